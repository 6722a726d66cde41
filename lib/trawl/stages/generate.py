"""generate: the politeness-aware fetch list of one segment.

Due URLs (new, or ``next_fetch_at`` passed), not locked by another
unfinished segment, not blocked or paused by policy (a host's rule or its
registered domain's, the stricter of the two), not of a host hostdb holds
(``backoff_until``: a failing host's pause, a robots.txt outage), ranked by
score; then caps:

- per host: what its politeness gap allows in the fetch window
  (window / gap + 1, less the requests before its pages: robots.txt when
  hostdb's copy is stale, the soft-404 probe when due),
  ``generate.max_per_host`` and the policy's page cap;
  one URL for a host whose Crawl-delay exceeds ``robots.max_crawl_delay_s``
  (the fetcher defers the rest rather than go faster than asked);
- per address: hosts sharing an IP share its clock, so together they get
  what it allows in the window (politeness.mode both: window / min_delay;
  byIP: window / the smallest gap of its hosts), less their first requests;
- per registered domain: ``generate.max_per_domain``, the domain policy's
  page cap and the domain's budget (``trawl.crawldb.budgets``: pages per distinct
  other domain linking to it, from ``domainlinks``); and a global
  ``generate.top_n``. Due URLs over their domain's budget are deferred
  (``next_fetch_at`` put off at growing intervals, ``deferred_reason``
  set), never dropped. A host the operator named (a seed's) is a budget
  group of its own instead, ``budget.seed_host_pages`` a segment, on top of
  its domain's budget and ``max_per_domain`` (``trawl.stages.ranking.rank_due``).

Host groups (an address's hosts) are spread over fetch tasks by expected
duration. The chosen crawldb rows are marked ``generated_segment``, and the
deferred ones put off, in one MERGE.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from trawl.crawldb.packing import assign_tasks
from trawl.stages.common import (
    StageContext,
    broadcastable,
    materialize,
    release,
    sql_in,
)
from trawl.stages.ranking import due_urls, rank_due, rank_order
from trawl.stages.traps import trusted_hosts
from trawl.store.schemas import CAPTURE_TYPE, FETCHLIST_SCHEMA
from trawl.store.tables import Merge

# What the fetch task needs to know of a host from hostdb: its politeness
# state, the cached robots.txt and its last soft-404 probe (trawl.dedup.soft404),
# carried on every fetch-list row.
HOST_HINTS = (
    "delay_s", "crawl_delay_s", "robots_url", "robots_status", "robots_http_status",
    "robots_body", "robots_fetched_at", "robots_unreachable_since", "next_allowed_at",
    "soft404_status", "soft404_sha256", "soft404_simhash", "soft404_probed_at",
    "soft404_location",
)  # fmt: skip
# A row of mark_generated's source as a broadcast hash table holds it: keys,
# the URL (crawl URLs average well under 100 bytes), due time, counts.
MARK_ROW_BYTES = 256
# fetch.follow_depth: a host crawldb knows more URLs of is not followed within
# a segment (the fetch list would carry every one of their fingerprints); its
# links go through updatedb.
FOLLOW_KNOWN_MAX = 10_000


def select_fetchlist(
    crawldb: DataFrame,
    hostdb: DataFrame,
    policy: DataFrame,
    ctx: StageContext,
    domainlinks: DataFrame | None = None,
) -> DataFrame:
    """The segment's fetch list, without the task column (see ``assign``)."""
    chosen = choose(rank_due(crawldb, hostdb, policy, ctx, domainlinks), ctx)
    return with_known(with_host_hints(chosen, hostdb), crawldb, ctx)


