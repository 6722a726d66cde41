"""Tests for trawl.warc.writer: WARC 1.1 writing, read back with warcio's reader."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import random
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from trawl.warc.fields import payload_digest
from trawl.warc.writer import (
    REVISIT_IDENTICAL,
    REVISIT_NOT_MODIFIED,
    ArchiveFailed,
    Stored,
    WarcRef,
    WarcWriter,
)

CONFORMANCE = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"
WARC_SAMPLES = CONFORMANCE / "warc_samples"

FETCHED_AT = datetime(2024, 5, 6, 7, 8, 9, 250_000, tzinfo=UTC)
HTML_BODY = b"<html><body><a href='/next'>next</a></body></html>"
GZIP_TEXT = b"compressed payload " * 20
GZIP_BODY = gzip.compress(GZIP_TEXT, mtime=0)


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def request_head(path: str, host: str = "example.com") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: trawl/0.1\r\n"
        "Accept-Encoding: gzip\r\n\r\n"
    ).encode("ascii")


def write_sample(path: Path) -> list[WarcRef]:
    """Three exchanges: plain HTML, gzip Content-Encoding + chunked, truncated."""
    with WarcWriter(
        path, "trawl/0.1", operator="crawl-team@example.com", extra_info={"isPartOf": "seg-7"}
    ) as writer:
        refs = [
            writer.write_exchange(
                url="http://example.com/",
                ip="93.184.216.34",
                fetched_at=FETCHED_AT,
                request_head=request_head("/"),
                status_line="HTTP/1.1 200 OK",
                response_headers=[("Content-Type", "text/html"), ("Content-Length", "51")],
                body=HTML_BODY,
            ),
            writer.write_exchange(
                url="https://example.com/data.txt",
                ip="2001:DB8:0:0::1",
                fetched_at=FETCHED_AT + timedelta(seconds=1),
                request_head=request_head("/data.txt"),
                status_line="HTTP/1.1 200 OK",
                response_headers=[
                    ("Content-Type", "text/plain"),
                    ("Content-Encoding", "gzip"),
                    ("Transfer-Encoding", "chunked"),
                ],
                body=GZIP_BODY,
            ),
            writer.write_exchange(
                url="http://example.com/big.bin",
                ip=None,
                fetched_at=FETCHED_AT + timedelta(seconds=2),
                request_head=request_head("/big.bin"),
                status_line="HTTP/1.1 200 OK",
                response_headers=[("Content-Length", "99999999")],
                body=b"\x00\x01" * 500,
                truncated="length",
            ),
        ]
    return refs


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record, read in full with digest checking that raises on a mismatch."""
    records = []
    with path.open("rb") as fh:
        iterator = ArchiveIterator(fh, check_digests="raise")
        for record in iterator:
            raw = record.raw_stream.read()
            records.append(
                {
                    "type": record.rec_type,
                    "headers": dict(record.rec_headers.headers),
                    "http": record.http_headers,
                    "raw": raw,
                    "digests_passed": record.digest_checker.passed,
                    "offset": iterator.get_record_offset(),
                    "length": iterator.get_record_length(),
                }
            )
    return records


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, list[WarcRef], list[dict[str, Any]]]:
    path = tmp_path / "trawl-seg-7-00003-00000.warc.gz"
    refs = write_sample(path)
    return path, refs, read_records(path)


# --- structure -----------------------------------------------------------------


def test_record_sequence(sample: tuple[Path, list[WarcRef], list[dict[str, Any]]]) -> None:
    _, _, records = sample
    assert [r["type"] for r in records] == ["warcinfo"] + ["response", "request"] * 3


