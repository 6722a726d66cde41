"""URL resolution, normalisation and the keys derived from a URL.

Every URL that enters the crawl db goes through :func:`normalize` first, so
that spellings of the same resource (``HTTP://Example.com:80/a/./b#x`` and
``http://example.com/a/b``) collapse to one row and one ``url_fp``. Links found
in pages are made absolute with :func:`resolve` before that.

Why it is built this way:

* :func:`resolve` follows RFC 3986 section 5.2 literally (strict parser, no
  ``urljoin``): ``urllib.parse.urljoin`` is not conformant (it mishandles some
  of the section 5.4 abnormal examples), and link resolution must be exact or
  the crawler invents URLs that no browser would request.
* :func:`normalize` applies only the equivalence-preserving normalisations of
  RFC 3986 section 6.2.2 / 6.2.3 plus two crawler conventions (drop the
  fragment, drop tracking parameters). It never sorts or decodes reserved
  characters, because servers may treat those differently.
* Everything is pure Python on ``str`` (no pyspark import) so it runs unchanged
  inside Spark UDFs and is unit-tested without a JVM. The public-suffix lookup
  uses tldextract's bundled snapshot only: executors have no internet and must
  all agree on the same suffix list.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from typing import NamedTuple

import idna
import mmh3
import tldextract

__all__ = [
    "DEFAULT_SESSION_PARAMS",
    "DEFAULT_STRIP_PARAMS",
    "UrlError",
    "host_bucket",
    "host_of",
    "normalize",
    "registered_domain",
    "remove_dot_segments",
    "resolve",
    "url_fingerprint",
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

# RFC 3986 Appendix B: the component-splitting regular expression.
_URI_RE = re.compile(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.S)
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
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


class UrlError(ValueError):
    """A URL that cannot be resolved or normalised; ``reason`` is machine-readable."""

    def __init__(self, reason: str, url: str) -> None:
        super().__init__(f"{reason}: {url!r}")
        self.reason = reason
        self.url = url


class _Parts(NamedTuple):
    """The five RFC 3986 components; ``None`` means the component is undefined."""

    scheme: str | None
    authority: str | None
    path: str
    query: str | None
    fragment: str | None


def _split(uri: str) -> _Parts:
    """Split a URI reference into components (RFC 3986 Appendix B)."""
    m = _URI_RE.match(uri)
    if m is None:  # the expression matches every string; kept for the type checker
        raise UrlError("unparsable", uri)
    scheme, authority, path, query, fragment = m.groups()
    return _Parts(scheme, authority, path, query, fragment)


def _recompose(p: _Parts) -> str:
    """RFC 3986 5.3 component recomposition."""
    out = []
    if p.scheme is not None:
        out.append(p.scheme + ":")
    if p.authority is not None:
        out.append("//" + p.authority)
    out.append(p.path)
    if p.query is not None:
        out.append("?" + p.query)
    if p.fragment is not None:
        out.append("#" + p.fragment)
    return "".join(out)


# --------------------------------------------------------------------------- resolution


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4: remove "." and ".." segments, step by step as the RFC writes it."""
    inp, out = path, ""
    while inp:
        if inp.startswith(("../", "./")):  # 2.A: drop the prefix
            inp = inp[inp.find("/") + 1 :]
        elif inp.startswith("/./") or inp == "/.":  # 2.B: replace the prefix with "/"
            inp = "/" + inp[3:]
        elif inp.startswith("/../") or inp == "/..":  # 2.C: ... and pop the last output segment
            inp = "/" + inp[4:]
            out = out[: max(out.rfind("/"), 0)]
        elif inp in (".", ".."):  # 2.D
            inp = ""
        else:  # 2.E: move the first segment (with its leading "/", if any) to the output
            cut = inp.find("/", 1)
            cut = len(inp) if cut < 0 else cut
            out, inp = out + inp[:cut], inp[cut:]
    return out


def _merge(base: _Parts, ref_path: str) -> str:
    """RFC 3986 5.2.3: merge a relative-path reference with the base path."""
    if base.authority is not None and base.path == "":
        return "/" + ref_path
    return base.path[: base.path.rfind("/") + 1] + ref_path


