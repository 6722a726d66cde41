"""CDXJ indexes of WARC files, line for line what ``cdxj-indexer`` 1.5.0 writes.

A CDXJ line is ``<SURT key> <14-digit timestamp> <JSON>``: pywb and other
wayback tools look captures up by it, and the index of a segment's WARC files
is what lets a reader find a capture without scanning them. Matching
cdxj-indexer byte for byte (default options) means our indexes and the usual
tool's can be mixed, merged and diffed.

What cdxj-indexer does, read from its source (``cdxj_indexer/main.py`` and
warcio's ``Indexer``), and done the same way here:

* Records indexed: ``response``, ``revisit``, ``resource`` and ``metadata``
  (``DEFAULT_RECORDS``), except ``resource`` and ``metadata`` records whose
  WARC Content-Type is exactly ``application/warc-fields`` (so the metadata
  records trawl's ``WarcWriter`` writes are not indexed). ``warcinfo`` and
  ``request`` records never are.
* Key: ``surt.surt(url)`` (the ``surt`` package's default IA canonicalizer,
  scheme dropped), or the URL itself if surt fails; the URL is WARC-Target-URI
  as warcio reads it (``WarcRecord.target_uri``). Timestamp: warcio's
  ``iso_date_to_timestamp(WARC-Date)``, sub-seconds dropped.
* JSON fields in this order, each left out when it has no value: ``url``;
  ``mime`` (``warc/revisit`` for revisits, the HTTP Content-Type of responses,
  the WARC Content-Type of other records, cut at the first ``;`` or space);
  ``status`` (HTTP status code of responses and revisits with an HTTP head);
  ``digest`` (WARC-Payload-Digest as written; if absent, SHA-1 base32 of the
  payload, except for revisits); ``length``, ``offset`` (the record's span, see
  :mod:`trawl.warc.reader`); ``filename`` (base name). All values are strings;
  ``json.dumps`` defaults (``", "``/``": "`` separators, non-ASCII escaped).
  ``method``, ``requestBody`` and ``referrer`` appear only with its
  ``--post-append`` or ``--fields`` options, which we do not copy.
* Order: by default lines come in file order, files in the order given. With
  ``-s`` it sorts the lines as Python strings (code point order, which is the
  byte order of their UTF-8), newline included, and drops repeated lines;
  ``sort=True`` does the same, and :func:`merge_indexes` merges sorted files
  into that same order, streaming (cdxj-indexer's ``SortingWriter`` merges its
  spill files with ``heapq.merge`` too).

Where cdxj-indexer reads a broken file up to the first error and then dies
with a traceback, we raise :class:`~trawl.warc.record.WarcFormatError` naming the
record. ARC files and directories of inputs are not supported.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

import surt  # type: ignore[import-untyped]
from warcio.timeutils import iso_date_to_timestamp
from warcio.utils import Digester

from trawl.warc.reader import iter_records, member_record
from trawl.warc.record import HttpHead, WarcFormatError, WarcRecord

__all__ = [
    "INDEXED_TYPES",
    "index_lines",
    "member_line",
    "merge_indexes",
    "merge_lines",
    "sorted_lines",
    "write_index",
]

INDEXED_TYPES = ("response", "revisit", "resource", "metadata")  # DEFAULT_RECORDS
_FIELDS_TYPE = "application/warc-fields"
_MIME_END = re.compile(r"[;\s]")  # CDXJIndexer.RE_SPACE
_STATUS_TYPES = ("response", "revisit")
_NO_COMPUTED_DIGEST = ("warcinfo", "revisit")  # warcio NO_PAYLOAD_DIGEST_TYPES


def index_lines(
    paths: Sequence[str | Path], filenames: Sequence[str] | None = None, *, sort: bool = False
) -> list[str]:
    """The CDXJ lines (without newlines) of the records in ``paths``.

    ``filenames`` gives the ``filename`` field of each path (default: its base
    name, as cdxj-indexer writes). Unsorted, in file order, unless ``sort``.
    """
    lines = list(_file_lines(paths, filenames))
    return sorted_lines(lines) if sort else lines


def write_index(
    paths: Sequence[str | Path],
    out_path: str | Path,
    *,
    filenames: Sequence[str] | None = None,
    sort: bool = False,
) -> int:
    """Write :func:`index_lines` to ``out_path`` (replaced atomically); the line count."""
    if sort:
        return _write_lines(Path(out_path), index_lines(paths, filenames, sort=True))
    return _write_lines(Path(out_path), _file_lines(paths, filenames))


def member_line(member: bytes, filename: str, offset: int) -> str | None:
    """The CDXJ line of the record a writer just wrote as the gzip member
    ``member`` at ``offset`` of ``filename`` (None: a record not indexed):
    the line :func:`index_lines` gives for it when it reads the file, made
    by the same functions from the bytes at hand."""
    record = member_record(member, filename, offset)
    return _index_line(record, filename, filename) if _is_indexed(record) else None


def merge_lines(sorted_lists: Iterable[Iterable[str]], out_path: str | Path) -> int:
    """Write the lines of several sorted, repeat-free lists (each as
    ``index_lines(..., sort=True)`` gives them) to ``out_path`` as one
    sorted index, repeats dropped: what ``write_index(..., sort=True)``
    writes for all their files at once. The line count."""
    merged = heapq.merge(*sorted_lists, key=_sort_key)
    return _write_lines(Path(out_path), _unique(merged))


def merge_indexes(index_paths: Sequence[str | Path], out_path: str | Path) -> int:
    """Merge sorted CDXJ files into one sorted file, streaming (k-way heap merge).

    The result is what ``cdxj-indexer -s`` writes for all their WARC files at
    once: repeated lines are dropped. Raises ValueError if an input is not
    sorted. Returns the number of lines written.
    """
    with ExitStack() as stack:
        streams = [
            _sorted_lines(stack.enter_context(Path(p).open(encoding="utf-8", newline="")), p)
            for p in index_paths
        ]
        merged = heapq.merge(*streams, key=_sort_key)
        return _write_lines(Path(out_path), _unique(merged))


# --- one record, one line ----------------------------------------------------------


def _file_lines(paths: Sequence[str | Path], filenames: Sequence[str] | None) -> Iterator[str]:
    if filenames is not None and len(filenames) != len(paths):
        raise ValueError(f"{len(filenames)} filenames for {len(paths)} paths")
    names = filenames if filenames is not None else [os.path.basename(p) for p in paths]
    for path, name in zip(paths, names, strict=True):
        for record in iter_records(path, verify=False):
            if _is_indexed(record):
                yield _index_line(record, name, str(path))


def _is_indexed(record: WarcRecord) -> bool:
    # CDXJIndexer.filter_record with the default record list.
    if record.rec_type not in INDEXED_TYPES:
        return False
    return not (
        record.rec_type in ("resource", "metadata")
        and record.header("Content-Type") == _FIELDS_TYPE
    )


def _index_line(record: WarcRecord, filename: str, path: str) -> str:
    head = _http_head(record)
    url = record.target_uri
    fields = {
        "url": url,
        "mime": _mime(record, head),
        # warcio's Indexer: http:status of responses and revisits only.
        "status": head.status if head is not None and record.rec_type in _STATUS_TYPES else None,
        "digest": _payload_digest(record),
        "length": str(record.length),
        "offset": str(record.offset),
        "filename": filename,
    }
    index = {name: value for name, value in fields.items() if value is not None}
    return f"{_surt_key(url)} {_timestamp(record, path)} {json.dumps(index)}"


def _http_head(record: WarcRecord) -> HttpHead | None:
    head = record.http_head()
    # warcio treats a head with neither status line nor fields as absent
    # (StatusAndHeaders.__bool__), e.g. a block that starts with a blank line.
    if head is None or not (head.status_line or head.headers):
        return None
    return head


def _mime(record: WarcRecord, head: HttpHead | None) -> str | None:
    if record.rec_type == "revisit":
        return "warc/revisit"
    if record.rec_type in ("response", "request"):
        value = head.header("Content-Type") if head is not None else None
    else:
        value = record.header("Content-Type")
    return _MIME_END.split(value, 1)[0].strip() if value else value


def _payload_digest(record: WarcRecord) -> str | None:
    value = record.header("WARC-Payload-Digest")
    if value or record.rec_type in _NO_COMPUTED_DIGEST:
        return value
    # cdxj-indexer has warcio's BufferWARCWriter.ensure_digest compute it: SHA-1
    # over what follows the HTTP head (whole block if none), base32.
    digester = Digester("sha1")
    digester.update(record.payload())
    return str(digester)


def _surt_key(url: str | None) -> str:
    try:
        return str(surt.surt(url))
    except Exception:  # CDXJIndexer.get_url_key falls back to the URL
        return str(url)


def _timestamp(record: WarcRecord, path: str) -> str:
    date = record.header("WARC-Date")
    try:
        return str(iso_date_to_timestamp(date))
    except (TypeError, ValueError) as exc:
        raise WarcFormatError(path, record.offset, f"WARC-Date {date!r} is not a date") from exc


# --- order -------------------------------------------------------------------------


def _sort_key(line: str) -> str:
    return line + "\n"  # SortingWriter sorts lines with their newline


def sorted_lines(lines: Iterable[str]) -> list[str]:
    """CDXJ lines in ``cdxj-indexer -s`` order, repeats dropped."""
    return list(_unique(sorted(lines, key=_sort_key)))


def _unique(lines: Iterable[str]) -> Iterator[str]:
    """Drop lines equal to the one before (SortingWriter.write_to_file)."""
    last = None
    for line in lines:
        if line != last:
            yield line
        last = line


def _sorted_lines(fh: TextIO, path: str | Path) -> Iterator[str]:
    last = None
    for number, raw in enumerate(fh, 1):
        line = raw[:-1] if raw.endswith("\n") else raw
        if last is not None and _sort_key(line) < _sort_key(last):
            raise ValueError(f"{path}:{number}: index is not sorted")
        last = line
        yield line


def _write_lines(out_path: Path, lines: Iterable[str]) -> int:
    tmp = out_path.with_name(out_path.name + ".tmp")
    count = 0
    try:
        with tmp.open("w", encoding="utf-8", newline="") as out:
            for line in lines:
                out.write(line + "\n")
                count += 1
        os.replace(tmp, out_path)
    finally:
        tmp.unlink(missing_ok=True)
    return count
