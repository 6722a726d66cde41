"""fetch: the fetch list read, the tasks run, the fetch table and the
segment's CDXJ index written, counted."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from trawl import faults
from trawl.runner.common import JobContext, say, sized_job
from trawl.runner.progress import FetchProgress
from trawl.stages.common import concurrently
from trawl.stages.fetch import fetch, fetch_counters, new_host_scope, started_hosts
from trawl.store.files import (
    INDEX_FILE,
    FetchPlaces,
    file_index_rel,
    index_rel,
    warc_files,
    warc_rel,
)
from trawl.store.session import wait_for_running_tasks
from trawl.store.tables import (
    read_segment_table,
    read_table,
    segment_exists,
    write_counters,
    write_segment_table,
)
from trawl.warc.archive import index_name
from trawl.warc.cdxj import index_lines, merge_lines


@sized_job("fetchlist")
def run_fetch(ctx: JobContext, time_limit_s: float | None = None) -> dict[str, Any]:
    spark, root, segment = ctx.spark, ctx.root, ctx.segment
    if not segment_exists(spark, root, segment, "fetchlist"):
        raise SystemExit(f"segment {segment} has no fetchlist: run generate first")
    fetchlist = read_segment_table(spark, root, segment, "fetchlist")
    places = FetchPlaces(ctx.files, segment)

    if not segment_exists(spark, root, segment, "fetch"):
        crawldb = read_table(spark, root, "crawldb")
        starts = new_host_scope(crawldb, fetchlist, ctx.cfg, places.claims)
        if starts is not None:
            places.claims.clear()  # a re-run's tasks claim afresh
        places.clear_progress()  # a re-run's tasks report afresh
        places.clear_indexes()  # and index their files afresh
        places.drop_unfinished()  # what tasks of a killed run left half written
        rows = fetch(fetchlist, ctx.stage, places, time_limit_s, starts)
        faults.point("fetch:before-write")  # kill tests (the frame fetches as it is written)
        try:
            with FetchProgress(places, ctx.cfg):
                write_segment_table(rows, root, segment, "fetch")
        except Exception:
            # a task that failed aborted its own files; the tasks Spark then
            # cancelled were killed without aborting theirs: once none runs,
            # their half-written files go too (a full disk gets its room back);
            # the job's own error is the one told, whatever this meets
            with contextlib.suppress(Exception):
                wait_for_running_tasks(spark)
                places.drop_unfinished()
            raise
    else:
        # The segment was fetched whole. A re-run (a cycle run again after a
        # crash in a later stage, Airflow clearing a run) keeps it: fetched
        # again, every host would get the segment's requests a second time,
        # and once updatedb merged it, crawldb and events point into its
        # WARC records, which a second fetch would rewrite under the same
        # names with new record ids (what tests/runner/test_kills.py found).
        say(
            f"fetch: segment {ctx.segment} is fetched; its fetch stays "
            f"(to fetch its list again, delete segments/{ctx.segment}/fetch first)"
        )
    rows = read_segment_table(spark, root, segment, "fetch")
    following = ctx.cfg.fetch.starts_new_hosts
    # the counting jobs and the WARC index (Python reading files in this
    # process) do not depend on each other
    (counters, internal), started, indexed = concurrently(
        lambda: fetch_counters(rows),
        lambda: started_hosts(rows, fetchlist) if following else None,
        lambda: write_segment_index(ctx),
    )
    if started is not None:
        counters.append(("fetch/hosts_started", started))
    if internal:
        first = rows.filter(F.col("error").startswith("internal:")).select("url", "error").first()
        assert first is not None
        say(
            f"{internal} fetches of segment {ctx.segment} failed with an internal "
            f"error (a trawl bug; they are retried next cycle), e.g. {first['url']}: "
            f"{first['error']}"
        )
    counters.append(("fetch/warc/index_lines", indexed))
    write_counters(ctx.files, ctx.segment, "fetch", counters)
    return {"segment": ctx.segment, **{k: v for k, v in sorted(counters)}}


def write_segment_index(ctx: JobContext) -> int:
    """The segment's CDXJ index, ``segments/<id>/index.cdxj``: every WARC file
    the fetch wrote, sorted (``cdxj-indexer -s`` gives the same bytes), so the
    indexes of many segments merge (``trawl warc index``). Lines written.

    Each file's lines come from the index its fetch task wrote beside it
    (``FetchPlaces.open_index``): the same lines, made from each record as
    it was written, so the driver only merges them (the fetch bench's
    12,520 records: 3.2 s to read back and index here). A file without one
    (a segment fetched by an older trawl) is read and indexed here. On an
    object store the files are read from local copies, and the index
    uploaded."""
    root, segment = ctx.files, ctx.segment
    names = warc_files(root, segment)
    indexed = set(root.names(file_index_rel(segment), ".cdxj"))
    with tempfile.TemporaryDirectory(prefix="trawl-index-") as tmp:
        parts = []
        for name in names:
            own = index_name(name)
            if own in indexed:
                copy = root.download(file_index_rel(segment, own), Path(tmp) / own)
                parts.append(copy.read_text(encoding="utf-8").splitlines())
            else:
                warc = root.download(warc_rel(segment, name), Path(tmp) / name)
                parts.append(index_lines([warc], sort=True))
        local = root.local_path(index_rel(segment))
        index = local or Path(tmp) / INDEX_FILE
        lines = merge_lines(parts, index)
        if local is None:
            root.write_bytes(index_rel(segment), index.read_bytes())
    return lines
