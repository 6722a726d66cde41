"""``trawl cycle``: generate -> fetch -> updatedb -> dedup -> events, N times."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from trawl import faults
from trawl.runner.common import JobContext, say, segment_id, stage
from trawl.runner.dedup import run_dedup
from trawl.runner.events import run_events
from trawl.runner.fetch import run_fetch
from trawl.runner.generate import run_generate
from trawl.runner.updatedb import run_updatedb

R = TypeVar("R")


def run_cycles(
    first: JobContext, cycles: int, step: timedelta, time_limit_s: float | None = None
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
        faults.point("stage:generate")
        stage("generate")
        gen, took = timed(run_generate, ctx)
        say(
            f"  generate: {gen['urls']} URLs on {gen['hosts']} hosts in {gen['tasks']} "
            f"tasks ({took:.1f} s)"
        )
        if not gen["urls"]:
            break
        faults.point("stage:fetch")
        stage("fetch")
        got, took = timed(run_fetch, ctx, time_limit_s)
        say(f"  fetch: {got.get('fetch/page/success', 0)} pages fetched ({took:.1f} s)")
        faults.point("stage:updatedb")
        stage("updatedb")
        upd, took = timed(run_updatedb, ctx)
        say(f"  updatedb: {upd['new_urls']} new URLs ({took:.1f} s)")
        faults.point("stage:dedup")
        stage("dedup")
        dup, took = timed(run_dedup, ctx)
        say(
            f"  dedup: {dup['dedup/duplicates/marked']} pages marked duplicate, "
            f"{dup['dedup/links/unfollowed']} links unfollowed ({took:.1f} s)"
        )
        faults.point("stage:events")
        stage("events")
        ev, took = timed(run_events, ctx)
        if ctx.cfg.catalog.register_in_cycle:
            from trawl.store.catalog import register_crawl

            reg = register_crawl(ctx.spark, ctx.files, ctx.cfg.catalog.database)
            say(f"  catalog: {reg['segments_added']} segments added to {reg['database']}")
        elapsed = time.monotonic() - started
        say(
            f"  events: {ev.get('events/crawl.fetched', 0)} fetched, "
            f"{ev.get('events/crawl.removed', 0)} removed ({took:.1f} s; "
            f"{elapsed:.0f} s for the cycle)"
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


def timed(job: Callable[..., R], *args: Any) -> tuple[R, float]:
    """``job(*args)`` and the seconds it took."""
    began = time.monotonic()
    return job(*args), time.monotonic() - began
