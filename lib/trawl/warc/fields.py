"""The named fields and blocks of the WARC records trawl writes, checked and formatted.

``trawl.warc.writer`` assembles each record from these; every value is checked
here against WARC 1.1, so a bad value fails the write instead of landing in
the archive:

* ``WARC-Record-ID`` (section 5.2) a fresh ``urn:uuid``, as WARC tools write;
  ``WARC-Date`` (section 5.4) the given instant in UTC, sub-second as warcio
  writes for 1.1, a naive datetime refused; ``WARC-Target-URI`` (section 5.14)
  without whitespace; ``WARC-IP-Address`` (section 5.10) in the canonical
  form of :mod:`ipaddress`; ``WARC-Truncated`` (section 5.15) one of its
  reason tokens.
* Digests are SHA-1 in base32 (warcio's ``Digester``), computed from the bytes
  in memory: block digest over the whole block (section 5.8), payload digest
  over the HTTP entity body (sections 5.9, 6.3.2).
* The blocks are assembled from the bytes we have, not re-parsed by warcio:
  warcio would parse HTTP headers back out and re-serialise them
  (percent-encoding non-ASCII values), which changes the bytes. Header values
  come from the HTTP client decoded as Latin-1, so encoding them back as
  Latin-1 restores the bytes as received. A response block's head drops
  ``Transfer-Encoding``: the body stored has had its transfer coding removed
  (section 6.3.2), so the header would make readers de-chunk it again.
* ``application/warc-fields`` blocks (section 8.3), as of ``warcinfo`` and
  ``metadata`` records: ``name: value`` CRLF lines, names tokens (section 4),
  line breaks in values replaced by spaces.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from warcio.statusandheaders import StatusAndHeadersParser
from warcio.timeutils import datetime_to_iso_date
from warcio.utils import Digester

__all__ = [
    "TRUNCATION_REASONS",
    "field_name",
    "field_value",
    "ip_address",
    "new_record_id",
    "payload_digest",
    "request_payload",
    "response_head",
    "sha1_digest",
    "target_uri",
    "truncation_reason",
    "warc_date",
    "warc_fields",
]

# WARC 1.1 section 5.15 (WARC-Truncated) reason tokens.
TRUNCATION_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})

# The body we store has had any transfer coding removed (section 6.3.2: the payload
# is the entity-body "with any transfer-encoding removed"), so the header that
# announces one would make readers try to de-chunk it again.
_DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})

_FIELD_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z\-]+$")  # a token (section 4)
_NEWLINES = re.compile(r"[\r\n]+")
_STATUS_LINE = re.compile(r"^HTTP/\d(\.\d)? \d{3}( |$)")


def new_record_id() -> str:
    # Section 5.2 (WARC-Record-ID): a globally unique URI; urn:uuid as WARC tools write.
    return str(StatusAndHeadersParser.make_warc_id())


def payload_digest(payload: bytes) -> str:
    """WARC-Payload-Digest of ``payload`` (the body as stored): sha1, base32."""
    return sha1_digest(payload)


def sha1_digest(data: bytes) -> str:
    """A block or payload digest (sections 5.8, 5.9): ``sha1:`` + base32."""
    digester = Digester("sha1")
    digester.update(data)
    return str(digester)  # "sha1:" + base32, as in the section 5.8 example


def warc_date(moment: datetime) -> str:
    """Section 5.4 (WARC-Date): UTC W3C-ISO8601, sub-second as warcio writes for 1.1."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("fetched_at must be timezone-aware")
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    return str(datetime_to_iso_date(utc, use_micros=True))


def target_uri(url: str) -> str:
    # Section 5.14 (WARC-Target-URI): escaped per RFC 3986, "no internal whitespace".
    if not url or any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValueError(f"WARC-Target-URI must be a non-empty URI without whitespace: {url!r}")
    return url


def ip_address(ip: str) -> str:
    # Section 5.10 (WARC-IP-Address): dotted quad or RFC 1884 form (via ipaddress).
    return str(ipaddress.ip_address(ip.strip()))


def truncation_reason(reason: str) -> str:
    if reason not in TRUNCATION_REASONS:
        raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATION_REASONS)}: {reason!r}")
    return reason


def field_name(name: str) -> str:
    if not _FIELD_NAME.match(name):
        raise ValueError(f"not a valid WARC field name: {name!r}")
    return name


def field_value(value: str) -> str:
    return _NEWLINES.sub(" ", str(value)).strip()


def warc_fields(fields: Mapping[str, str] | Sequence[tuple[str, str]]) -> bytes:
    """An application/warc-fields block (section 8.3): ``name: value`` CRLF lines."""
    pairs = fields.items() if isinstance(fields, Mapping) else fields
    lines = (f"{field_name(k)}: {field_value(v)}\r\n" for k, v in pairs)
    return "".join(lines).encode("utf-8")


def _head_line(text: str) -> bytes:
    try:
        return text.encode("latin-1") + b"\r\n"  # the inverse of how HTTP clients decode
    except UnicodeEncodeError:
        return text.encode("utf-8") + b"\r\n"


def response_head(status_line: str, headers: Sequence[tuple[str, str]]) -> bytes:
    """Status line, headers (minus Transfer-Encoding) and the blank line, as bytes."""
    status = field_value(status_line)
    if not _STATUS_LINE.match(status):
        # Section 6.3.2: the block is the HTTP response message (RFC 9112 4: the
        # status line starts with the HTTP version); readers parse it as such.
        raise ValueError(f"status_line must look like 'HTTP/1.1 200 OK': {status_line!r}")
    lines = [status]
    for name, value in headers:
        name = field_value(name)
        if name and name.lower() not in _DROPPED_RESPONSE_HEADERS:
            lines.append(f"{name}: {field_value(value)}")
    return b"".join(_head_line(line) for line in lines) + b"\r\n"


def request_payload(request_head: bytes) -> bytes:
    """The entity-body of a request (section 6.5.2): what follows the blank line."""
    _, sep, rest = request_head.partition(b"\r\n\r\n")
    return rest if sep else b""
