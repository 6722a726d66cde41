"""Schemas of every crawl table, as constants, in one place.

Tables are created from these (never inferred), so a column's type is the
same on a laptop and on a cluster, and analysts can rely on it in SQL. Status
columns hold ``trawl.crawldb.status`` names as strings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow as pa


def arrow_schema(schema: StructType) -> pa.Schema:
    """``schema`` in Arrow, as Spark's Delta writer stores it: timestamps in
    UTC (Delta's ``timestamp``), plain (not large) strings and lists."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)


def _schema(*cols: tuple[str, object]) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in cols])  # type: ignore[arg-type]


# The WARC response record that holds a URL's current copy: what a revisit
# record of an unchanged refetch refers to (WARC-Refers-To, -Target-URI,
# -Date) and the payload digest it must match (trawl.warc.writer.Stored).
CAPTURE_TYPE = StructType(
    [
        StructField("record_id", StringType(), True),
        StructField("uri", StringType(), True),
        StructField("date", StringType(), True),  # its WARC-Date
        StructField("digest", StringType(), True),  # its WARC-Payload-Digest
    ]
)

CRAWLDB_SCHEMA = _schema(
    ("url", StringType()),
    ("url_fp", LongType()),
    ("host", StringType()),
    ("host_bucket", IntegerType()),
    ("domain", StringType()),
    ("ip", StringType()),
    ("status", StringType()),
    ("source", StringType()),  # seed | outlink | redirect | sitemap | requisite
    ("reason", StringType()),  # why it was injected (seed files may say)
    ("depth", IntegerType()),
    ("score", DoubleType()),
    ("discovered_at", TimestampType()),
    ("discovered_segment", StringType()),
    ("last_fetch_at", TimestampType()),
    ("next_fetch_at", TimestampType()),
    ("fetch_interval_s", DoubleType()),
    ("fetches", IntegerType()),
    ("changes", IntegerType()),
    ("http_status", IntegerType()),
    ("etag", StringType()),
    ("last_modified", StringType()),
    ("content_sha256", StringType()),
    ("simhash", LongType()),
    ("stored_capture", CAPTURE_TYPE),  # the WARC record of the current copy
    ("duplicate_of", StringType()),
    ("retries", IntegerType()),
    ("redirect_to", StringType()),
    ("generated_segment", StringType()),
    ("generated_at", TimestampType()),
    ("last_segment", StringType()),
    ("is_sitemap", BooleanType()),  # the URL is a sitemap (or sitemap index), not a page
    # The change record (trawl.crawldb.changerate): visits that compared content, at
    # logical time content_seen_at; sums faded with age; the estimated rate.
    ("content_seen_at", TimestampType()),
    ("modified_at", TimestampType()),  # last visit that saw a change (Nutch's modifiedTime)
    ("changed", BooleanType()),  # did the last content visit see a change?
    ("change_visits", DoubleType()),
    ("change_changed", DoubleType()),
    ("change_unchanged_s", DoubleType()),
    ("change_inv_interval", DoubleType()),
    ("change_inv_changed", DoubleType()),
    ("change_dated", DoubleType()),  # changes dated by Last-Modified
    ("change_dated_s", DoubleType()),  # time watched by those dates; -1: dates distrusted
    ("change_rate", DoubleType()),  # estimated changes per second
    ("sitemap_lastmod", TimestampType()),  # the newest <lastmod> a sitemap gave
    ("gone_count", IntegerType()),  # 404/410 answers in a row
    ("removed_at", TimestampType()),  # when a URL that had content went gone
    # Domain budgets (trawl.crawldb.budgets): deferrals in a row of a due URL over its
    # domain's budget, why and when the last one was; reset once generated.
    ("deferrals", IntegerType()),
    ("deferred_reason", StringType()),
    ("deferred_at", TimestampType()),
    # Steps in a row along a counter (trawl.crawldb.budgets.counter_step) that led
    # here: a calendar's months, ?page=N; over traps.max_counter_run the
    # next step is rejected (trap/counter). Null: 0.
    ("counter_run", IntegerType()),
    # The URL's path pattern (trawl.crawldb.budgets.path_pattern): the new-URL cap's
    # key and the unit of a pattern's reputation. Null on rows written before
    # trawl kept it: those count for no pattern.
    ("pattern", StringType()),
)

