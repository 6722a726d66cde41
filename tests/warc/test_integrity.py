"""Tests for trawl.warc.integrity: each digest rule (algorithms, encodings,
chunked payloads, revisits) and the mandatory fields, on hand-made records
read through trawl.warc.reader."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from tests.warc.test_reader import BODY, plain_record, sha1_b32, write
from trawl.warc.reader import check_file, iter_records


def digest_record(label: str, value: str, block: bytes = b"payload") -> bytes:
    return plain_record(
        "resource", block, uri="urn:x", fields=[("WARC-Block-Digest", f"{label}:{value}")]
    )


def encode(digest: bytes, encoding: str) -> str:
    """``digest`` in one of the RFC 4648 encodings WARC writers use."""
    if encoding == "base32":
        return base64.b32encode(digest).decode()
    if encoding == "base64":
        return base64.b64encode(digest).decode()
    if encoding == "base64url":
        return base64.urlsafe_b64encode(digest).decode()
    return digest.hex().upper() if encoding == "HEX" else digest.hex()


@pytest.mark.parametrize(
    ("label", "algorithm", "encoding"),
    [
        ("sha1", "sha1", "base32"),
        ("SHA-1", "sha1", "base64"),
        ("sha256", "sha256", "base32"),
        ("sha-256", "sha256", "hex"),
        ("md5", "md5", "HEX"),
        ("sha512", "sha512", "base64url"),
    ],
)
def test_digest_algorithms_and_encodings_accepted(
    tmp_path: Path, label: str, algorithm: str, encoding: str
) -> None:
    value = encode(hashlib.new(algorithm, b"payload").digest(), encoding)
    path = write(tmp_path, "d.warc", digest_record(label, value))
    assert check_file(path) == []
    wrong = write(tmp_path, "w.warc", digest_record(label, value, b"payloaD"))
    computed = base64.b32encode(hashlib.new(algorithm, b"payloaD").digest()).decode()
    assert check_file(wrong) == [
        f"{wrong}: record at offset 0: WARC-Block-Digest {label}:{value} does not match the "
        f"bytes ({label}:{computed})"
    ]


@pytest.mark.parametrize(
    ("digest", "message"),
    [("crc32:AAAA", "unknown digest algorithm 'crc32'"), ("ABCDEF", "is not 'algorithm:value'")],
)
def test_unusable_digest_reported(tmp_path: Path, digest: str, message: str) -> None:
    record = plain_record("resource", b"x", uri="urn:x", fields=[("WARC-Block-Digest", digest)])
    path = write(tmp_path, "d.warc", record)
    [problem] = check_file(path)
    assert message in problem


def http_response(body: bytes, payload_digest: str, chunked: bool = True) -> bytes:
    coding = "Transfer-Encoding: chunked\r\n" if chunked else ""
    block = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n{coding}\r\n".encode() + body
    fields = [("WARC-Block-Digest", sha1_b32(block)), ("WARC-Payload-Digest", payload_digest)]
    return plain_record("response", block, fields=fields)


def test_payload_digest_of_chunked_body_as_stored_or_dechunked(tmp_path: Path) -> None:
    chunked = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    raw = write(tmp_path, "raw.warc", http_response(chunked, sha1_b32(chunked)))
    plain = write(tmp_path, "plain.warc", http_response(chunked, sha1_b32(b"hello world")))
    assert check_file(raw) == [] and check_file(plain) == []
    [record] = iter_records(plain)
    assert record.payload() == chunked  # the payload is the body as stored


def test_broken_chunked_body_with_wrong_digest_is_reported(tmp_path: Path) -> None:
    broken = b"5\r\nhello\r\nZZ\r\n"
    path = write(tmp_path, "b.warc", http_response(broken, sha1_b32(b"hello")))
    [problem] = check_file(path)
    assert "WARC-Payload-Digest" in problem and "no chunk size at byte 10" in problem
    short = write(tmp_path, "s.warc", http_response(b"9\r\nhello\r\n0\r\n\r\n", sha1_b32(b"x")))
    [problem] = check_file(short)
    assert "not valid chunked coding either: the chunk at byte 3 is cut short" in problem
    # Without Transfer-Encoding the body is not de-chunked at all.
    unchunked = write(
        tmp_path, "u.warc", http_response(b"hello", sha1_b32(b"hello"), chunked=False)
    )
    assert check_file(unchunked) == []


def test_revisit_payload_digest_names_the_original(tmp_path: Path) -> None:
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    fields = [("WARC-Block-Digest", sha1_b32(block)), ("WARC-Payload-Digest", sha1_b32(BODY))]
    path = write(tmp_path, "r.warc", plain_record("revisit", block, fields=fields))
    assert check_file(path) == []
    fields[0] = ("WARC-Block-Digest", sha1_b32(b"other"))
    path = write(tmp_path, "r2.warc", plain_record("revisit", block, fields=fields))
    [problem] = check_file(path)
    assert "WARC-Block-Digest" in problem and "Payload" not in problem


def test_missing_mandatory_fields_reported_only_when_verifying(tmp_path: Path) -> None:
    record = plain_record("resource", b"x", uri="urn:x").replace(b"WARC-Record-ID", b"X-Record-ID")
    path = write(tmp_path, "m.warc", record)
    assert check_file(path) == [
        f"{path}: record at offset 0: no WARC-Record-ID (mandatory, section 4)"
    ]
    assert [r.rec_type for r in iter_records(path, verify=False)] == ["resource"]
