"""Tests for trawl.warc.cdxj: byte-for-byte the output of the cdxj-indexer 1.5.0 CLI
(run from the virtualenv) on the conformance samples, on files our WarcWriter
writes, on warcio-written revisit/resource/metadata records and on hand-made
records for its corner cases; and merging sorted indexes."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from trawl.warc.cdxj import index_lines, merge_indexes, merge_lines, write_index
from trawl.warc.reader import iter_records
from trawl.warc.writer import REVISIT_IDENTICAL, REVISIT_NOT_MODIFIED, Stored, WarcWriter

CDXJ_INDEXER = Path(sys.executable).parent / "cdxj-indexer"
GOOD_SAMPLES = ["hello-world.warc", "hello-world.warc.gz", "example.warc.gz"]
FETCHED_AT = datetime(2024, 5, 6, 7, 8, 9, 250_000, tzinfo=UTC)
HTML = b"<html><body>hello</body></html>"


def cli(*args: str | Path) -> bytes:
    """What ``cdxj-indexer ARGS`` prints."""
    done = subprocess.run(
        [str(CDXJ_INDEXER), *map(str, args)], capture_output=True, check=True, timeout=120
    )
    return done.stdout


def as_output(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def request_head(target: str, host: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: trawl/0.1\r\n\r\n".encode()


# --- WARC files to index -------------------------------------------------------------


def exchange(
    writer: WarcWriter,
    url: str,
    status: str,
    headers: list[tuple[str, str]],
    body: bytes,
    seconds: int,
) -> Stored:
    host, _, target = url.split("://", 1)[1].partition("/")
    ref = writer.write_exchange(
        url=url,
        ip="10.0.0.1",
        fetched_at=FETCHED_AT + timedelta(seconds=seconds),
        request_head=request_head("/" + target, host),
        status_line=status,
        response_headers=headers,
        body=body,
    )
    writer.write_metadata(
        url=url,
        fetched_at=FETCHED_AT + timedelta(seconds=seconds),
        fields={"fetchTimeMs": "7"},
        concurrent_to=ref.record_id,
    )
    date = FETCHED_AT + timedelta(seconds=seconds)
    return Stored(ref.record_id, url, date.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def write_crawl(path: Path, indexed: list[str] | None = None) -> Path:
    """Our writer: pages, a 404, a redirect, odd URLs, revisits, metadata.
    ``indexed``: gets the lines the writer indexed as it wrote."""
    writer = WarcWriter(path, "trawl/0.1", extra_info={"isPartOf": "seg-1"}, index=True)
    with writer:
        page = exchange(
            writer,
            "http://example.com/",
            "HTTP/1.1 200 OK",
            [("Content-Type", "text/html; charset=utf-8")],
            HTML,
            0,
        )
        exchange(writer, "http://example.com/gone", "HTTP/1.1 404 Not Found", [], b"no", 1)
        exchange(
            writer,
            "http://example.com/old",
            "HTTP/1.1 301 Moved Permanently",
            [("Location", "http://example.com/new"), ("Content-Type", "text/html")],
            b"",
            2,
        )
        exchange(
            writer,
            "https://Example.COM:443/Search?q=Web+Crawler&b=2&a=1#frag",
            "HTTP/1.1 200 OK",
            [("Content-Type", "application/json")],
            b"{}",
            3,
        )
        exchange(
            writer,
            "http://www.bücher.example/straße?q=über",
            "HTTP/1.1 200 OK",
            [("Content-Type", "text/plain")],
            "grüße".encode(),
            4,
        )
        exchange(
            writer,
            "http://example.com/%7Euser/a%20b?x=%C3%BC",
            "HTTP/1.1 200 OK",
            [("content-type", "TEXT/HTML")],
            HTML,
            5,
        )
        writer.write_revisit(
            url="http://mirror.example.com/",
            ip=None,
            fetched_at=FETCHED_AT + timedelta(seconds=6),
            request_head=request_head("/", "mirror.example.com"),
            status_line="HTTP/1.1 200 OK",
            response_headers=[("Content-Type", "text/html")],
            profile=REVISIT_IDENTICAL,
            digest=sha1_b32(HTML),
            refers_to=page,
        )
        writer.write_revisit(
            url="http://example.com/",
            ip=None,
            fetched_at=FETCHED_AT + timedelta(days=1),
            request_head=request_head("/", "example.com"),
            status_line="HTTP/1.1 304 Not Modified",
            response_headers=[],
            profile=REVISIT_NOT_MODIFIED,
        )
    if indexed is not None:
        indexed.extend(writer.index_lines)
    return path


def write_warcio_records(path: Path) -> Path:
    """warcio's writer: revisits with and without an HTTP head, resource, metadata."""
    dated = {"WARC-Date": "2024-05-07T00:00:00.5Z"}
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    with path.open("wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="WARC/1.1")

        def record(uri: str, rec_type: str, payload: bytes, content_type: str) -> Any:
            return writer.create_warc_record(
                uri, rec_type, payload=BytesIO(payload), length=len(payload),
                warc_content_type=content_type, warc_headers_dict=dated,
            )  # fmt: skip

        records = [
            writer.create_revisit_record(
                "http://example.com/", sha1_b32(HTML), "http://example.com/",
                "2024-05-06T07:08:09Z", http_headers=http, warc_headers_dict=dated,
            ),
            writer.create_revisit_record(
                "http://example.com/bare", sha1_b32(HTML), "http://example.com/bare",
                "2024-05-06T07:08:09Z", warc_headers_dict=dated,
            ),
            record("http://example.com/robots.txt", "resource", b"User-agent: *\n", "text/plain"),
            record("http://example.com/", "metadata", b'{"a": 1}', "application/json"),
            record("http://example.com/", "metadata", b"a: 1\r\n", "application/warc-fields"),
            record("dns:example.com", "response", b"20240506070809\nexample.com. A", "text/dns"),
        ]  # fmt: skip
        for each in records:
            writer.write_record(each)
    return path


def plain_record(rec_type: str, uri: str, block: bytes, fields: list[tuple[str, str]]) -> bytes:
    head = [
        ("WARC-Type", rec_type),
        ("WARC-Record-ID", f"<urn:uuid:{hashlib.md5(block + uri.encode()).hexdigest()}>"),
        ("WARC-Date", "2024-05-06T07:08:09.123456Z"),
        ("WARC-Target-URI", uri),
        *fields,
        ("Content-Length", str(len(block))),
    ]
    text = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head) + "\r\n"
    return text.encode("utf-8") + block + b"\r\n\r\n"


