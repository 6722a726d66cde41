"""updatedb: the segment's fetch merged into crawldb and hostdb, the links
kept out recorded with their reasons, the domain link graph and the learned
session parameters extended; counted."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from trawl.runner.common import JobContext, fetched_segment, read_whole, sized_job
from trawl.stages.common import concurrently, release
from trawl.stages.updatedb import hostdb_changes, updatedb
from trawl.store.tables import (
    append_rows,
    merge,
    merge_counted,
    read_segment_table,
    read_table,
    replace_rows,
    write_counters,
)


@sized_job("fetch")
def run_updatedb(ctx: JobContext) -> dict[str, Any]:
    fetched_segment(ctx, merges=True)
    spark, root = ctx.spark, ctx.root
    fetch = read_segment_table(spark, root, ctx.segment, "fetch")
    (crawldb, held), (hostdb, held_hosts) = read_whole(ctx, "crawldb"), read_whole(ctx, "hostdb")
    hostparams, domainlinks = (read_table(spark, root, n) for n in ("hostparams", "domainlinks"))
    out = updatedb(fetch, crawldb, hostdb, hostparams, domainlinks, ctx.stage)
    report = out.report
    # Each write is its own commit and none reads what another writes: hostdb,
    # the domain links, the session parameters and the rejected links run
    # beside crawldb's MERGE.
    report.hosts, report.domain_links, report.rejected, _, _ = concurrently(
        lambda: merge_hosts(ctx, out.hosts),
        lambda: append_rows(out.domainlinks, root, "domainlinks"),
        lambda: record_rejected(ctx, out.rejected),
        lambda: append_rows(out.hostparams, root, "hostparams"),
        lambda: merge(spark, root, out.crawldb),
    )
    release(*out.held, *held, *held_hosts)
    write_counters(ctx.files, ctx.segment, "updatedb", report.counters())
    return {
        "segment": ctx.segment,
        "fetch_rows": report.fetched_rows,
        "new_urls": report.new_urls,
        "hosts": report.hosts,
        "rejected": dict(report.rejected),
    }


def merge_hosts(ctx: JobContext, rows: DataFrame) -> int:
    """MERGE the visited hosts' rows into hostdb; how many hosts changed."""
    return merge_counted(ctx.spark, ctx.root, hostdb_changes(rows)).rows


def record_rejected(ctx: JobContext, rows: DataFrame) -> dict[str, int]:
    """Replace this segment's updatedb rows of ``rejected`` (a re-run writes
    the same rows again; no commit when there are none, before or now); how
    many of each reason, counted on the rows written."""
    where = f"segment = '{ctx.segment}' AND stage = 'updatedb'"
    written = replace_rows(rows, ctx.root, "rejected", where, tally="reason")
    assert written is not None  # counted, by reason
    return written.tally
