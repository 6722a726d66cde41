"""updatedb: merge one segment's fetch results into crawldb and hostdb.

- Fetched URLs: their crawldb rows joined with the fetch rows and passed
  through ``trawl.transitions.apply_fetch`` (the one transition table).
- New URLs: followable outlinks and redirect targets, admitted (normalised,
  filtered), each URL once, found new by a batch anti-join against crawldb
  restricted to the host buckets they fall in (IRLbot's DRUM check, done by
  Spark's join instead of a disk bucket sort), then capped per host and per
  path pattern (``trawl.budgets``). Every link kept out, by a filter rule or
  a cap, is written with its reason to the ``rejected`` table.
- Session-id parameters a host is seen to use (``trawl.sessionparams``) are
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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from trawl.budgets import path_pattern
from trawl.frontier import admit, url_filter
from trawl.hoststate import merge_host
from trawl.schemas import CRAWLDB_SCHEMA, DOMAINLINKS_SCHEMA, HOSTDB_SCHEMA, HOSTPARAMS_SCHEMA
from trawl.sessionparams import param_variants, strip_params
from trawl.stages.common import StageContext, map_records, sql_in
from trawl.stages.inject import CANDIDATE_SCHEMA
from trawl.tables import (
    delta_table,
    read_segment_table,
    read_table,
    replace_rows,
    table_path,
)
from trawl.transitions import apply_fetch
from trawl.urlnorm import UrlError, host_bucket, host_of, registered_domain

CRAWLDB_COLS = CRAWLDB_SCHEMA.fieldNames()
OP_SCHEMA = StructType([*CRAWLDB_SCHEMA.fields, StructField("_op", StringType(), False)])
LINK_SCHEMA = StructType([*CANDIDATE_SCHEMA.fields, StructField("pattern", StringType(), True)])
PAIR_SCHEMA = StructType(DOMAINLINKS_SCHEMA.fields[:2])
VARIANT_SCHEMA = StructType(
    [StructField(n, StringType(), True) for n in ("host", "param", "value", "rest", "content")]
)
KEY = ["host_bucket", "url_fp", "url"]


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
    fetch = pages.select(*key, F.struct(*pages.columns).alias("fetch"))
    joined = old.join(fetch, key).select("old", "fetch", "_op")
    at, segment, schedule = ctx.at, ctx.segment, ctx.cfg.schedule

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            new = apply_fetch(row["old"], row["fetch"], at, segment, schedule)
            if new is not row["old"] or row["_op"] == "insert":
                yield {**new, "_op": row["_op"]}

    return map_records(joined, fn, OP_SCHEMA)


def discovered_links(fetch: DataFrame) -> DataFrame:
    """(url, depth, score, source, is_sitemap, lastmod) for every followable
    link of the segment: page outlinks without nofollow, sitemap entries (with
    their <lastmod>), robots.txt Sitemap lines, and redirect targets. A page's
    links share its unit of score (OPIC's cash split over outlinks, Abiteboul
    et al.); a redirect target takes over its source's score."""
    from_sitemap = (F.col("kind") == "robots") | F.coalesce(F.col("is_sitemap"), F.lit(False))
    links = (
        fetch.filter((F.col("outcome") == "success") & F.col("outlinks").isNotNull())
        .withColumn("n", F.size("outlinks"))
        .select("depth", "n", from_sitemap.alias("from_sitemap"), F.explode("outlinks").alias("l"))
        .filter(~F.coalesce(F.col("l.nofollow"), F.lit(False)))
        .select(
            F.col("l.url").alias("url"),
            (F.coalesce(F.col("depth"), F.lit(0)) + 1).alias("depth"),
            (F.lit(1.0) / F.col("n")).alias("score"),
            F.when(F.col("from_sitemap"), "sitemap").otherwise("outlink").alias("source"),
            F.coalesce(F.col("l.sitemap"), F.lit(False)).alias("is_sitemap"),
            F.col("l.lastmod").alias("lastmod"),
        )
    )
    redirects = fetch.filter(F.col("redirect_to").isNotNull()).select(
        F.col("redirect_to").alias("url"),
        F.col("depth"),
        F.coalesce(F.col("score"), F.lit(1.0)).alias("score"),
        F.lit("redirect").alias("source"),
        F.coalesce(F.col("is_sitemap"), F.lit(False)).alias("is_sitemap"),
        F.lit(None).cast("timestamp").alias("lastmod"),
    )
    return (
        links.unionByName(redirects)
        .groupBy("url")
        .agg(
            F.min("depth").alias("depth"),
            F.sum("score").alias("score"),
            F.min("source").alias("source"),
            F.max("is_sitemap").alias("is_sitemap"),
            F.max("lastmod").alias("lastmod"),
        )
    )


