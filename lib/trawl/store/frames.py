"""Frames computed once and kept (``materialize``), and freed (``release``):
the stages keep the frames several queries read, and the store keeps a
source it must both count and write."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` now and keep its rows on the executors (a local
    checkpoint), for a frame that several later queries or a MERGE read.

    Not ``cache()``: a cached frame keeps its plan, and that plan names the
    Delta tables it read. Every commit to one of them (each MERGE of the
    cycle) makes Spark's cache manager plan the cached frame again, which
    costs a file-listing job per Delta scan in it: 35 to 44 jobs after each
    crawldb MERGE of a small crawl, seconds of every stage. A checkpoint is
    rows with no plan behind them: a commit re-plans nothing, queries over
    it plan faster, and a MERGE takes it as its source without copying it
    first. What it gives up: its blocks live on the executors that computed
    them, so losing one fails the job rather than recomputing (every job is
    safe to re-run). ``release`` frees it."""
    return df.localCheckpoint(eager=True)


def release(*frames: DataFrame) -> None:
    """Free frames made by ``materialize`` (their blocks) or ``cache()``.
    PySpark has no call that frees a local checkpoint, and ``unpersist``
    does nothing to one: its RDD is reached through the JVM plan."""
    for frame in frames:
        plan = frame._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
        else:
            frame.unpersist()
