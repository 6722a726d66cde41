"""URL normalisation: one canonical spelling per resource.

Every URL that enters the crawl db goes through :func:`normalize` first, so
that spellings of the same resource (``HTTP://Example.com:80/a/./b#x`` and
``http://example.com/a/b``) collapse to one row and one ``url_fp``
(``trawl.url.keys``). Links found in pages are made absolute with
``trawl.url.resolution.resolve`` before that.

Why it is built this way:

* :func:`normalize` applies only the equivalence-preserving normalisations of
  RFC 3986 section 6.2.2 / 6.2.3 plus two crawler conventions (drop the
  fragment, drop tracking parameters). It never sorts or decodes reserved
  characters, because servers may treat those differently.
* Session-id parameters are dropped too, from the query and from path
  parameters: a server minting one per visit would otherwise give every page
  endless names.
* Hosts are lower-cased and IDNA-encoded (UTS #46 mapping as browsers do, RFC
  5891 punycode), IPv6 literals written canonically (RFC 5952), default ports
  dropped: :func:`normalize_authority`, which ``trawl.url.keys.host_of``
  shares.
* Everything is pure Python on ``str`` (no pyspark import) so it runs unchanged
  inside Spark UDFs and is unit-tested without a JVM.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import unquote

import idna

from trawl.url.resolution import UriParts, UrlError, recompose, remove_dot_segments, split_uri

__all__ = [
    "DEFAULT_SESSION_PARAMS",
    "DEFAULT_STRIP_PARAMS",
    "normalize",
    "normalize_authority",
]

# Query parameters that only carry click/campaign tracking, never page identity.
# Entries ending in "*" are prefix patterns.
DEFAULT_STRIP_PARAMS: tuple[str, ...] = (
    "utm_*",  # Google Analytics campaign tags
    "gclid",  # Google Ads
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "_ga",
    "_gl",
    "fbclid",  # Facebook
    "msclkid",  # Microsoft Ads
    "mc_cid",  # Mailchimp
    "mc_eid",
    "yclid",  # Yandex
    "_openstat",
    "igshid",  # Instagram
    "twclid",  # Twitter/X
    "ttclid",  # TikTok
    "li_fat_id",  # LinkedIn
    "_hsenc",  # HubSpot
    "_hsmi",
    "mkt_tok",  # Marketo
    "vero_id",
    "oly_anon_id",
    "oly_enc_id",
    "rb_clickid",
    "wickedid",
)

# Session-id parameters, compared case-insensitively ("x*" is a prefix): a
# server minting one per visit would otherwise give every page endless names.
# After Nutch's regex-normalize.xml (``(l|j|bv_)?(sid|phpsessid|sessionid)``),
# with the names of the common application servers. They are dropped from the
# query and, as servlet containers write them, from path parameters
# (``/a;jsessionid=...``).
DEFAULT_SESSION_PARAMS: tuple[str, ...] = (
    "sid", "lsid", "jsid", "bv_sid", "sessionid", "session_id", "sess_id", "sessid",
    "jsessionid", "phpsessid", "aspsessionid*", "asp.net_sessionid", "cfid", "cftoken",
    "zenid", "oscsid", "xtcsid",
)  # fmt: skip

# Default ports dropped by RFC 3986 6.2.3 (scheme-based normalisation).
_DEFAULT_PORTS = {"http": 80, "https": 443}

# RFC 3986 3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# DNS-style host labels (RFC 1123), tolerating "_" which real sites use.
_LABEL_RE = re.compile(r"[a-z0-9_](?:[a-z0-9_\-]{0,61}[a-z0-9_])?")
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")

# RFC 3986 2.3 unreserved, and the characters each component may hold raw
# (RFC 3986 3.2.1 userinfo, 3.3 pchar + "/", 3.4 query).
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = frozenset("!$&'()*+,;=")
_USERINFO_SAFE = _UNRESERVED | _SUB_DELIMS | {":"}
_PATH_SAFE = _UNRESERVED | _SUB_DELIMS | {":", "@", "/"}
_QUERY_SAFE = _PATH_SAFE | {"?"}
_HEX = "0123456789ABCDEF"

# WHATWG URL parsing: ASCII tab and newline are removed from anywhere in the input.
TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


def _pct_tidy(text: str, safe: frozenset[str], url: str) -> str:
    """Canonical percent-encoding for one component (RFC 3986 2.1, 2.4, 6.2.2.1, 6.2.2.2).

    ``%xx`` of an unreserved character is decoded, other ``%xx`` get uppercase hex,
    a "%" that starts no valid triplet becomes ``%25``, and any character not in
    ``safe`` (spaces, controls, non-ASCII, ...) is UTF-8 encoded. Reserved
    characters are never decoded, so the result means the same to any server.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "%":
            m = _PCT_RE.match(text, i)
            if m is None:
                out.append("%25")
            else:
                decoded = chr(int(m.group(1), 16))
                out.append(decoded if decoded in _UNRESERVED else m.group(0).upper())
                i += 2
        elif ch in safe:
            out.append(ch)
        else:
            try:
                raw = ch.encode("utf-8")
            except UnicodeEncodeError as exc:  # lone surrogate: no UTF-8 form exists
                raise UrlError("unparsable", url) from exc
            out.extend("%" + _HEX[b >> 4] + _HEX[b & 15] for b in raw)
        i += 1
    return "".join(out)


