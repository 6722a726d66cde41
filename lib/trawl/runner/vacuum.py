"""``trawl vacuum``: Delta VACUUM of the crawl's tables, keeping time travel
over the last segments.

Every MERGE leaves the files it replaced behind, so that readers of older
versions (time travel, a job still reading the version it started on) keep
working; VACUUM deletes those older than its retention. trawl sets the
retention from the crawl's own rhythm rather than a fixed week: files are
kept as long as the table versions of the newest ``crawl.vacuum_keep_segments``
segments need them, i.e. since the oldest of those segments was generated
(when its fetch list was written), and always since the oldest segment that
is still running (generated, not yet through updatedb), whose jobs read the
versions they started on. An explicit ``--retain-hours`` shorter than that
running segment is refused. Segment tables are plain files, not Delta, and
are not touched.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trawl.runner.common import JobContext, say
from trawl.store.session import session_conf
from trawl.store.tables import (
    TABLES,
    counted,
    delta_table,
    list_segments,
    segment_path,
    table_path,
)

MARGIN_H = 1.0  # added to every retention: clocks of the writers differ a little
VACUUM_CONF = {
    # trawl checks the retention itself (``retention``); Delta's check wants a week
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    # VACUUM lists the table's folders in this many tasks (Spark's default is
    # 10,000: a quarter of an hour of empty tasks in local mode); a crawl
    # table has one folder per host bucket
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "16",
}


@dataclass(frozen=True)
class Retention:
    """How long VACUUM keeps removed files, and why."""

    hours: float | None  # None: keep everything (too few segments yet)
    why: str


def _generated_at(ctx: JobContext, segment: str) -> float | None:
    """Wall time the segment's fetch list was written (its completion marker)."""
    root = ctx.files
    rel = segment_path("", segment, "fetchlist").lstrip("/")
    for name in ("_TRAWL_COMPLETE", "_delta_log/00000000000000000000.json"):
        when = root.modified_at(f"{rel}/{name}")
        if when is not None:
            return when
    return None


def retention(ctx: JobContext, keep_segments: int, retain_hours: float | None) -> Retention:
    """The retention ``trawl vacuum`` uses (see the module's docstring);
    ValueError for an explicit one shorter than a running segment."""
    now = time.time()
    segments = list_segments(ctx.spark, ctx.root)
    born = {s: t for s in segments if (t := _generated_at(ctx, s)) is not None}
    running = [s for s in born if not counted(ctx.files, s, "updatedb")]
    oldest_running = min(running, key=lambda s: born[s], default=None)
    need_h = (now - born[oldest_running]) / 3600 + MARGIN_H if oldest_running else 0.0
    if retain_hours is not None:
        if retain_hours < need_h:
            raise ValueError(
                f"vacuum: --retain-hours {retain_hours:g} is shorter than segment "
                f"{oldest_running}, still running (generated {need_h - MARGIN_H:.1f} h ago, "
                "not through updatedb): its jobs read older versions. Give at least "
                f"{math.ceil(need_h)}, or finish or abandon that segment first"
            )
        return Retention(retain_hours, "as given")
    kept = sorted(born)[-keep_segments:]
    if len(born) < keep_segments or not kept:
        return Retention(None, f"{len(born)} segments, fewer than {keep_segments} to keep")
    since = born[kept[0]]
    why = f"time travel over the last {keep_segments} segments (since {kept[0]})"
    if oldest_running and born[oldest_running] < since:
        since, why = born[oldest_running], f"segment {oldest_running} is still running"
    return Retention(round((now - since) / 3600 + MARGIN_H, 2), why)


def run_vacuum(
    ctx: JobContext,
    names: Sequence[str] = (),
    retain_hours: float | None = None,
    dry_run: bool = False,
) -> list[dict[str, Any]]:
    """VACUUM the named tables (default: all), one row each: the retention,
    why, and the files deleted (or that would be, with ``dry_run``)."""
    unknown = sorted(set(names) - set(TABLES))
    if unknown:
        raise ValueError(f"vacuum: no table {', '.join(unknown)} (tables: {', '.join(TABLES)})")
    plan = retention(ctx, ctx.cfg.crawl.vacuum_keep_segments, retain_hours)
    rows: list[dict[str, Any]] = []
    if plan.hours is None:
        say(f"vacuum: nothing to do ({plan.why})")
        return [{"table": n, "retain_hours": None, "why": plan.why, "files": 0} for n in
                names or TABLES]  # fmt: skip
    spark = ctx.spark
    with session_conf(spark, VACUUM_CONF):
        for name in names or TABLES:
            if not ctx.files.names(f"{name}/_delta_log", ".json"):
                continue  # never made: nothing to vacuum, and vacuum creates nothing
            table = delta_table(spark, ctx.root, name)
            path = table_path(ctx.root, name)
            doomed = spark.sql(f"VACUUM delta.`{path}` RETAIN {plan.hours} HOURS DRY RUN").count()
            if doomed and not dry_run:
                table.vacuum(plan.hours)
            rows.append({"table": name, "retain_hours": plan.hours, "why": plan.why,
                         "files": doomed, "deleted": 0 if dry_run else doomed})  # fmt: skip
    return rows
