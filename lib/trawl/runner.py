"""The jobs of the cycle, each: read tables, call the stage, write, count.

One small runner shared by the CLI (``trawl generate ...``, ``trawl cycle``)
and the spark-submit entry points in ``jobs/``. Each job writes its counters
(hierarchical names, ``fetch/outcome/success``) to the ``counters`` table under
its segment, replacing a previous run's, so ``trawl stats`` and SQL see them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import functions as F

from trawl.stages.common import StageContext
from trawl.stages.fetch import fetch
from trawl.stages.generate import generate, mark_generated
from trawl.stages.inject import inject
from trawl.stages.updatedb import updatedb
from trawl.tables import (
    ensure_all,
    read_segment_table,
    segment_exists,
    write_counters,
    write_segment_table,
)

Progress = Callable[[str], None]


def segment_id(at: datetime) -> str:
    """Segment ids sort by logical time: ``20261130T0353Z``-style, UTC."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def say(msg: str) -> None:
    print(f"[trawl] {msg}", file=sys.stderr, flush=True)


def run_inject(ctx: StageContext, seeds: Sequence[str]) -> dict[str, Any]:
    ensure_all(ctx.spark, ctx.root)
    report = inject(ctx, seeds)
    write_counters(ctx.spark, ctx.root, ctx.segment, "inject", report.counters())
    return {
        "lines": report.lines,
        "accepted": report.accepted,
        "duplicates": report.duplicates,
        "rejected": dict(report.rejected),
    }


def run_generate(ctx: StageContext) -> dict[str, Any]:
    ensure_all(ctx.spark, ctx.root)
    fetchlist = generate(ctx)
    write_segment_table(fetchlist, ctx.root, ctx.segment, "fetchlist")
    written = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetchlist")
    mark_generated(written, ctx)
    stats = written.agg(
        F.count("*").alias("urls"),
        F.countDistinct("host").alias("hosts"),
        F.countDistinct("task").alias("tasks"),
    ).first()
    assert stats is not None
    counters = [
        ("generate/urls", stats["urls"]),
        ("generate/hosts", stats["hosts"]),
        ("generate/tasks", stats["tasks"]),
    ]
    write_counters(ctx.spark, ctx.root, ctx.segment, "generate", counters)
    return {"segment": ctx.segment, **stats.asDict()}


def run_fetch(ctx: StageContext, time_limit_s: float | None = None) -> dict[str, Any]:
    if not segment_exists(ctx.spark, ctx.root, ctx.segment, "fetchlist"):
        raise SystemExit(f"segment {ctx.segment} has no fetchlist: run generate first")
    write_segment_table(fetch(ctx, time_limit_s), ctx.root, ctx.segment, "fetch")
    rows = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetch")
    counters: list[tuple[str, int]] = []
    for r in rows.groupBy("kind", "outcome").count().collect():
        counters.append((f"fetch/{r['kind']}/{r['outcome'] or 'none'}", r["count"]))
    for r in rows.filter("http_status IS NOT NULL").groupBy("http_status").count().collect():
        counters.append((f"fetch/status/{r['http_status']}", r["count"]))
    for r in (
        rows.filter("robots_decision IS NOT NULL").groupBy("robots_decision").count().collect()
    ):
        counters.append((f"robots/{r['robots_decision']}", r["count"]))
    write_counters(ctx.spark, ctx.root, ctx.segment, "fetch", counters)
    return {"segment": ctx.segment, **{k: v for k, v in sorted(counters)}}


def run_updatedb(ctx: StageContext) -> dict[str, Any]:
    if not segment_exists(ctx.spark, ctx.root, ctx.segment, "fetch"):
        raise SystemExit(f"segment {ctx.segment} has no fetch table: run fetch first")
    ensure_all(ctx.spark, ctx.root)
    report = updatedb(ctx)
    write_counters(ctx.spark, ctx.root, ctx.segment, "updatedb", report.counters())
    return {
        "segment": ctx.segment,
        "fetch_rows": report.fetched_rows,
        "new_urls": report.new_urls,
        "hosts": report.hosts,
        "rejected": dict(report.rejected),
    }
