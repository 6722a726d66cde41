"""generate's ranking: which due URLs come first, and how many each host,
address and registered domain may have in the segment.

Due URLs (new, or ``next_fetch_at`` passed) not locked by another unfinished
segment; the operator's rules in force per host and per domain
(``effective_policy``); recrawl priority from the change-rate model
(``trawl.crawldb.changerate``); domain budgets from the domain link graph
(``trawl.crawldb.budgets``); and ``rank_due``, which puts the caps of
``trawl.stages.generate``'s docstring on every due URL as window columns, so
``choose`` and ``over_budget`` only filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from trawl.crawldb.budgets import (
    FARM_LINKS_PER_PAGE,
    FARM_MIN_PAGES,
    FARM_PAGES_PER_SIBLING,
)
from trawl.net.resolver import Resolver
from trawl.stages.common import (
    StageContext,
    map_records,
)
from trawl.stages.traps import bad_patterns, trusted_hosts

# What a due URL carries through the ranking windows: the fetch list's own
# columns, the ranking keys and the caps (``rank_due``).
RANKED_COLUMNS = (
    "url", "url_fp", "host", "host_bucket", "domain", "host_ip", "group", "gap", "first",
    "score", "depth", "counter_run", "status", "source", "is_sitemap", "etag", "last_modified",
    "content_sha256", "stored_capture", "deferrals", "priority", "overdue", "host_cap",
    "static_domain_cap", "budget", "trusted", "farm", "budget_group", "budget_cap",
    "policy_domain_cap",
)  # fmt: skip
# No cap: what a domain without a policy page cap is ranked against.
UNCAPPED = 1_000_000_000

LOCK_EXPIRY = timedelta(days=7)  # Nutch crawl.gen.delay: a crashed segment's lock ends


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
    if ctx.released_segments:  # locked by a segment whose folder was deleted
        unlocked = unlocked | F.col("generated_segment").isin(list(ctx.released_segments))
    due = F.col("next_fetch_at").isNull() | (F.col("next_fetch_at") <= at)
    if not ctx.cfg.requisites.capture:  # requisites an archive crawl left wait for one
        due = due & F.coalesce(F.col("source") != "requisite", F.lit(True))
    return crawldb.filter(unlocked & due)


ADDRESS_SCHEMA = StructType(
    [StructField("host", StringType(), True), StructField("resolved_ip", StringType(), True)]
)


def with_addresses(due: DataFrame, ctx: StageContext) -> DataFrame:
    """Fill ``host_ip`` for hosts hostdb does not know yet, by resolving them
    (Nutch's generate.count.mode=byIP does the same), so hosts that share an
    address share one budget and one task from their first cycle on. The SSRF
    verdict is the fetcher's; here a refused address still names the group.
    Names are looked up several at a time (``Resolver.addresses``)."""
    cfg = ctx.cfg

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        hosts = (row["host"] for row in rows)
        for host, address in Resolver.from_config(cfg).addresses(hosts):
            yield {"host": host, "resolved_ip": address}

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


def farm_like_col(min_hosts: int) -> Column:
    """``trawl.crawldb.budgets.farm_like`` over hostdb's ``sibling_*`` counts
    (false where a host has none, or with ``min_hosts`` 0)."""
    if min_hosts <= 0:
        return F.lit(False)
    hosts, links, pages = (
        F.coalesce(F.col(c), F.lit(0)) for c in ("sibling_hosts", "sibling_links", "sibling_pages")
    )
    return (
        (pages >= FARM_MIN_PAGES)
        & (hosts >= min_hosts)
        & (links >= F.lit(FARM_LINKS_PER_PAGE) * pages)
        & (links < F.lit(FARM_PAGES_PER_SIBLING) * hosts)
    )


def with_trust(due: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    """``due`` with ``trusted``: its host was named by the operator
    (``trusted_hosts``) and does not link out like a link farm (hostdb's
    counts: ``farm_like_col``), or, with ``budget.trust_seed_domains``, is in
    a named host's registered domain; and ``farm``: named, but not trusted
    for linking out like a farm."""
    hosts, domains = trusted_hosts(crawldb)
    if ctx.cfg.budget.trust_seed_domains:
        flagged = domains.withColumn("named", F.lit(True))
        return (
            due.join(flagged, "domain", "left")
            .withColumns(
                {"trusted": F.coalesce(F.col("named"), F.lit(False)), "farm": F.lit(False)}
            )
            .drop("named")
        )
    named = F.coalesce(F.col("named"), F.lit(False))
    farm = named & F.coalesce(F.col("farm"), F.lit(False))
    return (
        due.join(hosts.withColumn("named", F.lit(True)), "host", "left")
        .withColumns({"trusted": named & ~farm, "farm": farm})
        .drop("named")
    )


def probes_only(due: DataFrame, bad: DataFrame, ctx: StageContext) -> DataFrame:
    """``due`` with the URLs of each bad path pattern (``bad_patterns``) cut
    to its best ``traps.pattern_probes``: a trap's pattern is still probed,
    so its verdict can change, but costs a few requests a segment, on a
    host the operator named as much as on any other. Only the bad patterns'
    rows are ranked (their own small shuffle)."""
    flagged = F.broadcast(bad.select("pattern", F.lit(True).alias("_bad")))
    tagged = due.join(flagged, "pattern", "left")
    good = tagged.filter(F.col("_bad").isNull())
    by_pattern = Window.partitionBy("pattern").orderBy(*rank_order())
    probes = (
        tagged.filter(F.col("_bad"))
        .withColumns({"priority": recrawl_priority(ctx), "overdue": overdue(ctx)})
        .withColumn("_n", F.row_number().over(by_pattern))
        .filter(F.col("_n") <= ctx.cfg.traps.pattern_probes)
        .drop("_n", "priority", "overdue")
    )
    return good.unionByName(probes).drop("_bad")


def rank_order() -> list[Column | str]:
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
    (``rank``, against ``domain_cap``: the domain policy's page cap) and in
    their budget group (``budget_rank`` against ``budget_cap``).

    The budget group of a host the operator named (``trusted``, see
    ``with_trust``) is the host itself, with ``budget.seed_host_pages`` a
    segment: its domain's budget counts it on top, so seeds are limited by
    politeness and the operator's caps, not by who links to them. Every other
    host shares its registered domain's group, capped by
    ``generate.max_per_domain`` and the domain's STAR ``budget``
    (``static_domain_cap`` is the first with the policy's cap)."""
    g, p, b = ctx.cfg.generate, ctx.cfg.politeness, ctx.cfg.budget
    at = F.lit(ctx.at).cast("timestamp")
    hosts = hostdb.select(
        "host", F.col("ip").alias("host_ip"), "backoff_until", "delay_s", "crawl_delay_s",
        "robots_fetched_at", "robots_unreachable_since", "soft404_probed_at",
        farm_like_col(b.farm_min_hosts).alias("farm"),
    )  # fmt: skip
    due = (
        with_addresses(due_urls(crawldb, ctx).join(hosts, "host", "left"), ctx)
        .join(F.broadcast(effective_policy(policy, ctx, "host")), "host", "left")
        .join(F.broadcast(effective_policy(policy, ctx, "domain")), "domain", "left")
        .filter(~F.coalesce(F.col("host_stop"), F.lit(False)))
        .filter(~F.coalesce(F.col("domain_stop"), F.lit(False)))
        .filter(F.col("backoff_until").isNull() | (F.col("backoff_until") <= at))
    )
    due = probes_only(due, bad_patterns(crawldb, ctx), ctx)
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
        # a domain policy's page cap is the operator's budget for the domain:
        # it replaces the STAR budget, raising or lowering it
        due = due.join(budgets, "domain", "left").withColumn(
            "budget", F.coalesce(F.col("domain_max_pages"), F.col("budget"), F.lit(b.min_pages))
        )
        due = with_trust(due, crawldb, ctx)
    else:
        due = due.withColumns(
            {"budget": F.lit(None).cast("int"), "trusted": F.lit(False), "farm": F.lit(False)}
        )
    budget_group = F.when(F.col("trusted"), F.concat(F.lit("host:"), F.col("host"))).otherwise(
        F.col("domain")
    )
    budget_cap = F.when(F.col("trusted"), F.lit(b.seed_host_pages)).otherwise(
        F.least(F.col("static_domain_cap"), F.col("budget"))
    )

    def rank(by: str) -> Column:
        return F.row_number().over(Window.partitionBy(by).orderBy(*rank_order()))

    # Ranked on narrow rows: the windows shuffle, and the result is cached, so
    # hostdb's hints (robots.txt bodies) join the chosen rows only, in
    # ``with_host_hints``. The literal bounds beside the per-row caps let
    # Spark keep only the top rows of each partition before its shuffle.
    # Two projections, not ten: each DataFrame call analyses the whole plan
    # again (tens of milliseconds apiece on the driver); the second holds
    # the caps made of the first's columns.
    narrow = (
        due.withColumns(
            {
                "priority": recrawl_priority(ctx),
                "overdue": overdue(ctx),
                "gap": gap,
                "first": first_requests(ctx),
                "group": group,
                "static_domain_cap": static_cap,
                "budget_group": budget_group,
                "policy_domain_cap": F.coalesce(F.col("domain_max_pages"), F.lit(UNCAPPED)),
            }
        )
        .withColumns({"host_cap": host_cap, "budget_cap": budget_cap})
        .select(*RANKED_COLUMNS)
    )
    by_host = narrow.withColumn("rank", rank("host")).filter(
        (F.col("rank") <= F.lit(g.max_per_host)) & (F.col("rank") <= F.col("host_cap"))
    )
    # group_cap counts the hosts' first requests by their own rank, before
    # rank becomes the rank in the group
    by_group = by_host.withColumns({"group_cap": group_cap, "rank": rank("group")})
    within_group = F.col("rank") <= F.col("group_cap")
    if p.mode != "byIP" and p.min_delay_s > 0:
        address_bound = int(g.fetch_window_s / p.min_delay_s) + 1
        within_group = within_group & (F.col("rank") <= F.lit(address_bound))
    # partitioned by (domain, budget group): the domain's shuffle serves both
    in_budget = Window.partitionBy("domain", "budget_group").orderBy(*rank_order())
    return by_group.filter(within_group).withColumns(
        {
            "rank": rank("domain"),
            "budget_rank": F.row_number().over(in_budget),
            "domain_cap": F.col("policy_domain_cap"),
        }
    )
