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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from trawl import __version__
from trawl.stages.common import StageContext, concurrently, materialize, release
from trawl.stages.dedup import dedup
from trawl.stages.events import merge_events, segment_events
from trawl.stages.export import Selection, select_captures
from trawl.stages.fetch import fetch, fetch_counters, fetch_scope, local_dir, started_hosts
from trawl.stages.generate import generate, mark_generated
from trawl.stages.inject import inject
from trawl.stages.stats import crawl_stats
from trawl.stages.updatedb import updatedb
from trawl.store.tables import (
    TABLES,
    compact,
    ensure_all,
    list_segments,
    read_segment_table,
    read_table,
    segment_exists,
    segment_path,
    write_counters,
    write_segment_table,
)
from trawl.store.views import register_views
from trawl.warc.cdxj import merge_indexes, write_index
from trawl.warc.lookup import export_captures


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
    tables_ready(ctx)
    report = inject(ctx, seeds, sitemaps)
    write_counters(ctx.spark, ctx.root, ctx.segment, "inject", report.counters())
    return {
        "lines": report.lines,
        "accepted": report.accepted,
        "duplicates": report.duplicates,
        "rejected": dict(report.rejected),
    }


def tables_ready(ctx: StageContext) -> None:
    """Every crawl table exists, and crawldb and hostdb have deletion vectors
    once they are large enough (``crawl.deletion_vectors_min_mb``), before a
    job MERGEs into them."""
    ensure_all(ctx.spark, ctx.root, ctx.cfg.crawl.deletion_vectors_min_mb * 2**20)


