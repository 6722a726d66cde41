"""What a GET sends: the request target, the header fields, the head's bytes.

``parse_target(url)`` splits a URL into where to connect (scheme, host, port)
and what to send: the ``Host`` field value (RFC 9110 7.2, port only when not
the default) and the origin-form request-target (RFC 9112 3.2.1: path and
query, an empty query kept, no fragment), percent-encoding what may not
appear in one (RFC 3986 2.1, 2.5) while keeping existing escapes as they are.
A URL that cannot be fetched is ``FetchError("invalid_url")``.

``request_fields`` lists the fields in the order they go on the wire, Host
first; a caller's extra fields (e.g. If-None-Match) replace ours of the same
name, but may not set Host, the framing fields or Proxy-Authorization. ``request_head`` gives the
request line and fields byte for byte as ``trawl.net.client`` sends them
through ``http.client``'s ``putrequest(skip_host=True,
skip_accept_encoding=True)`` (urllib3's pool would add a User-Agent and
re-encode the target, ``%2f`` -> ``%2F``), so the WARC request record holds
exactly what was sent. Field names must be tokens and values free of CR, LF
and NUL (RFC 9110 5.5, 5.6.2), checked before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from trawl.net.response import FetchError

__all__ = [
    "DEFAULT_ACCEPT",
    "Target",
    "check_field",
    "parse_target",
    "request_fields",
    "request_head",
    "user_agent_string",
]

DEFAULT_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.6.2
_BAD_VALUE = re.compile(r"[\r\n\x00]")  # RFC 9110 5.5: no CR, LF or NUL in a field value
# the target, the framing, and the proxy's credentials (trawl.net.proxy adds them)
_CALLER_MAY_NOT_SET = {"host", "content-length", "transfer-encoding", "proxy-authorization"}


def user_agent_string(agent_name: str, version: str, contact_url: str | None) -> str:
    """``name/version (+contact)``: a product token plus a comment (RFC 9110 10.1.5)."""
    if not _TOKEN.fullmatch(agent_name) or not _TOKEN.fullmatch(version):
        raise ValueError(f"agent name and version must be tokens: {agent_name!r} {version!r}")
    if not contact_url:
        return f"{agent_name}/{version}"
    if re.search(r"[()\\\x00-\x1f\x7f]", contact_url):  # RFC 9110 5.6.5 comment text
        raise ValueError(f"contact URL not allowed in a comment: {contact_url!r}")
    return f"{agent_name}/{version} (+{contact_url})"


@dataclass(frozen=True)
class Target:
    """What a URL means for the request: where to connect and what to send."""

    scheme: str
    host: str  # lower-case, IPv6 without brackets: for SNI and certificate checks
    port: int
    authority: str  # the Host field value (RFC 9110 7.2): port only if not the default
    request_target: str  # origin-form (RFC 9112 3.2.1): path and query, no fragment


def parse_target(url: str) -> Target:
    """Split ``url`` for a request; ``FetchError("invalid_url")`` if it cannot be fetched."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError("invalid_url", f"{url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in _DEFAULT_PORTS or not host or not host.isascii():
        raise FetchError("invalid_url", f"not an http(s) URL with an ASCII host: {url!r}")
    default = _DEFAULT_PORTS[scheme]
    port = default if port is None else port
    literal = f"[{host}]" if ":" in host else host
    authority = literal if port == default else f"{literal}:{port}"
    target = parts.path or "/"
    if "?" in url.partition("#")[0]:  # keep an empty query ("/a?"): RFC 3986 6.2.3
        target += "?" + parts.query
    return Target(scheme, host, port, authority, _encode_target(target))


def _encode_target(target: str) -> str:
    """Percent-encode what may not appear in a request-target (RFC 3986 2.1, 2.5):
    controls, space, DEL and non-ASCII (as UTF-8). Existing escapes are kept."""
    if all("!" <= ch <= "~" for ch in target):
        return target
    return "".join(
        ch if "!" <= ch <= "~" else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
        for ch in target
    )


def check_field(name: str, value: str) -> None:
    """``ValueError`` unless ``name: value`` is a field ``http.client`` may send as is."""
    if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
        raise ValueError(f"invalid request header {name!r}: {value!r}")
    value.encode("latin-1")  # http.client sends values as ISO-8859-1 (RFC 9110 5.5)


def request_fields(
    target: Target, ours: Sequence[tuple[str, str]], extra: Mapping[str, str] | None
) -> list[tuple[str, str]]:
    """Host, then ``ours``, then ``extra``: a name in ``extra`` that is also in
    ``ours`` replaces it in place; Host and framing fields are refused."""
    fields = [("Host", target.authority), *ours]  # RFC 9112 3.2: first, as clients usually do
    for name, value in (extra or {}).items():
        check_field(name, value)
        if name.lower() in _CALLER_MAY_NOT_SET:
            raise ValueError(f"extra_headers may not set {name}")
        same = [i for i, (have, _) in enumerate(fields) if have.lower() == name.lower()]
        if same:
            fields[same[0]] = (name, value)
        else:
            fields.append((name, value))
    return fields


def request_head(request_target: str, fields: list[tuple[str, str]]) -> bytes:
    """The bytes ``http.client`` puts on the wire for this request (RFC 9112 2.1, 3)."""
    lines = [f"GET {request_target} HTTP/1.1", *(f"{name}: {value}" for name, value in fields)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
