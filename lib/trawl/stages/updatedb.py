"""updatedb: merge one segment's fetch results into crawldb and hostdb.

- Fetched URLs: their crawldb rows joined with the fetch rows and passed
  through ``trawl.crawldb.transitions.apply_fetch`` (the one transition table).
- New URLs: followable outlinks, redirect targets and page requisites
  (``requisites.capture``: source "requisite"), admitted (normalised,
  filtered), each URL once, found new by a batch anti-join against crawldb
  restricted to the host buckets they fall in (IRLbot's DRUM check, done by
  Spark's join instead of a disk bucket sort), then capped per host and per
  path pattern (``trawl.crawldb.budgets``). Every link kept out, by a filter rule or
  a cap, is written with its reason to the ``rejected`` table.
- Session-id parameters a host is seen to use (``trawl.url.sessionparams``) are
  learned from the segment's pages and the host's earlier ones into
  ``hostparams``, and dropped from the host's links before admission.
- The domain link graph (``domainlinks``) gains the segment's new pairs of
  distinct registered domains, which earn domains their budgets in generate.
- Updates and inserts go into crawldb in ONE MERGE (one commit), and hosts
  into hostdb in another; both skip rows already carrying this segment, so a
  re-run leaves the tables as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from trawl.crawldb.admission import admit, url_filter
from trawl.crawldb.budgets import path_pattern
from trawl.crawldb.hoststate import SIBLING_FIELDS, merge_host
from trawl.crawldb.transitions import FETCH_FIELDS, apply_fetch
from trawl.fetch.row import CRAWLDB_KINDS
from trawl.stages.common import (
    StageContext,
    map_records,
    materialize,
    sql_in,
)
from trawl.stages.inject import CANDIDATE_SCHEMA
from trawl.stages.traps import (
    KEY,
    bad_patterns,
    counter_run_col,
    decide_new_urls,
    domain_pairs,
    new_domain_links,
    one_per_url,
    rejected_rows,
    session_params,
    sibling_evidence,
)
from trawl.store.schemas import CRAWLDB_SCHEMA, HOSTDB_SCHEMA
from trawl.store.tables import Merge
from trawl.url.keys import host_bucket, host_of, registered_domain
from trawl.url.resolution import UrlError
from trawl.url.sessionparams import strip_params

CRAWLDB_COLS = CRAWLDB_SCHEMA.fieldNames()
OP_SCHEMA = StructType([*CRAWLDB_SCHEMA.fields, StructField("_op", StringType(), False)])
LINK_SCHEMA = CANDIDATE_SCHEMA  # a crawldb row (with its path pattern), or a reason


@dataclass
class UpdateReport:
    fetched_rows: int = 0
    new_urls: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    hosts: int = 0
    domain_links: int = 0

    def counters(self) -> list[tuple[str, int]]:
        out = [
            ("updatedb/fetch_rows", self.fetched_rows),
            ("updatedb/new_urls", self.new_urls),
            ("updatedb/hosts", self.hosts),
            ("updatedb/domain_links/new", self.domain_links),
        ]
        return out + [(f"updatedb/rejected/{k}", v) for k, v in sorted(self.rejected.items())]


def updated_rows(crawldb: DataFrame, pages: DataFrame, ctx: StageContext) -> DataFrame:
    """Rows of the fetched URLs after their fetch. ``crawldb`` carries ``_op``:
    'update' for known URLs, 'insert' for new ones (a redirect target the
    fetch task followed is new and fetched in the same segment)."""
    key = ["host_bucket", "url_fp", "url"]
    old = crawldb.select(*key, F.struct(*CRAWLDB_COLS).alias("old"), "_op")
    fetch = pages.select(*key, F.struct(*FETCH_FIELDS).alias("fetch"))
    joined = old.join(fetch, key).select("old", "fetch", "_op")
    at, segment, schedule = ctx.at, ctx.segment, ctx.cfg.schedule

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            new = apply_fetch(row["old"], row["fetch"], at, segment, schedule)
            if new is not row["old"] or row["_op"] == "insert":
                # a row kept before crawldb had patterns gets its own on its next visit
                pattern = new.get("pattern") or path_pattern(new["url"])
                yield {**new, "pattern": pattern, "_op": row["_op"]}

    return map_records(joined, fn, OP_SCHEMA)


def discovered_links(fetch: DataFrame) -> DataFrame:
    """(url, depth, counter_run, score, source, is_sitemap, lastmod) for every
    followable link of the segment: page outlinks without nofollow, sitemap
    entries (with their <lastmod>), robots.txt Sitemap lines, redirect
    targets and URLs the fetch task followed links to. A page's links share
    its unit of score (OPIC's cash split over outlinks, Abiteboul et al.); a
    redirect target takes over its source's score and counter run. A URL
    linked many ways keeps its shortest run."""
    from_sitemap = (F.col("kind") == "robots") | F.coalesce(F.col("is_sitemap"), F.lit(False))
    links = (
        fetch.filter((F.col("outcome") == "success") & F.col("outlinks").isNotNull())
        .withColumn("n", F.size("outlinks"))
        .select(
            F.col("url").alias("src"),
            "depth",
            "counter_run",
            "n",
            from_sitemap.alias("from_sitemap"),
            F.explode("outlinks").alias("l"),
        )
        .filter(~F.coalesce(F.col("l.nofollow"), F.lit(False)))
        .select(
            F.col("l.url").alias("url"),
            (F.coalesce(F.col("depth"), F.lit(0)) + 1).alias("depth"),
            F.when(F.col("from_sitemap"), F.lit(0))
            .otherwise(counter_run_col(F.col("src"), F.col("l.url"), F.col("counter_run")))
            .alias("counter_run"),
            (F.lit(1.0) / F.col("n")).alias("score"),
            F.when(F.col("from_sitemap"), "sitemap").otherwise("outlink").alias("source"),
            F.coalesce(F.col("l.sitemap"), F.lit(False)).alias("is_sitemap"),
            F.col("l.lastmod").alias("lastmod"),
        )
    )
    requisite = F.col("kind") == "requisite"
    redirects = fetch.filter(F.col("redirect_to").isNotNull()).select(
        F.col("redirect_to").alias("url"),
        F.col("depth"),
        F.coalesce(F.col("counter_run"), F.lit(0)).alias("counter_run"),
        F.coalesce(F.col("score"), F.lit(1.0)).alias("score"),
        F.when(requisite, "requisite").otherwise("redirect").alias("source"),
        F.coalesce(F.col("is_sitemap"), F.lit(False)).alias("is_sitemap"),
        F.lit(None).cast("timestamp").alias("lastmod"),
    )
    # A URL the fetch task reached by a link (fetch.follow_depth) is its own
    # link too, so it is added whatever became of the page that led to it.
    followed = fetch.filter(F.col("linked_from").isNotNull()).select(
        "url",
        "depth",
        F.coalesce(F.col("counter_run"), F.lit(0)).alias("counter_run"),
        F.lit(0.0).alias("score"),  # the linking page's share stands
        F.when(requisite, "requisite").otherwise("outlink").alias("source"),
        F.coalesce(F.col("is_sitemap"), F.lit(False)).alias("is_sitemap"),
        F.lit(None).cast("timestamp").alias("lastmod"),
    )
    # What pages and stylesheets need to render (requisites.capture): part
    # of the page, at its depth, with no share of its score.
    requisites = fetch.filter(
        (F.col("outcome") == "success") & (F.size(F.coalesce("requisites", F.array())) > 0)
    ).select(
        F.explode("requisites").alias("url"),
        F.coalesce(F.col("depth"), F.lit(0)).alias("depth"),
        F.lit(0).alias("counter_run"),
        F.lit(0.0).alias("score"),
        F.lit("requisite").alias("source"),
        F.lit(False).alias("is_sitemap"),
        F.lit(None).cast("timestamp").alias("lastmod"),
    )
    # A URL found more than one way keeps the first source by name: a link
    # (outlink) makes it a page, as a redirect to it does.
    return (
        links.unionByName(redirects)
        .unionByName(followed)
        .unionByName(requisites)
        .groupBy("url")
        .agg(
            F.min("depth").alias("depth"),
            F.min("counter_run").alias("counter_run"),
            F.sum("score").alias("score"),
            F.min("source").alias("source"),
            F.max("is_sitemap").alias("is_sitemap"),
            F.max("lastmod").alias("lastmod"),
        )
    )


def admitted_links(
    links: DataFrame, ctx: StageContext, session_params: dict[str, list[str]] | None = None
) -> DataFrame:
    """``admit`` over the links, with each admitted URL's path pattern and
    counter run; a rejected one keeps its raw spelling, reason and (if it has
    one) host. A link more than ``traps.max_counter_run`` counter steps in a
    row deep is rejected as ``trap/counter``.
    ``session_params``: host -> parameters learned as its session ids, dropped
    from its links first."""
    cfg, at, segment = ctx.cfg, ctx.at, ctx.segment
    learned = session_params or {}
    max_run = cfg.traps.max_counter_run or None

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        flt = url_filter(cfg)
        for row in rows:
            url = row["url"]
            if learned and "?" in url and (names := learned.get(_host_or_none(url) or "")):
                url = strip_params(url, names)
            record, reason = admit(
                url,
                cfg,
                flt,
                source=row["source"],
                depth=row["depth"] or 0,
                score=row["score"] or 0.0,
                at=at,
                segment=segment,
                is_sitemap=bool(row["is_sitemap"]),
                sitemap_lastmod=row["lastmod"],
            )
            run = row["counter_run"] or 0
            if record is not None and max_run is not None and run > max_run:
                record, reason = None, "trap/counter"
            if record is not None:
                yield {
                    **record, "counter_run": run, "raw": row["url"],
                }  # fmt: skip
            else:
                yield {
                    "rejected": reason, "raw": row["url"], "host": _host_or_none(row["url"]),
                    "source": row["source"],
                }  # fmt: skip

    return map_records(links, fn, LINK_SCHEMA)


def _host_or_none(url: str) -> str | None:
    try:
        return host_of(url)
    except UrlError:
        return None


def host_rows(
    hostdb: DataFrame, fetch: DataFrame, ctx: StageContext, siblings: DataFrame
) -> DataFrame:
    """hostdb rows for every host the segment visited, through ``merge_host``;
    ``siblings``: ``trawl.stages.traps.sibling_evidence`` per host."""
    visit = F.struct(
        "fetched_at", "outcome", "delay_s", "elapsed_s", "ip", "kind", "robots_decision", "error"
    )
    pages = fetch.groupBy("host").agg(F.sort_array(F.collect_list(visit)).alias("visits"))
    robots = (
        fetch.filter(F.col("kind") == "robots")
        .groupBy("host")
        .agg(F.max_by(F.struct(*fetch.columns), "fetched_at").alias("robots"))
    )
    probe = (  # the soft-404 probe (trawl.dedup.soft404): one per host and segment
        fetch.filter(F.col("kind") == "probe")
        .groupBy("host")
        .agg(F.max_by(F.struct(*fetch.columns), "fetched_at").alias("probe"))
    )
    per_host = (
        pages.join(robots, "host", "full")
        .join(probe, "host", "left")
        .join(siblings.select("host", F.struct(*SIBLING_FIELDS).alias("siblings")), "host", "left")
    )
    joined = per_host.join(
        hostdb.select("host", F.struct(*HOSTDB_SCHEMA.fieldNames()).alias("old")), "host", "left"
    )
    at, segment, buckets = ctx.at, ctx.segment, ctx.cfg.crawl.host_buckets
    politeness = ctx.cfg.politeness
    pause = timedelta(seconds=politeness.failure_pause_s)
    robots_hold = timedelta(seconds=ctx.cfg.schedule.retry_interval_s)

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            host = row["host"]
            base = {"host_bucket": host_bucket(host, buckets), "domain": registered_domain(host)}
            new = merge_host(
                row["old"], host, row["visits"] or [], row["robots"], at, segment, base,
                politeness.max_failures, pause, probe=row["probe"], robots_hold=robots_hold,
                siblings=row["siblings"],
            )  # fmt: skip
            if new is not row["old"]:
                yield new

    return map_records(joined, fn, HOSTDB_SCHEMA)


@dataclass
class Updated:
    """updatedb's result, for the runner to write (each write its own
    commit, none reading what another writes): crawldb's MERGE of the
    changes and new URLs, hostdb's of the hosts visited, the segment's
    ``rejected`` rows, the new ``domainlinks`` and ``hostparams`` rows.
    ``held``: frames to free once all are written."""

    report: UpdateReport
    crawldb: Merge
    hosts: DataFrame
    rejected: DataFrame
    domainlinks: DataFrame
    hostparams: DataFrame
    held: list[DataFrame]


def updatedb(
    fetch: DataFrame,
    crawldb: DataFrame,
    hostdb: DataFrame,
    hostparams: DataFrame,
    domainlinks: DataFrame,
    ctx: StageContext,
) -> Updated:
    """The segment's fetch rows against the crawl's tables: what each table
    gains. The main line (new URLs -> changes) is computed here; the other
    outputs are frames the runner computes as it writes them."""
    fetch = materialize(fetch)
    pages = fetch.filter(F.col("kind") == "page")
    # the rows of crawldb URLs: pages, and requisites (requisites.capture)
    fetched = fetch.filter(F.col("kind").isin(*CRAWLDB_KINDS))
    report = UpdateReport(fetched_rows=fetched.count())
    page_buckets = {r[0] for r in fetched.select("host_bucket").distinct().collect()}
    in_pages = crawldb.filter(f"host_bucket IN {sql_in(page_buckets)}")
    sources = link_sources(fetch, in_pages)
    learned, new_params = session_params(pages, in_pages, hostparams, ctx)
    candidates = materialize(admitted_links(discovered_links(sources), ctx, learned))
    admitted = one_per_url(candidates.filter(F.col("rejected").isNull()))
    buckets = page_buckets | {r[0] for r in admitted.select("host_bucket").distinct().collect()}
    touched = crawldb.filter(f"host_bucket IN {sql_in(buckets)}")
    # kept: the caps, the rejected rows and the changes all read it
    looked_up = materialize(look_up(admitted, touched))
    # Every new URL decided in one pass, kept: the changes and the rejected
    # rows read the decisions, not the ranking windows behind them.
    capped = materialize(
        decide_new_urls(
            looked_up.filter(F.col("_seen_in").isNull()).drop("_seen_in"),
            looked_up.filter(F.col("_seen_in") == ctx.segment).drop("_seen_in"),
            fetched,
            ctx,
            bad_patterns(touched, ctx),
            touched,
        )
    )
    new, over = (
        capped.filter(F.col("rejected").isNull()),
        capped.filter(F.col("rejected").isNotNull()),
    )
    # from the frames above, so from the same crawldb snapshot as the URLs
    # added, whenever crawldb's MERGE commits
    rejected = rejected_rows(candidates.filter(F.col("rejected").isNotNull()), ctx).unionByName(
        rejected_rows(over, ctx)
    )
    new = new.select(*CRAWLDB_COLS).withColumn("_op", F.lit("insert"))
    # The segment touches a small share of crawldb's rows: those are picked
    # out by broadcast keys before the wide joins, which then shuffle only
    # them rather than every row of the touched buckets.
    known = touched.join(F.broadcast(fetched.select(*KEY)), KEY, "left_semi")
    changes = materialize(
        updated_rows(known.withColumn("_op", F.lit("update")).unionByName(new), fetched, ctx)
        .unionByName(new.join(fetched.select(*KEY), KEY, "left_anti"))
        .unionByName(sitemap_hints(looked_up.select(*CRAWLDB_COLS), touched, fetched))
    )
    report.new_urls = changes.filter("_op = 'insert'").count()
    held = [fetch, candidates, looked_up, capped, changes]
    return Updated(
        report,
        crawldb_changes(changes, buckets),
        host_rows(hostdb, fetch, ctx, sibling_evidence(sources, crawldb, ctx, held)),
        rejected,
        new_domain_links(domain_pairs(sources), domainlinks, ctx),
        new_params,
        held,
    )


def look_up(admitted: DataFrame, touched: DataFrame) -> DataFrame:
    """The new-URL check (IRLbot's DRUM, as a join): each admitted link with
    ``_seen_in``, the segment that discovered it, null for a URL crawldb does
    not know. ``touched`` is crawldb's rows in the buckets the links fall in;
    those with an admitted link's key are picked by broadcasting the keys (a
    few MB per 100,000 links) before the join, so the buckets' rows are
    scanned, not shuffled."""
    keys = F.broadcast(admitted.select(*KEY))
    seen = touched.join(keys, KEY, "left_semi").select(
        *KEY, F.col("discovered_segment").alias("_seen_in")
    )
    return admitted.join(seen, KEY, "left")


def link_sources(fetch: DataFrame, crawldb: DataFrame) -> DataFrame:
    """The fetch rows whose links are followed: all but pages dedup already
    marked duplicate (``duplicate_of``) that were fetched unchanged."""
    key = ["host_bucket", "url_fp", "url"]
    duplicates = crawldb.filter(F.col("duplicate_of").isNotNull()).select(*key)
    unchanged = fetch.filter(F.col("changed") == F.lit(False)).join(duplicates, key, "left_semi")
    return fetch.join(unchanged.select(*key), key, "left_anti")


def sitemap_hints(admitted: DataFrame, crawldb: DataFrame, pages: DataFrame) -> DataFrame:
    """A sitemap's <lastmod> for URLs already known and not fetched in this
    segment (``_op = 'hint'``): the newest one is kept, and generate treats a
    lastmod after the last visit as a change seen."""
    key = ["host_bucket", "url_fp", "url"]
    hinted = admitted.filter(F.col("sitemap_lastmod").isNotNull()).select(*key, "sitemap_lastmod")
    candidates = crawldb.join(F.broadcast(hinted.select(*key)), key, "left_semi")
    known = candidates.drop("sitemap_lastmod").join(hinted, key)
    return (
        known.join(pages.select(*key), key, "left_anti")
        .select(*CRAWLDB_COLS)
        .withColumn("_op", F.lit("hint"))
    )


def crawldb_changes(changes: DataFrame, buckets: set[int]) -> Merge:
    """crawldb's MERGE of updatedb's rows (``_op``: update, hint, insert)."""
    assignments: dict[str, str | Column] = {c: f"s.{c}" for c in CRAWLDB_COLS}
    # the newer of the two, either null (plain SQL: Spark and delta-rs both take it)
    newest = (
        "CASE WHEN t.sitemap_lastmod IS NULL OR s.sitemap_lastmod > t.sitemap_lastmod "
        "THEN s.sitemap_lastmod ELSE t.sitemap_lastmod END"
    )
    return Merge(
        "crawldb",
        changes,
        f"t.host_bucket IN {sql_in(buckets)} AND t.host_bucket = s.host_bucket "
        "AND t.url_fp = s.url_fp AND t.url = s.url",
        updates=(
            ("s._op = 'update'", assignments),
            ("s._op = 'hint'", {"sitemap_lastmod": newest}),
        ),
        inserts=(("s._op = 'insert'", assignments),),
    )


def hostdb_changes(hosts: DataFrame) -> Merge:
    """hostdb's MERGE of the visited hosts' new rows (``host_rows``)."""
    assignments: dict[str, str | Column] = {c: f"s.{c}" for c in HOSTDB_SCHEMA.fieldNames()}
    return Merge(
        "hostdb",
        hosts,
        "t.host_bucket = s.host_bucket AND t.host = s.host",
        updates=((None, assignments),),
        inserts=((None, assignments),),
    )
