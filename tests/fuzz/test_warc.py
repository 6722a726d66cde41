"""Fuzz trawl.warc's readers: any bytes, and any damage to a good file, give
records or a ``WarcFormatError``, never another exception.

What reads WARC bytes: ``reader.iter_records``, ``read_record`` (from bytes and
from a file, at any offset and length), ``check_file`` (which never raises at
all), ``cdxj.index_lines``, and on each record read its HTTP head, payload and
integrity checks. The inputs are arbitrary bytes, hand-made records with odd
fields and blocks, and a good file (uncompressed and one gzip member a record)
cut, bit-flipped, with bytes inserted, deleted or spliced in. Two properties
can only hold if the reader checks what it should: a file cut anywhere but
between records is an error, and so is a flipped bit in a block.
"""

from __future__ import annotations

import gzip
import itertools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from hypothesis import example
from hypothesis import strategies as st

from tests.fuzz.properties import fuzz
from tests.warc.test_reader import plain_record, request_head, sha1_b32
from trawl.warc.cdxj import index_lines
from trawl.warc.integrity import record_problems
from trawl.warc.reader import check_file, iter_records, read_record
from trawl.warc.record import WarcFormatError, WarcRecord

PAYLOAD = b"<html><body><a href='/next'>next</a></body></html>"
HTTP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(
    PAYLOAD
)
# Every record has a WARC-Block-Digest (plain_record's default fields).
GOOD_RECORDS = (
    plain_record("warcinfo", b"software: trawl-fuzz\r\n"),
    plain_record(
        "response",
        HTTP_HEAD + PAYLOAD,
        fields=[
            ("WARC-Block-Digest", sha1_b32(HTTP_HEAD + PAYLOAD)),
            ("WARC-Payload-Digest", sha1_b32(PAYLOAD)),
            ("Content-Type", "application/http; msgtype=response"),
        ],
    ),
    plain_record("request", request_head("/")),
    plain_record("metadata", b"fetchTimeMs: 12\r\n"),
)
PLAIN = b"".join(GOOD_RECORDS)
GZIPPED = b"".join(gzip.compress(record, mtime=0) for record in GOOD_RECORDS)


def ends(records: tuple[bytes, ...]) -> list[int]:
    """Where each record (or gzip member) of a file ends, 0 first."""
    out = [0]
    for record in records:
        out.append(out[-1] + len(record))
    return out


PLAIN_ENDS = ends(GOOD_RECORDS)
GZIP_ENDS = ends(tuple(gzip.compress(record, mtime=0) for record in GOOD_RECORDS))


def block_spans() -> list[tuple[int, int]]:
    """(start, end) of the block of each record of PLAIN."""
    spans = []
    for start, end in itertools.pairwise(PLAIN_ENDS):
        record = read_record(PLAIN, start, end - start)
        spans.append((start + record.length - len(record.block), start + record.length))
    return spans


BLOCK_SPANS = block_spans()


@contextmanager
def warc_file(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="trawl-fuzz-") as tmp:
        path = Path(tmp) / "fuzz.warc"
        path.write_bytes(data)
        yield path


def read_all(path: Path, verify: bool) -> list[WarcRecord] | WarcFormatError:
    """Every record of the file, or the error that stopped the reader."""
    try:
        return list(iter_records(path, verify=verify))
    except WarcFormatError as exc:
        return exc


# --- inputs -------------------------------------------------------------------------

