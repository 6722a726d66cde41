"""events: what a segment did, as a feed for downstream consumers.

Runs after dedup, so each event carries the URL's final word for the segment
(its status and ``duplicate_of``). Two kinds, in the schema of DESIGN.md
(``EVENTS_SCHEMA``):

- ``crawl.fetched``: one per response the segment stored (a page fetched
  with its body; a 304 stores none), with the body's checksum and simhash,
  ``changed``, the robots meta directives, the outlinks and ``warc_ref`` (file,
  offset, length of the WARC record);
- ``crawl.removed``: one per URL with content that the segment removed (gone
  after its 404/410s, or newly disallowed by robots.txt: ``removed_at`` set
  at the cycle's time).

The ``events`` table has Delta's Change Data Feed on, so a consumer reads
what is new since the version it last saw. Events are inserted by a MERGE
keyed on (segment, event, url): a re-run adds nothing, and the feed never
shows a segment's events twice.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from trawl.stages.common import StageContext
from trawl.store.schemas import EVENTS_SCHEMA
from trawl.store.tables import Merge

KEY = ["host_bucket", "url_fp", "url"]


def _event(name: str, ctx: StageContext) -> list[Column]:
    return [
        F.lit(name).alias("event"),
        F.lit(ctx.segment).alias("segment"),
        F.to_date(F.lit(ctx.at).cast("timestamp")).alias("event_date"),
    ]


def fetched_events(fetch: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    stored = fetch.filter(
        (F.col("kind") == "page") & (F.col("outcome") == "success") & F.col("warc_file").isNotNull()
    )
    now = crawldb.select(*KEY, F.col("status"), F.col("duplicate_of"))
    warc = F.struct(
        F.col("warc_file").alias("file"),
        F.col("warc_offset").alias("offset"),
        F.col("warc_length").alias("length"),
    )
    return stored.join(now, KEY, "left").select(
        *_event("crawl.fetched", ctx),
        "url",
        F.col("url").alias("final_url"),
        "status",
        "http_status",
        "fetched_at",
        "content_type",
        "changed",
        F.col("content_sha256").alias("checksum"),
        "simhash",
        "duplicate_of",
        warc.alias("warc_ref"),
        "robots_meta",
        F.transform(F.coalesce("outlinks", F.array()), lambda link: link["url"]).alias("out_links"),
    )


def removed_events(crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    at = F.lit(ctx.at).cast("timestamp")
    removed = crawldb.filter((F.col("last_segment") == ctx.segment) & (F.col("removed_at") == at))
    none = {f.name: F.lit(None).cast(f.dataType) for f in EVENTS_SCHEMA.fields}
    return removed.select(
        *_event("crawl.removed", ctx),
        "url",
        none["final_url"].alias("final_url"),
        "status",
        "http_status",
        F.col("last_fetch_at").alias("fetched_at"),
        *[none[c].alias(c) for c in ("content_type", "changed")],
        F.col("content_sha256").alias("checksum"),
        "simhash",
        "duplicate_of",
        *[none[c].alias(c) for c in ("warc_ref", "robots_meta", "out_links")],
    )


def segment_events(fetch: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    """The segment's events, from its fetch rows and crawldb after dedup."""
    events = fetched_events(fetch, crawldb, ctx).unionByName(removed_events(crawldb, ctx))
    return events.select(*EVENTS_SCHEMA.fieldNames())


def merge_events(events: DataFrame, ctx: StageContext) -> Merge:
    """The events the table does not hold yet (a re-run adds nothing): the
    key is the day, segment, kind and URL."""
    day = ctx.at.date().isoformat()
    return Merge(
        "events",
        events,
        f"t.event_date = DATE'{day}' AND t.segment = s.segment "
        "AND t.event = s.event AND t.url = s.url",
        inserts=((None, None),),
    )
