"""Reading the crawl: ``trawl stats``, ``trawl sql``, and ``trawl compact``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from trawl.runner.common import JobContext
from trawl.stages.stats import crawl_stats
from trawl.store.tables import (
    TABLES,
    compact,
    ensure_all,
    read_table,
)
from trawl.store.views import register_views


class QueryError(ValueError):
    """A query Spark refused (a syntax error, an unknown table or column)."""


def run_stats(ctx: JobContext) -> dict[str, list[dict[str, Any]]]:
    """``trawl stats``: the summary tables of the crawl, by title."""
    crawldb, counters, rejected, domainlinks, policy = (
        read_table(ctx.spark, ctx.root, n)
        for n in ("crawldb", "counters", "rejected", "domainlinks", "policy")
    )
    return crawl_stats(crawldb, counters, rejected, domainlinks, ctx.stage, policy)


def run_sql(ctx: JobContext, query: str) -> list[dict[str, Any]]:
    """``trawl sql``: the rows of ``query`` over the crawl's tables by name."""
    from pyspark.errors import PySparkException

    register_views(ctx.spark, ctx.root)
    try:
        return [r.asDict(recursive=True) for r in ctx.spark.sql(query).collect()]
    except PySparkException as exc:
        raise QueryError(str(exc).splitlines()[0]) from exc


def run_compact(ctx: JobContext, names: Sequence[str] = ()) -> list[dict[str, Any]]:
    """OPTIMIZE the named tables (default: all of them), one row each."""
    unknown = sorted(set(names) - set(TABLES))
    if unknown:
        raise ValueError(f"compact: no table {', '.join(unknown)} (tables: {', '.join(TABLES)})")
    ensure_all(ctx.spark, ctx.root)
    rows = []
    for name in names or TABLES:
        started = time.monotonic()
        rows.append({"table": name, **compact(ctx.spark, ctx.root, name),
                     "seconds": round(time.monotonic() - started, 1)})  # fmt: skip
    return rows
