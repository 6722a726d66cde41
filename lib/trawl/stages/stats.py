"""``trawl stats``: the crawl state, summed up in SQL.

Nutch's ``readdb -stats`` and more: URLs by status, hosts, and per segment
the fetch outcomes from the counters table, rejected links by reason and
deferred URLs by domain. The runner hands over the three tables as frames;
the queries name them as ``{crawldb}``, ``{counters}`` and ``{rejected}``
(``SparkSession.sql``'s frame arguments), so no view or table is named here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def crawl_stats(
    crawldb: DataFrame, counters: DataFrame, rejected: DataFrame
) -> dict[str, list[dict[str, Any]]]:
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
    }
