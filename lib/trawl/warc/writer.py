"""Write fetched HTTP exchanges to a WARC 1.1 file, as they are fetched.

A ``WarcWriter`` appends a ``response`` record and a ``request`` record per
fetch (or a ``revisit`` and its ``request``, and ``metadata`` records) to one
file of a fetch task (``trawl.warc.archive``). It returns a :class:`WarcRef`
(file, offset, length) for every response so the crawl db can point at the
record and a reader can seek straight to it.

How it is built, and why:

* warcio does the record framing, gzip and digest formatting
  (``WARCWriter(fh, gzip=True)``: one gzip member per record, WARC 1.1 annex
  "Compression recommendations", record-at-time compression), so the output is
  what the usual tools (pywb, cdxj-indexer, jwarc) expect.
* The record blocks and field values are assembled and checked by
  ``trawl.warc.fields`` from the bytes we have, not re-parsed by warcio, so
  the block holds the bytes as sent and received.
* ``WARC-Date`` is the fetch time handed in by the caller, never the wall clock
  (section 5.4: the instant capture began; the same value on the records of one
  capture event). Only the ``warcinfo`` record, which describes the file, is
  dated when the file is opened.
* A record is made whole in memory, then appended in one write: a record
  that cannot be made (a value the format refuses) leaves the file as it
  was, and the caller may go on. A write that fails (a full disk, an upload
  refused) may leave part of a record: the writer then refuses every later
  write (``ArchiveFailed``), so the task fails and its files are written
  again by its re-run, never kept with a torn record inside.
* A revisit (section 6.7) stores the response head only, under one of the two
  profiles: the payload is identical to a response stored earlier (``Stored``),
  or the server answered 304 Not Modified.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from io import BytesIO
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Self

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from trawl import faults
from trawl.warc import cdxj
from trawl.warc.fields import (
    field_name,
    field_value,
    ip_address,
    new_record_id,
    request_payload,
    response_head,
    sha1_digest,
    target_uri,
    truncation_reason,
    warc_date,
    warc_fields,
)

__all__ = [
    "REVISIT_IDENTICAL",
    "REVISIT_NOT_MODIFIED",
    "ArchiveFailed",
    "Stored",
    "WarcRef",
    "WarcWriter",
]

WARC_VERSION = "WARC/1.1"
WARC_FORMAT = "WARC File Format 1.1"
WARC_CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"

# WARC 1.1 section 6.7.2 and 6.7.3: the two revisit profiles.
REVISIT_IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
REVISIT_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

# WARC 1.1 section 6.3.2 / 6.5.2: Content-Type of http response / request blocks.
_HTTP_RESPONSE_TYPE = "application/http; msgtype=response"
_HTTP_REQUEST_TYPE = "application/http; msgtype=request"
_WARC_FIELDS_TYPE = "application/warc-fields"  # section 8.3


class ArchiveFailed(OSError):
    """A WARC file could not be written (the disk or the store refused): the
    file may hold part of a record, so it takes no more and must not be kept."""


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
        return cls(ref.record_id, target_uri(url), warc_date(fetched_at))


class Closing:
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

log = logging.getLogger(__name__)


def _never_indexed(record: Any) -> bool:
    """A record cdxj-indexer leaves out whatever its bytes (``trawl.warc.cdxj``:
    warcinfo and request records, and metadata records of WARC fields, as
    the writer's are), not parsed back for the index: half of a crawl's."""
    if record.rec_type in ("warcinfo", "request"):
        return True
    return bool(record.rec_type == "metadata" and record.content_type == _WARC_FIELDS_TYPE)


class WarcWriter(Closing):
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
        *,
        sink: BinaryIO | None = None,
        index: bool = False,
    ) -> None:
        """Write to the file ``path``, or, with ``sink``, to that stream (a
        file being uploaded, say) under the name ``path``'s last part.
        ``index``: keep the CDXJ line of every record written
        (``index_lines``), as ``trawl.warc.cdxj`` would read it back."""
        self._path = Path(path)
        self.subset = subset  # which of a task's files (SUBSETS) this is
        self._fh: BinaryIO | None = sink if sink is not None else self._path.open("wb")
        self._member = BytesIO()  # the record being made, one gzip member
        self._writer = _Writer(self._member, gzip=True, warc_version=WARC_VERSION)
        self._failed: str | None = None  # why a write failed: no more are made
        self._records = 0
        self._size = 0
        self._index: list[str] | None = [] if index else None  # None: not indexed
        try:
            self._warcinfo_id = self._write_warcinfo(software, operator, extra_info or {})
        except BaseException:
            self.abort()
            raise

    # --- properties and lifecycle -----------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def name(self) -> str:
        """The file's name, as ``WarcRef.file`` gives it."""
        return self._path.name

    @property
    def records_written(self) -> int:
        """Records written so far, the ``warcinfo`` record included."""
        return self._records

    @property
    def index_lines(self) -> list[str]:
        """The CDXJ lines of the records written so far, sorted, repeats
        dropped: ``trawl.warc.cdxj.index_lines(..., sort=True)`` of the file
        as it stands (none without ``index``, or once ``indexed`` is false)."""
        return cdxj.sorted_lines(self._index or [])

    @property
    def indexed(self) -> bool:
        """Whether ``index_lines`` holds every record written (``index`` on,
        and no record it could not take)."""
        return self._index is not None

    @property
    def warcinfo_id(self) -> str:
        return self._warcinfo_id

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._fh.tell() if self._fh is not None else self._size

    def close(self) -> None:
        """Flush and close the file (a sink: complete it). Safe to call twice."""
        if self._fh is not None and self._failed is not None:  # torn: not kept
            self.abort()
            raise ArchiveFailed(f"WARC file {self.name} is not kept: {self._failed}")
        if self._fh is not None:
            fh, self._fh = self._fh, None
            self._size = fh.tell()
            try:
                fh.close()
            except Exception as exc:  # the last bytes (or the upload) did not land
                self._discard(fh)
                raise ArchiveFailed(f"WARC file {self.name} could not be closed: {exc}") from exc

    def abort(self) -> None:
        """Close without keeping the file: a sink that can abort (an upload)
        leaves nothing; a local file is removed."""
        if self._fh is None:
            return
        fh, self._fh = self._fh, None
        self._discard(fh)

    def _discard(self, fh: BinaryIO) -> None:
        abort = getattr(fh, "abort", None)
        if callable(abort):
            abort()
        else:
            with suppress(OSError):  # a full disk may refuse the last flush again
                fh.close()
            self._path.unlink(missing_ok=True)

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
        common = [("WARC-Target-URI", target_uri(url)), ("WARC-Date", warc_date(fetched_at))]
        if ip:
            common.append(("WARC-IP-Address", ip_address(ip)))  # section 5.10
        response_id = new_record_id()
        head = response_head(status_line, response_headers)
        response_fields = [("WARC-Record-ID", response_id), *common]
        if truncated is not None:
            response_fields.append(("WARC-Truncated", truncation_reason(truncated)))
        ref = self._write_record(
            "response", response_fields, head + body, _HTTP_RESPONSE_TYPE, payload=body
        )
        self._write_request(request_head, common, response_id)
        return ref

    def _write_request(
        self, request_head: bytes, common: list[tuple[str, str]], concurrent_to: str
    ) -> None:
        fields = [
            ("WARC-Record-ID", new_record_id()),
            *common,
            ("WARC-Concurrent-To", concurrent_to),  # section 5.7: same capture event
        ]
        payload = request_payload(request_head)
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
        common = [("WARC-Target-URI", target_uri(url)), ("WARC-Date", warc_date(fetched_at))]
        if ip:
            common.append(("WARC-IP-Address", ip_address(ip)))
        revisit_id = new_record_id()
        fields = [("WARC-Record-ID", revisit_id), *common, ("WARC-Profile", profile)]
        if refers_to is not None:
            fields += [
                ("WARC-Refers-To", refers_to.record_id),
                ("WARC-Refers-To-Target-URI", refers_to.target_uri),
                ("WARC-Refers-To-Date", refers_to.date),
            ]
        head = response_head(status_line, response_headers)
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
            ("WARC-Record-ID", new_record_id()),
            ("WARC-Target-URI", target_uri(url)),
            ("WARC-Date", warc_date(fetched_at)),
        ]
        if concurrent_to:
            record_fields.append(("WARC-Concurrent-To", concurrent_to))
        return self._write_record("metadata", record_fields, warc_fields(fields), _WARC_FIELDS_TYPE)

    def append_member(self, member: bytes) -> WarcRef:
        """Append one record that is already a gzip member, byte for byte (an
        export's copy); the caller vouches that it is one whole record."""
        offset = self._append(member)
        self._indexed(member, offset)
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
        info = {field_name(k): field_value(v) for k, v in info.items()}
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
        fields.append(("WARC-Block-Digest", sha1_digest(block)))  # section 5.8
        if payload is not None:
            payload_digest = sha1_digest(payload)
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
        self._member.seek(0)
        self._member.truncate()
        self._writer.write_record(record)  # one gzip member, made in memory
        member = self._member.getvalue()
        offset = self._append(member)
        if not _never_indexed(record):
            self._indexed(member, offset)
        faults.point("warc:mid-file")  # kill tests: a record written, the file open
        return WarcRef(self.name, offset, len(member), record_id)

    def _indexed(self, member: bytes, offset: int) -> None:
        """Keep the CDXJ line of the record just written (with ``index``).
        A record the index cannot take (a bug, not the file's: it is
        written) ends the index, never the write: ``indexed`` turns false
        and the file is indexed from its records instead."""
        if self._index is None:
            return
        try:
            line = cdxj.member_line(member, self.name, offset)
        except Exception as exc:
            self._index = None
            log.warning("WARC file %s is not indexed as written: %s", self.name, exc)
            return
        if line is not None:
            self._index.append(line)

    def _append(self, member: bytes) -> int:
        """Append a whole record to the file, flush and count it; its offset."""
        if self._fh is None:
            raise ValueError(f"WARC file {self._path} is closed")
        if self._failed is not None:
            raise ArchiveFailed(f"WARC file {self.name} failed before: {self._failed}")
        offset = self._fh.tell()
        try:
            self._fh.write(member)
            self._fh.flush()
        except Exception as exc:  # the file may end in part of this record
            self._failed = f"{type(exc).__name__}: {exc}"
            raise ArchiveFailed(f"WARC file {self.name} could not be written: {exc}") from exc
        self._records += 1
        return offset
