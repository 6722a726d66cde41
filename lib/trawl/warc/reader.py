"""Read WARC files back: record framing, offsets, and what is wrong.

Three entry points: :func:`iter_records` walks a file record by record,
:func:`read_record` reads the one record a ``warc_ref`` (file, offset, length)
points to, as ``trawl warc get`` does, and :func:`check_file` lists every problem
it finds without raising. Records come out as ``trawl.warc.record.WarcRecord``;
with ``verify`` their mandatory fields and digests are checked
(``trawl.warc.integrity``).

How it is built, and why:

* The framing is ours, not warcio's ``ArchiveIterator``: that iterator recovers
  from broken files by warning on stderr and carrying on, and reports a record
  split across gzip members only one record later, as "Unknown archive format".
  A reader that checks what we archived must say which record is wrong, and why.
  Header lines are still parsed by warcio's ``StatusAndHeadersParser`` (UTF-8,
  else Latin-1; continuation lines), so names and values are exactly what warcio
  and cdxj-indexer see.
* ``.warc.gz`` files are read gzip member by member (WARC 1.1 annex D,
  "Compression recommendations": one record per member, so a reader can seek to
  any record). A record's ``offset``/``length`` are its member's compressed
  offset and length, the numbers cdxj-indexer writes. A member that ends inside
  its record (``example-wrong-chunks.warc.gz``) or holds more than one record
  (``example-bad-non-chunked.warc.gz``, a whole file gzipped at once) is an error.
* Uncompressed files: ``offset`` is where the record's ``WARC/`` line starts and
  ``length`` covers the header and block without the CRLF CRLF that ends every
  record (section 4), as warcio, cdxj-indexer and the IIPC reference CDX of
  ``hello-world.warc`` count it.
* Every record must carry ``WARC-Type`` and a numeric ``Content-Length``
  (section 4 and 5.6: nothing else frames it), and its block must be followed by
  CRLF CRLF; otherwise Content-Length is wrong and nothing after it can be trusted.
  Blocks (and ``read_record``'s spans) are read in 64 KiB steps, so a length
  past the end of the file is that error, never an allocation of that size.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from warcio.statusandheaders import StatusAndHeadersParser, StatusAndHeadersParserException

from trawl.warc.integrity import record_problems
from trawl.warc.record import Headers, WarcFormatError, WarcRecord, header_value

__all__ = ["check_file", "iter_records", "read_record"]

_GZIP_MAGIC = b"\x1f\x8b"
_RECORD_END = b"\r\n\r\n"  # section 4: warc-record = header CRLF block CRLF CRLF
_READ_SIZE = 1 << 16

_WARC_PARSER = StatusAndHeadersParser(["WARC/1.1", "WARC/1.0", "WARC/0.18", "WARC/0.17"])
_DIGITS = re.compile(r"[0-9]+")  # section 5.6: Content-Length = 1*DIGIT
_MAX_LENGTH_DIGITS = 18  # a block of 10**18 bytes (an exabyte) is no block: the field is wrong


# --- public API --------------------------------------------------------------------


def iter_records(path: str | Path, verify: bool = True) -> Iterator[WarcRecord]:
    """Yield the records of a ``.warc`` or ``.warc.gz`` file (told apart by content).

    Raises :class:`WarcFormatError` at the first record that cannot be framed, or
    with ``verify`` whose digests do not match or which lacks a mandatory field.
    """
    for record in _framed_records(Path(path)):
        if verify:
            problems = record_problems(record)
            if problems:
                raise WarcFormatError(str(path), record.offset, "; ".join(problems))
        yield record


def member_record(member: bytes, name: str, offset: int) -> WarcRecord:
    """The record of one gzip member (annex D) that sits at ``offset`` of the
    file ``name``, framed as ``iter_records`` frames it there: a writer's
    view of what it just wrote, without reading the file back."""
    data, rest = _inflate_member(member, name, offset)
    if rest:
        raise WarcFormatError(name, offset, f"{len(rest)} bytes follow the gzip member")
    return _member_record(data, name, offset, len(member))


def read_record(
    source: str | Path | bytes | bytearray | memoryview | BinaryIO,
    offset: int,
    length: int,
    *,
    verify: bool = True,
) -> WarcRecord:
    """The record at ``offset`` (``length`` bytes) of a file, a byte string or a
    seekable binary file object.

    The bytes there must be exactly one whole record: one gzip member holding it,
    or (uncompressed) its header and block, optionally with the CRLF CRLF after
    it. Anything else raises :class:`WarcFormatError`, as does a bad digest
    with ``verify``.
    """
    name, span = _read_span(source, offset, length)
    if len(span) != length:
        raise WarcFormatError(name, offset, f"only {len(span)} of {length} bytes are there")
    if span[:2] == _GZIP_MAGIC:
        data, rest = _inflate_member(span, name, offset)
        if rest:
            raise WarcFormatError(name, offset, f"{len(rest)} bytes follow the gzip member")
        record = _member_record(data, name, offset, length)
    else:
        record = _span_record(span, name, offset)
    if verify and (problems := record_problems(record)):
        raise WarcFormatError(name, offset, "; ".join(problems))
    return record


def check_file(path: str | Path) -> list[str]:
    """Every problem :func:`iter_records` would raise for, and more; [] if the file is
    good. Digest problems do not stop the check; a framing problem ends it (what
    follows cannot be located). Never raises for a broken or missing file."""
    problems: list[str] = []
    count = 0
    try:
        for record in _framed_records(Path(path)):
            count += 1
            where = f"{path}: record at offset {record.offset}"
            problems.extend(f"{where}: {problem}" for problem in record_problems(record))
    except WarcFormatError as exc:
        problems.append(str(exc))
    except OSError as exc:
        problems.append(f"{path}: cannot be read: {exc}")
    else:
        if count == 0:
            problems.append(f"{path}: holds no WARC record")
    return problems


# --- framing -----------------------------------------------------------------------


def _framed_records(path: Path) -> Iterator[WarcRecord]:
    with path.open("rb") as fh:
        if fh.peek(2)[:2] == _GZIP_MAGIC:
            for offset, length, data in _gzip_members(fh, str(path)):
                yield _member_record(data, str(path), offset, length)
        else:
            yield from _plain_records(fh, str(path))


def _gzip_members(fh: BinaryIO, name: str) -> Iterator[tuple[int, int, bytes]]:
    """(offset, compressed length, inflated bytes) of each gzip member in turn."""
    offset = 0
    pending = fh.read(_READ_SIZE)
    while pending:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip wrapper (RFC 1952)
        parts: list[bytes] = []
        used = 0
        while not inflater.eof:
            if not pending:
                pending = fh.read(_READ_SIZE)
                if not pending:
                    raise WarcFormatError(name, offset, "the file ends inside a gzip member")
            parts.append(_inflate(inflater, pending, name, offset))
            used += len(pending) - len(inflater.unused_data)
            pending = inflater.unused_data
        yield offset, used, b"".join(parts)
        offset += used
        if not pending:
            pending = fh.read(_READ_SIZE)


def _inflate(inflater: zlib._Decompress, data: bytes, name: str, offset: int) -> bytes:
    try:
        return inflater.decompress(data)
    except zlib.error as exc:
        raise WarcFormatError(name, offset, f"not a valid gzip member ({exc})") from exc


def _inflate_member(span: bytes, name: str, offset: int) -> tuple[bytes, bytes]:
    """Inflate the gzip member at the start of ``span``; (data, bytes after it)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = _inflate(inflater, span, name, offset)
    if not inflater.eof:
        raise WarcFormatError(name, offset, "the bytes end inside a gzip member")
    return data, inflater.unused_data


