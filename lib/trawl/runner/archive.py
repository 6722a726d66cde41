"""The crawl's WARC records out: merged CDXJ indexes, exports to WARC
files, and WACZ packages of an export."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
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
from trawl.warc.lookup import ExportResult, export_captures
from trawl.warc.wacz import PageCapture, WaczSigner, pages, wacz_target, write_wacz

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
    rows = selected_captures(ctx, selection)
    name = name or export_name(ctx)
    target = CrawlRoot.of(out_dir, ctx.cfg.storage)
    with tempfile.TemporaryDirectory(prefix="trawl-export-") as tmp:
        local_out = target.local or Path(tmp) / "out"
        result = copy_captures(ctx, selection, rows, Path(tmp) / "in", local_out, name)
        index = local_out / f"{name}.cdxj"
        lines = write_index(result.files, index, sort=True)
        if target.local is None:  # upload what was written, the index last
            for path in [*result.files, index]:
                target.write_bytes(path.name, path.read_bytes())
    _say_missing(result)
    return {
        "captures": result.captures,
        "records": result.records,
        "files": len(result.files),
        "index": target.child(index.name),
        "index_lines": lines,
        "missing": len(result.missing),
    }


def run_wacz_export(
    ctx: JobContext,
    selection: Selection,
    out: str,
    title: str | None = None,
    sign_key: str | None = None,
) -> dict[str, Any]:
    """Pack the selected captures as the WACZ ``out`` (a local file, or one
    on an object store): their WARC files as ``export warc`` writes them,
    the CDXJ index, the HTML pages among them, the manifest with hashes
    (``trawl.warc.wacz``), signed with the PEM key ``sign_key`` if given.
    Nothing selected is an error, not an empty package."""
    folder, file_name = wacz_target(out)
    signer = WaczSigner.from_pem(sign_key) if sign_key else None
    rows = selected_captures(ctx, selection)
    if not rows:
        raise ValueError(f"export wacz: no captures match the selection ({_said(selection)})")
    target = CrawlRoot.of(folder, ctx.cfg.storage)
    with tempfile.TemporaryDirectory(prefix="trawl-wacz-") as tmp:
        archive = Path(tmp) / "archive"
        result = copy_captures(ctx, selection, rows, Path(tmp) / "in", archive, export_name(ctx))
        _say_missing(result)
        if not result.captures:
            raise ValueError(f"export wacz: none of the {len(rows)} selected captures was found")
        index = Path(tmp) / "index.cdxj"
        lines = write_index(result.files, index, sort=True)
        listed = pages(_page_captures(rows, result.missing))
        local = target.local_path(file_name) or Path(tmp) / file_name
        package = write_wacz(
            local, result.files, index, listed, created=ctx.at,
            software=f"trawl {__version__}",
            title=title or f"trawl crawl {Path(ctx.root).name}",
            description=_said(selection), signer=signer,
        )  # fmt: skip
        size = package.size
        if target.local is None:
            target.upload(file_name, local)
    return {
        "wacz": target.child(file_name),
        "captures": result.captures,
        "records": result.records,
        "warc_files": len(result.files),
        "index_lines": lines,
        "pages": package.pages,
        "bytes": size,
        "missing": len(result.missing),
        "signed": signer is not None,
    }


def selected_captures(ctx: JobContext, selection: Selection) -> list[Any]:
    """The fetch rows of the captures ``selection`` picks (``select_captures``)."""
    segments = fetched_segments(ctx.spark, ctx.root, selection.segments)
    fetch = read_segments(ctx.spark, ctx.root, segments, "fetch")
    crawldb = read_existing(ctx.spark, ctx.root, "crawldb")
    return list(select_captures(fetch, crawldb, selection).collect())


def export_name(ctx: JobContext) -> str:
    """The stem of an export's WARC files: ``<prefix>-export-<time>``."""
    return f"{ctx.cfg.warc.prefix}-export-{segment_id(ctx.at)}"


def copy_captures(
    ctx: JobContext,
    selection: Selection,
    rows: Sequence[Any],
    sources: Path,
    out: Path,
    name: str,
) -> ExportResult:
    """Copy the captures of ``rows`` into ``<name>-<serial>.warc.gz`` files
    in the local folder ``out`` (sources of an object-store root are
    downloaded into ``sources`` first)."""
    return export_captures(
        source_files(ctx.files, rows, sources),
        out,
        name=name,
        software=f"trawl/{__version__}",
        description=selection.describe(),
        max_file_bytes=ctx.cfg.warc.max_file_bytes,
    )


def _page_captures(rows: Sequence[Any], missing: Sequence[str]) -> list[PageCapture]:
    """The exported rows as the page list sees them (``missing``: the
    ``file:offset`` of selected captures not found, left out)."""
    gone = set(missing)
    return [
        PageCapture(
            url=row["url"],
            fetched_at=_EPOCH + timedelta(microseconds=int(row["fetched_us"])),
            http_status=row["http_status"],
            content_type=row["content_type"],
            title=row["title"],
        )
        for row in rows
        if f"{row['warc_file']}:{row['warc_offset']}" not in gone and row["fetched_us"] is not None
    ]


def _say_missing(result: ExportResult) -> None:
    if result.missing:
        say(f"export: {len(result.missing)} selected records were not found: {result.missing[:5]}")


def _said(selection: Selection) -> str:
    """The selection in words: ``segments 1 2, statuses 2xx, duplicates excluded``."""
    fields = {k: v for k, v in selection.describe().items() if k != "isPartOf"}
    return ", ".join(f"{k} {v}" for k, v in fields.items())


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
