"""Daily crawl cycles for the crawl tests of ``tests/stages``: the segments'
jobs in order on the logical clock, and a segment table read across them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from trawl.runner import JobContext, run_fetch, run_generate, run_updatedb
from trawl.store.tables import read_segment_table


def run_days(ctx_of: Callable[[int], JobContext], days: int) -> list[str]:
    """generate -> fetch -> updatedb for days 0 .. ``days`` - 1 (``ctx_of``
    gives each day's job context); the segments, in order."""
    segments = []
    for day in range(days):
        ctx = ctx_of(day)
        segments.append(ctx.segment)
        run_generate(ctx)
        run_fetch(ctx)
        run_updatedb(ctx)
    return segments


def across_segments(spark: Any, root: str, segments: list[str], name: str) -> Any:
    """The segment table ``name`` of every segment, with a ``segment`` column."""
    frames = [
        read_segment_table(spark, root, seg, name).withColumn("segment", F.lit(seg))
        for seg in segments
    ]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out
