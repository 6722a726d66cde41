"""The crawl's WARC records out: merged CDXJ indexes and exports."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trawl import __version__
from trawl.runner.common import JobContext, say, segment_id
from trawl.runner.fetch import write_segment_index
from trawl.stages.export import Selection, select_captures
from trawl.store.files import CrawlRoot, index_rel, warc_files, warc_rel
from trawl.store.tables import (
    fetched_segments,
    list_segments,
    read_existing,
    read_segments,
    segment_exists,
)
from trawl.warc.cdxj import merge_indexes, write_index
from trawl.warc.lookup import export_captures


def run_warc_index(ctx: JobContext, segments: Sequence[str], out: str) -> dict[str, Any]:
    """Merge the segments' CDXJ indexes (all fetched segments if none named)
    into ``out`` (a local file), streaming; a segment without an index gets
    one first."""
    root = ctx.files
    chosen = list(segments) or [
        s
        for s in list_segments(ctx.spark, ctx.root)
        if segment_exists(ctx.spark, ctx.root, s, "fetch")
    ]
    with tempfile.TemporaryDirectory(prefix="trawl-index-") as tmp:
        paths = []
        for segment in chosen:
            if not warc_files(root, segment):
                raise ValueError(f"segment {segment} has no WARC files under {ctx.root}")
            if root.modified_at(index_rel(segment)) is None:  # no index yet
                write_segment_index(dataclasses.replace(ctx, segment=segment))
            paths.append(root.download(index_rel(segment), Path(tmp) / f"{segment}.cdxj"))
        lines = merge_indexes(paths, out)
    return {"segments": len(paths), "index": out, "lines": lines}


def run_export(
    ctx: JobContext, selection: Selection, out_dir: str, name: str | None = None
) -> dict[str, Any]:
    """Copy the selected captures into new WARC files under ``out_dir`` (a
    local folder, or a folder of an object store), with their CDXJ index
    (``<name>.cdxj``, sorted) beside them."""
    segments = fetched_segments(ctx.spark, ctx.root, selection.segments)
    fetch = read_segments(ctx.spark, ctx.root, segments, "fetch")
    crawldb = read_existing(ctx.spark, ctx.root, "crawldb")
    rows = select_captures(fetch, crawldb, selection).collect()
    name = name or f"{ctx.cfg.warc.prefix}-export-{segment_id(ctx.at)}"
    target = CrawlRoot.of(out_dir, ctx.cfg.storage)
    with tempfile.TemporaryDirectory(prefix="trawl-export-") as tmp:
        chosen = source_files(ctx.files, rows, Path(tmp) / "in")
        local_out = target.local or Path(tmp) / "out"
        result = export_captures(
            chosen,
            local_out,
            name=name,
            software=f"trawl/{__version__}",
            description=selection.describe(),
            max_file_bytes=ctx.cfg.warc.max_file_bytes,
        )
        index = local_out / f"{name}.cdxj"
        lines = write_index(result.files, index, sort=True)
        if target.local is None:  # upload what was written, the index last
            for path in [*result.files, index]:
                target.write_bytes(path.name, path.read_bytes())
    if result.missing:
        say(f"export: {len(result.missing)} selected records were not found: {result.missing[:5]}")
    return {
        "captures": result.captures,
        "records": result.records,
        "files": len(result.files),
        "index": target.child(index.name),
        "index_lines": lines,
        "missing": len(result.missing),
    }


def source_files(root: CrawlRoot, rows: Sequence[Any], tmp: Path) -> dict[Path, list[int]]:
    """The WARC file of each selected capture (a local copy when the root is
    an object store) with the offsets of its captures, in file order."""
    chosen: dict[Path, list[int]] = {}
    for row in sorted(rows, key=lambda r: (r["segment"], r["warc_file"], r["warc_offset"])):
        rel = warc_rel(row["segment"], row["warc_file"])
        path = root.local_path(rel) or tmp / row["segment"] / row["warc_file"]
        if path not in chosen and not path.exists():
            root.download(rel, path)
        chosen.setdefault(path, []).append(int(row["warc_offset"]))
    return chosen
