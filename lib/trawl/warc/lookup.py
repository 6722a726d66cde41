"""Getting records back out of a crawl's WARC files: one by reference, or many
copied into new files for an archive (``trawl warc get``, ``trawl export warc``).

A ``warc_ref`` (the events table's, the fetch table's ``warc_file``,
``warc_offset``, ``warc_length``) names a file by its basename; the file lives
in its segment's ``warc/`` folder (found by ``trawl.store.files.locate_warc``).
``parse_ref`` reads the forms a user pastes: the events' JSON object, or
``FILE:OFFSET[:LENGTH]``.

Export copies records byte for byte: each is its own gzip member (WARC 1.1
annex D), so a record is copied as the member it is, digests and all, never
re-encoded. A capture is the selected ``response`` or ``revisit`` record and
every record ``WARC-Concurrent-To`` it (its ``request`` and ``metadata``);
its records are written together, in their source order, and files rotate
only between captures. Every output file opens with its own ``warcinfo``
saying what was selected; the copied records still name their original
``warcinfo`` in WARC-Warcinfo-ID, so that record is copied too, once per
output file, before the first record that names it.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trawl.warc.archive import warc_filename
from trawl.warc.reader import iter_records, read_record
from trawl.warc.record import WarcRecord
from trawl.warc.writer import WarcRef, WarcWriter

__all__ = ["ExportResult", "export_captures", "get_record", "parse_ref"]

_GZIP_MAGIC = b"\x1f\x8b"
_CAPTURE_TYPES = ("response", "revisit")


def parse_ref(text: str) -> WarcRef:
    """A warc_ref as pasted: ``{"file": ..., "offset": ..., "length": ...}`` (an
    event's) or ``FILE:OFFSET[:LENGTH]``. The length may be left out (the record
    is then read to its end)."""
    text = text.strip()
    try:
        if text.startswith("{"):
            raw = json.loads(text)
            file, offset, length = raw["file"], int(raw["offset"]), int(raw.get("length") or 0)
        else:
            file, _, rest = text.partition(":")
            offset_text, _, length_text = rest.partition(":")
            offset, length = int(offset_text), int(length_text or 0)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a warc_ref (FILE:OFFSET[:LENGTH] or its JSON): {text!r}") from exc
    if not file or "/" in file or offset < 0 or length < 0:
        raise ValueError(f"not a warc_ref (a file name, offset >= 0, length >= 0): {text!r}")
    return WarcRef(str(file), offset, length)


def get_record(path: Path, ref: WarcRef) -> tuple[WarcRecord, bytes]:
    """The record ``ref`` points to in the WARC file at ``path`` (digests
    checked), and its bytes exactly as stored, uncompressed."""
    length = ref.length or _member_length(path, ref.offset)
    record = read_record(path, ref.offset, length)
    with path.open("rb") as fh:
        fh.seek(ref.offset)
        span = fh.read(length)
    return record, gzip.decompress(span) if span[:2] == _GZIP_MAGIC else span


@dataclass
class ExportResult:
    """What ``export_captures`` wrote."""

    files: list[Path] = field(default_factory=list)
    captures: int = 0
    records: int = 0
    missing: list[str] = field(default_factory=list)  # selected refs no record was found at


def export_captures(
    selection: Mapping[Path, Iterable[int]],
    out_dir: str | Path,
    *,
    name: str,
    software: str,
    description: Mapping[str, str],
    max_file_bytes: int = 1_000_000_000,
) -> ExportResult:
    """Copy the captures at the selected offsets (source file -> offsets of its
    response/revisit records) into ``<name>-<serial>.warc.gz`` files in
    ``out_dir``, rotating at ``max_file_bytes``; ``description`` goes into
    each file's warcinfo (what was selected). Sources are read in the given
    order, captures in file order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = ExportResult()
    state = _Output(out, name, software, description, max_file_bytes, result)
    try:
        for source, offsets in selection.items():
            wanted = set(offsets)
            records = list(iter_records(source))
            by_id = {r.header("WARC-Record-ID"): r for r in records}
            found = {r.offset for r in records if r.rec_type in _CAPTURE_TYPES} & wanted
            result.missing += [f"{source.name}:{o}" for o in sorted(wanted - found)]
            concurrent: dict[str, list[WarcRecord]] = defaultdict(list)
            for r in records:
                if (to := r.header("WARC-Concurrent-To")) is not None:
                    concurrent[to].append(r)
            for r in records:
                if r.offset not in found:
                    continue
                group = [r, *concurrent.get(str(r.header("WARC-Record-ID")), [])]
                info = by_id.get(r.header("WARC-Warcinfo-ID"))
                state.write_capture(source, group, info)
    finally:
        state.close()
    return result


class _Output:
    """The rotating output files of one export."""

    def __init__(
        self,
        out: Path,
        name: str,
        software: str,
        description: Mapping[str, str],
        max_file_bytes: int,
        result: ExportResult,
    ) -> None:
        warc_filename(name, "export", 0)  # validates the name now
        self.out, self.name, self.software = out, name, software
        self.description, self.max, self.result = dict(description), max_file_bytes, result
        self.writer: WarcWriter | None = None
        self.infos: set[str] = set()  # source warcinfo records already in this file

    def write_capture(
        self, source: Path, group: Sequence[WarcRecord], info: WarcRecord | None
    ) -> None:
        writer = self._writer()
        if info is not None and (info_id := str(info.header("WARC-Record-ID"))) not in self.infos:
            writer.append_member(_member(source, info))
            self.infos.add(info_id)
        for record in sorted(group, key=lambda r: r.offset):
            writer.append_member(_member(source, record))
            self.result.records += 1
        self.result.captures += 1

    def _writer(self) -> WarcWriter:
        if self.writer is not None and self.writer.size < self.max:
            return self.writer
        self.close()
        serial = len(self.result.files)
        path = self.out / f"{self.name}-{serial:05d}.warc.gz"
        self.writer = WarcWriter(path, self.software, extra_info=self.description)
        self.infos = set()
        self.result.files.append(path)
        return self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _member(source: Path, record: WarcRecord) -> bytes:
    """The record's bytes as one gzip member: the source's own member, or (from an
    uncompressed file) the record compressed on its own."""
    with source.open("rb") as fh:
        fh.seek(record.offset)
        span = fh.read(record.length)
    if span[:2] == _GZIP_MAGIC:
        return span
    return gzip.compress(span + b"\r\n\r\n", mtime=0)


def _member_length(path: Path, offset: int) -> int:
    """The length of the record at ``offset`` when the ref did not say."""
    for record in iter_records(path, verify=False):
        if record.offset == offset:
            return record.length
    raise ValueError(f"{path.name}: no record starts at offset {offset}")
