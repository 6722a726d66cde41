"""Daily crawl cycles for the crawl tests of ``tests/stages``: a crawl's job
context per day on the logical clock, the segments' jobs in order, and a
segment table read across them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import functions as F

from trawl.config import Config
from trawl.runner import (
    JobContext,
    run_dedup,
    run_fetch,
    run_generate,
    run_updatedb,
    segment_id,
)
from trawl.store.tables import read_segment_table, read_table

DAY0 = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class DailyCrawl:
    """A crawl root in a test: its job context on day ``day`` after ``DAY0``
    and its tables."""

    spark: Any
    cfg: Config
    root: str

    def ctx(self, day: int) -> JobContext:
        at = DAY0 + timedelta(days=day)
        return JobContext(self.spark, self.cfg, self.root, segment_id(at), at)

    def table(self, name: str) -> Any:
        return read_table(self.spark, self.root, name)


def run_days(ctx_of: Callable[[int], JobContext], days: int, dedup: bool = False) -> list[str]:
    """generate -> fetch -> updatedb (-> dedup, as ``trawl cycle`` runs it) for
    days 0 .. ``days`` - 1 (``ctx_of`` gives each day's job context); the
    segments, in order."""
    segments = []
    for day in range(days):
        ctx = ctx_of(day)
        segments.append(ctx.segment)
        run_generate(ctx)
        run_fetch(ctx)
        run_updatedb(ctx)
        if dedup:
            run_dedup(ctx)
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
