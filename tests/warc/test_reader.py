"""Tests for trawl.warc.reader: the conformance WARC samples (good ones read, broken
ones reported with the reason), files our WarcWriter writes read back record by
record and at every offset, and hand-made records for each digest and framing rule."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from trawl.warc.reader import check_file, iter_records, read_record
from trawl.warc.record import WarcFormatError
from trawl.warc.writer import REVISIT_IDENTICAL, Stored, WarcRef, WarcWriter

FETCHED_AT = datetime(2024, 5, 6, 7, 8, 9, 250_000, tzinfo=UTC)
BODY = b"<html><body><a href='/next'>next</a></body></html>"

GOOD_SAMPLES = {
    "hello-world.warc": ["warcinfo", "request", "response", "metadata", "resource", "resource"],
    "hello-world.warc.gz": ["warcinfo", "request", "response", "metadata", "resource", "resource"],
    "example.warc.gz": ["warcinfo", "warcinfo", "response", "request", "revisit", "request"],
}


@pytest.fixture(scope="module")
def samples(conformance: Path) -> Path:
    return conformance / "warc_samples"


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def plain_record(
    rec_type: str,
    block: bytes,
    *,
    uri: str = "http://example.com/",
    fields: list[tuple[str, str]] | None = None,
    content_length: int | None = None,
    end: bytes = b"\r\n\r\n",
) -> bytes:
    """An uncompressed WARC/1.1 record; ``fields`` replace the default digests."""
    head = [
        ("WARC-Type", rec_type),
        ("WARC-Record-ID", "<urn:uuid:12345678-1234-1234-1234-123456789abc>"),
        ("WARC-Date", "2024-05-06T07:08:09Z"),
        ("WARC-Target-URI", uri),
        *(fields if fields is not None else [("WARC-Block-Digest", sha1_b32(block))]),
        ("Content-Length", str(len(block) if content_length is None else content_length)),
    ]
    text = "WARC/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head) + "\r\n"
    return text.encode("utf-8") + block + end


def write(tmp_path: Path, name: str, *records: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(records))
    return path


def request_head(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: example.com\r\nUser-Agent: trawl/0.1\r\n\r\n".encode()


def write_crawl(path: Path) -> list[WarcRef]:
    """A response (chunked on the wire), a 404, a revisit and a metadata record."""
    with WarcWriter(path, "trawl/0.1", extra_info={"isPartOf": "seg-1"}) as writer:
        page = writer.write_exchange(
            url="http://example.com/",
            ip="93.184.216.34",
            fetched_at=FETCHED_AT,
            request_head=request_head("/"),
            status_line="HTTP/1.1 200 OK",
            response_headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
            body=BODY,
        )
        missing = writer.write_exchange(
            url="http://example.com/gone",
            ip=None,
            fetched_at=FETCHED_AT + timedelta(seconds=1),
            request_head=request_head("/gone"),
            status_line="HTTP/1.1 404 Not Found",
            response_headers=[("Content-Type", "text/plain")],
            body=b"not here",
        )
        revisit = writer.write_revisit(
            url="http://example.com/copy",
            ip=None,
            fetched_at=FETCHED_AT + timedelta(seconds=2),
            request_head=request_head("/copy"),
            status_line="HTTP/1.1 200 OK",
            response_headers=[("Content-Type", "text/html")],
            profile=REVISIT_IDENTICAL,
            digest=sha1_b32(BODY),
            refers_to=Stored(page.record_id, "http://example.com/", "2024-05-06T07:08:09.250000Z"),
        )
        meta = writer.write_metadata(
            url="http://example.com/",
            fetched_at=FETCHED_AT,
            fields={"fetchTimeMs": "12"},
            concurrent_to=page.record_id,
        )
    return [page, missing, revisit, meta]


# --- conformance samples -----------------------------------------------------------


@pytest.mark.parametrize(("name", "types"), GOOD_SAMPLES.items())
def test_good_samples_read_cleanly(samples: Path, name: str, types: list[str]) -> None:
    records = list(iter_records(samples / name))  # verify=True: digests checked
    assert [r.rec_type for r in records] == types
    assert all(r.version == "WARC/1.0" for r in records)
    assert check_file(samples / name) == []


def test_uncompressed_spans_are_those_of_the_reference_cdx(samples: Path) -> None:
    # hello-world.warc.cdx (CDX N b a m s k r M S V g): url, length, offset, filename.
    rows = [line.split() for line in (samples / "hello-world.warc.cdx").read_text().splitlines()]
    by_offset = {r.offset: r for r in iter_records(samples / "hello-world.warc")}
    expected = [(r[2], int(r[8]), int(r[9])) for r in rows[1:] if r[10] == "hello-world.warc"]
    assert len(expected) == 4
    for url, length, offset in expected:
        assert by_offset[offset].length == length
        assert by_offset[offset].target_uri == url


@pytest.mark.parametrize("name", ["hello-world.warc.gz", "example.warc.gz"])
def test_gzip_spans_are_the_members_and_tile_the_file(samples: Path, name: str) -> None:
    data = (samples / name).read_bytes()
    records = list(iter_records(samples / name))
    assert records[0].offset == 0
    for record, after in zip(records, [*records[1:], None], strict=True):
        member = gzip.decompress(data[record.offset : record.offset + record.length])
        assert member.startswith(b"WARC/1.0\r\n") and member.endswith(record.block + b"\r\n\r\n")
        end = after.offset if after is not None else len(data)
        assert record.offset + record.length == end


@pytest.mark.parametrize("name", GOOD_SAMPLES)
def test_read_record_at_every_offset_of_the_samples(samples: Path, name: str) -> None:
    path = samples / name
    data = path.read_bytes()
    records = list(iter_records(path))
    with path.open("rb") as fh:
        for record in records:
            assert read_record(path, record.offset, record.length) == record
            assert read_record(data, record.offset, record.length) == record
            assert read_record(fh, record.offset, record.length) == record


def test_bad_digest_sample_is_reported(samples: Path) -> None:
    path = samples / "example-digest.warc"
    problems = check_file(path)
    assert len(problems) == 1
    assert "record at offset 0:" in problems[0]
    assert "WARC-Payload-Digest sha1:1112H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ does not match" in problems[0]
    with pytest.raises(WarcFormatError, match="offset 0: WARC-Payload-Digest") as caught:
        list(iter_records(path))
    assert caught.value.file == str(path) and caught.value.offset == 0
    records = list(iter_records(path, verify=False))
    assert [r.rec_type for r in records] == ["request"] * 4
    # The other three carry the same digests in base64 and URL-safe base64 (RFC 4648).
    for record in records[1:]:
        assert read_record(path, record.offset, record.length, verify=True) == record


def test_record_split_over_gzip_members_is_reported(samples: Path) -> None:
    # example-wrong-chunks.warc.gz: the record's head, HTTP body and CRLF CRLF
    # are three gzip members.
    path = samples / "example-wrong-chunks.warc.gz"
    problems = check_file(path)
    assert problems == [
        f"{path}: record at offset 0: its gzip member ends inside the record: "
        "the block has 343 of its Content-Length 1613 bytes"
    ]
    with pytest.raises(WarcFormatError, match="gzip member ends inside the record"):
        list(iter_records(path, verify=False))
    with pytest.raises(WarcFormatError, match="ends inside the record"):
        read_record(path, 0, 516)


def test_whole_file_gzip_is_reported(samples: Path) -> None:
    # example-bad-non-chunked.warc.gz: all records in one gzip member.
    path = samples / "example-bad-non-chunked.warc.gz"
    problems = check_file(path)
    assert len(problems) == 1 and "offset 0" in problems[0]
    assert "gzip member holds more than one record" in problems[0]
    with pytest.raises(WarcFormatError, match="more than one record"):
        next(iter_records(path, verify=False))
    with pytest.raises(WarcFormatError, match="more than one record"):
        read_record(path, 0, path.stat().st_size)


def test_error_is_a_value_error() -> None:
    error = WarcFormatError("a.warc.gz", 17, "bad")
    assert isinstance(error, ValueError)
    assert str(error) == "a.warc.gz: record at offset 17: bad"


# --- our writer, read back ---------------------------------------------------------


def test_writer_output_reads_back_record_for_record(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    page, missing, revisit, meta = write_crawl(path)
    records = list(iter_records(path))
    assert [r.rec_type for r in records] == [
        "warcinfo", "response", "request", "response", "request", "revisit", "request", "metadata"
    ]  # fmt: skip
    by_offset = {r.offset: r for r in records}
    for ref in (page, missing, revisit, meta):
        assert by_offset[ref.offset].length == ref.length
        assert by_offset[ref.offset].header("WARC-Record-ID") == ref.record_id
    response = by_offset[page.offset]
    assert response.headers[0] == ("WARC-Type", "response")
    assert response.block == b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + BODY
    assert response.payload() == BODY
    head = response.http_head()
    assert head is not None and head.status == "200" and head.header("content-type") == "text/html"
    assert by_offset[missing.offset].http_head().status == "404"  # type: ignore[union-attr]
    assert by_offset[revisit.offset].payload() == b""
    assert by_offset[meta.offset].payload() == b"fetchTimeMs: 12\r\n"
    assert by_offset[meta.offset].http_head() is None
    assert check_file(path) == []


def test_read_record_at_every_offset_of_writer_output(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    write_crawl(path)
    for record in iter_records(path):
        assert read_record(path, record.offset, record.length) == record


def test_read_record_rejects_spans_that_are_not_one_record(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    page, missing, *_ = write_crawl(path)
    size = path.stat().st_size
    wrong = [
        (page.offset, page.length - 1, "end inside a gzip member"),
        (page.offset, page.length + 1, "1 bytes follow the gzip member"),
        # repr() quotes the bytes with " when they hold a ' (random record ids)
        (page.offset + 1, page.length, r"not a WARC record: it starts b['\"]\\x8b"),
        (page.offset, missing.offset + missing.length - page.offset, "bytes follow the gzip"),
        (size - 10, 20, "only 10 of 20 bytes"),
    ]
    for offset, length, message in wrong:
        with pytest.raises(WarcFormatError, match=message):
            read_record(path, offset, length)
    with pytest.raises(ValueError, match="offset >= 0"):
        read_record(path, -1, 10)


def test_read_record_uncompressed_span_with_or_without_record_end(tmp_path: Path) -> None:
    first = plain_record("resource", b"hello", uri="urn:x:1")
    second = plain_record("resource", b"world", uri="urn:x:2")
    path = write(tmp_path, "two.warc", first, second)
    records = list(iter_records(path))
    assert [(r.offset, r.length) for r in records] == [
        (0, len(first) - 4),
        (len(first), len(second) - 4),
    ]
    assert read_record(path, 0, len(first) - 4) == records[0]
    assert read_record(path, 0, len(first)).block == b"hello"  # CRLF CRLF included
    for length, message in [(len(first) - 5, "ends inside"), (len(first) + 4, "bytes follow")]:
        with pytest.raises(WarcFormatError, match=message):
            read_record(path, 0, length)
    with pytest.raises(WarcFormatError, match="not a WARC record"):
        read_record(path, 1, len(first) - 4)


def test_tampered_body_is_reported_at_its_record(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    page, *_ = write_crawl(path)
    data = path.read_bytes()
    member = gzip.decompress(data[page.offset : page.offset + page.length])
    tampered = gzip.compress(member.replace(b"next</a>", b"NEXT</a>"))
    path.write_bytes(data[: page.offset] + tampered + data[page.offset + page.length :])
    where = f"{path}: record at offset {page.offset}: "
    block, payload = check_file(path)
    assert block.startswith(where + "WARC-Block-Digest sha1:")
    assert payload.startswith(where + "WARC-Payload-Digest " + sha1_b32(BODY) + " does not match")
    with pytest.raises(WarcFormatError, match=f"offset {page.offset}: WARC-Block-Digest"):
        list(iter_records(path))
    assert len(list(iter_records(path, verify=False))) == 8


# --- framing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (plain_record("resource", b"hello", content_length=4), "not followed by CRLF CRLF"),
        (plain_record("resource", b"hello", content_length=20), "the file ends inside the record"),
        (plain_record("resource", b"hello", end=b"\r\n"), "not followed by CRLF CRLF"),
        (plain_record("resource", b"x").replace(b"Length: 1", b"Length: 1x"), "not a number"),
        (plain_record("resource", b"x").replace(b"Content-Length", b"Size"), "no Content-Length"),
        (plain_record("resource", b"x").replace(b"WARC-Type", b"Type"), "no WARC-Type"),
        (b"<!doctype html>\n<html></html>\n", "not a WARC record: it starts b'<!doctype html>\\n'"),
    ],
)
def test_framing_errors_reported(tmp_path: Path, record: bytes, message: str) -> None:
    info = plain_record("warcinfo", b"a: b\r\n", uri="urn:x")
    path = write(tmp_path, "f.warc", info, record)
    problems = check_file(path)
    assert len(problems) == 1 and f"record at offset {len(info)}:" in problems[0]
    assert message in problems[0]
    with pytest.raises(WarcFormatError, match=re.escape(message)):
        list(iter_records(path, verify=False))


def test_blank_lines_between_uncompressed_records_are_skipped(tmp_path: Path) -> None:
    first = plain_record("resource", b"a", uri="urn:x:1")
    path = write(
        tmp_path, "b.warc", first, b"\r\n\r\n", plain_record("resource", b"b", uri="urn:x:2")
    )
    assert [r.offset for r in iter_records(path)] == [0, len(first) + 4]


def test_truncated_gzip_and_empty_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    *_, meta = write_crawl(path)
    cut = write(tmp_path, "cut.warc.gz", path.read_bytes()[:-5])
    assert check_file(cut) == [
        f"{cut}: record at offset {meta.offset}: the file ends inside a gzip member"
    ]
    empty = write(tmp_path, "empty.warc")
    assert check_file(empty) == [f"{empty}: holds no WARC record"]
    assert list(iter_records(empty)) == []
    [problem] = check_file(tmp_path / "nothing.warc.gz")
    assert "cannot be read" in problem


# --- sources -------------------------------------------------------------------------


def test_read_record_from_a_stream(tmp_path: Path) -> None:
    data = plain_record("resource", b"hello", uri="urn:x")
    stream = io.BytesIO(b"junk" + data)
    record = read_record(stream, 4, len(data))
    assert record.block == b"hello" and record.offset == 4