def resolve(base: str, reference: str) -> str:
    """Resolve ``reference`` against the absolute URI ``base`` (RFC 3986 5.2.2, strict).

    The strings are taken as they are: strip whitespace from ``href`` values
    before calling (HTML does), and :func:`normalize` the result before storing it.
    """
    b = _split(base)
    if b.scheme is None:  # RFC 3986 5.2.1: the base URI must be absolute
        raise UrlError("no_scheme", base)
    r = _split(reference)
    if r.scheme is not None:
        t_scheme, t_auth, t_path, t_query = (
            r.scheme,
            r.authority,
            remove_dot_segments(r.path),
            r.query,
        )
    elif r.authority is not None:
        t_scheme, t_auth, t_path, t_query = (
            b.scheme,
            r.authority,
            remove_dot_segments(r.path),
            r.query,
        )
    elif r.path == "":
        t_scheme, t_auth, t_path = b.scheme, b.authority, b.path
        t_query = r.query if r.query is not None else b.query
    elif r.path.startswith("/"):
        t_scheme, t_auth, t_path, t_query = (
            b.scheme,
            b.authority,
            remove_dot_segments(r.path),
            r.query,
        )
    else:
        merged = remove_dot_segments(_merge(b, r.path))
        t_scheme, t_auth, t_path, t_query = b.scheme, b.authority, merged, r.query
    return _recompose(_Parts(t_scheme, t_auth, t_path, t_query, r.fragment))


# --------------------------------------------------------------------------- normalisation


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
    """Decode ``%xx`` in a reg-name (RFC 3986 3.2.2 allows them; DNS needs the text)."""
    if "%" not in host:
        return host
    try:
        raw = _PCT_RE.sub(lambda m: chr(int(m.group(1), 16)), host).encode("latin-1")
        return raw.decode("utf-8")
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


def _authority(authority: str, scheme: str, url: str) -> tuple[str, str, str]:
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
    text = url.strip().translate(_TAB_NEWLINE)
    p = _split(text)
    if p.scheme is None:
        raise UrlError("no_scheme", url)
    if not _SCHEME_RE.fullmatch(p.scheme):
        raise UrlError("bad_scheme", url)
    if not p.authority:
        raise UrlError("no_host", url)
    scheme = p.scheme.lower()  # RFC 3986 6.2.2.1: scheme is case-insensitive
    userinfo, host, port = _authority(p.authority, scheme, url)
    authority = (userinfo + "@" if userinfo else "") + host + (":" + port if port else "")
    # RFC 3986 6.2.2.2 then 6.2.2.3: decode unreserved first so "%2E%2E" is a dot segment.
    path = remove_dot_segments(_pct_tidy(p.path, _PATH_SAFE, url)) or "/"  # 6.2.3: empty -> "/"
    path = _strip_path_sessions(path, session_params)
    query = None
    if p.query is not None:
        query = (
            _strip_query(_pct_tidy(p.query, _QUERY_SAFE, url), strip_params, session_params) or None
        )
    # The fragment is never sent to the server: drop it.
    return _recompose(_Parts(scheme, authority, path, query, None))


# --------------------------------------------------------------------------- derived keys


def host_of(url: str) -> str:
    """The normalised host of ``url`` without userinfo or port (IPv6 keeps its brackets)."""
    p = _split(url.strip().translate(_TAB_NEWLINE))
    if p.scheme is None:
        raise UrlError("no_scheme", url)
    if not p.authority:
        raise UrlError("no_host", url)
    return _authority(p.authority, p.scheme.lower(), url)[1]


@functools.cache
def _extractor() -> tldextract.TLDExtract:
    """One offline extractor per process: bundled PSL snapshot, no cache dir, no fetch."""
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=65_536)
def registered_domain(host: str) -> str:
    """The registrable domain (public suffix + one label) of a host, for per-site grouping.

    IP addresses are returned as they are. A host that is itself a public suffix is
    returned whole. Hosts under no known suffix (``localhost``, ``site-7.test``,
    ``intranet.corp``) fall back to their last two labels. Cached: a page's
    links, and a segment's, keep naming the same hosts.
    """
    host = host.strip().lower().removesuffix(".")
    if _is_ip(host):
        return host
    parts = _extractor()(host)
    if parts.suffix:
        return f"{parts.domain}.{parts.suffix}" if parts.domain else host
    return ".".join(host.split(".")[-2:])


def url_fingerprint(url: str) -> int:
    """Signed 64-bit MurmurHash3 (x64, seed 0) of ``url``: the ``url_fp`` column.

    Pass the output of :func:`normalize`; the string is hashed exactly as given.
    """
    return mmh3.hash64(url.encode("utf-8"), seed=0, signed=True)[0]


def host_bucket(host: str, buckets: int) -> int:
    """A stable bucket in ``[0, buckets)`` from MurmurHash3-32 of ``host``.

    Stable across processes and Python versions, unlike ``hash()`` (PYTHONHASHSEED).
    """
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    return mmh3.hash(host.encode("utf-8"), seed=0, signed=False) % buckets