HOSTDB_SCHEMA = _schema(
    ("host", StringType()),
    ("host_bucket", IntegerType()),
    ("domain", StringType()),
    ("ip", StringType()),
    ("robots_url", StringType()),  # robots.txt is per scheme+host+port (RFC 9309 2.3)
    ("robots_status", StringType()),  # parsed | status_4xx | unreachable | ...
    ("robots_http_status", IntegerType()),
    ("robots_body", StringType()),
    ("robots_fetched_at", TimestampType()),
    # First failed robots.txt fetch of the current outage (5xx, 429, network),
    # null once it answers again; the copy above stays the last usable one.
    ("robots_unreachable_since", TimestampType()),
    ("crawl_delay_s", DoubleType()),
    ("delay_s", DoubleType()),  # the politeness gap in force after the last fetch
    ("next_allowed_at", TimestampType()),
    ("consecutive_failures", IntegerType()),
    ("backoff_until", TimestampType()),
    ("resp_time_avg_s", DoubleType()),
    ("fetches", LongType()),
    ("status_counts", MapType(StringType(), LongType())),
    ("last_segment", StringType()),
    # The host's answer to a path that cannot exist (trawl.dedup.soft404): its status,
    # for a 2xx the not-found page's sha256 and simhash (without the echo of
    # the probe's path), for a redirect its target; kept until a later probe
    # answers (a failed one teaches nothing), asked again after
    # traps.soft404_reprobe_s.
    ("soft404_status", IntegerType()),
    ("soft404_sha256", StringType()),
    ("soft404_simhash", LongType()),
    ("soft404_probed_at", TimestampType()),
    ("soft404_location", StringType()),
    # Links from the host's pages to other hosts of its registered domain the
    # operator did not name (trawl.crawldb.budgets.farm_like), counted in the last
    # segment in which five or more of its pages had links: those pages, the
    # sibling hosts they link (menus left out: a sibling linked from more than
    # half of the pages), the (page, sibling host) pairs.
    ("sibling_pages", IntegerType()),
    ("sibling_hosts", IntegerType()),
    ("sibling_links", IntegerType()),
    ("sibling_segment", StringType()),
)

FETCHLIST_SCHEMA = _schema(
    ("url", StringType()),
    ("url_fp", LongType()),
    ("host", StringType()),
    ("host_bucket", IntegerType()),
    ("domain", StringType()),  # registered domain: domain-wide policy rules
    ("ip", StringType()),
    ("task", IntegerType()),
    ("score", DoubleType()),
    ("depth", IntegerType()),
    ("counter_run", IntegerType()),
    ("prev_status", StringType()),
    ("is_sitemap", BooleanType()),
    ("etag", StringType()),
    ("last_modified", StringType()),
    ("content_sha256", StringType()),
    ("stored_capture", CAPTURE_TYPE),
    ("delay_s", DoubleType()),
    ("crawl_delay_s", DoubleType()),
    ("robots_url", StringType()),
    ("robots_status", StringType()),
    ("robots_http_status", IntegerType()),
    ("robots_body", StringType()),
    ("robots_fetched_at", TimestampType()),
    ("robots_unreachable_since", TimestampType()),
    ("next_allowed_at", TimestampType()),  # the host's politeness clock from hostdb
    ("soft404_status", IntegerType()),  # the host's last soft-404 probe, from hostdb
    ("soft404_sha256", StringType()),
    ("soft404_simhash", LongType()),
    ("soft404_probed_at", TimestampType()),
    ("soft404_location", StringType()),
    # fetch.follow_depth: links the host's task may follow in this segment
    # (what generate's caps leave it), on every row of the host; crawldb's
    # URLs of the host (fingerprints), on one row of it, so none is fetched
    # again by a followed link. Null when following is off.
    ("follow_quota", IntegerType()),
    ("follow_known", ArrayType(LongType())),
    # requisites.capture: the URL is a page requisite (crawldb's source), fetched
    # as one; crawldb's requisites of the host (fingerprints), on one row of
    # it, so that a page's requisites crawldb holds are not fetched again
    # before they are due (null: unknown, the task leaves them to updatedb).
    ("requisite", BooleanType()),
    ("requisites_known", ArrayType(LongType())),
    # ... and the records holding their current copies, one per payload digest:
    # a payload fetched again under another URL is a revisit of the stored one.
    ("requisites_stored", ArrayType(CAPTURE_TYPE)),
)