def run_generate(ctx: StageContext) -> dict[str, Any]:
    tables_ready(ctx)
    if segment_exists(ctx.spark, ctx.root, ctx.segment, "fetch"):
        # The segment was fetched from its fetch list: a re-run (Airflow
        # clearing a whole run) keeps it rather than pick what is due now.
        say(f"generate: segment {ctx.segment} is fetched; its fetch list stays")
        stats = fetchlist_stats(read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetchlist"))
        if not _counted(ctx, "generate"):  # the first run's counters stand
            write_counters(ctx.spark, ctx.root, ctx.segment, "generate", generate_counters(stats))
        return generate_result(ctx, stats)
    generated = generate(ctx)
    write_segment_table(generated.fetchlist, ctx.root, ctx.segment, "fetchlist")
    written = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetchlist")
    stats, deferred = concurrently(lambda: fetchlist_stats(written), generated.deferred.count)
    mark_generated(written, generated.deferred, ctx, rows=stats["urls"] + deferred)
    generated.release()
    counters = [*generate_counters(stats), ("generate/deferred/budget", deferred)]
    write_counters(ctx.spark, ctx.root, ctx.segment, "generate", counters)
    return generate_result(ctx, stats)


def fetchlist_stats(fetchlist: DataFrame) -> dict[str, int]:
    """URLs, hosts and tasks of a fetch list, and the room it gives hosts to
    follow links (``follow``), in one pass."""
    row = fetchlist.agg(
        F.count("*").alias("urls"),
        F.countDistinct("host").alias("hosts"),
        F.countDistinct("task").alias("tasks"),
        # one row of each host that may have links followed carries its room
        F.sum(F.when(F.col("follow_known").isNotNull(), F.col("follow_quota"))).alias("follow"),
    ).first()
    assert row is not None
    return {k: int(v or 0) for k, v in row.asDict().items()}


def generate_result(ctx: StageContext, stats: dict[str, int]) -> dict[str, Any]:
    return {"segment": ctx.segment, **{k: v for k, v in stats.items() if k != "follow"}}


def generate_counters(stats: dict[str, int]) -> list[tuple[str, int]]:
    counters = [(f"generate/{k}", stats[k]) for k in ("urls", "hosts", "tasks")]
    if stats["follow"]:
        counters.append(("generate/follow_quota", stats["follow"]))
    return counters


def run_fetch(ctx: StageContext, time_limit_s: float | None = None) -> dict[str, Any]:
    if not segment_exists(ctx.spark, ctx.root, ctx.segment, "fetchlist"):
        raise SystemExit(f"segment {ctx.segment} has no fetchlist: run generate first")
    # the check and the new-host scope are each a few small jobs: side by side
    merged, scope = concurrently(lambda: _counted(ctx, "updatedb"), lambda: fetch_scope(ctx))
    if not merged:
        write_segment_table(fetch(ctx, time_limit_s, scope), ctx.root, ctx.segment, "fetch")
    else:
        # updatedb merged this fetch: crawldb and events point into its WARC
        # records, so a re-run keeps them rather than fetch the list again.
        say(f"fetch: segment {ctx.segment} is merged; its fetch stays")
    rows = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetch")
    listed = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetchlist")
    starts = ctx.cfg.fetch.starts_new_hosts
    # the counting jobs and the WARC index (Python reading files in this
    # process) do not depend on each other
    (counters, internal), started, indexed = concurrently(
        lambda: fetch_counters(rows),
        lambda: started_hosts(rows, listed) if starts else None,
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
    if indexed is not None:
        counters.append(("fetch/warc/index_lines", indexed))
    else:
        # An object-store root: the executors write WARC to local or mounted
        # paths only, so this segment's exchanges are not archived. Said, and
        # counted, rather than passed over.
        unarchived = rows.filter("http_status IS NOT NULL").count()
        counters.append(("fetch/warc/not_written", unarchived))
        say(
            f"fetch: no WARC files for segment {ctx.segment}: the crawl root {ctx.root} is "
            f"not a local or mounted path ({unarchived} responses not archived)"
        )
    write_counters(ctx.spark, ctx.root, ctx.segment, "fetch", counters)
    return {"segment": ctx.segment, **{k: v for k, v in sorted(counters)}}


def segment_warc_dir(root: str, segment: str) -> Path | None:
    """Where the segment's WARC files are (None: not on a local path)."""
    local = local_dir(segment_path(root, segment, "warc"))
    return None if local is None else Path(local)


def write_segment_index(ctx: StageContext) -> int | None:
    """The segment's CDXJ index, ``segments/<id>/index.cdxj``: every WARC file
    the fetch wrote, sorted (``cdxj-indexer -s`` gives the same bytes), so the
    indexes of many segments merge (``trawl warc index``). Lines written."""
    warc_dir = segment_warc_dir(ctx.root, ctx.segment)
    if warc_dir is None:
        return None
    files = sorted(warc_dir.glob("*.warc.gz"))
    return write_index(files, warc_dir.parent / "index.cdxj", sort=True)


def run_warc_index(ctx: StageContext, segments: Sequence[str], out: str) -> dict[str, Any]:
    """Merge the segments' CDXJ indexes (all fetched segments if none named)
    into ``out``, streaming; a segment without an index gets one first."""
    chosen = list(segments) or [
        s
        for s in list_segments(ctx.spark, ctx.root)
        if segment_exists(ctx.spark, ctx.root, s, "fetch")
    ]
    paths = []
    for segment in chosen:
        warc_dir = segment_warc_dir(ctx.root, segment)
        if warc_dir is None or not warc_dir.is_dir():
            raise ValueError(f"segment {segment} has no WARC files under {ctx.root}")
        index = warc_dir.parent / "index.cdxj"
        if not index.exists():
            write_segment_index(dataclasses.replace(ctx, segment=segment))
        paths.append(index)
    lines = merge_indexes(paths, out)
    return {"segments": len(paths), "index": out, "lines": lines}


def run_export(
    ctx: StageContext, selection: Selection, out_dir: str, name: str | None = None
) -> dict[str, Any]:
    """Copy the selected captures into new WARC files under ``out_dir``, with
    their CDXJ index (``<name>.cdxj``, sorted) beside them."""
    rows = select_captures(ctx, selection).collect()
    chosen: dict[Path, list[int]] = {}
    for row in sorted(rows, key=lambda r: (r["segment"], r["warc_file"], r["warc_offset"])):
        warc_dir = segment_warc_dir(ctx.root, row["segment"])
        if warc_dir is None:
            raise ValueError(f"export reads WARC files on local paths; {ctx.root} is not one")
        chosen.setdefault(warc_dir / row["warc_file"], []).append(int(row["warc_offset"]))
    name = name or f"{ctx.cfg.warc.prefix}-export-{segment_id(ctx.at)}"
    result = export_captures(
        chosen,
        out_dir,
        name=name,
        software=f"trawl/{__version__}",
        description=selection.describe(),
        max_file_bytes=ctx.cfg.warc.max_file_bytes,
    )
    index = Path(out_dir) / f"{name}.cdxj"
    lines = write_index(result.files, index, sort=True)
    if result.missing:
        say(f"export: {len(result.missing)} selected records were not found: {result.missing[:5]}")
    return {
        "captures": result.captures,
        "records": result.records,
        "files": len(result.files),
        "index": str(index),
        "index_lines": lines,
        "missing": len(result.missing),
    }


def _counted(ctx: StageContext, job: str) -> bool:
    """Whether ``job`` has written its counters for this segment (it finished)."""
    counters = read_table(ctx.spark, ctx.root, "counters")
    return not counters.filter((F.col("segment") == ctx.segment) & (F.col("job") == job)).isEmpty()


def _fetched_segment(ctx: StageContext, merges: bool = False) -> None:
    """The jobs after fetch need its table, and every crawl table to exist
    (``merges``: ready for the job's MERGE into crawldb or hostdb)."""
    if not segment_exists(ctx.spark, ctx.root, ctx.segment, "fetch"):
        raise SystemExit(f"segment {ctx.segment} has no fetch table: run fetch first")
    if merges:
        tables_ready(ctx)
    else:
        ensure_all(ctx.spark, ctx.root)


def run_updatedb(ctx: StageContext) -> dict[str, Any]:
    _fetched_segment(ctx, merges=True)
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
    _fetched_segment(ctx, merges=True)
    report = dedup(ctx)
    write_counters(ctx.spark, ctx.root, ctx.segment, "dedup", report.counters())
    return {"segment": ctx.segment, **{k: v for k, v in report.counters()}}


def run_events(ctx: StageContext) -> dict[str, Any]:
    _fetched_segment(ctx)
    events = materialize(segment_events(ctx))
    counts = {r["event"]: r["count"] for r in events.groupBy("event").count().collect()}
    merge_events(events, ctx)
    release(events)
    counters = [(f"events/{name}", n) for name, n in sorted(counts.items())]
    write_counters(ctx.spark, ctx.root, ctx.segment, "events", counters)
    return {"segment": ctx.segment, **dict(counters)}


class QueryError(ValueError):
    """A query Spark refused (a syntax error, an unknown table or column)."""


def run_stats(ctx: StageContext) -> dict[str, list[dict[str, Any]]]:
    """``trawl stats``: the summary tables of the crawl, by title."""
    register_views(ctx.spark, ctx.root)
    return crawl_stats(ctx.spark)


def run_sql(ctx: StageContext, query: str) -> list[dict[str, Any]]:
    """``trawl sql``: the rows of ``query`` over the crawl's tables by name."""
    from pyspark.errors import PySparkException

    register_views(ctx.spark, ctx.root)
    try:
        return [r.asDict(recursive=True) for r in ctx.spark.sql(query).collect()]
    except PySparkException as exc:
        raise QueryError(str(exc).splitlines()[0]) from exc


def run_compact(ctx: StageContext, names: Sequence[str] = ()) -> list[dict[str, Any]]:
    """OPTIMIZE the named tables (default: all of them), one row each."""
    unknown = sorted(set(names) - set(TABLES))
    if unknown:
        raise ValueError(f"compact: no table {', '.join(unknown)} (tables: {', '.join(TABLES)})")
    ensure_all(ctx.spark, ctx.root)
    rows = []
    for name in names or TABLES:
        started = time.monotonic()
        rows.append({"table": name, **compact(ctx.spark, ctx.root, name),
                     "seconds": round(time.monotonic() - started, 1)})  # fmt: skip
    return rows


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