def _member_record(data: bytes, name: str, offset: int, length: int) -> WarcRecord:
    """The one record a gzip member must hold (annex D: record-at-time compression)."""
    stream = io.BytesIO(data)
    version, headers, block = _read_head_and_block(stream, name, offset, "its gzip member")
    rest = data[stream.tell() :]
    if not rest.startswith(_RECORD_END):
        raise WarcFormatError(name, offset, _no_record_end(rest))
    extra = rest[len(_RECORD_END) :]
    if extra.strip():  # blank lines are tolerated, as warcio does
        if extra.lstrip().startswith(b"WARC/"):
            problem = "its gzip member holds more than one record (annex D: one record a member)"
        else:
            problem = f"{len(extra)} bytes follow the record inside its gzip member"
        raise WarcFormatError(name, offset, problem)
    return _record(name, offset, length, version, headers, block)


def _plain_records(fh: BinaryIO, name: str) -> Iterator[WarcRecord]:
    while _skip_blank_lines(fh):
        offset = fh.tell()
        version, headers, block = _read_head_and_block(fh, name, offset, "the file")
        length = fh.tell() - offset
        end = fh.read(len(_RECORD_END))
        if end != _RECORD_END:
            raise WarcFormatError(name, offset, _no_record_end(end))
        yield _record(name, offset, length, version, headers, block)


