"""The jobs of the cycle, each: read tables, call the stage, write, count.

One small runner shared by the CLI (``trawl generate ...``, ``trawl cycle``)
and the spark-submit entry points in ``jobs/``. Each job writes its counters
(hierarchical names, ``fetch/outcome/success``) to the ``counters`` table under
its segment, replacing a previous run's, so ``trawl stats`` and SQL see them.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from trawl.stages.common import StageContext
from trawl.stages.dedup import dedup
from trawl.stages.events import merge_events, segment_events
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


def segment_id(at: datetime) -> str:
    """Segment ids sort by logical time: ``20261130T0353Z``-style, UTC."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def say(msg: str) -> None:
    print(f"[trawl] {msg}", file=sys.stderr, flush=True)


def run_inject(
    ctx: StageContext, seeds: Sequence[str], sitemaps: Sequence[str] = ()
) -> dict[str, Any]:
    missing = [s for s in [*seeds, *sitemaps] if "://" not in s and not Path(s).exists()]
    if missing:
        raise FileNotFoundError(f"seed file not found: {', '.join(missing)}")
    ensure_all(ctx.spark, ctx.root)
    report = inject(ctx, seeds, sitemaps)
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
    # Why URLs were not fetched or failed: the error's kind ("policy",
    # "address", "timeout", "crawl_delay_over_cap", "time_limit", ...).
    why = F.substring_index(F.col("error"), ":", 1).alias("why")
    for r in rows.filter("error IS NOT NULL").groupBy("outcome", why).count().collect():
        counters.append((f"fetch/why/{r['outcome']}/{r['why']}", r["count"]))
    write_counters(ctx.spark, ctx.root, ctx.segment, "fetch", counters)
    return {"segment": ctx.segment, **{k: v for k, v in sorted(counters)}}


def _fetched_segment(ctx: StageContext) -> None:
    """The jobs after fetch need its table, and every crawl table to exist."""
    if not segment_exists(ctx.spark, ctx.root, ctx.segment, "fetch"):
        raise SystemExit(f"segment {ctx.segment} has no fetch table: run fetch first")
    ensure_all(ctx.spark, ctx.root)


def run_updatedb(ctx: StageContext) -> dict[str, Any]:
    _fetched_segment(ctx)
    report = updatedb(ctx)
    write_counters(ctx.spark, ctx.root, ctx.segment, "updatedb", report.counters())
    return {
        "segment": ctx.segment,
        "fetch_rows": report.fetched_rows,
        "new_urls": report.new_urls,
        "hosts": report.hosts,
        "rejected": dict(report.rejected),
    }


def run_dedup(ctx: StageContext) -> dict[str, Any]:
    _fetched_segment(ctx)
    report = dedup(ctx)
    write_counters(ctx.spark, ctx.root, ctx.segment, "dedup", report.counters())
    return {"segment": ctx.segment, **{k: v for k, v in report.counters()}}


def run_events(ctx: StageContext) -> dict[str, Any]:
    _fetched_segment(ctx)
    events = segment_events(ctx).cache()
    counts = {r["event"]: r["count"] for r in events.groupBy("event").count().collect()}
    merge_events(events, ctx)
    events.unpersist()
    counters = [(f"events/{name}", n) for name, n in sorted(counts.items())]
    write_counters(ctx.spark, ctx.root, ctx.segment, "events", counters)
    return {"segment": ctx.segment, **dict(counters)}


def run_cycles(
    first: StageContext, cycles: int, step: timedelta, time_limit_s: float | None = None
) -> list[dict[str, Any]]:
    """generate -> fetch -> updatedb -> dedup -> events, ``cycles`` times,
    with progress on stderr.

    Cycle i runs at logical time ``first.at + i * step``, in the segment named
    after that time. Stops early when generate finds nothing due.
    """
    rows: list[dict[str, Any]] = []
    for i in range(cycles):
        at = first.at + i * step
        ctx = dataclasses.replace(first, at=at, segment=segment_id(at))
        started = time.monotonic()
        say(f"cycle {i + 1}/{cycles}: segment {ctx.segment}")
        gen = run_generate(ctx)
        say(f"  generate: {gen['urls']} URLs on {gen['hosts']} hosts in {gen['tasks']} tasks")
        if not gen["urls"]:
            break
        got = run_fetch(ctx, time_limit_s)
        say(f"  fetch: {got.get('fetch/page/success', 0)} pages fetched")
        upd = run_updatedb(ctx)
        say(f"  updatedb: {upd['new_urls']} new URLs")
        dup = run_dedup(ctx)
        say(
            f"  dedup: {dup['dedup/duplicates/marked']} pages marked duplicate, "
            f"{dup['dedup/links/unfollowed']} links unfollowed"
        )
        ev = run_events(ctx)
        elapsed = time.monotonic() - started
        say(
            f"  events: {ev.get('events/crawl.fetched', 0)} fetched, "
            f"{ev.get('events/crawl.removed', 0)} removed ({elapsed:.0f} s for the cycle)"
        )
        rows.append({
            "cycle": i + 1, "segment": ctx.segment, "generated": gen["urls"],
            "fetched_ok": got.get("fetch/page/success", 0),
            "robots_denied": got.get("fetch/page/robots_denied", 0),
            "not_reached": got.get("fetch/page/not_reached", 0),
            "new_urls": upd["new_urls"] - dup["dedup/links/unfollowed"],
            "duplicates": dup["dedup/duplicates/marked"], "seconds": round(elapsed, 1),
        })  # fmt: skip
    return rows