def write_corner_cases(path: Path) -> Path:
    """Records warcio and cdxj-indexer treat specially, uncompressed."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + HTML
    records = [
        # No WARC-Payload-Digest: cdxj-indexer computes one over the HTTP body.
        plain_record("response", "http://example.com/nodigest", ok, []),
        # Resource without digest: over the whole block.
        plain_record(
            "resource",
            "http://example.com/r",
            b"resource body",
            [("Content-Type", "text/plain ;x")],
        ),
        # Revisit without digest: none computed.
        plain_record("revisit", "http://example.com/", b"HTTP/1.0 304 Not Modified\r\n\r\n", []),
        # Wget 1.19 angle brackets and a space in the target URI.
        plain_record("response", "<http://example.com/wget>", ok, []),
        plain_record("response", "http://example.com/a b", ok, []),
        # An empty Content-Type and a status line without a reason phrase.
        plain_record(
            "response", "http://example.com/empty", b"HTTP/1.1 204\r\nContent-Type:\r\n\r\n", []
        ),
        # A block that starts with a blank line: no HTTP head for warcio.
        plain_record("response", "http://example.com/blank", b"\r\nbody", []),
        # Not exactly application/warc-fields, so indexed.
        plain_record(
            "metadata",
            "http://example.com/",
            b"a: 1\r\n",
            [("Content-Type", "application/warc-fields; charset=utf-8")],
        ),
        # Request and warcinfo records are never indexed.
        plain_record("request", "http://example.com/", b"GET / HTTP/1.1\r\n\r\n", []),
        plain_record(
            "warcinfo", "", b"software: x\r\n", [("Content-Type", "application/warc-fields")]
        ),
    ]
    path.write_bytes(b"".join(records))
    return path


@pytest.fixture
def warcs(tmp_path: Path) -> list[Path]:
    return [
        write_crawl(tmp_path / "trawl-seg-1-00000-00000.warc.gz"),
        write_warcio_records(tmp_path / "warcio.warc.gz"),
        write_corner_cases(tmp_path / "corners.warc"),
    ]


# --- byte for byte -------------------------------------------------------------------


@pytest.mark.parametrize("name", GOOD_SAMPLES)
def test_conformance_samples_as_cdxj_indexer(conformance: Path, name: str) -> None:
    path = conformance / "warc_samples" / name
    assert as_output(index_lines([path])) == cli(path)
    assert as_output(index_lines([path], sort=True)) == cli("-s", path)


def test_all_conformance_samples_at_once(conformance: Path) -> None:
    paths = [conformance / "warc_samples" / name for name in GOOD_SAMPLES]
    assert as_output(index_lines(paths)) == cli(*paths)
    assert as_output(index_lines(paths, sort=True)) == cli("-s", *paths)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_written_files_as_cdxj_indexer(warcs: list[Path], which: int) -> None:
    path = warcs[which]
    lines = index_lines([path])
    assert as_output(lines) == cli(path)
    assert as_output(index_lines([path], sort=True)) == cli("-s", path)
    assert len(lines) == [8, 5, 8][which]  # every response, revisit, non-warc-fields record


def test_what_is_indexed_from_our_writer(warcs: list[Path]) -> None:
    lines = index_lines(warcs[:1])
    assert lines[0].startswith('com,example)/ 20240506070809 {"url": "http://example.com/", ')
    assert '"mime": "text/html", "status": "200", "digest": "' + sha1_b32(HTML) in lines[0]
    assert ' {"url": "http://example.com/gone", "status": "404", ' in lines[1]
    assert '"status": "301"' in lines[2]
    assert lines[3].startswith("com,example)/search?a=1&b=2&q=web+crawler 20240506070812 ")
    assert r'"url": "http://www.b\u00fccher.example/stra\u00dfe?q=\u00fcber"' in lines[4]
    assert '"mime": "warc/revisit", "status": "200", "digest": "' + sha1_b32(HTML) in lines[6]
    assert '"status": "304", "length"' in lines[7]  # no digest on a 304 revisit


def test_many_files_at_once_and_repeated(warcs: list[Path]) -> None:
    paths = [*warcs, warcs[0]]  # a file twice: sorting drops the repeated lines
    assert as_output(index_lines(paths)) == cli(*paths)
    assert as_output(index_lines(paths, sort=True)) == cli("-s", *paths)
    assert len(index_lines(paths, sort=True)) == len(index_lines(warcs))


def test_write_index_as_cdxj_indexer_output_file(warcs: list[Path], tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.cdxj", tmp_path / "theirs.cdxj"
    assert write_index(warcs, ours) == 21
    cli("-o", theirs, *warcs)
    assert ours.read_bytes() == theirs.read_bytes()
    write_index(warcs, ours, sort=True)
    cli("-s", "-o", theirs, *warcs)
    assert ours.read_bytes() == theirs.read_bytes()
    assert not (tmp_path / "ours.cdxj.tmp").exists()


def test_filenames_as_dir_root_gives_them(warcs: list[Path], tmp_path: Path) -> None:
    names = [p.relative_to(tmp_path.parent).as_posix() for p in warcs]
    assert names[0].endswith("/trawl-seg-1-00000-00000.warc.gz")
    assert as_output(index_lines(warcs, names)) == cli("--dir-root", tmp_path.parent, *warcs)
    with pytest.raises(ValueError, match="2 filenames for 3 paths"):
        index_lines(warcs, names[:2])


# --- merge ---------------------------------------------------------------------------


def test_merge_equals_indexing_all_at_once(warcs: list[Path], tmp_path: Path) -> None:
    parts = []
    for number, path in enumerate([*warcs, warcs[0]]):
        part = tmp_path / f"part-{number}.cdxj"
        write_index([path], part, sort=True)
        parts.append(part)
    merged = tmp_path / "merged.cdxj"
    assert merge_indexes(parts, merged) == 21
    assert merged.read_bytes() == cli("-s", *warcs)
    assert merged.read_bytes() == as_output(index_lines(warcs, sort=True))


def test_merge_of_conformance_samples(conformance: Path, tmp_path: Path) -> None:
    paths = [conformance / "warc_samples" / name for name in GOOD_SAMPLES]
    parts = [tmp_path / f"{p.name}.cdxj" for p in paths]
    for path, part in zip(paths, parts, strict=True):
        part.write_bytes(cli("-s", path))
    merge_indexes(parts, tmp_path / "all.cdxj")
    assert (tmp_path / "all.cdxj").read_bytes() == cli("-s", *paths)


def test_merge_refuses_unsorted_input(warcs: list[Path], tmp_path: Path) -> None:
    unsorted = tmp_path / "unsorted.cdxj"
    write_index(warcs[:1], unsorted)
    assert index_lines(warcs[:1]) != index_lines(warcs[:1], sort=True)
    with pytest.raises(ValueError, match=r"unsorted.cdxj:\d+: index is not sorted"):
        merge_indexes([unsorted], tmp_path / "out.cdxj")
    assert not (tmp_path / "out.cdxj").exists()


# --- indexed as written ------------------------------------------------------------


def test_a_writer_indexes_its_records_as_reading_the_file_back_would(tmp_path: Path) -> None:
    indexed: list[str] = []
    path = write_crawl(tmp_path / "trawl-seg-1-00000-00000.warc.gz", indexed)
    assert indexed == index_lines([path], sort=True)
    assert len(indexed) == 8  # six responses and two revisits; no request, metadata, warcinfo


def test_records_copied_whole_are_indexed_as_written_too(tmp_path: Path) -> None:
    """``append_member``: members of another writer's file (warcio's, with
    revisits, resources and metadata records of both kinds) copied byte for
    byte, indexed at their new offsets."""
    source = write_warcio_records(tmp_path / "warcio.warc.gz")
    data = source.read_bytes()
    with WarcWriter(tmp_path / "copy.warc.gz", "trawl/0.1", index=True) as writer:
        for record in iter_records(source, verify=False):
            writer.append_member(data[record.offset : record.offset + record.length])
    assert writer.index_lines == index_lines([tmp_path / "copy.warc.gz"], sort=True)
    assert len(writer.index_lines) == 5  # all but the warc-fields metadata record


def test_a_writer_without_index_keeps_no_lines(tmp_path: Path) -> None:
    with WarcWriter(tmp_path / "plain.warc.gz", "trawl/0.1") as writer:
        exchange(writer, "http://example.com/", "HTTP/1.1 200 OK", [], HTML, 0)
    assert writer.index_lines == []


def test_files_indexed_apart_merge_into_the_index_of_them_all(
    warcs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "merged.cdxj"
    parts = [index_lines([w], sort=True) for w in [*warcs, warcs[0]]]  # one file twice
    assert merge_lines(parts, out) == len(index_lines(warcs, sort=True))
    assert out.read_text().splitlines() == index_lines(warcs, sort=True)