def test_every_record_is_its_own_gzip_member(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    path, _, records = sample
    data = path.read_bytes()
    for record in records:
        member = data[record["offset"] : record["offset"] + record["length"]]
        assert member[:2] == b"\x1f\x8b"
        assert gzip.decompress(member).startswith(b"WARC/1.1\r\n")
    assert records[-1]["offset"] + records[-1]["length"] == len(data)


def test_warcinfo_record(sample: tuple[Path, list[WarcRef], list[dict[str, Any]]]) -> None:
    path, _, records = sample
    info = records[0]
    assert info["headers"]["WARC-Filename"] == path.name
    assert info["headers"]["Content-Type"] == "application/warc-fields"
    assert "WARC-Target-URI" not in info["headers"]
    assert "WARC-Payload-Digest" not in info["headers"]
    fields = dict(line.split(": ", 1) for line in info["raw"].decode().splitlines())
    assert fields == {
        "software": "trawl/0.1",
        "format": "WARC File Format 1.1",
        "conformsTo": "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "hostname": socket.gethostname(),
        "operator": "crawl-team@example.com",
        "isPartOf": "seg-7",
    }


def test_records_point_at_the_warcinfo(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    _, _, records = sample
    warcinfo_id = records[0]["headers"]["WARC-Record-ID"]
    assert all(r["headers"]["WARC-Warcinfo-ID"] == warcinfo_id for r in records[1:])


def test_record_ids_unique(sample: tuple[Path, list[WarcRef], list[dict[str, Any]]]) -> None:
    _, _, records = sample
    ids = [r["headers"]["WARC-Record-ID"] for r in records]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("<urn:uuid:") and i.endswith(">") for i in ids)


# --- response and request records ------------------------------------------------


def test_response_and_request_headers(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    _, _, records = sample
    response, request = records[1]["headers"], records[2]["headers"]
    assert response["WARC-Target-URI"] == request["WARC-Target-URI"] == "http://example.com/"
    assert response["WARC-Date"] == request["WARC-Date"] == "2024-05-06T07:08:09.250000Z"
    assert response["WARC-IP-Address"] == request["WARC-IP-Address"] == "93.184.216.34"
    assert response["Content-Type"] == "application/http; msgtype=response"
    assert request["Content-Type"] == "application/http; msgtype=request"
    assert request["WARC-Concurrent-To"] == response["WARC-Record-ID"]
    assert "WARC-Truncated" not in response


def test_ipv6_address_normalised_and_missing_ip_omitted(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    _, _, records = sample
    assert records[3]["headers"]["WARC-IP-Address"] == "2001:db8::1"
    assert "WARC-IP-Address" not in records[5]["headers"]
    assert "WARC-IP-Address" not in records[6]["headers"]


def test_warc_date_is_fetch_time(sample: tuple[Path, list[WarcRef], list[dict[str, Any]]]) -> None:
    _, _, records = sample
    dates = [r["headers"]["WARC-Date"] for r in records[1:]]
    assert dates == [
        "2024-05-06T07:08:09.250000Z",
        "2024-05-06T07:08:09.250000Z",
        "2024-05-06T07:08:10.250000Z",
        "2024-05-06T07:08:10.250000Z",
        "2024-05-06T07:08:11.250000Z",
        "2024-05-06T07:08:11.250000Z",
    ]


def test_response_block_is_status_headers_and_raw_body(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    _, _, records = sample
    html = records[1]
    assert html["http"].protocol == "HTTP/1.1"
    assert html["http"].statusline == "200 OK"
    assert html["http"].get_header("Content-Type") == "text/html"
    assert html["raw"] == HTML_BODY


def test_content_encoded_body_stored_raw_and_transfer_encoding_dropped(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    path, refs, records = sample
    gz = records[3]
    assert gz["raw"] == GZIP_BODY  # still compressed, byte for byte
    assert gz["http"].get_header("Content-Encoding") == "gzip"
    assert gz["http"].get_header("Transfer-Encoding") is None
    # and a reader can still decode it
    with path.open("rb") as fh:
        fh.seek(refs[1].offset)
        record = next(iter(ArchiveIterator(fh)))
        assert record.content_stream().read() == GZIP_TEXT


def test_truncated_response(sample: tuple[Path, list[WarcRef], list[dict[str, Any]]]) -> None:
    _, _, records = sample
    big = records[5]
    assert big["headers"]["WARC-Truncated"] == "length"
    assert big["raw"] == b"\x00\x01" * 500
    assert big["http"].get_header("Content-Length") == "99999999"  # as received


def test_request_block_is_the_exact_bytes_sent(tmp_path: Path) -> None:
    odd = b"GET /a%20b?x=1 HTTP/1.1\r\nHost:  example.com\r\nX-Weird:\tvalue \r\n\r\n"
    path = tmp_path / "req.warc.gz"
    with WarcWriter(path, "trawl/0.1") as writer:
        writer.write_exchange(
            url="http://example.com/a%20b?x=1",
            ip="127.0.0.1",
            fetched_at=FETCHED_AT,
            request_head=odd,
            status_line="HTTP/1.1 204 No Content",
            response_headers=[],
            body=b"",
        )
    with path.open("rb") as fh:
        # no_record_parse: raw_stream is the whole block, HTTP head included
        blocks = [
            (r.rec_type, r.raw_stream.read()) for r in ArchiveIterator(fh, no_record_parse=True)
        ]
    assert blocks[1:] == [
        ("response", b"HTTP/1.1 204 No Content\r\n\r\n"),
        ("request", odd),
    ]


def test_latin1_header_bytes_are_restored(tmp_path: Path) -> None:
    path = tmp_path / "h.warc.gz"
    with WarcWriter(path, "trawl/0.1") as writer:
        writer.write_exchange(
            url="http://example.com/",
            ip=None,
            fetched_at=FETCHED_AT,
            request_head=request_head("/"),
            status_line="HTTP/1.1 200 OK",
            # http.client decodes header bytes as Latin-1: b"caf\xe9" -> "café"
            response_headers=[("X-Name", "caf\u00e9"), ("X-Bad", "a\r\nInjected: yes")],
            body=b"x",
        )
    with path.open("rb") as fh:
        blocks = [r.raw_stream.read() for r in ArchiveIterator(fh, no_record_parse=True)]
    assert blocks[1] == (b"HTTP/1.1 200 OK\r\nX-Name: caf\xe9\r\nX-Bad: a Injected: yes\r\n\r\nx")


# --- digests -----------------------------------------------------------------------


def test_digests_verified_by_warcio(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    _, _, records = sample  # read with check_digests="raise": a mismatch would raise
    for record in records:
        assert record["digests_passed"] is True, record["type"]


def test_digests_are_sha1_base32_of_block_and_payload(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    path, refs, records = sample
    data = path.read_bytes()
    for ref, body in zip(refs, [HTML_BODY, GZIP_BODY, b"\x00\x01" * 500], strict=True):
        record = gzip.decompress(data[ref.offset : ref.offset + ref.length])
        header, _, rest = record.partition(b"\r\n\r\n")
        block = rest[: -len(b"\r\n\r\n")]
        fields = dict(line.split(": ", 1) for line in header.decode().splitlines()[1:])
        assert fields["WARC-Block-Digest"] == sha1_b32(block)
        assert fields["WARC-Payload-Digest"] == sha1_b32(body)
        assert int(fields["Content-Length"]) == len(block)
    request = records[2]["headers"]
    assert request["WARC-Payload-Digest"] == sha1_b32(b"")  # a GET has no body


def test_corrupted_record_is_detected(tmp_path: Path) -> None:
    """The digest check used above does catch a changed byte."""
    path = tmp_path / "c.warc.gz"
    refs = write_sample(path)
    data = path.read_bytes()
    member = gzip.decompress(data[refs[0].offset : refs[0].offset + refs[0].length])
    tampered = gzip.compress(member.replace(b"next</a>", b"NEXT</a>"))
    with pytest.raises(ArchiveLoadFailed, match="digest failed"):
        list(_records_of(tampered))


def _records_of(data: bytes) -> list[bytes]:
    return [r.raw_stream.read() for r in ArchiveIterator(io.BytesIO(data), check_digests="raise")]


# --- WarcRef -------------------------------------------------------------------------


def test_refs_match_reader_offsets(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    path, refs, records = sample
    responses = [r for r in records if r["type"] == "response"]
    assert [(ref.offset, ref.length) for ref in refs] == [
        (r["offset"], r["length"]) for r in responses
    ]
    assert [ref.record_id for ref in refs] == [r["headers"]["WARC-Record-ID"] for r in responses]
    assert {ref.file for ref in refs} == {path.name}


def test_seek_to_ref_reads_exactly_that_record(
    sample: tuple[Path, list[WarcRef], list[dict[str, Any]]],
) -> None:
    path, refs, _ = sample
    expected_bodies = [HTML_BODY, GZIP_BODY, b"\x00\x01" * 500]
    with path.open("rb") as fh:
        for ref, body in zip(refs, expected_bodies, strict=True):
            fh.seek(ref.offset)
            chunk = fh.read(ref.length)
            records = [
                (r.rec_type, r.rec_headers.get_header("WARC-Record-ID"), r.raw_stream.read())
                for r in ArchiveIterator(io.BytesIO(chunk), check_digests="raise")
            ]
            assert records == [("response", ref.record_id, body)]


# --- metadata, lifecycle, validation -----------------------------------------------------


def test_metadata_record(tmp_path: Path) -> None:
    path = tmp_path / "m.warc.gz"
    with WarcWriter(path, "trawl/0.1") as writer:
        ref = writer.write_exchange(
            url="http://example.com/",
            ip="127.0.0.1",
            fetched_at=FETCHED_AT,
            request_head=request_head("/"),
            status_line="HTTP/1.1 200 OK",
            response_headers=[],
            body=b"hi",
        )
        meta = writer.write_metadata(
            url="http://example.com/",
            fetched_at=FETCHED_AT,
            fields={"via": "http://example.org/", "fetchTimeMs": "12", "note": "two\nlines"},
            concurrent_to=ref.record_id,
        )
    records = read_records(path)
    record = records[-1]
    assert record["type"] == "metadata"
    assert (record["offset"], record["length"]) == (meta.offset, meta.length)
    assert record["headers"]["WARC-Concurrent-To"] == ref.record_id
    assert record["headers"]["Content-Type"] == "application/warc-fields"
    assert "WARC-Payload-Digest" not in record["headers"]  # metadata has no payload
    assert record["raw"] == b"via: http://example.org/\r\nfetchTimeMs: 12\r\nnote: two lines\r\n"


def test_records_written_path_and_close(tmp_path: Path) -> None:
    path = tmp_path / "w.warc.gz"
    writer = WarcWriter(str(path), "trawl/0.1")
    assert writer.path == path
    assert writer.records_written == 1  # the warcinfo record
    writer.write_exchange(
        url="http://example.com/",
        ip=None,
        fetched_at=FETCHED_AT,
        request_head=request_head("/"),
        status_line="HTTP/1.1 200 OK",
        response_headers=[],
        body=b"",
    )
    assert writer.records_written == 3
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        writer.write_metadata(url="http://example.com/", fetched_at=FETCHED_AT, fields={})
    assert len(read_records(path)) == 3


def test_fetch_time_converted_to_utc_and_naive_rejected(tmp_path: Path) -> None:
    cest = timezone(timedelta(hours=2))
    with WarcWriter(tmp_path / "t.warc.gz", "trawl/0.1") as writer:
        ref = writer.write_metadata(
            url="http://example.com/",
            fetched_at=datetime(2024, 5, 6, 9, 8, 9, tzinfo=cest),
            fields={"a": "b"},
        )
        with pytest.raises(ValueError, match="timezone-aware"):
            writer.write_metadata(
                url="http://example.com/", fetched_at=datetime(2024, 5, 6), fields={}
            )
    records = read_records(tmp_path / "t.warc.gz")
    assert records[-1]["headers"]["WARC-Date"] == "2024-05-06T07:08:09Z"
    assert records[-1]["offset"] == ref.offset


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"truncated": "too-big"}, "WARC-Truncated"),
        ({"url": "http://example.com/a b"}, "whitespace"),
        ({"url": "http://example.com/\r\nWARC-Type: x"}, "whitespace"),
        ({"ip": "not-an-ip"}, "IP"),
        ({"status_line": "  "}, "status_line"),
        ({"status_line": "200 OK"}, "status_line"),  # the HTTP version is part of it
    ],
)
def test_invalid_exchange_rejected(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    exchange: dict[str, Any] = {
        "url": "http://example.com/",
        "ip": "127.0.0.1",
        "fetched_at": FETCHED_AT,
        "request_head": request_head("/"),
        "status_line": "HTTP/1.1 200 OK",
        "response_headers": [],
        "body": b"",
    }
    with WarcWriter(tmp_path / "v.warc.gz", "trawl/0.1") as writer:
        with pytest.raises(ValueError, match=message):
            writer.write_exchange(**(exchange | kwargs))
        assert writer.records_written == 1


def test_invalid_warcinfo_field_name_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="field name"):
        WarcWriter(tmp_path / "f.warc.gz", "trawl/0.1", extra_info={"bad name": "x"})


# --- conformance samples ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "types"),
    [
        (
            "hello-world.warc.gz",
            ["warcinfo", "request", "response", "metadata", "resource", "resource"],
        ),
        (
            "example.warc.gz",
            ["warcinfo", "warcinfo", "response", "request", "revisit", "request"],
        ),
    ],
)
def test_conformance_samples_read_cleanly(name: str, types: list[str]) -> None:
    path = WARC_SAMPLES / name
    records = read_records(path)  # check_digests="raise"
    assert [r["type"] for r in records] == types
    assert all(r["digests_passed"] is not False for r in records)


def test_conformance_bad_digest_sample_is_reported() -> None:
    with (
        (WARC_SAMPLES / "example-digest.warc").open("rb") as fh,
        pytest.raises(ArchiveLoadFailed, match="digest failed"),
    ):
        for record in ArchiveIterator(fh, check_digests="raise"):
            record.raw_stream.read()


# --- revisits -------------------------------------------------------------------------


def warcio_check(*paths: Path) -> None:
    """``warcio check`` (the digest checker archive builders run) passes."""
    warcio = Path(sys.executable).with_name("warcio")
    done = subprocess.run(
        [str(warcio), "check", "-v", *map(str, paths)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "digest pass" in done.stdout and "digest fail" not in done.stdout


def test_revisit_records_of_both_profiles(tmp_path: Path) -> None:
    path = tmp_path / "r.warc.gz"
    with WarcWriter(path, "trawl/0.1") as writer:
        first = writer.write_exchange(
            url="http://example.com/a",
            ip="10.0.0.1",
            fetched_at=FETCHED_AT,
            request_head=request_head("/a"),
            status_line="HTTP/1.1 200 OK",
            response_headers=[("Content-Type", "text/html"), ("ETag", '"v1"')],
            body=HTML_BODY,
        )
        stored = Stored(first.record_id, "http://example.com/a", "2024-05-06T07:08:09.250000Z")
        dup = writer.write_revisit(
            url="http://mirror.example.com/a",
            ip="10.0.0.2",
            fetched_at=FETCHED_AT + timedelta(seconds=5),
            request_head=request_head("/a", "mirror.example.com"),
            status_line="HTTP/1.1 200 OK",
            response_headers=[("Content-Type", "text/html")],
            profile=REVISIT_IDENTICAL,
            digest=payload_digest(HTML_BODY),
            refers_to=stored,
        )
        not_modified = writer.write_revisit(
            url="http://example.com/a",
            ip="10.0.0.1",
            fetched_at=FETCHED_AT + timedelta(days=1),
            request_head=request_head("/a"),
            status_line="HTTP/1.1 304 Not Modified",
            response_headers=[("ETag", '"v1"')],
            profile=REVISIT_NOT_MODIFIED,
        )
    records = read_records(path)
    assert [r["type"] for r in records] == [
        "warcinfo", "response", "request", "revisit", "request", "revisit", "request"
    ]  # fmt: skip
    identical, nm = records[3]["headers"], records[5]["headers"]
    assert identical["WARC-Profile"] == REVISIT_IDENTICAL
    assert identical["WARC-Payload-Digest"] == records[1]["headers"]["WARC-Payload-Digest"]
    assert identical["WARC-Refers-To"] == first.record_id
    assert identical["WARC-Refers-To-Target-URI"] == "http://example.com/a"
    assert identical["WARC-Refers-To-Date"] == records[1]["headers"]["WARC-Date"]
    assert records[3]["raw"] == b""  # the block is the response head, no payload
    assert records[3]["http"].get_header("Content-Type") == "text/html"
    assert nm["WARC-Profile"] == REVISIT_NOT_MODIFIED and "WARC-Payload-Digest" not in nm
    assert "WARC-Refers-To" not in nm and records[5]["http"].get_statuscode() == "304"
    assert records[4]["headers"]["WARC-Concurrent-To"] == dup.record_id
    assert records[6]["headers"]["WARC-Concurrent-To"] == not_modified.record_id
    warcio_check(path)
    with (
        pytest.raises(ValueError, match="needs the digest"),
        WarcWriter(tmp_path / "bad.warc.gz", "trawl/0.1") as writer,
    ):
        writer.write_revisit(
                url="http://example.com/a", ip=None, fetched_at=FETCHED_AT,
                request_head=request_head("/a"), status_line="HTTP/1.1 200 OK",
                response_headers=[], profile=REVISIT_IDENTICAL,
            )  # fmt: skip


def test_metadata_fields_may_repeat(tmp_path: Path) -> None:
    path = tmp_path / "m.warc.gz"
    with WarcWriter(path, "trawl/0.1") as writer:
        writer.write_metadata(
            url="http://example.com/",
            fetched_at=FETCHED_AT,
            fields=[("outlink", "http://example.com/a"), ("outlink", "http://example.com/b")],
        )
    block = read_records(path)[1]["raw"]
    assert block == b"outlink: http://example.com/a\r\noutlink: http://example.com/b\r\n"


def test_the_demo_checks_every_warc_record(tmp_path: Path) -> None:
    from trawl.demo import warc_check

    warc_dir = tmp_path / "segments" / "s1" / "warc"
    warc_dir.mkdir(parents=True)
    write_sample(warc_dir / "trawl-s1-00000-00000.warc.gz")
    assert warc_check(tmp_path) == {
        "files": 1, "request": 3, "response": 3, "warcinfo": 1, "problems": 0,
        "warcio_check": "pass",
    }  # fmt: skip
    broken = warc_dir / "trawl-s1-00001-00000.warc.gz"
    broken.write_bytes((WARC_SAMPLES / "example-digest.warc").read_bytes())
    result = warc_check(tmp_path)
    assert result["problems"] >= 1 and result["warcio_check"] == "fail"


# --- a disk or store that refuses ------------------------------------------------


class FillingSink(io.BytesIO):
    """A file on a disk with ``room`` bytes left: a write that does not fit
    lands in part, then fails as a full disk does."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > self.room:
            super().write(bytes(data)[: self.room - self.tell()])
            raise OSError(28, "No space left on device")
        return super().write(data)


def _exchange(path: str, body: bytes = b"x" * 2000) -> dict[str, Any]:
    return {
        "url": f"http://example.com{path}", "ip": None, "fetched_at": FETCHED_AT,
        "request_head": request_head(path), "status_line": "HTTP/1.1 200 OK",
        "response_headers": [("Content-Type", "text/plain")], "body": body,
    }  # fmt: skip


def test_a_full_disk_fails_the_writer_for_good(tmp_path: Path) -> None:
    """The record that did not fit is torn: nothing more is appended after
    it, and the file is not kept by close."""
    path = tmp_path / "full.warc.gz"
    sink = FillingSink(room=2500)
    writer = WarcWriter(path, "trawl/0.1", sink=sink)
    first = writer.write_exchange(**_exchange("/a", b"small"))
    whole = sink.tell()
    with pytest.raises(ArchiveFailed, match=r"could not be written: .*No space left"):
        writer.write_exchange(**_exchange("/b", random.Random(7).randbytes(4000)))
    assert whole < sink.tell() <= 2500  # part of a record landed
    kept = sink.getvalue()
    with pytest.raises(ArchiveFailed, match="failed before: OSError"):
        writer.write_exchange(**_exchange("/c", b"small"))
    with pytest.raises(ArchiveFailed, match="is not kept"):
        writer.close()
    # what was whole before the failure reads back whole
    path.write_bytes(kept[:whole])
    records = read_records(path)
    assert [r["type"] for r in records] == ["warcinfo", "response", "request"]
    assert records[1]["offset"] == first.offset


def test_a_record_that_cannot_be_made_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """A value the format refuses fails before a byte is written: the
    writer goes on, and the file holds only whole records."""
    path = tmp_path / "bad.warc.gz"
    with WarcWriter(path, "trawl/0.1") as writer:
        writer.write_exchange(**_exchange("/a"))
        size = writer.size
        with pytest.raises(ValueError):
            writer.write_exchange(**(_exchange("/b") | {"status_line": "nonsense"}))
        assert writer.size == size
        writer.write_exchange(**_exchange("/c"))
    assert [r["type"] for r in read_records(path)] == ["warcinfo", *["response", "request"] * 2]


def test_a_file_whose_close_fails_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "closing.warc.gz"

    class Refusing(io.FileIO):
        def close(self) -> None:
            super().close()
            raise OSError(122, "Disk quota exceeded")

    writer = WarcWriter(path, "trawl/0.1", sink=Refusing(path, "wb"))
    writer.write_exchange(**_exchange("/a"))
    with pytest.raises(ArchiveFailed, match=r"could not be closed: .*quota"):
        writer.close()
    assert not path.exists()
