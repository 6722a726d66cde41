"""Write fetched HTTP exchanges to WARC 1.1 files, as they are fetched.

Each fetch task owns one ``WarcWriter`` and appends a ``response`` record and a
``request`` record per fetch, so the raw bytes are archived once, in the task
that has them, and never travel through Spark. The writer returns a
:class:`WarcRef` (file, offset, length) for every response so the crawl db can
point at the record and a reader can seek straight to it.

How it is built, and why:

* warcio does the record framing, gzip and digest formatting
  (``WARCWriter(fh, gzip=True)``: one gzip member per record, WARC 1.1 annex
  "Compression recommendations", record-at-time compression), so the output is
  what the usual tools (pywb, cdxj-indexer, jwarc) expect.
* The record blocks are assembled here from the bytes we have, not re-parsed by
  warcio: warcio would parse HTTP headers back out and re-serialise them
  (percent-encoding non-ASCII values), which changes the bytes. Header values
  come from the HTTP client decoded as Latin-1, so encoding them back as Latin-1
  restores the bytes as received.
* Digests are SHA-1 in base32 (warcio's ``Digester``), computed from the bytes
  in memory: block digest over the whole block (WARC 1.1 section 5.8), payload
  digest over the HTTP entity body (section 5.9, 6.3.2).
* ``WARC-Date`` is the fetch time handed in by the caller, never the wall clock
  (section 5.4: the instant capture began; the same value on the records of one
  capture event). Only the ``warcinfo`` record, which describes the file, is
  dated when the file is opened.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Self

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.timeutils import datetime_to_iso_date
from warcio.utils import Digester
from warcio.warcwriter import WARCWriter

__all__ = [
    "REVISIT_IDENTICAL",
    "REVISIT_NOT_MODIFIED",
    "SUBSETS",
    "TRUNCATION_REASONS",
    "Stored",
    "TaskArchive",
    "WarcRef",
    "WarcWriter",
    "payload_digest",
    "warc_filename",
]

WARC_VERSION = "WARC/1.1"
WARC_FORMAT = "WARC File Format 1.1"
WARC_CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"

# WARC 1.1 section 6.7.2 and 6.7.3: the two revisit profiles.
REVISIT_IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
REVISIT_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

#: The files of a fetch task, as Common Crawl splits a segment: pages (and
#: their revisits), robots.txt fetches, and everything that is not a page
#: (redirects, 4xx and 5xx answers, failed fetches). The main subset's name
#: carries no subset part.
SUBSETS = ("warc", "robotstxt", "crawldiagnostics")

# WARC 1.1 section 5.15 (WARC-Truncated) reason tokens.
TRUNCATION_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})

# WARC 1.1 section 6.3.2 / 6.5.2: Content-Type of http response / request blocks.
_HTTP_RESPONSE_TYPE = "application/http; msgtype=response"
_HTTP_REQUEST_TYPE = "application/http; msgtype=request"
_WARC_FIELDS_TYPE = "application/warc-fields"  # section 8.3

# The body we store has had any transfer coding removed (section 6.3.2: the payload
# is the entity-body "with any transfer-encoding removed"), so the header that
# announces one would make readers try to de-chunk it again.
_DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})

_FIELD_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z\-]+$")  # a token (section 4)
_NEWLINES = re.compile(r"[\r\n]+")
_STATUS_LINE = re.compile(r"^HTTP/\d(\.\d)? \d{3}( |$)")
_FILENAME_PART = re.compile(r"^[A-Za-z0-9._\-]+$")


@dataclass(frozen=True, slots=True)
class WarcRef:
    """Where a record is: its gzip member in ``file`` (a basename).

    ``offset`` and ``length`` delimit the record's gzip member, so
    ``gzip.decompress(data[offset : offset + length])`` is the whole record.
    ``record_id`` is its WARC-Record-ID ("" when rebuilt from an index that
    does not keep it).
    """

    file: str
    offset: int
    length: int
    record_id: str = ""


@dataclass(frozen=True, slots=True)
class Stored:
    """A response record a revisit can refer to (WARC-Refers-To-*)."""

    record_id: str
    target_uri: str
    date: str  # its WARC-Date

    @classmethod
    def of(cls, ref: WarcRef, url: str, fetched_at: datetime) -> Stored:
        """The response ``ref`` that ``write_exchange`` wrote for ``url``."""
        return cls(ref.record_id, _target_uri(url), _warc_date(fetched_at))


class _Closing:
    """``with``: ``close()`` at the end of the block."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Writer(WARCWriter):  # type: ignore[misc]  # warcio is untyped
    # WARC 1.1 section 4: 'warcinfo', 'metadata' and 'revisit' records have no
    # payload, so no WARC-Payload-Digest (section 5.9); warcio would add one to
    # metadata records.
    NO_PAYLOAD_DIGEST_TYPES = ("warcinfo", "revisit", "metadata", "_revisit_block")


