"""Read WARC files back: record framing, offsets, digests, and what is wrong.

Three entry points: :func:`iter_records` walks a file record by record,
:func:`read_record` reads the one record a ``warc_ref`` (file, offset, length)
points to, as ``trawl warc get`` does, and :func:`check_file` lists every problem
it finds without raising.

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
* With ``verify``, ``WARC-Block-Digest`` (section 5.8, over the block) and
  ``WARC-Payload-Digest`` (section 5.9, over the payload) are checked. Labels
  ``sha1``, ``sha256``, ``sha512``, ``md5`` (with or without a hyphen: what
  warcio's ``Digester``, i.e. ``hashlib``, computes), values in base32 (the
  section 5.8 example), base16 or base64 (RFC 4648, as warcio accepts). The
  payload of an HTTP block is what follows the HTTP head; when the head says
  ``Transfer-Encoding: chunked`` a digest of the de-chunked body is accepted too
  (section 6.3.2 says "with any transfer-encoding removed", while warcio and most
  writers digest the bytes as stored). A revisit's payload digest names the
  record it revisits (section 6.7.2), and a segment's covers the whole payload
  (section 7), so neither is checked against the record's own bytes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from warcio.statusandheaders import StatusAndHeadersParser, StatusAndHeadersParserException

__all__ = ["HttpHead", "WarcFormatError", "WarcRecord", "check_file", "iter_records", "read_record"]

Headers = tuple[tuple[str, str], ...]

_GZIP_MAGIC = b"\x1f\x8b"
_RECORD_END = b"\r\n\r\n"  # section 4: warc-record = header CRLF block CRLF CRLF
_READ_SIZE = 1 << 16

_WARC_PARSER = StatusAndHeadersParser(["WARC/1.1", "WARC/1.0", "WARC/0.18", "WARC/0.17"])
# verify=False: the first line is split at its first space, whatever it says
# (warcio reads requests and responses this way for cdxj-indexer).
_HTTP_PARSER = StatusAndHeadersParser([], verify=False)

# warcio's rule for which blocks start with an HTTP head (ArcWarcRecordLoader).
_HTTP_RECORD_TYPES = ("response", "request", "revisit")
_HTTP_SCHEMES = ("http:", "https:")

# Section 4: mandatory fields besides WARC-Type and Content-Length, which frame the record.
_MANDATORY_FIELDS = ("WARC-Record-ID", "WARC-Date")

_DIGEST_ALGORITHMS = frozenset({"sha1", "sha256", "sha512", "md5"})  # hashlib names
_DIGITS = re.compile(r"[0-9]+")  # section 5.6: Content-Length = 1*DIGIT
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]+")  # RFC 9112 7.1: chunk-size = 1*HEXDIG


class WarcFormatError(ValueError):
    """A WARC file, or the bytes at a ``warc_ref``, is not what WARC 1.1 says.

    ``file`` names the file (or the source given), ``offset`` the record's offset
    and ``problem`` what is wrong with it.
    """

    def __init__(self, file: str, offset: int, problem: str) -> None:
        super().__init__(f"{file}: record at offset {offset}: {problem}")
        self.file = file
        self.offset = offset
        self.problem = problem


@dataclass(frozen=True, slots=True)
class HttpHead:
    """The HTTP head at the start of a block, as warcio parses it.

    ``protocol`` is the first word of the first line ("HTTP/1.1", or the method of
    a request) and ``status_line`` the rest ("200 OK", "/ HTTP/1.1"). ``length`` is
    its size in bytes, the blank line included.
    """

    protocol: str
    status_line: str
    headers: Headers
    length: int

    @property
    def status(self) -> str:
        """The status code of a response ("200"): the first word of ``status_line``."""
        return self.status_line.split(" ", 1)[0]

    def header(self, name: str) -> str | None:
        return _first(self.headers, name)


@dataclass(frozen=True, slots=True)
class WarcRecord:
    """One WARC record: where it is, its header fields and its block.

    ``headers`` are the header fields in file order (names as written);
    ``block`` is the Content-Length bytes after them (section 4), as stored.
    """

    offset: int
    length: int
    rec_type: str
    headers: Headers
    block: bytes = field(repr=False)
    version: str = "WARC/1.1"

    def header(self, name: str) -> str | None:
        """The first field called ``name`` (any case), or None."""
        return _first(self.headers, name)

    @property
    def target_uri(self) -> str | None:
        """WARC-Target-URI as warcio reads it: angle brackets (the wget 1.19 bug)
        stripped, spaces percent-encoded."""
        uri = self.header("WARC-Target-URI")
        if uri is not None and uri.startswith("<") and uri.endswith(">"):
            uri = uri[1:-1]
        return None if uri is None else uri.replace(" ", "%20")

    def http_head(self) -> HttpHead | None:
        """The HTTP head of a non-empty response, request or revisit block of an
        http(s) URI (warcio's rule); None for any other record."""
        uri = self.target_uri
        if self.rec_type not in _HTTP_RECORD_TYPES or not self.block or uri is None:
            return None
        if not uri.startswith(_HTTP_SCHEMES):
            return None
        stream = io.BytesIO(self.block)
        parsed = _HTTP_PARSER.parse(stream)
        headers = tuple((str(k), str(v)) for k, v in parsed.headers)
        return HttpHead(str(parsed.protocol), str(parsed.statusline), headers, stream.tell())

    def payload(self) -> bytes:
        """The block after its HTTP head, if it has one (section 5.9), else the block."""
        head = self.http_head()
        return self.block[head.length :] if head is not None else self.block


# --- public API --------------------------------------------------------------------


def iter_records(path: str | Path, verify: bool = True) -> Iterator[WarcRecord]:
    """Yield the records of a ``.warc`` or ``.warc.gz`` file (told apart by content).

    Raises :class:`WarcFormatError` at the first record that cannot be framed, or
    with ``verify`` whose digests do not match or which lacks a mandatory field.
    """
    for record in _framed_records(Path(path)):
        if verify:
            problems = _record_problems(record)
            if problems:
                raise WarcFormatError(str(path), record.offset, "; ".join(problems))
        yield record


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
    if verify and (problems := _record_problems(record)):
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
            problems.extend(f"{where}: {problem}" for problem in _record_problems(record))
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
    block = stream.read(content_length)
    if len(block) < content_length:
        raise WarcFormatError(
            name,
            offset,
            f"{container} ends inside the record: the block has {len(block)} of its "
            f"Content-Length {content_length} bytes",
        )
    return str(parsed.protocol), headers, block


def _content_length(headers: Headers, name: str, offset: int) -> int:
    value = _first(headers, "Content-Length")
    if value is None:
        raise WarcFormatError(name, offset, "no Content-Length (mandatory, section 5.6)")
    if not _DIGITS.fullmatch(value.strip()):
        raise WarcFormatError(name, offset, f"Content-Length is not a number: {value!r}")
    return int(value)


def _record(
    name: str, offset: int, length: int, version: str, headers: Headers, block: bytes
) -> WarcRecord:
    rec_type = _first(headers, "WARC-Type")
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
            return str(source), fh.read(length)
    source.seek(offset)
    return str(getattr(source, "name", "<stream>")), source.read(length)


def _first(headers: Headers, name: str) -> str | None:
    lower = name.lower()
    return next((value for key, value in headers if key.lower() == lower), None)


# --- checks ------------------------------------------------------------------------


def _record_problems(record: WarcRecord) -> list[str]:
    """Missing mandatory fields and digest mismatches, as sentences."""
    problems = [
        f"no {name} (mandatory, section 4)" for name in _MANDATORY_FIELDS if not record.header(name)
    ]
    block_digest = record.header("WARC-Block-Digest")
    if block_digest:
        problems += _digest_problems("WARC-Block-Digest", block_digest, [record.block])
    payload_digest = record.header("WARC-Payload-Digest")
    if payload_digest and record.rec_type != "revisit" and not record.header("WARC-Segment-Number"):
        problems += _digest_problems("WARC-Payload-Digest", payload_digest, _payloads(record))
    return problems


def _payloads(record: WarcRecord) -> Iterator[bytes]:
    """The payload as stored, then de-chunked if the head says chunked."""
    head = record.http_head()
    payload = record.block[head.length :] if head is not None else record.block
    yield payload
    coding = head.header("Transfer-Encoding") if head is not None else None
    if coding is not None and coding.strip().lower().endswith("chunked"):
        yield _dechunk(payload)


def _digest_problems(name: str, labelled: str, candidates: Iterable[bytes]) -> list[str]:
    algorithm, sep, value = labelled.strip().partition(":")
    if not sep:
        return [f"{name} {labelled!r} is not 'algorithm:value' (section 5.8)"]
    hash_name = algorithm.lower().replace("-", "")  # "SHA-1" -> "sha1"
    if hash_name not in _DIGEST_ALGORITHMS:
        return [f"{name} uses an unknown digest algorithm {algorithm!r}"]
    computed = ""
    try:
        for data in candidates:
            digest = hashlib.new(hash_name, data).digest()
            if _digest_matches(value.strip(), digest):
                return []
            computed = computed or base64.b32encode(digest).decode("ascii")
    except ValueError as exc:  # the head says chunked and the body is not
        return [
            f"{name} {labelled} does not match the bytes ({algorithm}:{computed}), "
            f"and the body is not valid chunked coding either: {exc}"
        ]
    return [f"{name} {labelled} does not match the bytes ({algorithm}:{computed})"]


def _digest_matches(value: str, digest: bytes) -> bool:
    """``value`` is ``digest`` in base32, base16 or base64 (RFC 4648)."""
    b32 = base64.b32encode(digest).decode("ascii").rstrip("=")
    b64 = base64.b64encode(digest).decode("ascii").rstrip("=")
    b64_url = b64.replace("+", "-").replace("/", "_")
    return (
        value.upper().rstrip("=") == b32
        or value.lower() == digest.hex()
        or value.rstrip("=") in (b64, b64_url)
    )


def _dechunk(body: bytes) -> bytes:
    """Remove chunked transfer coding (RFC 9112 7.1); ValueError says where it breaks."""
    parts: list[bytes] = []
    pos = 0
    while True:
        eol = body.find(b"\r\n", pos)
        size_text = body[pos:eol].split(b";", 1)[0].strip() if eol >= 0 else b""
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise ValueError(f"no chunk size at byte {pos}")
        size, pos = int(size_text, 16), eol + 2
        if size == 0:  # last-chunk; a trailer section may follow
            return b"".join(parts)
        chunk = body[pos : pos + size]
        if len(chunk) < size or body[pos + size : pos + size + 2] != b"\r\n":
            raise ValueError(f"the chunk at byte {pos} is cut short")
        parts.append(chunk)
        pos += size + 2
