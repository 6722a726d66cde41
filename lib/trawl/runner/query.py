"""Reading the crawl: ``trawl stats``, ``trawl sql``, and ``trawl compact``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trawl.runner.common import JobContext
from trawl.stages.stats import crawl_stats
from trawl.store.lake import QueryError
from trawl.store.tables import (
    TABLES,
    compact,
    ensure_all,
    read_existing,
)
from trawl.store.views import register_views

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 10_000  # rows a streamed result brings to the driver at a time


def run_stats(ctx: JobContext) -> dict[str, list[dict[str, Any]]]:
    """``trawl stats`` on Spark: the summary tables of the crawl, by title
    (the same SQL as the JVM-free ``trawl.sql.lake_stats``). Reads only."""
    crawldb, counters, rejected, domainlinks, policy = (
        read_existing(ctx.spark, ctx.root, n)
        for n in ("crawldb", "counters", "rejected", "domainlinks", "policy")
    )
    return crawl_stats(crawldb, counters, rejected, domainlinks, ctx.stage, policy)


def run_sql(ctx: JobContext, query: str) -> list[dict[str, Any]]:
    """The rows of ``query`` over the crawl's tables by name, on Spark (for
    small results; ``sql_batches`` streams)."""
    _, batches = sql_batches(ctx, query)
    return [row for batch in batches for row in batch.to_pylist()]


def sql_batches(
    ctx: JobContext, query: str, limit: int | None = None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """``trawl sql --engine spark``: the result's schema, and its rows as
    Arrow batches as they come from the executors (``toLocalIterator``, a
    partition at a time), never collected whole into the driver."""
    from pyspark.errors import PySparkException
    from pyspark.sql.pandas.types import to_arrow_schema

    register_views(ctx.spark, ctx.root)
    try:
        frame = ctx.spark.sql(query)
        if limit is not None:
            frame = frame.limit(limit)
        schema = to_arrow_schema(frame.schema, timezone="UTC", prefers_large_types=False)
        rows = frame.toLocalIterator(prefetchPartitions=True)
    except PySparkException as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc
    return schema, _batched(rows, schema)


def _batched(rows: Iterator[Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Rows in Arrow batches; an error Spark raises only as the rows come
    (a bad cast, a division by zero) is a ``QueryError`` too."""
    import pyarrow as pa
    from pyspark.errors import PySparkException

    chunk: list[dict[str, Any]] = []
    try:
        for row in rows:
            chunk.append(row.asDict(recursive=True))
            if len(chunk) == BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(chunk, schema=schema)
                chunk = []
    except PySparkException as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


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
