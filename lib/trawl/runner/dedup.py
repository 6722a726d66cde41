"""dedup: the segment's contents and near-duplicates, in three steps that
each read what the one before wrote: new contents and their pairs, then the
duplicates marked in crawldb, then the links only duplicates led to taken
out again; counted."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from trawl.runner.common import JobContext, fetched_segment, sized_job
from trawl.stages.common import release
from trawl.stages.dedup import (
    DedupReport,
    mark_duplicates,
    new_contents,
    removal,
    unfollowed_links,
)
from trawl.store.tables import (
    merge,
    merge_counted,
    read_segment_table,
    read_table,
    replace_rows,
    write_counters,
)


@sized_job("fetch")
def run_dedup(ctx: JobContext) -> dict[str, Any]:
    fetched_segment(ctx, merges=True)
    spark, root, segment = ctx.spark, ctx.root, ctx.segment
    report = DedupReport()
    fetch = read_segment_table(spark, root, segment, "fetch")
    found = new_contents(fetch, read_table(spark, root, "content"), ctx.stage, report)
    replace_rows(found.neardup_rows, root, "neardup", f"segment = '{segment}'", report.new_pairs)
    if found.content is not None:
        merge(spark, root, found.content)
    neardup = read_table(spark, root, "neardup")
    marks, held = mark_duplicates(found, neardup, read_table(spark, root, "crawldb"), ctx.stage,
                                  report)  # fmt: skip
    if marks is not None:
        merge(spark, root, marks)
    report.unfollowed = unfollow(ctx, found.fetch)
    release(*found.held, *held)
    write_counters(ctx.files, segment, "dedup", report.counters())
    return {"segment": segment, **{k: v for k, v in report.counters()}}


def unfollow(ctx: JobContext, fetch: DataFrame) -> int:
    """Delete from crawldb (as dedup marked it) the URLs only duplicates led
    to; how many."""
    found = unfollowed_links(fetch, read_table(ctx.spark, ctx.root, "crawldb"), ctx.stage)
    if found is None:
        return 0
    return merge_counted(ctx.spark, ctx.root, removal(found)).rows
