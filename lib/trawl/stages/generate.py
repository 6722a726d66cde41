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
  set), never dropped.

Host groups (an address's hosts) are spread over fetch tasks by expected
duration. The chosen crawldb rows are marked ``generated_segment``, and the
deferred ones put off, in one MERGE.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from trawl.crawldb.packing import assign_tasks
from trawl.net.resolver import AddressRefused, Resolver
from trawl.stages.common import (
    StageContext,
    broadcastable,
    map_records,
    materialize,
    release,
)
from trawl.store.schemas import FETCHLIST_SCHEMA
from trawl.store.tables import delta_table, read_table

# What the fetch task needs to know of a host from hostdb: its politeness
# state, the cached robots.txt and its last soft-404 probe (trawl.dedup.soft404),
# carried on every fetch-list row.
HOST_HINTS = (
    "delay_s", "crawl_delay_s", "robots_url", "robots_status", "robots_http_status",
    "robots_body", "robots_fetched_at", "robots_unreachable_since", "next_allowed_at",
    "soft404_status", "soft404_sha256", "soft404_simhash", "soft404_probed_at",
    "soft404_location",
)  # fmt: skip
# What a due URL carries through the ranking windows: the fetch list's own
# columns, the ranking keys and the caps (``rank_due``).
RANKED_COLUMNS = (
    "url", "url_fp", "host", "host_bucket", "domain", "host_ip", "group", "gap", "first",
    "score", "depth", "counter_run", "status", "is_sitemap", "etag", "last_modified",
    "content_sha256", "stored_capture", "deferrals", "priority", "overdue", "host_cap",
    "static_domain_cap", "budget",
)  # fmt: skip
# A row of mark_generated's source as a broadcast hash table holds it: keys,
# the URL (crawl URLs average well under 100 bytes), due time, counts.
MARK_ROW_BYTES = 256
LOCK_EXPIRY = timedelta(days=7)  # Nutch crawl.gen.delay: a crashed segment's lock ends
# fetch.follow_depth: a host crawldb knows more URLs of is not followed within
# a segment (the fetch list would carry every one of their fingerprints); its
# links go through updatedb.
FOLLOW_KNOWN_MAX = 10_000


def effective_policy(policy: DataFrame, ctx: StageContext, scope: str) -> DataFrame:
    """Per target of ``scope`` (host or domain): blocked-or-paused, minimum
    delay and page cap from the latest row (the rule in force; a "clear" row
    has them all null). Columns are prefixed with the scope."""
    latest = Window.partitionBy("target").orderBy(F.col("set_at").desc())
    rows = policy.filter(F.col("scope") == scope).withColumn("rn", F.row_number().over(latest))
    now = F.lit(ctx.at).cast("timestamp")
    return rows.filter("rn = 1").select(
        F.col("target").alias(scope),
        (
            F.coalesce(F.col("blocked"), F.lit(False))
            | F.coalesce(F.col("paused_until") > now, F.lit(False))
        ).alias(f"{scope}_stop"),
        F.col("min_delay_s").alias(f"{scope}_min_delay_s"),
        F.col("max_pages_per_cycle").alias(f"{scope}_max_pages"),
    )


def due_urls(crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    at = F.lit(ctx.at).cast("timestamp")
    lock_expired = F.col("generated_at") < F.lit(ctx.at - LOCK_EXPIRY).cast("timestamp")
    unlocked = (
        F.col("generated_segment").isNull()
        | (F.col("generated_segment") == ctx.segment)  # a re-run of this generate
        | lock_expired
    )
    due = F.col("next_fetch_at").isNull() | (F.col("next_fetch_at") <= at)
    return crawldb.filter(unlocked & due)


ADDRESS_SCHEMA = StructType(
    [StructField("host", StringType(), True), StructField("resolved_ip", StringType(), True)]
)


def with_addresses(due: DataFrame, ctx: StageContext) -> DataFrame:
    """Fill ``host_ip`` for hosts hostdb does not know yet, by resolving them
    (Nutch's generate.count.mode=byIP does the same), so hosts that share an
    address share one budget and one task from their first cycle on. The SSRF
    verdict is the fetcher's; here a refused address still names the group."""
    cfg = ctx.cfg

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        resolver = Resolver.from_config(cfg)
        for row in rows:
            try:
                address: str | None = resolver.resolve(row["host"])
            except AddressRefused as exc:
                address = exc.address
            yield {"host": row["host"], "resolved_ip": address}

    unknown = due.filter(F.col("host_ip").isNull()).select("host").distinct()
    resolved = map_records(unknown, fn, ADDRESS_SCHEMA)
    return due.join(resolved, "host", "left").withColumn(
        "host_ip", F.coalesce(F.col("host_ip"), F.col("resolved_ip"))
    )


def _since_last_visit(ctx: StageContext) -> Column:
    """Seconds since the last content visit; null for a URL never read, or
    one a sitemap's <lastmod> says changed after that visit (known changed)."""
    seen = F.col("content_seen_at")
    known_changed = F.coalesce(F.col("sitemap_lastmod") > seen, F.lit(False))
    elapsed = F.lit(ctx.at.timestamp()) - seen.cast("double")
    return F.when(seen.isNull() | known_changed, F.lit(None)).otherwise(
        F.greatest(elapsed, F.lit(0.0))
    )


def recrawl_priority(ctx: StageContext) -> Column:
    """Rank of a due URL under ``schedule.policy``, higher first (the Spark
    form of ``trawl.crawldb.changerate.priority``; new URLs on the same scale).

    lagrangian:  (w/λ)(1 - (1 + λτ) e^{-λτ}), or w/λ if never read, known
                 changed or still probing (every visit saw a change, and
                 no Last-Modified dated one);
    change_prob: w (1 - e^{-λτ}), or w;
    uniform:     τ, the least recently read first (never read: first of all);
    adaptive:    w, as Nutch's generator sorts by score.
    """
    sched = ctx.cfg.schedule
    w = F.coalesce(F.col("score"), F.lit(1.0))
    rate = F.coalesce(F.col("change_rate"), F.lit(1.0 / sched.prior_change_interval_s))
    tau = _since_last_visit(ctx)
    if sched.policy == "uniform":
        return F.coalesce(tau, F.lit(float("inf")))
    if sched.policy == "adaptive":
        return w
    x = rate * tau
    if sched.policy == "change_prob":
        return F.when(tau.isNull(), w).otherwise(w * -F.expm1(-x))
    dated = (F.col("change_dated_s") > 0) | (F.col("change_dated") > 0)
    probing = (
        (F.col("change_visits") > 0)
        & (F.col("change_unchanged_s") == 0)
        & ~F.coalesce(dated, F.lit(False))
    )
    value = w / rate * F.greatest(F.lit(0.0), -F.expm1(-x) - x * F.exp(-x))
    return F.when(tau.isNull() | F.coalesce(probing, F.lit(False)), w / rate).otherwise(value)


def overdue(ctx: StageContext) -> Column:
    """Not read for ``schedule.max_interval_s``: ranked before everything else
    (change-rate policies; Nutch's and uniform schedules only know due times)."""
    sched = ctx.cfg.schedule
    if sched.policy not in ("lagrangian", "change_prob"):
        return F.lit(False)
    return F.coalesce(_since_last_visit(ctx) >= sched.max_interval_s, F.lit(False))


def domain_budgets(domainlinks: DataFrame, ctx: StageContext) -> DataFrame:
    """(domain, budget): IRLbot's STAR budget of every domain something links
    to, ``pages_per_linking_domain`` per distinct other linking domain
    between ``min_pages`` and ``max_pages`` (a domain nothing links to gets
    ``min_pages``, in ``select_fetchlist``)."""
    b = ctx.cfg.budget
    linking = domainlinks.groupBy(F.col("to_domain").alias("domain")).agg(
        F.countDistinct("from_domain").alias("linking_domains")
    )
    budget = F.least(
        F.lit(b.max_pages),
        F.greatest(F.lit(b.min_pages), F.col("linking_domains") * b.pages_per_linking_domain),
    )
    return linking.select("domain", "linking_domains", budget.cast("int").alias("budget"))


def select_fetchlist(
    crawldb: DataFrame,
    hostdb: DataFrame,
    policy: DataFrame,
    ctx: StageContext,
    domainlinks: DataFrame | None = None,
) -> DataFrame:
    """The segment's fetch list, without the task column (see ``assign``)."""
    chosen = choose(rank_due(crawldb, hostdb, policy, ctx, domainlinks), ctx)
    return with_follow_quota(with_host_hints(chosen, hostdb), crawldb, ctx)


def choose(ranked: DataFrame, ctx: StageContext) -> DataFrame:
    """The fetch list from ``rank_due``'s frame: within every domain cap, the
    best ``generate.top_n`` of all."""
    chosen = ranked.filter(F.col("rank") <= F.col("domain_cap"))
    return chosen.orderBy(*_rank_order()).limit(ctx.cfg.generate.top_n).select(*_chosen_columns())


def over_budget(ranked: DataFrame, ctx: StageContext) -> DataFrame:
    """Due URLs left out by their domain's budget alone (within every other
    cap): to be deferred (BEAST), each with its new due time and count.
    Deferrals in a row double the wait (``trawl.crawldb.budgets.defer_interval_s``)."""
    b = ctx.cfg.budget
    over = ranked.filter(
        (F.col("rank") > F.col("domain_cap")) & (F.col("budget") < F.col("static_domain_cap"))
    )
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
    )


def _rank_order() -> list[Column | str]:
    return [F.col("overdue").desc(), F.col("priority").desc(), "url_fp"]


def first_requests(ctx: StageContext) -> Column:
    """Requests a host's fetch task makes before its pages, each under the
    host's gap: robots.txt unless hostdb's copy is fresh, and the soft-404
    probe when it is due (the rules of ``trawl.fetch.rules``, on generate's
    clock)."""
    at = F.lit(ctx.at).cast("timestamp")

    def older_than(column: str, seconds: float) -> Column:
        age = at.cast("double") - F.col(column).cast("double")
        return F.col(column).isNull() | (age > seconds)

    robots = older_than("robots_fetched_at", ctx.cfg.robots.cache_ttl_s)
    robots = robots | F.col("robots_unreachable_since").isNotNull()
    probe = older_than("soft404_probed_at", ctx.cfg.traps.soft404_reprobe_s)
    if not ctx.cfg.traps.soft404_probe:
        probe = F.lit(False)
    return robots.cast("int") + probe.cast("int")


def rank_due(
    crawldb: DataFrame,
    hostdb: DataFrame,
    policy: DataFrame,
    ctx: StageContext,
    domainlinks: DataFrame | None = None,
) -> DataFrame:
    """Due URLs within their host and address caps, ranked in their domain
    (``rank``), with the domain's caps: ``domain_cap`` (the least of all)
    and ``budget``, ``static_domain_cap`` (configured and policy caps)."""
    g, p, b = ctx.cfg.generate, ctx.cfg.politeness, ctx.cfg.budget
    at = F.lit(ctx.at).cast("timestamp")
    hosts = hostdb.select(
        "host", F.col("ip").alias("host_ip"), "backoff_until", "delay_s", "crawl_delay_s",
        "robots_fetched_at", "robots_unreachable_since", "soft404_probed_at",
    )  # fmt: skip
    due = (
        with_addresses(due_urls(crawldb, ctx).join(hosts, "host", "left"), ctx)
        .join(F.broadcast(effective_policy(policy, ctx, "host")), "host", "left")
        .join(F.broadcast(effective_policy(policy, ctx, "domain")), "domain", "left")
        .filter(~F.coalesce(F.col("host_stop"), F.lit(False)))
        .filter(~F.coalesce(F.col("domain_stop"), F.lit(False)))
        .filter(F.col("backoff_until").isNull() | (F.col("backoff_until") <= at))
    )
    robots_cap = float(ctx.cfg.robots.max_crawl_delay_s)
    crawl_delay = F.coalesce(F.col("crawl_delay_s"), F.lit(0.0))
    # The expected gap: greatest() skips the nulls of missing state or policy.
    gap = F.greatest(
        F.lit(p.min_delay_s),
        F.coalesce(F.col("delay_s"), F.lit(p.min_delay_s)),
        F.least(crawl_delay, F.lit(robots_cap)),
        F.col("host_min_delay_s"),
        F.col("domain_min_delay_s"),
    )
    window_cap = F.greatest(
        F.lit(1), (F.lit(g.fetch_window_s) / F.col("gap")).cast("int") + 1 - F.col("first")
    )
    host_cap = F.when(crawl_delay > robots_cap, F.lit(1)).otherwise(
        F.least(F.lit(g.max_per_host), window_cap, F.col("host_max_pages"))
    )
    # Hosts that share an address share its clock, so they share its budget:
    # "both" lets the address serve one request per min_delay, "byIP" one per
    # its hosts' smallest gap; "byHost" has no address budget.
    group = F.col("host") if p.mode == "byHost" else F.coalesce(F.col("host_ip"), F.col("host"))
    address_gap = (
        F.min("gap").over(Window.partitionBy("group")) if p.mode == "byIP" else F.lit(p.min_delay_s)
    )
    # the address's clock serves its hosts' robots.txt and probes too
    group_first = F.sum(F.when(F.col("rank") == 1, F.col("first"))).over(
        Window.partitionBy("group")
    )
    group_cap = F.greatest(
        F.lit(1), (F.lit(g.fetch_window_s) / address_gap).cast("int") + 1 - group_first
    )
    static_cap = F.least(F.lit(g.max_per_domain), F.col("domain_max_pages"))
    if b.enabled and domainlinks is not None:
        budgets = F.broadcast(domain_budgets(domainlinks, ctx).select("domain", "budget"))
        due = due.join(budgets, "domain", "left").withColumn(
            "budget", F.coalesce(F.col("budget"), F.lit(b.min_pages))
        )
    else:
        due = due.withColumn("budget", F.lit(None).cast("int"))

    def rank(by: str) -> Column:
        return F.row_number().over(Window.partitionBy(by).orderBy(*_rank_order()))

    # Ranked on narrow rows: the windows shuffle, and the result is cached, so
    # hostdb's hints (robots.txt bodies) join the chosen rows only, in
    # ``with_host_hints``. The literal bounds beside the per-row caps let
    # Spark keep only the top rows of each partition before its shuffle.
    narrow = (
        due.withColumn("priority", recrawl_priority(ctx))
        .withColumn("overdue", overdue(ctx))
        .withColumn("gap", gap)
        .withColumn("first", first_requests(ctx))
        .withColumn("group", group)
        .withColumn("host_cap", host_cap)
        .withColumn("static_domain_cap", static_cap)
        .select(*RANKED_COLUMNS)
    )
    by_host = narrow.withColumn("rank", rank("host")).filter(
        (F.col("rank") <= F.lit(g.max_per_host)) & (F.col("rank") <= F.col("host_cap"))
    )
    by_group = by_host.withColumn("group_cap", group_cap).withColumn("rank", rank("group"))
    within_group = F.col("rank") <= F.col("group_cap")
    if p.mode != "byIP" and p.min_delay_s > 0:
        address_bound = int(g.fetch_window_s / p.min_delay_s) + 1
        within_group = within_group & (F.col("rank") <= F.lit(address_bound))
    return (
        by_group.filter(within_group)
        .withColumn("rank", rank("domain"))
        .withColumn("domain_cap", F.least(F.col("static_domain_cap"), F.col("budget")))
    )


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
        "etag",
        "last_modified",
        "content_sha256",
        "stored_capture",
        # the caps, for what following may add (``with_follow_quota``)
        "host_cap",
        "group_cap",
        "domain_cap",
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
    return chosen.withColumn("follow_quota", F.lit(None).cast("int")).withColumn(
        "follow_known", F.lit(None).cast("array<bigint>")
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
    per_host = chosen.groupBy("host", "host_bucket", "group", "domain").agg(
        F.count("*").alias("n"),
        F.first("host_cap").alias("host_cap"),
        F.first("group_cap").alias("group_cap"),
        F.first("domain_cap").alias("domain_cap"),
    )
    quota = F.least(
        F.col("host_cap") - F.col("n"),
        _shares("group", "group_cap"),
        _shares("domain", "domain_cap"),
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


def assign(chosen: DataFrame, ctx: StageContext) -> DataFrame:
    """Add the ``task`` column: host groups packed over ``fetch.tasks`` tasks."""
    costs = chosen.groupBy("group").agg(F.sum("gap").alias("cost")).collect()
    mapping = assign_tasks([(r["group"], float(r["cost"])) for r in costs], ctx.cfg.fetch.tasks)
    spark = ctx.spark
    tasks = spark.createDataFrame(list(mapping.items()), "group string, task int")
    return chosen.join(F.broadcast(tasks), "group").select(*FETCHLIST_SCHEMA.fieldNames())


def mark_generated(
    fetchlist: DataFrame, deferred: DataFrame, ctx: StageContext, rows: int | None = None
) -> None:
    """One MERGE: the fetch list's rows are generated for this segment (their
    deferral count starts again), the deferred ones are put off. ``rows``
    (both together, if known): a source that ``broadcastable`` allows is
    broadcast, so crawldb's rows meet it where they are read instead of
    being shuffled to it (bench_scale at 10M URLs, 1.5M rows: the MERGE
    took 129 s shuffled, 53 s broadcast; README)."""
    if rows == 0:
        return
    at = F.lit(ctx.at).cast("timestamp")
    chosen = fetchlist.select(
        "host_bucket", "url_fp", "url",
        F.lit(None).cast("timestamp").alias("next_fetch_at"),
        F.lit(0).alias("deferrals"), F.lit("generate").alias("_op"),
    )  # fmt: skip
    source = chosen.unionByName(deferred.withColumn("_op", F.lit("defer")))
    if rows is not None and broadcastable(ctx.spark, rows, MARK_ROW_BYTES):
        source = F.broadcast(source)
    buckets = [r[0] for r in source.select("host_bucket").distinct().collect()]
    if not buckets:
        return
    bucket_list = ", ".join(str(int(b)) for b in sorted(buckets))
    (
        delta_table(ctx.spark, ctx.root, "crawldb")
        .alias("t")
        .merge(
            source.alias("s"),
            f"t.host_bucket IN ({bucket_list}) AND t.host_bucket = s.host_bucket "
            "AND t.url_fp = s.url_fp AND t.url = s.url",
        )
        .whenMatchedUpdate(
            condition="s._op = 'generate'",
            set={
                "generated_segment": F.lit(ctx.segment),
                "generated_at": at,
                "deferrals": F.lit(0),
                "deferred_reason": F.lit(None).cast("string"),
            },
        )
        .whenMatchedUpdate(
            condition="s._op = 'defer'",
            set={
                "next_fetch_at": F.col("s.next_fetch_at"),
                "deferrals": F.col("s.deferrals"),
                "deferred_reason": F.lit("budget/domain"),
                "deferred_at": at,
            },
        )
        .execute()
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

    def release(self) -> None:
        release(*self.cached)


# over_budget's rows
DEFERRED_COLUMNS = (
    "host_bucket int, url_fp bigint, url string, next_fetch_at timestamp, deferrals int"
)


def generate(ctx: StageContext) -> Generated:
    spark, root = ctx.spark, ctx.root
    crawldb = read_table(spark, root, "crawldb")
    hostdb = read_table(spark, root, "hostdb")
    held = hostdb.filter(F.col("backoff_until") > F.lit(ctx.at).cast("timestamp"))
    if due_urls(crawldb, ctx).join(F.broadcast(held.select("host")), "host", "left_anti").isEmpty():
        # Nothing due, or only URLs of held hosts (a crawl caught up): one
        # narrow scan instead of the ranking's joins and windows over nothing.
        empty = spark.createDataFrame([], FETCHLIST_SCHEMA)
        return Generated(empty, spark.createDataFrame([], DEFERRED_COLUMNS), [])
    ranked = materialize(
        rank_due(
            crawldb,
            hostdb,
            read_table(spark, root, "policy"),
            ctx,
            read_table(spark, root, "domainlinks"),
        )
    )
    chosen = with_follow_quota(with_host_hints(choose(ranked, ctx), hostdb), crawldb, ctx)
    chosen = materialize(chosen)
    deferred = materialize(over_budget(ranked, ctx))
    return Generated(assign(chosen, ctx), deferred, [ranked, chosen, deferred])