OUTLINK_TYPE = StructType(
    [
        StructField("url", StringType(), True),
        StructField("anchor", StringType(), True),
        StructField("nofollow", BooleanType(), True),
        StructField("sitemap", BooleanType(), True),  # the link is a sitemap (index child, robots)
        StructField("lastmod", TimestampType(), True),  # a sitemap entry's <lastmod>
    ]
)

FETCH_SCHEMA = _schema(
    # page (any crawldb URL, sitemaps too) | requisite (what a page needs to
    # render, requisites.capture: a crawldb URL, its links not followed) |
    # robots | probe (the soft-404 probe of a path that cannot exist: never a
    # crawldb URL, its links not followed)
    ("kind", StringType()),
    ("url", StringType()),
    ("url_fp", LongType()),
    ("host", StringType()),
    ("host_bucket", IntegerType()),
    ("task", IntegerType()),
    ("ip", StringType()),
    ("depth", IntegerType()),
    ("counter_run", IntegerType()),
    ("score", DoubleType()),  # the URL's score when generated (a redirect target inherits it)
    ("is_sitemap", BooleanType()),  # the URL was read as a sitemap
    # The page whose link the fetch task followed to this URL in the same
    # segment (fetch.follow_depth); null for the fetch list's URLs.
    ("linked_from", StringType()),
    ("outcome", StringType()),  # trawl.crawldb.status.FetchOutcome
    ("http_status", IntegerType()),
    ("fetched_at", TimestampType()),
    ("content_type", StringType()),
    ("headers", ArrayType(ArrayType(StringType()))),
    ("ttfb_s", DoubleType()),
    ("elapsed_s", DoubleType()),
    ("bytes", LongType()),
    ("truncated", StringType()),
    ("warc_file", StringType()),
    ("warc_offset", LongType()),
    ("warc_length", LongType()),
    # The record a later revisit of this copy refers to: this fetch's response,
    # or the earlier one its identical-payload revisit names (null for a 304).
    ("stored_capture", CAPTURE_TYPE),
    ("content_sha256", StringType()),
    # Near-duplicate fingerprints of the main text (trawl.dedup.fingerprint); null
    # below dedup.min_words words. simhash is the signed form of the 64 bits.
    ("simhash", LongType()),
    ("minhash", ArrayType(LongType())),  # dedup.method = "minhash" only
    ("text_words", IntegerType()),  # words of the main text (HTML pages only)
    ("changed", BooleanType()),  # content differs from the previous visit's (None: no previous)
    ("etag", StringType()),
    ("last_modified", StringType()),
    ("redirect_to", StringType()),
    ("canonical", StringType()),
    ("robots_meta", StringType()),  # e.g. "noindex,nofollow"
    ("title", StringType()),
    ("outlinks", ArrayType(OUTLINK_TYPE)),
    # What the page (or stylesheet) needs to render, resolved and normalised,
    # with requisites.capture only (trawl.parse.requisites).
    ("requisites", ArrayType(StringType())),
    ("robots_decision", StringType()),  # allowed | denied | unreachable ...
    ("robots_body", StringType()),  # kind=robots rows only
    ("crawl_delay_s", DoubleType()),
    ("delay_s", DoubleType()),  # the gap the scheduler chose after this fetch
    ("error", StringType()),
    # A 2xx page compared with its host's not-found page, or a redirect with
    # where the probe was redirected (trawl.dedup.soft404): true if it is one
    # (outcome soft404, no outlinks, no redirect_to), false if not; null when
    # not compared (no usable probe answer, the host's root).
    ("soft404", BooleanType()),
)