# warcio writes a record of type "revisit" as its parsed HTTP headers only; ours
# carry the head as raw bytes (no parsed headers), so they go through the writer
# under this internal type, which makes it copy the block. WARC-Type still says
# "revisit": the type is only in the headers we give.
_REVISIT_BLOCK = "_revisit_block"


def warc_filename(prefix: str, segment: str, task: int, serial: int = 0) -> str:
    """``<prefix>-<segment>-<task:05d>-<serial:05d>.warc.gz``.

    Unique per segment, task and file within the task, after WARC 1.1 annex
    "WARC file size and name recommendations" (prefix, then what makes the name
    unique; ``.warc.gz`` for record-at-time gzip). Spark task retries get the
    same name and overwrite the failed attempt's file.
    """
    for name, part in (("prefix", prefix), ("segment", segment)):
        if not _FILENAME_PART.match(part):
            raise ValueError(f"{name} must be [A-Za-z0-9._-]+, got {part!r}")
    if task < 0 or serial < 0:
        raise ValueError("task and serial must be >= 0")
    return f"{prefix}-{segment}-{task:05d}-{serial:05d}.warc.gz"


class WarcWriter(_Closing):
    """Append request/response records to one gzipped WARC 1.1 file.

    Opening the writer truncates ``path`` and writes a ``warcinfo`` record
    (section 6.2) with ``software``, ``format``, ``conformsTo``, ``hostname``,
    ``operator`` when given, then ``extra_info`` (for example ``isPartOf``: the
    segment id, ``robots``: "obey", ``http-header-user-agent``). Every later
    record names it in ``WARC-Warcinfo-ID`` (section 5.16).

    Not thread-safe: one writer per task.
    """

    def __init__(
        self,
        path: str | Path,
        software: str,
        operator: str | None = None,
        extra_info: Mapping[str, str] | None = None,
        subset: str = "warc",
    ) -> None:
        self._path = Path(path)
        self.subset = subset  # which of a task's files (SUBSETS) this is
        self._fh: BinaryIO | None = self._path.open("wb")
        self._writer = _Writer(self._fh, gzip=True, warc_version=WARC_VERSION)
        self._records = 0
        try:
            self._warcinfo_id = self._write_warcinfo(software, operator, extra_info or {})
        except BaseException:
            self.close()
            raise

    # --- properties and lifecycle -----------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def records_written(self) -> int:
        """Records written so far, the ``warcinfo`` record included."""
        return self._records

    @property
    def warcinfo_id(self) -> str:
        return self._warcinfo_id

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._fh.tell() if self._fh is not None else self._path.stat().st_size

    def close(self) -> None:
        """Flush and close the file. Safe to call twice."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            fh.close()

    # --- records ----------------------------------------------------------------

    def write_exchange(
        self,
        *,
        url: str,
        ip: str | None,
        fetched_at: datetime,
        request_head: bytes,
        status_line: str,
        response_headers: Sequence[tuple[str, str]],
        body: bytes,
        truncated: str | None = None,
    ) -> WarcRef:
        """Write one fetch as a ``response`` record then its ``request`` record.

        ``status_line`` ("HTTP/1.1 200 OK") and ``response_headers`` are the
        response head as received; ``Transfer-Encoding`` is dropped because
        ``body`` must already be de-chunked, while ``Content-Encoding`` is kept
        and ``body`` stored as received (still compressed). ``request_head`` is
        the request exactly as sent. ``fetched_at`` must be timezone-aware.
        ``truncated`` is a section 5.15 reason ("length", "time", ...) when the
        body was cut short. Returns where the response record is.
        """
        warc_date = _warc_date(fetched_at)
        common = [("WARC-Target-URI", _target_uri(url)), ("WARC-Date", warc_date)]
        if ip:
            common.append(("WARC-IP-Address", _ip_address(ip)))  # section 5.10
        response_id = _new_record_id()
        head = _response_head(status_line, response_headers)
        response_fields = [("WARC-Record-ID", response_id), *common]
        if truncated is not None:
            response_fields.append(("WARC-Truncated", _truncation_reason(truncated)))
        ref = self._write_record(
            "response", response_fields, head + body, _HTTP_RESPONSE_TYPE, payload=body
        )
        self._write_request(request_head, common, response_id)
        return ref

    def _write_request(
        self, request_head: bytes, common: list[tuple[str, str]], concurrent_to: str
    ) -> None:
        fields = [
            ("WARC-Record-ID", _new_record_id()),
            *common,
            ("WARC-Concurrent-To", concurrent_to),  # section 5.7: same capture event
        ]
        payload = _request_payload(request_head)
        self._write_record("request", fields, request_head, _HTTP_REQUEST_TYPE, payload=payload)

    def write_revisit(
        self,
        *,
        url: str,
        ip: str | None,
        fetched_at: datetime,
        request_head: bytes,
        status_line: str,
        response_headers: Sequence[tuple[str, str]],
        profile: str,
        digest: str | None = None,
        refers_to: Stored | None = None,
    ) -> WarcRef:
        """Write a ``revisit`` record (section 6.7) then its ``request`` record.

        The block is the response head only (status line and headers, as
        ``write_exchange`` writes them); no payload is stored.
        ``REVISIT_IDENTICAL``: the payload (``digest``, its
        ``payload_digest``) equals that of ``refers_to``, a response this
        crawl stored. ``REVISIT_NOT_MODIFIED``: a 304; ``refers_to`` when the
        copy it confirms is known. WARC-Refers-To, -Target-URI and -Date name
        the earlier record (sections 5.11, 5.12, 5.13).
        """
        if profile not in (REVISIT_IDENTICAL, REVISIT_NOT_MODIFIED):
            raise ValueError(f"unknown revisit profile {profile!r}")
        if profile == REVISIT_IDENTICAL and (digest is None or refers_to is None):
            raise ValueError("an identical-payload-digest revisit needs the digest and the record")
        warc_date = _warc_date(fetched_at)
        common = [("WARC-Target-URI", _target_uri(url)), ("WARC-Date", warc_date)]
        if ip:
            common.append(("WARC-IP-Address", _ip_address(ip)))
        revisit_id = _new_record_id()
        fields = [("WARC-Record-ID", revisit_id), *common, ("WARC-Profile", profile)]
        if refers_to is not None:
            fields += [
                ("WARC-Refers-To", refers_to.record_id),
                ("WARC-Refers-To-Target-URI", refers_to.target_uri),
                ("WARC-Refers-To-Date", refers_to.date),
            ]
        head = _response_head(status_line, response_headers)
        ref = self._write_record(
            "revisit", fields, head, _HTTP_RESPONSE_TYPE, payload_digest=digest
        )
        self._write_request(request_head, common, revisit_id)
        return ref

    def write_metadata(
        self,
        *,
        url: str,
        fetched_at: datetime,
        fields: Mapping[str, str] | Sequence[tuple[str, str]],
        concurrent_to: str | None = None,
    ) -> WarcRef:
        """Write a ``metadata`` record (section 6.6) of ``application/warc-fields``.

        ``fields`` become ``name: value`` lines (e.g. ``via``, ``fetchTimeMs``;
        a sequence of pairs may repeat a name, as ``outlink`` does); line
        breaks in values are replaced by spaces. ``concurrent_to`` is the
        WARC-Record-ID of the response from the same capture event
        (``WarcRef.record_id``).
        """
        record_fields = [
            ("WARC-Record-ID", _new_record_id()),
            ("WARC-Target-URI", _target_uri(url)),
            ("WARC-Date", _warc_date(fetched_at)),
        ]
        if concurrent_to:
            record_fields.append(("WARC-Concurrent-To", concurrent_to))
        return self._write_record(
            "metadata", record_fields, _warc_fields(fields), _WARC_FIELDS_TYPE
        )

    def append_member(self, member: bytes) -> WarcRef:
        """Append one record that is already a gzip member, byte for byte (an
        export's copy); the caller vouches that it is one whole record."""
        if self._fh is None:
            raise ValueError(f"WARC file {self._path} is closed")
        offset = self._fh.tell()
        self._fh.write(member)
        self._fh.flush()
        self._records += 1
        return WarcRef(self._path.name, offset, len(member))

    # --- internals ----------------------------------------------------------------

    def _write_warcinfo(
        self, software: str, operator: str | None, extra_info: Mapping[str, str]
    ) -> str:
        info: dict[str, str] = {
            "software": software,
            "format": WARC_FORMAT,
            "conformsTo": WARC_CONFORMS_TO,
            "hostname": socket.gethostname(),
        }
        if operator:
            info["operator"] = operator
        info.update(extra_info)
        info = {_field_name(k): _field_value(v) for k, v in info.items()}
        record = self._writer.create_warcinfo_record(self._path.name, info)
        self._write(record)
        return str(record.rec_headers.get_header("WARC-Record-ID"))

    def _write_record(
        self,
        rec_type: str,
        fields: list[tuple[str, str]],
        block: bytes,
        content_type: str,
        *,
        payload: bytes | None = None,
        payload_digest: str | None = None,
    ) -> WarcRef:
        """Write one record whose block is ``block`` verbatim; its payload digest
        from ``payload``, or given (a revisit's, of the payload not stored)."""
        fields = [("WARC-Type", rec_type), *fields, ("WARC-Warcinfo-ID", self._warcinfo_id)]
        fields.append(("WARC-Block-Digest", _sha1(block)))  # section 5.8
        if payload is not None:
            payload_digest = _sha1(payload)
        if payload_digest is not None:
            fields.append(("WARC-Payload-Digest", payload_digest))  # section 5.9
        headers = StatusAndHeaders("", fields, protocol=WARC_VERSION)
        write_as = _REVISIT_BLOCK if rec_type == "revisit" else rec_type
        record = ArcWarcRecord(
            "warc", write_as, headers, BytesIO(block), None, content_type, len(block)
        )
        record_id = str(headers.get_header("WARC-Record-ID"))
        return self._write(record, record_id)

    def _write(self, record: Any, record_id: str = "") -> WarcRef:
        if self._fh is None:
            raise ValueError(f"WARC file {self._path} is closed")
        offset = self._fh.tell()
        self._writer.write_record(record)  # one gzip member, flushed
        self._records += 1
        return WarcRef(self._path.name, offset, self._fh.tell() - offset, record_id)


class TaskArchive(_Closing):
    """The WARC files of one fetch task: one rotating writer per subset.

    ``writer(subset)`` is the subset's current file, opened on first use
    (with its ``warcinfo``) and replaced by the next serial once it has
    reached ``max_file_bytes``; call it once per capture, so the records of
    one capture stay in one file. Files replaced stay open until ``close``,
    so a metadata record written after parsing still joins its response.
    ``stored``/``remember`` keep the first response of every payload digest
    the task archived, for identical-payload-digest revisits (at most
    ``MAX_REMEMBERED`` of them). Not thread-safe: the caller serialises.
    """

    MAX_REMEMBERED = 200_000

    def __init__(
        self,
        directory: str | Path,
        segment: str,
        task: int,
        *,
        software: str,
        prefix: str = "trawl",
        max_file_bytes: int = 1_000_000_000,
        operator: str | None = None,
        extra_info: Mapping[str, str] | None = None,
    ) -> None:
        self._dir = Path(directory)
        self._segment, self._task, self._prefix = segment, task, prefix
        self._max = max_file_bytes
        self._software, self._operator = software, operator
        self._extra = dict(extra_info or {})
        self._current: dict[str, WarcWriter] = {}
        self._all: list[WarcWriter] = []
        self._stored: dict[str, Stored] = {}
        warc_filename(prefix, segment, task)  # validates the name parts now

    def writer(self, subset: str) -> WarcWriter:
        if subset not in SUBSETS:
            raise ValueError(f"unknown WARC subset {subset!r} (known: {', '.join(SUBSETS)})")
        current = self._current.get(subset)
        if current is not None and current.size < self._max:
            return current
        serial = sum(1 for w in self._all if w.subset == subset)
        prefix = self._prefix if subset == "warc" else f"{self._prefix}-{subset}"
        self._dir.mkdir(parents=True, exist_ok=True)
        path = self._dir / warc_filename(prefix, self._segment, self._task, serial)
        writer = WarcWriter(path, self._software, self._operator, self._extra, subset=subset)
        self._current[subset] = writer
        self._all.append(writer)
        return writer

    @property
    def files(self) -> list[Path]:
        """Every file opened so far, in order."""
        return [w.path for w in self._all]

    def stored(self, digest: str) -> Stored | None:
        return self._stored.get(digest)

    def remember(self, digest: str, ref: WarcRef, url: str, fetched_at: datetime) -> None:
        """Note the response record ``ref`` as the first copy of ``digest``."""
        if digest not in self._stored and len(self._stored) < self.MAX_REMEMBERED:
            self._stored[digest] = Stored.of(ref, url, fetched_at)

    def close(self) -> None:
        for writer in self._all:
            writer.close()


# --- field helpers ---------------------------------------------------------------


def _new_record_id() -> str:
    # Section 5.2 (WARC-Record-ID): a globally unique URI; urn:uuid as WARC tools write.
    return str(StatusAndHeadersParser.make_warc_id())


def payload_digest(payload: bytes) -> str:
    """WARC-Payload-Digest of ``payload`` (the body as stored): sha1, base32."""
    return _sha1(payload)


def _sha1(data: bytes) -> str:
    digester = Digester("sha1")
    digester.update(data)
    return str(digester)  # "sha1:" + base32, as in the section 5.8 example


def _warc_date(moment: datetime) -> str:
    """Section 5.4 (WARC-Date): UTC W3C-ISO8601, sub-second as warcio writes for 1.1."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("fetched_at must be timezone-aware")
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    return str(datetime_to_iso_date(utc, use_micros=True))


def _target_uri(url: str) -> str:
    # Section 5.14 (WARC-Target-URI): escaped per RFC 3986, "no internal whitespace".
    if not url or any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValueError(f"WARC-Target-URI must be a non-empty URI without whitespace: {url!r}")
    return url


def _ip_address(ip: str) -> str:
    # Section 5.10 (WARC-IP-Address): dotted quad or RFC 1884 form (via ipaddress).
    return str(ipaddress.ip_address(ip.strip()))


def _truncation_reason(reason: str) -> str:
    if reason not in TRUNCATION_REASONS:
        raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATION_REASONS)}: {reason!r}")
    return reason


def _field_name(name: str) -> str:
    if not _FIELD_NAME.match(name):
        raise ValueError(f"not a valid WARC field name: {name!r}")
    return name


def _field_value(value: str) -> str:
    return _NEWLINES.sub(" ", str(value)).strip()


def _warc_fields(fields: Mapping[str, str] | Sequence[tuple[str, str]]) -> bytes:
    """An application/warc-fields block (section 8.3): ``name: value`` CRLF lines."""
    pairs = fields.items() if isinstance(fields, Mapping) else fields
    lines = (f"{_field_name(k)}: {_field_value(v)}\r\n" for k, v in pairs)
    return "".join(lines).encode("utf-8")


def _head_line(text: str) -> bytes:
    try:
        return text.encode("latin-1") + b"\r\n"  # the inverse of how HTTP clients decode
    except UnicodeEncodeError:
        return text.encode("utf-8") + b"\r\n"


def _response_head(status_line: str, headers: Sequence[tuple[str, str]]) -> bytes:
    """Status line, headers (minus Transfer-Encoding) and the blank line, as bytes."""
    status = _field_value(status_line)
    if not _STATUS_LINE.match(status):
        # Section 6.3.2: the block is the HTTP response message (RFC 9112 4: the
        # status line starts with the HTTP version); readers parse it as such.
        raise ValueError(f"status_line must look like 'HTTP/1.1 200 OK': {status_line!r}")
    lines = [status]
    for name, value in headers:
        name = _field_value(name)
        if name and name.lower() not in _DROPPED_RESPONSE_HEADERS:
            lines.append(f"{name}: {_field_value(value)}")
    return b"".join(_head_line(line) for line in lines) + b"\r\n"


def _request_payload(request_head: bytes) -> bytes:
    """The entity-body of a request (section 6.5.2): what follows the blank line."""
    _, sep, rest = request_head.partition(b"\r\n\r\n")
    return rest if sep else b""
