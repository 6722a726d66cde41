"""Small pieces every stage uses: per-record Python over Arrow batches,
frames computed once and reused (``materialize``, kept in
``trawl.store.frames`` since the store keeps frames too), independent
Spark actions run side by side (``beside``, ``concurrently``), and the
stage context (config, segment, logical time: no session and no crawl
root, since a stage gets its tables as frames and returns frames, MERGE
plans or values)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from trawl.config import Config
from trawl.store.frames import materialize as materialize
from trawl.store.frames import release as release
from trawl.store.schemas import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

RowFn = Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]]


@dataclass(frozen=True)
class StageContext:
    """What a stage knows of its run. The session comes with the frames
    (``DataFrame.sparkSession``); the crawl root is the runner's and the
    store's alone."""

    cfg: Config
    segment: str
    at: datetime  # the cycle's logical time; no job reads the wall clock for it
    # generate: segments whose folders are gone; the URLs they locked are free
    released_segments: tuple[str, ...] = ()


def map_records(df: DataFrame, fn: RowFn, schema: StructType) -> DataFrame:
    """Run ``fn`` over the rows of each partition as dicts (``mapInArrow``),
    producing rows of ``schema``. ``fn`` is a pure function from trawl."""
    out_schema = arrow_schema(schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        def rows() -> Iterator[dict[str, Any]]:
            for batch in batches:
                yield from batch.to_pylist()

        chunk: list[dict[str, Any]] = []
        for record in fn(rows()):
            chunk.append(record)
            if len(chunk) >= 2048:
                yield pa.RecordBatch.from_pylist(chunk, schema=out_schema)
                chunk = []
        if chunk:
            yield pa.RecordBatch.from_pylist(chunk, schema=out_schema)

    return df.mapInArrow(run, schema)


def sql_in(values: Iterable[int]) -> str:
    """``(1, 2, 3)`` for a partition filter; ``(NULL)`` when empty."""
    items = sorted(set(values))
    return "(" + ", ".join(str(int(v)) for v in items) + ")" if items else "(NULL)"


def broadcastable(spark: SparkSession, rows: int, row_bytes: int) -> bool:
    """Is a join side of ``rows`` rows of about ``row_bytes`` bytes each
    small enough to send whole to every executor: at most an eighth of the
    driver's heap (which builds it), and broadcasting not turned off
    (``spark.sql.autoBroadcastJoinThreshold=-1``)."""
    if spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1":
        return False
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    return rows * row_bytes <= heap // 8


def beside(workers: int = 3) -> ThreadPoolExecutor:
    """A pool for Spark actions that do not depend on the stage's main line,
    submitted from the driver to run while it goes on.

    One SparkSession takes jobs from many driver threads. A stage's jobs are
    mostly small (a Delta log replay, a commit, a count over a few thousand
    rows), much of whose time is the driver's planning and waiting, so two
    side by side overlap it; it pays when the cores are not already busy
    (docs/benchmarks.md: nothing measurable under the tiered JIT, a few
    seconds a cycle with ``spark.driver_jit = "c1"``). Use it as a
    context manager: leaving the block waits for every action submitted, so
    none is still writing when the stage returns or raises; call
    ``result()`` on each future inside the block to get its value or its
    error."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trawl-beside")


def concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls side by side (``beside``); their results in order. Every
    call finishes before the first error is raised."""
    with beside(len(calls)) as pool:
        futures = [pool.submit(_inheriting(call)) for call in calls]
        return [f.result() for f in futures]


def _inheriting(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` run with the calling thread's Spark local properties (job
    group, description, scheduler pool, anything a caller tags its jobs
    with), so the jobs it starts on a pool thread are the caller's. A
    Python thread does not inherit them (pinned-thread mode)."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        return call
    properties = sc._jsc.sc().getLocalProperties().clone()

    def run() -> Any:
        sc._jsc.sc().setLocalProperties(properties)
        return call()

    return run