HTTP_BLOCKS = st.builds(
    lambda line, fields, body: (
        (line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n").encode(
            "latin-1", "replace"
        )
        + body
    ),
    st.one_of(st.sampled_from(["HTTP/1.1 200 OK", "GET / HTTP/1.1", "", "HTTP/1.1"]), st.text()),
    st.lists(
        st.tuples(
            st.sampled_from(["Content-Type", "Transfer-Encoding", "X", ""]),
            st.one_of(st.just("chunked"), st.text(max_size=8)),
        ),
        max_size=3,
    ),
    st.one_of(st.binary(max_size=30), st.sampled_from([b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\n"])),
)
FIELD_VALUES = st.one_of(
    st.sampled_from(["http://a/", "<http://a/>", "https://x y/", "sha1:AAAA", "sha1:", "md5:x"]),
    st.sampled_from(["sha-1:=", "foo", "application/warc-fields", "", "2024", "not a date"]),
    st.text(max_size=10),
)
FIELD_NAMES = st.sampled_from([
    "WARC-Target-URI", "WARC-Block-Digest", "WARC-Payload-Digest", "Content-Type",
    "WARC-Segment-Number", "WARC-Date", "WARC-Record-ID", "WARC-Type",
])  # fmt: skip
FIELDS = st.lists(st.tuples(FIELD_NAMES, FIELD_VALUES), max_size=4)
HAND_MADE = st.builds(
    lambda rec_type, block, fields, length, end: plain_record(
        rec_type, block, fields=fields, content_length=length, end=end
    ),
    st.sampled_from(["response", "request", "revisit", "resource", "metadata", "warcinfo", "x"]),
    st.one_of(HTTP_BLOCKS, st.binary(max_size=20)),
    FIELDS,
    st.one_of(st.none(), st.integers(0, 60)),
    st.sampled_from([b"\r\n\r\n", b"\r\n\r\n", b"\n\n", b""]),
)
HAND_MADE_FILES = st.builds(
    lambda records, packed: b"".join(gzip.compress(r, mtime=0) if packed else r for r in records),
    st.lists(HAND_MADE, min_size=1, max_size=3),
    st.booleans(),
)
SPLICES = st.one_of(
    st.sampled_from([b"WARC/1.1\r\n", b"Content-Length: 99999999999999999999\r\n"]),
    st.sampled_from([b"Content-Length: -1\r\n", b"WARC-Type: response\r\n", b"\r\n\r\n"]),
    st.sampled_from([b"\x1f\x8b", b"\n", b"\x00" * 8]),
)


@st.composite
def damaged_files(draw: st.DrawFn) -> bytes:
    data = draw(st.sampled_from([PLAIN, GZIPPED]))
    at = draw(st.integers(0, len(data)))
    damage = draw(st.sampled_from(["cut", "flip", "insert", "delete", "splice"]))
    if damage == "cut":
        return data[:at]
    if damage == "flip":
        flipped = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            flipped[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        return bytes(flipped)
    if damage == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=20)) + data[at:]
    if damage == "delete":
        return data[:at] + data[at + draw(st.integers(1, 20)) :]
    return data[:at] + draw(SPLICES) + data[at:]


HUGE_LENGTHS = [
    b"WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: " + digits + b"\r\n\r\nabc\r\n\r\n"
    for digits in (b"99999999999999999999", b"10000000000000", b"9" * 5_000)
]

# --- properties ---------------------------------------------------------------------


@fuzz(
    st.one_of(damaged_files(), HAND_MADE_FILES, st.binary(max_size=400)),
    max_examples=200,
    deadline_ms=5_000,
)
@example(HUGE_LENGTHS[0])  # OverflowError: read() of more than sys.maxsize
@example(HUGE_LENGTHS[1])  # MemoryError: a file's read(n) allocates n bytes first
@example(HUGE_LENGTHS[2])  # ValueError: int() refuses more than 4,300 digits
def test_any_bytes_give_records_or_a_warc_format_error(data: bytes) -> None:
    with warc_file(data) as path:
        problems = check_file(path)  # never raises
        records = read_all(path, verify=False)
        verified = read_all(path, verify=True)
        with suppress(WarcFormatError):
            index_lines([path])
        # check_file finds a problem exactly when the verifying reader stops
        # or finds no record; a framing error stops both readers.
        assert bool(problems) == (isinstance(verified, WarcFormatError) or verified == [])
        if isinstance(records, WarcFormatError):
            assert isinstance(verified, WarcFormatError)
            return
        if not isinstance(verified, WarcFormatError):
            assert verified == records
        end = 0
        for record in records:
            assert record.offset >= end
            end = record.offset + record.length
            assert end <= len(data)
            record.http_head()
            record.payload()
            record_problems(record)
            # A record read from a file is read again at its offset and length.
            assert read_record(path, record.offset, record.length, verify=False) == record
    if data:
        with suppress(WarcFormatError):
            read_record(data, 0, len(data), verify=False).http_head()


@fuzz(st.booleans(), st.integers(0, max(len(PLAIN), len(GZIPPED))), max_examples=200)
@example(False, PLAIN_ENDS[2] - 2)  # inside the CRLF CRLF that ends a record
def test_a_cut_file_is_an_error_unless_cut_between_records(packed: bool, cut: int) -> None:
    data, boundaries = (GZIPPED, GZIP_ENDS) if packed else (PLAIN, PLAIN_ENDS)
    cut = min(cut, len(data))
    with warc_file(data[:cut]) as path:
        read = read_all(path, verify=True)
        problems = check_file(path)
    if cut in boundaries:
        assert not isinstance(read, WarcFormatError)
        assert len(read) == boundaries.index(cut)
        assert problems == ([] if cut else [f"{path}: holds no WARC record"])
    else:
        assert isinstance(read, WarcFormatError)
        assert problems


BLOCK_BYTES = st.sampled_from(BLOCK_SPANS).flatmap(lambda span: st.integers(span[0], span[1] - 1))


@fuzz(BLOCK_BYTES, st.integers(0, 7), max_examples=100)
def test_a_flipped_bit_in_a_block_is_reported(at: int, bit: int) -> None:
    flipped = PLAIN[:at] + bytes([PLAIN[at] ^ 1 << bit]) + PLAIN[at + 1 :]
    with warc_file(flipped) as path:
        assert isinstance(read_all(path, verify=True), WarcFormatError)
        assert any("does not match" in problem for problem in check_file(path))


@fuzz(
    st.booleans(),
    st.integers(0, len(GZIPPED) + 10),
    st.one_of(st.integers(1, len(PLAIN) + 10), st.sampled_from([10**13, 2**63])),
    max_examples=200,
)
@example(False, 0, 10**13)  # a wrong warc_ref: read(n) of a file allocates n bytes first
def test_a_record_at_any_ref_or_a_warc_format_error(packed: bool, offset: int, length: int) -> None:
    data, boundaries = (GZIPPED, GZIP_ENDS) if packed else (PLAIN, PLAIN_ENDS)
    with warc_file(data) as path:
        try:
            record = read_record(path, offset, length)
        except WarcFormatError:
            assert (offset, offset + length) not in itertools.pairwise(boundaries)
            return
    assert offset in boundaries and record.offset == offset