def with_known(chosen: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    """The chosen rows with what the fetch task needs to tell new URLs from
    crawldb's: ``with_follow_quota``'s and ``with_requisites_known``'s."""
    return with_requisites_known(with_follow_quota(chosen, crawldb, ctx), crawldb, ctx)


def choose(ranked: DataFrame, ctx: StageContext) -> DataFrame:
    """The fetch list from ``rank_due``'s frame: within every domain cap, the
    best ``generate.top_n`` of all."""
    chosen = ranked.filter(
        (F.col("rank") <= F.col("domain_cap")) & (F.col("budget_rank") <= F.col("budget_cap"))
    )
    return chosen.orderBy(*rank_order()).limit(ctx.cfg.generate.top_n).select(*_chosen_columns())


def _left_out_by_budget() -> Column:
    """A ranked row (``rank_due``) over its domain's budget alone, within
    every other cap; a host the operator named is never."""
    return (
        ~F.col("trusted")
        & (F.col("budget_rank") > F.col("budget_cap"))
        & (F.col("budget") < F.col("static_domain_cap"))
    )


def over_budget(ranked: DataFrame, ctx: StageContext) -> DataFrame:
    """Due URLs left out by their domain's budget alone (within every other
    cap): to be deferred (BEAST), each with its new due time and count.
    Deferrals in a row double the wait (``trawl.crawldb.budgets.defer_interval_s``);
    ``deferred_reason`` says which budget."""
    b = ctx.cfg.budget
    over = ranked.filter(_left_out_by_budget())
    deferrals = F.coalesce(F.col("deferrals"), F.lit(0))
    wait_s = F.least(
        F.lit(b.defer_max_s), F.lit(b.defer_s) * F.pow(2.0, F.least(deferrals, F.lit(64)))
    )
    return over.select(
        "host_bucket",
        "url_fp",
        "url",
        F.timestamp_seconds(F.lit(ctx.at.timestamp()) + wait_s).alias("next_fetch_at"),
        (deferrals + 1).alias("deferrals"),
        # a named host budgeted with its domain for linking out like a farm
        F.when(F.col("farm"), "budget/farm").otherwise("budget/domain").alias("deferred_reason"),
    )


def starved_seed_domains(ranked: DataFrame, crawldb: DataFrame) -> DataFrame:
    """(domain, due, deferred, budget, farm_hosts): registered domains of
    hosts the operator named (``trusted_hosts``) with more than half their
    due URLs deferred by the domain's budget in this segment. The named hosts
    are not deferred unless they link out like a farm (``farm_hosts``); the
    rest are their siblings, which count as discovered unless
    ``budget.trust_seed_domains``: an operator who runs the whole domain
    should be told."""
    _, domains = trusted_hosts(crawldb)
    counts = (
        ranked.join(F.broadcast(domains), "domain", "left_semi")
        .groupBy("domain")
        .agg(
            F.count("*").alias("due"),
            F.sum(_left_out_by_budget().cast("int")).alias("deferred"),
            F.max(F.when(~F.col("trusted"), F.col("budget"))).alias("budget"),
            F.sort_array(F.collect_set(F.when(F.col("farm"), F.col("host")))).alias("farm_hosts"),
        )
    )
    return counts.filter(F.col("deferred") * 2 > F.col("due"))


def with_host_hints(chosen: DataFrame, hostdb: DataFrame) -> DataFrame:
    """The fetch-list rows: the chosen URLs with their host's ``HOST_HINTS``."""
    hints = hostdb.select("host", *HOST_HINTS)
    return chosen.join(hints, "host", "left").select(*chosen.columns, *HOST_HINTS)


def _chosen_columns() -> list[Column | str]:
    return [
        "url",
        "url_fp",
        "host",
        "host_bucket",
        "domain",
        F.col("host_ip").alias("ip"),
        "group",
        "gap",
        "score",
        "depth",
        "counter_run",
        F.col("status").alias("prev_status"),
        F.coalesce(F.col("is_sitemap"), F.lit(False)).alias("is_sitemap"),
        F.coalesce(F.col("source") == "requisite", F.lit(False)).alias("requisite"),
        "etag",
        "last_modified",
        "content_sha256",
        "stored_capture",
        # the caps, for what following may add (``with_follow_quota``)
        "host_cap",
        "group_cap",
        "domain_cap",
        "budget_group",
        "budget_cap",
    ]


def _shares(by: str, cap: str) -> Column:
    """Each host's share of what ``cap`` leaves its ``by`` (address group or
    domain) after the chosen URLs: split evenly over the group's hosts in the
    fetch list, the remainder to the first hosts by name."""
    scope = Window.partitionBy(by)
    room = F.greatest(F.lit(0), F.first(cap).over(scope) - F.sum("n").over(scope))
    k = F.count("*").over(scope)
    index = F.row_number().over(scope.orderBy("host")) - 1
    return F.floor(room / k).cast("int") + F.when(index < room % k, 1).otherwise(0)


def _no_follow(chosen: DataFrame) -> DataFrame:
    return chosen.withColumns(
        {
            "follow_quota": F.lit(None).cast("int"),
            "follow_known": F.lit(None).cast("array<bigint>"),
        }
    )


def with_follow_quota(chosen: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    """``follow_quota`` and ``follow_known`` for ``fetch.follow_depth``.

    A host may have as many links followed in the segment as its caps leave:
    its own (``host_cap``) less its chosen URLs, and its share of its address
    group's and its domain's room (``_shares``), so the fetched pages stay
    within what generate would have chosen had it known the links. Hosts
    crawldb knows over ``FOLLOW_KNOWN_MAX`` URLs of get none. The host's
    known fingerprints ride on its first row (by fingerprint), so a followed
    link never fetches a URL crawldb knows, due or not.
    """
    if ctx.cfg.fetch.follow_depth <= 0:
        return _no_follow(chosen)
    per_host = chosen.groupBy("host", "host_bucket", "group", "domain", "budget_group").agg(
        F.count("*").alias("n"),
        F.first("host_cap").alias("host_cap"),
        F.first("group_cap").alias("group_cap"),
        F.first("domain_cap").alias("domain_cap"),
        F.first("budget_cap").alias("budget_cap"),
    )
    quota = F.least(
        F.col("host_cap") - F.col("n"),
        _shares("group", "group_cap"),
        _shares("domain", "domain_cap"),
        _shares("budget_group", "budget_cap"),
    )
    following = per_host.select("host", "host_bucket", quota.alias("q")).filter("q > 0")
    quotas = {r["host"]: (int(r["host_bucket"]), int(r["q"])) for r in following.collect()}
    if not quotas:
        return _no_follow(chosen)
    hosts = chosen.sparkSession.createDataFrame(
        [(host, q) for host, (_, q) in quotas.items()], "host string, follow_quota int"
    )
    buckets = sorted({bucket for bucket, _ in quotas.values()})
    rows = crawldb.filter(F.col("host_bucket").isin(buckets)).select("host", "url_fp")
    rows = rows.join(F.broadcast(hosts.select("host")), "host", "left_semi")
    small = rows.groupBy("host").count().filter(F.col("count") <= FOLLOW_KNOWN_MAX)
    known = rows.join(F.broadcast(small.select("host")), "host", "left_semi")
    known = known.groupBy("host").agg(F.collect_list("url_fp").alias("known"))
    allowed = hosts.join(known, "host")
    first = F.row_number().over(Window.partitionBy("host").orderBy("url_fp")) == 1
    return (
        chosen.join(F.broadcast(allowed), "host", "left")
        .withColumn("follow_known", F.when(first, F.col("known")))
        .drop("known")
    )


def with_requisites_known(chosen: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    """``requisites_known`` for ``requisites.capture``: crawldb's requisites
    of each host of the fetch list (fingerprints) on its first row, so that
    the task fetches a page's requisites that crawldb holds only when they
    are due (then they are in the fetch list). An empty list: none held; null
    on every row of a host holding over ``FOLLOW_KNOWN_MAX``: the task leaves
    its requisites to updatedb. Beside them, ``requisites_stored``: the
    records of their current copies, one per payload digest, so that the
    same bytes fetched under another URL are archived as a revisit."""
    if not ctx.cfg.requisites.capture:
        return chosen.withColumns(
            {
                "requisites_known": F.lit(None).cast("array<bigint>"),
                "requisites_stored": F.lit(None).cast(ArrayType(CAPTURE_TYPE)),
            }
        )
    hosts = chosen.select("host", "host_bucket").distinct()
    buckets = [r[0] for r in hosts.select("host_bucket").distinct().collect()]
    rows = (
        crawldb.filter(F.col("host_bucket").isin(buckets) & (F.col("source") == "requisite"))
        .select("host", "url_fp", "stored_capture")
        .join(F.broadcast(hosts.select("host")), "host", "left_semi")
    )
    copies = (
        rows.filter(F.col("stored_capture.digest").isNotNull())
        .groupBy("host", F.col("stored_capture.digest").alias("digest"))
        .agg(F.min("stored_capture").alias("copy"))
        .groupBy("host")
        .agg(F.collect_list("copy").alias("stored"))
    )
    held = rows.groupBy("host").agg(F.collect_list("url_fp").alias("held"), F.count("*").alias("n"))
    few = F.col("n").isNull() | (F.col("n") <= FOLLOW_KNOWN_MAX)
    known = (
        hosts.select("host")
        .join(held, "host", "left")
        .join(copies, "host", "left")
        .select(
            "host",
            F.when(few, F.coalesce(F.col("held"), F.array().cast("array<bigint>"))).alias("known"),
            F.when(few, F.col("stored")).alias("stored"),
        )
    )
    first = F.row_number().over(Window.partitionBy("host").orderBy("url_fp")) == 1
    return (
        chosen.join(F.broadcast(known), "host", "left")
        .withColumns(
            {
                "requisites_known": F.when(first, F.col("known")),
                "requisites_stored": F.when(first, F.col("stored")),
            }
        )
        .drop("known", "stored")
    )


def assign(chosen: DataFrame, ctx: StageContext) -> DataFrame:
    """Add the ``task`` column: host groups packed over ``fetch.tasks`` tasks."""
    costs = chosen.groupBy("group").agg(F.sum("gap").alias("cost")).collect()
    mapping = assign_tasks([(r["group"], float(r["cost"])) for r in costs], ctx.cfg.fetch.tasks)
    tasks = chosen.sparkSession.createDataFrame(list(mapping.items()), "group string, task int")
    return chosen.join(F.broadcast(tasks), "group").select(*FETCHLIST_SCHEMA.fieldNames())


def abandoned_locks(crawldb: DataFrame, live: list[str], ctx: StageContext) -> dict[str, int]:
    """URLs generated for a segment that is not in ``live`` (the segment
    folders on disk), counted per segment: the folder was deleted before
    updatedb freed them. Without this they would wait out ``LOCK_EXPIRY``
    (a week). This run's own segment is never abandoned: its generate
    re-runs. One small job: the lock column of the rows that have one."""
    locked = crawldb.filter(
        F.col("generated_segment").isNotNull()
        & (F.col("generated_segment") != ctx.segment)
        & ~F.col("generated_segment").isin(live)
    )
    rows = locked.groupBy("generated_segment").count().collect()
    return {r["generated_segment"]: int(r["count"]) for r in rows}


def mark_generated(
    fetchlist: DataFrame, deferred: DataFrame, ctx: StageContext, rows: int | None = None
) -> Merge | None:
    """One MERGE: the fetch list's rows are generated for this segment (their
    deferral count starts again), the deferred ones are put off. ``rows``
    (both together, if known): a source that ``broadcastable`` allows is
    broadcast, so crawldb's rows meet it where they are read instead of
    being shuffled to it (bench_scale at 10M URLs, 1.5M rows: the MERGE
    took 129 s shuffled, 53 s broadcast; docs/benchmarks.md). None: nothing
    to mark."""
    if rows == 0:
        return None
    at = F.lit(ctx.at).cast("timestamp")
    # every value is the source's: plain column references, which Spark's
    # MERGE and delta-rs's both take
    chosen = fetchlist.select(
        "host_bucket", "url_fp", "url",
        F.lit(None).cast("timestamp").alias("next_fetch_at"),
        F.lit(0).alias("deferrals"), F.lit("generate").alias("_op"),
        F.lit(None).cast("string").alias("deferred_reason"),
    )  # fmt: skip
    put_off = deferred.select(
        "host_bucket", "url_fp", "url", "next_fetch_at", "deferrals", F.lit("defer").alias("_op"),
        "deferred_reason",
    )  # fmt: skip
    source = chosen.unionByName(put_off).select(
        "*", F.lit(ctx.segment).alias("generated_segment"), at.alias("at")
    )
    if rows is not None and broadcastable(fetchlist.sparkSession, rows, MARK_ROW_BYTES):
        source = F.broadcast(source)
    buckets = [r[0] for r in source.select("host_bucket").distinct().collect()]
    if not buckets:
        return None
    generated = {
        "generated_segment": "s.generated_segment",
        "generated_at": "s.at",
        "deferrals": "s.deferrals",
        "deferred_reason": "s.deferred_reason",
    }
    put_off_cols = {
        "next_fetch_at": "s.next_fetch_at",
        "deferrals": "s.deferrals",
        "deferred_reason": "s.deferred_reason",
        "deferred_at": "s.at",
    }
    return Merge(
        "crawldb",
        source,
        f"t.host_bucket IN {sql_in(buckets)} AND t.host_bucket = s.host_bucket "
        "AND t.url_fp = s.url_fp AND t.url = s.url",
        updates=(("s._op = 'generate'", generated), ("s._op = 'defer'", put_off_cols)),
    )


@dataclass
class Generated:
    """generate's result: the fetch list with tasks and the URLs to defer,
    computed from cached frames that ``release`` frees once both are written
    (a cached plan left behind slows the planning of every later query in
    the session)."""

    fetchlist: DataFrame
    deferred: DataFrame
    cached: list[DataFrame]
    starved: DataFrame | None = None  # starved_seed_domains

    def release(self) -> None:
        release(*self.cached)


# over_budget's rows
DEFERRED_COLUMNS = (
    "host_bucket int, url_fp bigint, url string, next_fetch_at timestamp, deferrals int"
)


def generate(
    crawldb: DataFrame,
    hostdb: DataFrame,
    policy: DataFrame,
    domainlinks: DataFrame,
    ctx: StageContext,
) -> Generated:
    """The fetch list and the URLs to defer, from the crawl's tables."""
    spark = crawldb.sparkSession
    held = hostdb.filter(F.col("backoff_until") > F.lit(ctx.at).cast("timestamp"))
    if due_urls(crawldb, ctx).join(F.broadcast(held.select("host")), "host", "left_anti").isEmpty():
        # Nothing due, or only URLs of held hosts (a crawl caught up): one
        # narrow scan instead of the ranking's joins and windows over nothing.
        empty = spark.createDataFrame([], FETCHLIST_SCHEMA)
        return Generated(empty, spark.createDataFrame([], DEFERRED_COLUMNS), [])
    ranked = materialize(rank_due(crawldb, hostdb, policy, ctx, domainlinks))
    chosen = materialize(with_known(with_host_hints(choose(ranked, ctx), hostdb), crawldb, ctx))
    deferred = materialize(over_budget(ranked, ctx))
    starved = starved_seed_domains(ranked, crawldb)
    return Generated(assign(chosen, ctx), deferred, [ranked, chosen, deferred], starved)