POLICY_SCHEMA = _schema(
    ("scope", StringType()),  # host | domain
    ("target", StringType()),
    ("action", StringType()),  # block | unblock | slow | pause | budget
    ("blocked", BooleanType()),
    ("min_delay_s", DoubleType()),
    ("paused_until", TimestampType()),
    ("max_pages_per_cycle", IntegerType()),
    ("set_by", StringType()),
    ("set_at", TimestampType()),
    ("reason", StringType()),
)

# URLs kept out of crawldb, one row per URL, stage and segment, with the
# reason (a filter rule, a normaliser error, a trap cap): what was not
# crawled, and why, for SQL and ``trawl stats``.
REJECTED_SCHEMA = _schema(
    ("segment", StringType()),
    ("stage", StringType()),  # updatedb
    ("url", StringType()),  # normalised if it got that far, else as linked
    ("host", StringType()),  # null when the URL has none
    ("reason", StringType()),  # normalize/... | filter/... | cap/...
    ("source", StringType()),  # outlink | sitemap | redirect | requisite
)

# The domain link graph (registered domain -> registered domain, distinct
# domains only), gathered by updatedb from the links it follows: the
# in-links that earn a domain its budget (trawl.crawldb.budgets, IRLbot's STAR).
DOMAINLINKS_SCHEMA = _schema(
    ("from_domain", StringType()),
    ("to_domain", StringType()),
    ("first_segment", StringType()),
    ("last_segment", StringType()),
)

# Session-id parameters learned per host (trawl.url.sessionparams): links of the
# host are admitted with them dropped from the query.
HOSTPARAMS_SCHEMA = _schema(
    ("host", StringType()),
    ("param", StringType()),
    ("segment", StringType()),  # the segment whose pages showed it
)

COUNTERS_SCHEMA = _schema(
    ("segment", StringType()),
    ("job", StringType()),
    ("name", StringType()),
    ("value", LongType()),
)

# One row per distinct content (body sha256) the crawl has stored: where it
# was first seen and its near-duplicate fingerprints (trawl dedup keeps it).
CONTENT_SCHEMA = _schema(
    ("content_sha256", StringType()),
    ("node", StringType()),  # its near-duplicate graph node (trawl.dedup.neardup.node_id)
    ("simhash", LongType()),
    ("minhash", ArrayType(LongType())),
    ("text_words", IntegerType()),
    ("url", StringType()),  # the first URL it was fetched from
    ("host", StringType()),
    ("first_seen_at", TimestampType()),
    ("first_segment", StringType()),
    ("warc_file", StringType()),
    ("warc_offset", LongType()),
    ("warc_length", LongType()),
)

# Near-duplicate pairs of graph nodes (a < b) found by dedup, in the segment
# that found them; the clusters are the connected components of these pairs.
NEARDUP_SCHEMA = _schema(
    ("a", StringType()),
    ("b", StringType()),
    ("method", StringType()),  # simhash | minhash
    ("distance", IntegerType()),  # simhash: Hamming distance
    ("similarity", DoubleType()),  # minhash: estimated Jaccard similarity
    ("segment", StringType()),
)

WARC_REF_TYPE = StructType(
    [
        StructField("file", StringType(), True),
        StructField("offset", LongType(), True),
        StructField("length", LongType(), True),
    ]
)

# Events for downstream consumers (DESIGN.md's event schema): crawl.fetched
# for every response stored in the segment, crawl.removed for URLs that went
# gone or were newly disallowed. Change Data Feed is on: consumers read the
# increments by table version.
EVENTS_SCHEMA = _schema(
    ("event", StringType()),  # crawl.fetched | crawl.removed
    ("segment", StringType()),
    ("event_date", DateType()),  # the cycle's logical date (partition)
    ("url", StringType()),
    ("final_url", StringType()),
    ("status", StringType()),  # the URL's crawldb status after the segment
    ("http_status", IntegerType()),
    ("fetched_at", TimestampType()),
    ("content_type", StringType()),
    ("changed", BooleanType()),
    ("checksum", StringType()),  # sha256 of the body
    ("simhash", LongType()),
    ("duplicate_of", StringType()),
    ("warc_ref", WARC_REF_TYPE),
    ("robots_meta", StringType()),
    ("out_links", ArrayType(StringType())),
)
