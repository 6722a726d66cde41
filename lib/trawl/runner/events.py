"""events: the segment's events MERGEd into the events table, counted."""

from __future__ import annotations

from typing import Any

from trawl.runner.common import JobContext, fetched_segment, sized_job
from trawl.stages.events import merge_events, segment_events
from trawl.store.tables import merge_counted, read_segment_table, read_table, write_counters


@sized_job("fetch")
def run_events(ctx: JobContext) -> dict[str, Any]:
    fetched_segment(ctx)
    fetch = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetch")
    crawldb = read_table(ctx.spark, ctx.root, "crawldb")
    events = segment_events(fetch, crawldb, ctx.stage)
    # counted on the rows merged (each segment event once, a re-run's too)
    counts = merge_counted(ctx.spark, ctx.root, merge_events(events, ctx.stage), "event").tally
    counters = [(f"events/{name}", n) for name, n in sorted(counts.items())]
    write_counters(ctx.files, ctx.segment, "events", counters)
    return {"segment": ctx.segment, **dict(counters)}
