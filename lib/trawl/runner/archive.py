"""The crawl's WARC records out: merged CDXJ indexes and exports."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trawl import __version__
from trawl.runner.common import JobContext, say, segment_id
from trawl.runner.fetch import write_segment_index
from trawl.stages.export import Selection, select_captures
from trawl.store.files import segment_index, segment_warc_dir
from trawl.store.tables import (
    fetched_segments,
    list_segments,
    read_segments,
    read_table,
    segment_exists,
)
from trawl.warc.cdxj import merge_indexes, write_index
from trawl.warc.lookup import export_captures


def run_warc_index(ctx: JobContext, segments: Sequence[str], out: str) -> dict[str, Any]:
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
        index = segment_index(ctx.root, segment)
        if warc_dir is None or index is None or not warc_dir.is_dir():
            raise ValueError(f"segment {segment} has no WARC files under {ctx.root}")
        if not index.exists():
            write_segment_index(dataclasses.replace(ctx, segment=segment))
        paths.append(index)
    lines = merge_indexes(paths, out)
    return {"segments": len(paths), "index": out, "lines": lines}


def run_export(
    ctx: JobContext, selection: Selection, out_dir: str, name: str | None = None
) -> dict[str, Any]:
    """Copy the selected captures into new WARC files under ``out_dir``, with
    their CDXJ index (``<name>.cdxj``, sorted) beside them."""
    segments = fetched_segments(ctx.spark, ctx.root, selection.segments)
    fetch = read_segments(ctx.spark, ctx.root, segments, "fetch")
    crawldb = read_table(ctx.spark, ctx.root, "crawldb")
    rows = select_captures(fetch, crawldb, selection).collect()
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