def admitted_links(
    links: DataFrame, ctx: StageContext, session_params: dict[str, list[str]] | None = None
) -> DataFrame:
    """``admit`` over the links, with each admitted URL's path pattern; a
    rejected one keeps its raw spelling, reason and (if it has one) host.
    ``session_params``: host -> parameters learned as its session ids, dropped
    from its links first."""
    cfg, at, segment = ctx.cfg, ctx.at, ctx.segment
    learned = session_params or {}

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
            if record is not None:
                yield {**record, "pattern": path_pattern(record["url"]), "raw": row["url"]}
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


def one_per_url(admitted: DataFrame) -> DataFrame:
    """One candidate per URL: links spelled apart can normalise to one URL
    (a learned session parameter dropped), and crawldb must get it once.
    The best-scored, then shallowest, spelling stands for it."""
    first = Window.partitionBy(*KEY).orderBy(F.col("score").desc(), "depth", "raw")
    return admitted.withColumn("_n", F.row_number().over(first)).filter("_n = 1").drop("_n")


def cap_new_urls(
    new: DataFrame, earlier: DataFrame, fetched: DataFrame, ctx: StageContext
) -> tuple[DataFrame, DataFrame]:
    """(new URLs within the caps, those over a cap with their reason).

    ``traps.max_new_per_pattern`` applies first, then ``max_new_per_host``
    to what is left, each ranked by link score, then URL fingerprint.
    ``earlier``: URLs an earlier run of this updatedb already added (they
    hold their places, so a re-run admits the same set); URLs ``fetched`` in
    the segment (redirect targets the fetcher followed) are not capped.
    """
    traps = ctx.cfg.traps
    order = [F.col("score").desc(), F.col("url_fp")]
    pool = new.withColumn("_earlier", F.lit(False)).unionByName(
        earlier.withColumn("_earlier", F.lit(True))
    )
    exempt = pool.join(fetched.select(*KEY), KEY, "left_semi")
    pool = pool.join(fetched.select(*KEY), KEY, "left_anti")
    cut: list[DataFrame] = []
    for column, cap, reason in (
        ("pattern", traps.max_new_per_pattern, "cap/new_per_pattern"),
        ("host", traps.max_new_per_host, "cap/new_per_host"),
    ):
        rank = F.row_number().over(Window.partitionBy(column).orderBy(*order))
        pool = pool.withColumn("_rank", rank)
        cut.append(pool.filter(F.col("_rank") > cap).withColumn("rejected", F.lit(reason)))
        pool = pool.filter(F.col("_rank") <= cap).drop("_rank")
    kept = pool.unionByName(exempt).filter(~F.col("_earlier")).drop("_earlier")
    over = cut[0].unionByName(cut[1]).filter(~F.col("_earlier"))
    return kept, over


def rejected_rows(rejected: DataFrame, ctx: StageContext) -> DataFrame:
    """Rows of the ``rejected`` table: the URL as admitted, or as linked when
    it did not get that far."""
    return rejected.select(
        F.lit(ctx.segment).alias("segment"),
        F.lit("updatedb").alias("stage"),
        F.coalesce(F.col("url"), F.col("raw")).alias("url"),
        "host",
        F.col("rejected").alias("reason"),
        "source",
    )


def write_rejected(rows: DataFrame, ctx: StageContext) -> None:
    """Replace this segment's updatedb rows of ``rejected`` (a re-run writes
    the same rows again); no commit when there are none, before or now."""
    where = f"segment = '{ctx.segment}' AND stage = 'updatedb'"
    if rows.isEmpty() and read_table(ctx.spark, ctx.root, "rejected").filter(where).isEmpty():
        return
    replace_rows(rows, ctx.root, "rejected", where)