def _pct_decode_host(host: str, url: str) -> str:
    """Decode ``%xx`` in a reg-name (RFC 3986 3.2.2 allows them; DNS needs the text).

    The escapes are UTF-8 octets (3.2.2); characters written as they are stay
    themselves, so "ª%30" is "ª0", as the WHATWG host parser reads it.
    """
    if "%" not in host:
        return host
    try:
        return unquote(host, errors="strict")
    except UnicodeError as exc:
        raise UrlError("bad_host", url) from exc


def _ip_literal(host: str, url: str) -> str:
    """RFC 3986 3.2.2 IP-literal: canonical (RFC 5952) IPv6 text in brackets."""
    if "%" in host:  # RFC 6874 zone identifiers mean nothing off the local link
        raise UrlError("bad_host", url)
    try:
        return "[" + ipaddress.IPv6Address(host[1:-1]).compressed + "]"
    except ValueError as exc:  # also rejects IPvFuture (RFC 3986 3.2.2)
        raise UrlError("bad_host", url) from exc


def _reg_name(host: str, url: str) -> str:
    """Lowercase, IDNA-encode and check a registered name (RFC 3986 6.2.2.1, RFC 5891)."""
    host = _pct_decode_host(host, url)
    if not host.isascii():
        try:  # UTS #46 mapping (non-transitional, as browsers do): case, full-width dots, ...
            host = idna.uts46_remap(host, std3_rules=False, transitional=False)
        except idna.IDNAError as exc:
            raise UrlError("bad_host", url) from exc
    host = host.lower()
    host = host.removesuffix(".")  # the root label: "example.com." is "example.com"
    labels = host.split(".")
    for i, label in enumerate(labels):
        if not label.isascii():
            try:
                labels[i] = idna.alabel(label).decode("ascii")  # RFC 5891 4.4 punycode
            except (idna.IDNAError, UnicodeError) as exc:
                raise UrlError("bad_host", url) from exc
        if not _LABEL_RE.fullmatch(labels[i]):
            raise UrlError("bad_host", url)
    host = ".".join(labels)
    if len(host) > 253:  # RFC 1035 2.3.4
        raise UrlError("bad_host", url)
    return host


def _split_host_port(hostport: str, url: str) -> tuple[str, str]:
    """Split ``host[:port]`` where host may be a bracketed IP-literal (RFC 3986 3.2.2-3.2.3)."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise UrlError("unparsable", url)
        rest = hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            raise UrlError("unparsable", url)
        return hostport[: end + 1], rest[1:]
    host, _, port = hostport.partition(":")
    return host, port


def _port(port: str, scheme: str, url: str) -> str:
    """RFC 3986 3.2.3 / 6.2.3: validate the port; empty and default ports are dropped."""
    if port == "":
        return ""
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) <= 65535:
        raise UrlError("bad_port", url)
    value = int(port)  # also drops leading zeros
    return "" if _DEFAULT_PORTS.get(scheme) == value else str(value)


def normalize_authority(authority: str, scheme: str, url: str) -> tuple[str, str, str]:
    """Normalise an authority into (userinfo, host, port); empty strings mean absent."""
    userinfo, sep, hostport = authority.rpartition("@")
    userinfo = _pct_tidy(userinfo, _USERINFO_SAFE, url) if sep else ""
    raw_host, raw_port = _split_host_port(hostport, url)
    if raw_host == "":
        raise UrlError("no_host", url)
    host = _ip_literal(raw_host, url) if raw_host.startswith("[") else _reg_name(raw_host, url)
    return userinfo, host, _port(raw_port, scheme, url)


def _param_matcher(patterns: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Split strip patterns into exact names and prefixes (entries ending in "*")."""
    pats = tuple(patterns)
    exact = frozenset(p for p in pats if not p.endswith("*"))
    prefixes = tuple(p[:-1] for p in pats if p.endswith("*"))
    return exact, prefixes