def _span_record(span: bytes, name: str, offset: int) -> WarcRecord:
    """An uncompressed record spanning exactly ``span`` (its CRLF CRLF optional)."""
    stream = io.BytesIO(span)
    version, headers, block = _read_head_and_block(stream, name, offset, "the bytes given")
    rest = span[stream.tell() :]
    if rest not in (b"", _RECORD_END):
        problem = f"{len(rest)} bytes follow the record: not exactly one record"
        if not rest.startswith(_RECORD_END):
            problem = _no_record_end(rest)
        raise WarcFormatError(name, offset, problem)
    return _record(name, offset, len(span) - len(rest), version, headers, block)


def _skip_blank_lines(fh: BinaryIO) -> bool:
    """Step over blank lines between records; False at the end of the file."""
    while True:
        pos = fh.tell()
        line = fh.readline(_READ_SIZE)
        if not line:
            return False
        if line.strip():
            fh.seek(pos)
            return True


def _read_head_and_block(
    stream: BinaryIO, name: str, offset: int, container: str
) -> tuple[str, Headers, bytes]:
    """Parse the header fields at the stream's position and read the block after them."""
    start = stream.tell()
    try:
        parsed = _WARC_PARSER.parse(stream)
    except EOFError:
        raise WarcFormatError(name, offset, "no record here (empty)") from None
    except StatusAndHeadersParserException:
        stream.seek(start)
        first = stream.readline(40)
        raise WarcFormatError(name, offset, f"not a WARC record: it starts {first!r}") from None
    if not parsed.protocol:
        raise WarcFormatError(name, offset, "not a WARC record: it starts with a blank line")
    headers = tuple((str(k), str(v)) for k, v in parsed.headers)
    content_length = _content_length(headers, name, offset)
    block = _read_block(stream, content_length)
    if len(block) < content_length:
        raise WarcFormatError(
            name,
            offset,
            f"{container} ends inside the record: the block has {len(block)} of its "
            f"Content-Length {content_length} bytes",
        )
    return str(parsed.protocol), headers, block


def _read_block(stream: BinaryIO, length: int) -> bytes:
    """Up to ``length`` bytes, read in steps: a file's ``read(n)`` sets aside n
    bytes first, so one read of a wrong or hostile Content-Length (10 GB on a
    small file) would fail for want of memory rather than say the file ends."""
    parts: list[bytes] = []
    left = length
    while left > 0:
        part = stream.read(min(left, _READ_SIZE))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _content_length(headers: Headers, name: str, offset: int) -> int:
    value = header_value(headers, "Content-Length")
    if value is None:
        raise WarcFormatError(name, offset, "no Content-Length (mandatory, section 5.6)")
    digits = value.strip()
    if not _DIGITS.fullmatch(digits):
        raise WarcFormatError(name, offset, f"Content-Length is not a number: {value!r}")
    if len(digits.lstrip("0")) > _MAX_LENGTH_DIGITS:  # also spares int() its 4,300-digit limit
        raise WarcFormatError(name, offset, f"Content-Length is too large: {digits[:40]}...")
    return int(digits)


def _record(
    name: str, offset: int, length: int, version: str, headers: Headers, block: bytes
) -> WarcRecord:
    rec_type = header_value(headers, "WARC-Type")
    if not rec_type:
        raise WarcFormatError(name, offset, "no WARC-Type (mandatory, section 5.5)")
    return WarcRecord(offset, length, rec_type, headers, block, version)


def _no_record_end(after: bytes) -> str:
    return (
        f"the block is not followed by CRLF CRLF (section 4) but by {after[:16]!r}: "
        "Content-Length is wrong"
    )


def _read_span(
    source: str | Path | bytes | bytearray | memoryview | BinaryIO, offset: int, length: int
) -> tuple[str, bytes]:
    if offset < 0 or length <= 0:
        raise ValueError(f"need offset >= 0 and length > 0, got {offset}, {length}")
    if isinstance(source, bytes | bytearray | memoryview):
        return "<bytes>", bytes(source[offset : offset + length])
    if isinstance(source, str | Path):
        with Path(source).open("rb") as fh:
            fh.seek(offset)
            return str(source), _read_block(fh, length)  # a wrong length is not allocated
    source.seek(offset)
    return str(getattr(source, "name", "<stream>")), _read_block(source, length)
