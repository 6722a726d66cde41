"""Is a WARC record what its fields say? Mandatory fields and digests, checked.

``record_problems`` lists, as sentences, what ``trawl.warc.reader`` reports
with ``verify`` (and ``check_file`` always): a missing ``WARC-Record-ID`` or
``WARC-Date`` (section 4: mandatory besides the fields that frame the record),
and a ``WARC-Block-Digest`` (section 5.8, over the block) or
``WARC-Payload-Digest`` (section 5.9, over the payload) that does not match the
record's bytes.

* Labels ``sha1``, ``sha256``, ``sha512``, ``md5`` are known (with or without a
  hyphen: what warcio's ``Digester``, i.e. ``hashlib``, computes), values in
  base32 (the section 5.8 example), base16 or base64 (RFC 4648, as warcio
  accepts).
* The payload of an HTTP block is what follows the HTTP head; when the head
  says ``Transfer-Encoding: chunked`` a digest of the de-chunked body (RFC 9112
  7.1) is accepted too (section 6.3.2 says "with any transfer-encoding
  removed", while warcio and most writers digest the bytes as stored).
* A revisit's payload digest names the record it revisits (section 6.7.2), and
  a segment's covers the whole payload (section 7), so neither is checked
  against the record's own bytes.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Iterator

from trawl.warc.record import WarcRecord

__all__ = ["record_problems"]

# Section 4: mandatory fields besides WARC-Type and Content-Length, which frame the record.
_MANDATORY_FIELDS = ("WARC-Record-ID", "WARC-Date")

_DIGEST_ALGORITHMS = frozenset({"sha1", "sha256", "sha512", "md5"})  # hashlib names
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]+")  # RFC 9112 7.1: chunk-size = 1*HEXDIG


def record_problems(record: WarcRecord) -> list[str]:
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