def _strip_query(query: str, strip_params: Iterable[str], session_params: Iterable[str]) -> str:
    """Drop tracking and session parameters and empty ``&&`` pieces, keeping the
    order of the rest.

    Empty pieces are skipped as the WHATWG application/x-www-form-urlencoded parser
    does; names are compared after percent-tidying, tracking names
    case-sensitively, session names case-insensitively (``PHPSESSID``).
    """
    exact, prefixes = _param_matcher(strip_params)
    sess_exact, sess_prefixes = _param_matcher(p.lower() for p in session_params)
    kept = []
    for piece in query.split("&"):
        name = piece.partition("=")[0]
        if not piece or name in exact or (prefixes and name.startswith(prefixes)):
            continue
        low = name.lower()
        if low in sess_exact or (sess_prefixes and low.startswith(sess_prefixes)):
            continue
        kept.append(piece)
    return "&".join(kept)


def _strip_path_sessions(path: str, session_params: Iterable[str]) -> str:
    """Drop ``;name=value`` path parameters whose name is a session parameter
    (``/cart;jsessionid=0A1B``), as servlet containers append them."""
    if ";" not in path:
        return path
    exact, prefixes = _param_matcher(p.lower() for p in session_params)
    out = []
    for segment in path.split("/"):
        head, *params = segment.split(";")
        kept = [
            q
            for q in params
            if not (
                (low := q.partition("=")[0].lower()) in exact
                or (prefixes and low.startswith(prefixes))
            )
        ]
        out.append(";".join([head, *kept]))
    return "/".join(out)


def normalize(
    url: str,
    strip_params: Iterable[str] = DEFAULT_STRIP_PARAMS,
    session_params: Iterable[str] = DEFAULT_SESSION_PARAMS,
) -> str:
    """Return the canonical spelling of an absolute http(s)-style URL.

    Raises :class:`UrlError` (reason ``no_scheme``, ``bad_scheme``, ``no_host``,
    ``bad_host``, ``bad_port`` or ``unparsable``). ``normalize(normalize(u)) ==
    normalize(u)`` for every ``u`` that does not raise.
    """
    text = url.strip().translate(TAB_NEWLINE)
    p = split_uri(text)
    if p.scheme is None:
        raise UrlError("no_scheme", url)
    if not _SCHEME_RE.fullmatch(p.scheme):
        raise UrlError("bad_scheme", url)
    if not p.authority:
        raise UrlError("no_host", url)
    scheme = p.scheme.lower()  # RFC 3986 6.2.2.1: scheme is case-insensitive
    userinfo, host, port = normalize_authority(p.authority, scheme, url)
    authority = (userinfo + "@" if userinfo else "") + host + (":" + port if port else "")
    # RFC 3986 6.2.2.2 then 6.2.2.3: decode unreserved first so "%2E%2E" is a dot segment.
    # Session parameters go before the dot segments: "/.;jsessionid=1/b" would else
    # leave "/./b", which a second pass shortens to "/b" (not idempotent).
    path = _strip_path_sessions(_pct_tidy(p.path, _PATH_SAFE, url), session_params)
    path = remove_dot_segments(path) or "/"  # 6.2.3: empty -> "/"
    query = None
    if p.query is not None:
        query = (
            _strip_query(_pct_tidy(p.query, _QUERY_SAFE, url), strip_params, session_params) or None
        )
    # The fragment is never sent to the server: drop it.
    return recompose(UriParts(scheme, authority, path, query, None))
