"""events: the segment's events MERGEd into the events table, counted."""

from __future__ import annotations

from typing import Any

from trawl.runner.common import JobContext, fetched_segment, sized_job
from trawl.stages.common import materialize, release
from trawl.stages.events import merge_events, segment_events
from trawl.store.tables import merge, read_segment_table, read_table, write_counters


@sized_job("fetch")
def run_events(ctx: JobContext) -> dict[str, Any]:
    fetched_segment(ctx)
    fetch = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetch")
    crawldb = read_table(ctx.spark, ctx.root, "crawldb")
    events = materialize(segment_events(fetch, crawldb, ctx.stage))
    counts = {r["event"]: r["count"] for r in events.groupBy("event").count().collect()}
    merge(ctx.spark, ctx.root, merge_events(events, ctx.stage))
    release(events)
    counters = [(f"events/{name}", n) for name, n in sorted(counts.items())]
    write_counters(ctx.files, ctx.segment, "events", counters)
    return {"segment": ctx.segment, **dict(counters)}
