"""``trawl sql`` and ``trawl stats`` on either engine.

- ``duckdb`` (the default): DuckDB over the Delta tables delta-rs reads
  (``trawl.store.lake``). No JVM: an answer on the demo crawl in about a
  second, on local and object-store roots alike.
- ``spark``: the Spark session, for queries too big for one machine
  (``trawl.runner.query``).

Both see the same table names (``crawldb``, ``hostdb``, ..., ``fetch`` and
``fetchlist`` over every segment), both stream a result to the writer
(``trawl.report.write_batches``) rather than collect it, and ``trawl stats``
is the same SQL on both (``trawl.crawldb.statsql``). Neither creates,
alters or upgrades a table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from trawl.config import Config
from trawl.crawldb.statsql import stats_queries
from trawl.store.files import CrawlRoot
from trawl.store.lake import open_lake

if TYPE_CHECKING:
    import pyarrow as pa

ENGINES = ("duckdb", "spark")
STATS_TABLES = ("crawldb", "counters", "rejected", "domainlinks", "policy")


def lake_stats(root: CrawlRoot, cfg: Config, at: datetime) -> dict[str, list[dict[str, Any]]]:
    """``trawl stats`` without a JVM: every section, by title."""
    lake = open_lake(root)
    try:
        names = {name: f'"{name}"' for name in STATS_TABLES}
        return {
            title: lake.rows(query.format(**names))
            for title, query in stats_queries(cfg, at, "duckdb").items()
        }
    finally:
        lake.close()


@contextmanager
def lake_batches(
    root: CrawlRoot, query: str, limit: int | None = None
) -> Iterator[tuple[pa.Schema | None, Iterator[pa.RecordBatch]]]:
    """``query`` on DuckDB: its schema (None for a statement without rows)
    and its batches as they stream; ``limit`` is planned into the query."""
    lake = open_lake(root)
    try:
        rel = lake.relation(query)
        if rel is None:
            yield None, iter(())
            return
        if limit is not None:
            rel = rel.limit(limit)
        reader = rel.to_arrow_reader(10_000)
        yield reader.schema, iter(reader)
    finally:
        lake.close()