def learn_session_params(pages: DataFrame, crawldb: DataFrame) -> DataFrame:
    """(host, param) pairs ``trawl.sessionparams`` calls session ids, from the
    segment's pages with a query and their hosts' earlier ones in
    ``crawldb``; content is the main-text simhash, or the body's sha256."""
    content = F.coalesce(F.col("simhash").cast("string"), F.col("content_sha256"))
    has_query = F.col("url").contains("?") & content.isNotNull()
    now = pages.filter((F.col("outcome") == "success") & has_query)
    hosts = now.select("host").distinct()
    before = crawldb.filter((F.col("status") == "fetched") & has_query).join(
        F.broadcast(hosts), "host", "left_semi"
    )
    rows = (
        now.select("host", "url", content.alias("content"))
        .unionByName(before.select("host", "url", content.alias("content")))
        .distinct()
    )

    def fn(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for r in records:
            for name, value, rest in param_variants(r["url"]):
                yield {"host": r["host"], "param": name, "value": value, "rest": rest,
                       "content": r["content"]}  # fmt: skip

    groups = (
        map_records(rows, fn, VARIANT_SCHEMA)
        .groupBy("host", "param", "rest")
        .agg(F.countDistinct("value").alias("values"), F.countDistinct("content").alias("contents"))
        .filter(F.col("values") >= 2)
    )
    verdict = groups.groupBy("host", "param").agg(
        F.sum(F.when(F.col("contents") == 1, 1).otherwise(0)).alias("same"),
        F.sum(F.when(F.col("contents") > 1, 1).otherwise(0)).alias("differ"),
    )
    return verdict.filter((F.col("same") > 0) & (F.col("differ") == 0)).select("host", "param")


def session_params(pages: DataFrame, crawldb: DataFrame, ctx: StageContext) -> dict[str, list[str]]:
    """Add this segment's newly learned session parameters to ``hostparams``
    (a re-run finds them known) and return all of them, host -> names."""
    known = read_table(ctx.spark, ctx.root, "hostparams")
    added = learn_session_params(pages, crawldb).join(known, ["host", "param"], "left_anti")
    rows = added.withColumn("segment", F.lit(ctx.segment)).collect()
    if rows:
        frame = ctx.spark.createDataFrame(rows, HOSTPARAMS_SCHEMA)
        frame.write.format("delta").mode("append").save(table_path(ctx.root, "hostparams"))
    out: dict[str, list[str]] = {}
    for r in read_table(ctx.spark, ctx.root, "hostparams").select("host", "param").collect():
        out.setdefault(r["host"], []).append(r["param"])
    return out


def domain_pairs(sources: DataFrame) -> DataFrame:
    """Distinct (from_domain, to_domain) of the segment's followed page links
    between different registered domains."""
    links = (
        sources.filter((F.col("outcome") == "success") & F.col("outlinks").isNotNull())
        .select("host", F.explode("outlinks").alias("l"))
        .filter(~F.coalesce(F.col("l.nofollow"), F.lit(False)))
        .select(F.col("host").alias("src"), F.expr("lower(parse_url(l.url, 'HOST'))").alias("dst"))
        .filter(F.col("dst").isNotNull() & (F.col("dst") != F.col("src")))
        .distinct()
    )

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            a, b = registered_domain(row["src"]), registered_domain(row["dst"])
            if a != b:
                yield {"from_domain": a, "to_domain": b}

    return map_records(links, fn, PAIR_SCHEMA).distinct()


def add_domain_links(pairs: DataFrame, ctx: StageContext) -> int:
    """Append the pairs ``domainlinks`` does not have yet (a re-run finds
    none left to add); returns how many were added."""
    known = read_table(ctx.spark, ctx.root, "domainlinks").select("from_domain", "to_domain")
    added = (
        pairs.join(known, ["from_domain", "to_domain"], "left_anti")
        .withColumn("first_segment", F.lit(ctx.segment))
        .withColumn("last_segment", F.lit(ctx.segment))
        .cache()
    )
    count = added.count()
    if count:
        cols = DOMAINLINKS_SCHEMA.fieldNames()
        added.select(*cols).write.format("delta").mode("append").save(
            table_path(ctx.root, "domainlinks")
        )
    added.unpersist()
    return count


def host_rows(hostdb: DataFrame, fetch: DataFrame, ctx: StageContext) -> DataFrame:
    """hostdb rows for every host the segment visited, through ``merge_host``."""
    visit = F.struct("fetched_at", "outcome", "delay_s", "elapsed_s", "ip", "kind")
    pages = fetch.groupBy("host").agg(F.sort_array(F.collect_list(visit)).alias("visits"))
    robots = (
        fetch.filter(F.col("kind") == "robots")
        .groupBy("host")
        .agg(F.max_by(F.struct(*fetch.columns), "fetched_at").alias("robots"))
    )
    probe = (  # the soft-404 probe (trawl.soft404): one per host and segment
        fetch.filter(F.col("kind") == "probe")
        .groupBy("host")
        .agg(F.max_by(F.struct(*fetch.columns), "fetched_at").alias("probe"))
    )
    per_host = pages.join(robots, "host", "full").join(probe, "host", "left")
    joined = per_host.join(
        hostdb.select("host", F.struct(*HOSTDB_SCHEMA.fieldNames()).alias("old")), "host", "left"
    )
    at, segment, buckets = ctx.at, ctx.segment, ctx.cfg.crawl.host_buckets
    politeness = ctx.cfg.politeness
    pause = timedelta(seconds=politeness.failure_pause_s)

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            host = row["host"]
            base = {"host_bucket": host_bucket(host, buckets), "domain": registered_domain(host)}
            new = merge_host(
                row["old"], host, row["visits"] or [], row["robots"], at, segment, base,
                politeness.max_failures, pause, probe=row["probe"],
            )  # fmt: skip
            if new is not row["old"]:
                yield new

    return map_records(joined, fn, HOSTDB_SCHEMA)


def updatedb(ctx: StageContext) -> UpdateReport:
    spark, root = ctx.spark, ctx.root
    fetch = read_segment_table(spark, root, ctx.segment, "fetch").cache()
    pages = fetch.filter(F.col("kind") == "page")
    report = UpdateReport(fetched_rows=pages.count())
    page_buckets = {r[0] for r in pages.select("host_bucket").distinct().collect()}
    crawldb = read_table(spark, root, "crawldb")
    sources = link_sources(fetch, crawldb.filter(f"host_bucket IN {sql_in(page_buckets)}"))

    learned = session_params(pages, crawldb.filter(f"host_bucket IN {sql_in(page_buckets)}"), ctx)
    candidates = admitted_links(discovered_links(sources), ctx, learned).cache()
    admitted = one_per_url(candidates.filter(F.col("rejected").isNull()))
    buckets = page_buckets | {r[0] for r in admitted.select("host_bucket").distinct().collect()}
    touched = crawldb.filter(f"host_bucket IN {sql_in(buckets)}")
    seen = touched.select(*KEY, F.col("discovered_segment").alias("_seen_in"))
    looked_up = admitted.join(seen, KEY, "left")
    new, over = cap_new_urls(
        looked_up.filter(F.col("_seen_in").isNull()).drop("_seen_in"),
        looked_up.filter(F.col("_seen_in") == ctx.segment).drop("_seen_in"),
        pages,
        ctx,
    )
    # written before crawldb changes, so it is computed from the same snapshot
    # as the URLs added; counted from what was written
    write_rejected(
        rejected_rows(candidates.filter(F.col("rejected").isNotNull()), ctx).unionByName(
            rejected_rows(over, ctx)
        ),
        ctx,
    )
    written = read_table(spark, root, "rejected").filter(
        (F.col("segment") == ctx.segment) & (F.col("stage") == "updatedb")
    )
    for row in written.groupBy("reason").count().collect():
        report.rejected[row["reason"]] = row["count"]
    new = new.select(*CRAWLDB_COLS).withColumn("_op", F.lit("insert"))
    known = touched.withColumn("_op", F.lit("update"))
    changes = (
        updated_rows(known.unionByName(new), pages, ctx)
        .unionByName(new.join(pages.select(*KEY), KEY, "left_anti"))
        .unionByName(sitemap_hints(admitted.select(*CRAWLDB_COLS), touched, pages))
        .cache()
    )
    report.new_urls = changes.filter("_op = 'insert'").count()
    merge_crawldb(changes, buckets, ctx)
    report.domain_links = add_domain_links(domain_pairs(sources), ctx)

    hosts = host_rows(read_table(spark, root, "hostdb"), fetch, ctx).cache()
    report.hosts = hosts.count()
    merge_hostdb(hosts, ctx)
    for frame in (fetch, candidates, changes, hosts):
        frame.unpersist()
    return report


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
    known = crawldb.drop("sitemap_lastmod").join(hinted, key)
    return (
        known.join(pages.select(*key), key, "left_anti")
        .select(*CRAWLDB_COLS)
        .withColumn("_op", F.lit("hint"))
    )


def merge_crawldb(changes: DataFrame, buckets: set[int], ctx: StageContext) -> None:
    assignments: dict[str, str | Column] = {c: f"s.{c}" for c in CRAWLDB_COLS}
    newest = "greatest(t.sitemap_lastmod, s.sitemap_lastmod)"
    (
        delta_table(ctx.spark, ctx.root, "crawldb")
        .alias("t")
        .merge(
            changes.alias("s"),
            f"t.host_bucket IN {sql_in(buckets)} AND t.host_bucket = s.host_bucket "
            "AND t.url_fp = s.url_fp AND t.url = s.url",
        )
        .whenMatchedUpdate(condition="s._op = 'update'", set=assignments)
        .whenMatchedUpdate(condition="s._op = 'hint'", set={"sitemap_lastmod": F.expr(newest)})
        .whenNotMatchedInsert(condition="s._op = 'insert'", values=assignments)
        .execute()
    )


def merge_hostdb(hosts: DataFrame, ctx: StageContext) -> None:
    assignments: dict[str, str | Column] = {c: f"s.{c}" for c in HOSTDB_SCHEMA.fieldNames()}
    (
        delta_table(ctx.spark, ctx.root, "hostdb")
        .alias("t")
        .merge(hosts.alias("s"), "t.host_bucket = s.host_bucket AND t.host = s.host")
        .whenMatchedUpdate(set=assignments)
        .whenNotMatchedInsert(values=assignments)
        .execute()
    )
