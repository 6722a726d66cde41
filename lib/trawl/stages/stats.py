"""``trawl stats`` on Spark (``--engine spark``): the sections of
``trawl.crawldb.statsql``, whose SQL DuckDB runs too, over frames the runner
hands over (Spark's frame arguments fill the queries' ``{crawldb}``,
``{counters}``, ... so no view or table is named here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trawl.crawldb.statsql import stats_queries
from trawl.stages.common import StageContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _run(query: str, frames: dict[str, DataFrame]) -> list[dict[str, Any]]:
    spark = next(iter(frames.values())).sparkSession
    named: dict[str, Any] = dict(frames)
    return [r.asDict(recursive=True) for r in spark.sql(query, **named).collect()]


def _frames(
    crawldb: DataFrame, counters: DataFrame, rejected: DataFrame,
    domainlinks: DataFrame, policy: DataFrame | None,
) -> dict[str, DataFrame]:  # fmt: skip
    if policy is None:  # no policy table: no operator's budget
        from trawl.store.schemas import POLICY_SCHEMA

        policy = crawldb.sparkSession.createDataFrame([], POLICY_SCHEMA)
    return {"crawldb": crawldb, "counters": counters, "rejected": rejected,
            "domainlinks": domainlinks, "policy": policy}  # fmt: skip


def domain_budgets(
    crawldb: DataFrame, domainlinks: DataFrame, ctx: StageContext,
    policy: DataFrame | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """The "domains" section alone (``trawl.crawldb.statsql``)."""
    query = stats_queries(ctx.cfg, ctx.at, "spark")["domains"]
    return _run(query, _frames(crawldb, crawldb, crawldb, domainlinks, policy))


def crawl_stats(
    crawldb: DataFrame, counters: DataFrame, rejected: DataFrame,
    domainlinks: DataFrame, ctx: StageContext, policy: DataFrame | None = None,
) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """The summary tables of one crawl, by title."""
    frames = _frames(crawldb, counters, rejected, domainlinks, policy)
    return {
        title: _run(query, frames)
        for title, query in stats_queries(ctx.cfg, ctx.at, "spark").items()
    }
