"""``trawl stats``: the crawl state, summed up in SQL.

Nutch's ``readdb -stats`` and more: URLs by status, hosts, and per segment
the fetch outcomes from the counters table, rejected links by reason and
deferred URLs by domain, and each domain's budget (``domain_budgets``). The
runner hands over the tables as frames; the queries name them as
``{crawldb}``, ``{counters}`` and ``{rejected}`` (``SparkSession.sql``'s
frame arguments), so no view or table is named here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from trawl.crawldb.status import HAS_CONTENT
from trawl.stages.common import StageContext
from trawl.stages.ranking import domain_budgets as star_budgets
from trawl.stages.ranking import effective_policy, trusted_hosts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The domains ``domain_budgets`` shows: the most URLs first.
TOP_DOMAINS = 20


def domain_budgets(
    crawldb: DataFrame, domainlinks: DataFrame, ctx: StageContext,
    policy: DataFrame | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Per registered domain (the ``TOP_DOMAINS`` with the most URLs): its
    hosts and how many the operator named (each a budget group of its own,
    ``budget.seed_host_pages`` a segment), its STAR budget a segment (pages
    per distinct other domain linking to it, between ``budget.min_pages``
    and ``budget.max_pages``; none when budgets are off), the operator's
    budget (a domain policy's page cap, which replaces STAR's; none without
    one), and its URLs: with content, due, and deferred, with the reasons."""
    b = ctx.cfg.budget
    named, _ = trusted_hosts(crawldb)
    hosts = crawldb.select("domain", "host").distinct()
    hosts = hosts.join(named.withColumn("named", F.lit(1)), "host", "left")
    per_host = hosts.groupBy("domain").agg(
        F.count("*").alias("hosts"), F.sum(F.coalesce("named", F.lit(0))).alias("named_hosts")
    )
    statuses = [s.value for s in HAS_CONTENT]
    at = F.lit(ctx.at).cast("timestamp")
    urls = crawldb.groupBy("domain").agg(
        F.count("*").alias("urls"),
        F.sum(F.col("status").isin(statuses).cast("int")).alias("with_content"),
        F.sum((F.col("next_fetch_at").isNull() | (F.col("next_fetch_at") <= at)).cast("int")).alias(
            "due"
        ),
        F.sum(F.col("deferred_reason").isNotNull().cast("int")).alias("deferred"),
        F.array_sort(F.collect_set("deferred_reason")).alias("deferred_why"),
    )
    rows = urls.join(per_host, "domain", "left")
    if b.enabled:
        budgets = star_budgets(domainlinks, ctx).select("domain", "linking_domains", "budget")
        rows = rows.join(budgets, "domain", "left").select(
            "*",
            F.coalesce("linking_domains", F.lit(0)).alias("linking"),
            F.coalesce("budget", F.lit(b.min_pages)).alias("star_budget"),
        )
    else:
        rows = rows.select(
            "*", F.lit(0).alias("linking"), F.lit(None).cast("int").alias("star_budget")
        )
    if policy is not None:
        caps = effective_policy(policy, ctx, "domain").select(
            "domain", F.col("domain_max_pages").alias("policy_budget")
        )
        rows = rows.join(caps, "domain", "left")
    else:
        rows = rows.withColumn("policy_budget", F.lit(None).cast("int"))
    top = rows.orderBy(F.col("urls").desc(), "domain").limit(TOP_DOMAINS)
    return [
        r.asDict()
        for r in top.select(
            "domain", "hosts", "named_hosts", F.col("linking").alias("linking_domains"),
            "star_budget", "policy_budget", "urls", "with_content", "due", "deferred",
            "deferred_why",
        ).collect()
    ]  # fmt: skip


def crawl_stats(
    crawldb: DataFrame, counters: DataFrame, rejected: DataFrame,
    domainlinks: DataFrame, ctx: StageContext, policy: DataFrame | None = None,
) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """The summary tables of one crawl, by title."""
    spark = crawldb.sparkSession

    def q(query: str) -> DataFrame:
        return spark.sql(query, crawldb=crawldb, counters=counters, rejected=rejected)

    return {
        "totals": [
            r.asDict()
            for r in q(
                "SELECT count(*) AS urls, count(DISTINCT host) AS hosts, "
                "count(DISTINCT domain) AS domains, sum(fetches) AS fetches FROM {crawldb}"
            ).collect()
        ],
        "by_status": [
            r.asDict()
            for r in q(
                "SELECT status, count(*) AS urls FROM {crawldb} GROUP BY status ORDER BY urls DESC"
            ).collect()
        ],
        "segments": [
            r.asDict()
            for r in q(
                "SELECT segment, "
                "sum(CASE WHEN name = 'generate/urls' THEN value END) AS generated, "
                "sum(CASE WHEN name = 'fetch/page/success' THEN value END) AS fetched, "
                "sum(CASE WHEN name LIKE 'fetch/page/%' AND name <> 'fetch/page/success' "
                "THEN value END) AS other_outcomes, "
                "sum(CASE WHEN name LIKE 'fetch/why/%/internal' THEN value END) "
                "AS internal_errors, "
                "sum(CASE WHEN name = 'robots/robots_denied' THEN value END) AS robots_denied, "
                "sum(CASE WHEN name = 'updatedb/new_urls' THEN value END) AS new_urls, "
                "sum(CASE WHEN name = 'dedup/duplicates/marked' THEN value END) AS duplicates, "
                "sum(CASE WHEN name LIKE 'updatedb/rejected/%' THEN value END) AS rejected, "
                "sum(CASE WHEN name = 'generate/deferred/budget' THEN value END) AS deferred "
                "FROM {counters} GROUP BY segment ORDER BY segment"
            ).collect()
        ],
        # What was kept out of the crawl and why: links never added (filter
        # rules, normaliser errors, trap caps), and due URLs put off by their
        # domain's budget (in crawldb, until generated).
        "rejected": [
            r.asDict()
            for r in q(
                "SELECT reason, count(*) AS urls, count(DISTINCT host) AS hosts, "
                "count(DISTINCT segment) AS segments FROM {rejected} "
                "GROUP BY reason ORDER BY urls DESC, reason"
            ).collect()
        ],
        "deferred": [
            r.asDict()
            for r in q(
                "SELECT deferred_reason AS reason, domain, count(*) AS urls, "
                "max(deferrals) AS most_in_a_row, min(next_fetch_at) AS next_due FROM {crawldb} "
                "WHERE deferred_reason IS NOT NULL GROUP BY deferred_reason, domain "
                "ORDER BY urls DESC, domain LIMIT 20"
            ).collect()
        ],
        "domains": domain_budgets(crawldb, domainlinks, ctx, policy),
    }
