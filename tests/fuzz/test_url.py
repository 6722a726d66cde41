"""Fuzz trawl.url: normalize, host_of, resolve and the keys of any string.

``normalize`` returns a URL or raises ``UrlError`` with one of its documented
reasons; what it returns is a fixed point (``normalize(normalize(x)) ==
normalize(x)``, as its docstring promises), parses again, with urllib and with
our own splitter, to a scheme and a host, and is spelled the same whichever
equivalent spelling it came from (RFC 3986 6.2.2-6.2.3). Inputs are
URL-shaped text (schemes, IDN, IPv4/IPv6, percent-escapes, ports, dot
segments, session and tracking parameters, fragments) and arbitrary text.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from hypothesis import example
from hypothesis import strategies as st

from tests.fuzz.properties import fuzz
from trawl.url.filter import UrlFilter
from trawl.url.keys import host_bucket, host_of, registered_domain, url_fingerprint
from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError, remove_dot_segments, resolve, split_uri

REASONS = {"no_scheme", "bad_scheme", "no_host", "bad_host", "bad_port", "unparsable"}

# --- URL-shaped text ------------------------------------------------------------------

SCHEMES = st.sampled_from(["http", "https", "HTTP", "hTTps", "ftp", "a+b.c-d", "1http", "h tp", ""])
SEPARATORS = st.sampled_from(["://", "://", "://", ":", ":/", ":///", "//", ":\t//"])
LABELS = st.one_of(
    st.from_regex(r"[a-zA-Z0-9_-]{1,12}", fullmatch=True),
    st.sampled_from(["xn--bcher-kva", "XN--", "bücher", "例え", "ＡＢＣ", "straße", "-a"]),
    st.sampled_from(["a" * 63, "a" * 64, "ǅ", "İ", "\u0345", "\ufb01"]),
    st.sampled_from(["%65x", "%C3%BC", "%zz", "%FF", "ª%30", "a%2Eb", "\u200d", "a\u3002b"]),
    st.text(max_size=6),
)
REG_NAMES = st.tuples(st.lists(LABELS, min_size=1, max_size=4), st.sampled_from(["", ".", ".."]))
HOSTS = st.one_of(
    REG_NAMES.map(lambda parts: ".".join(parts[0]) + parts[1]),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip.exploded.upper()}]"),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
    st.sampled_from(["[::1", "[::1]x", "[fe80::1%25eth0]", "[v1.x]", "[not-ipv6]", "", "@"]),
)
USERINFO = st.one_of(st.just(""), st.text(max_size=6).map(lambda t: t + "@"))
PORTS = st.one_of(
    st.just(""),
    st.integers(0, 70_000).map(lambda port: f":{port}"),
    st.sampled_from([":", ":080", ":0443", ":http", ":٨٠", ":8:8", ":-1"]),
)
SEGMENTS = st.one_of(
    st.sampled_from([".", "..", "%2e", "%2E%2e", ".%2E", "", ".;jsessionid=1", "..;sid=2"]),
    st.sampled_from(["a;JSESSIONID=0A", "a;v=1", "%7euser", "%e2%82%ac", "a b", "ü", "100%"]),
    st.sampled_from(["%zz", "[x]", "\ud800", "%252E"]),
    st.text(max_size=5),
)
PATHS = st.lists(SEGMENTS, max_size=6).map(lambda segments: "".join("/" + s for s in segments))
QUERY_PIECES = st.one_of(
    st.sampled_from(["utm_source=x", "gclid=1", "PHPSESSID=a", "sid=1", "utm%5Fmedium=2", "a=1"]),
    st.sampled_from(["", "=", "q=a b", "r=%C3%a9", "x=%2b", "UTM_SOURCE=x"]),
    st.text(max_size=5),
)
QUERIES = st.one_of(st.just(""), st.lists(QUERY_PIECES, max_size=4).map("?{}".format))
FRAGMENTS = st.one_of(st.just(""), st.text(max_size=5).map(lambda t: "#" + t))
PADDING = st.sampled_from(["", " ", "\t", "\n", " \u3000"])

URL_SHAPED = st.builds(
    lambda *parts: "".join(parts),
    PADDING,
    SCHEMES,
    SEPARATORS,
    USERINFO,
    HOSTS,
    PORTS,
    PATHS,
    QUERIES,
    FRAGMENTS,
    PADDING,
)
URLS = st.one_of(URL_SHAPED, st.text(), st.text(st.characters(codec="utf-8")))


def normal_form(url: str) -> str | tuple[str, str]:
    """What normalize makes of ``url``: the URL, or ("error", reason)."""
    try:
        return normalize(url)
    except UrlError as exc:
        return ("error", exc.reason)


# --- normalize ------------------------------------------------------------------------


@fuzz(URLS, max_examples=300)
@example("http://a/\ud800")  # a lone surrogate has no UTF-8 form: "unparsable"
@example("http://a/\x00\x7f b\u3000")
def test_normalize_returns_a_url_or_url_error(url: str) -> None:
    try:
        normalized = normalize(url)
    except UrlError as exc:
        assert exc.reason in REASONS
        assert exc.url == url
        return
    # Everything outside the URL alphabet percent-encoded, the fragment gone.
    assert normalized.isascii() and normalized.isprintable() and " " not in normalized
    assert "#" not in normalized


@fuzz(URLS, max_examples=300)
@example("http://a/.;jsessionid=1/b")  # gave "http://a/./b", whose normal form is "http://a/b"
@example("http://a/..;sid=2/x/.;JSESSIONID=0A")
@example("HTTP://EXAMPLE.com./%2e%2E/%7e?utm_source=x&&b#f")
def test_normalize_is_idempotent(url: str) -> None:
    try:
        normalized = normalize(url)
    except UrlError:
        return
    assert normalize(normalized) == normalized


@fuzz(URLS, max_examples=300)
@example("http://[2001:DB8::0001]:80/")
@example("http://a%40b@Example.COM:8080/p")
def test_normal_form_parses_again_to_a_scheme_and_host(url: str) -> None:
    try:
        normalized = normalize(url)
    except UrlError:
        return
    ours = split_uri(normalized)
    assert ours.scheme and ours.authority and ours.fragment is None
    theirs = urlsplit(normalized)
    assert theirs.scheme == ours.scheme
    assert theirs.port is None or 0 < theirs.port <= 65535  # .port raises on a bad one
    # host_of reads the same host from the input and from its normal form, and
    # urllib finds it there too (it drops the IPv6 brackets).
    host = host_of(url)
    assert host == host_of(normalized)
    assert theirs.hostname == host.strip("[]")


@fuzz(URLS, max_examples=200)
def test_keys_of_a_normal_form(url: str) -> None:
    try:
        normalized = normalize(url)
    except UrlError:
        return
    host = host_of(normalized)
    site = registered_domain(host)
    assert site and host.endswith(site)
    assert -(2**63) <= url_fingerprint(normalized) < 2**63  # the url_fp column: a LONG
    assert 0 <= host_bucket(host, 7) < 7
    reason = UrlFilter().reject_reason(normalized)
    assert reason is None or isinstance(reason, str)


# --- equivalent spellings -----------------------------------------------------------

# Host labels of letters, digits, "-" and "_": characters with no meaning in URL syntax,
# so any of them may be percent-encoded (RFC 3986 3.2.2: UTF-8 octets) without changing
# the URL.
HOST_LABELS = st.text(
    st.characters(categories=["Ll", "Lu", "Lo", "Nd"], include_characters="-_"),
    min_size=1,
    max_size=8,
)
# Path text: anything but "/", "?", "#", "%" (which would change the URL's shape) and
# whitespace (which normalize strips from the ends of the URL, so it matters where the
# URL ends). Any of it but the reserved characters (RFC 3986 2.2) may be respelled.
PATH_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="/?#%"), max_size=12).filter(
    lambda text: not any(ch.isspace() for ch in text)
)
RESERVED = frozenset(":/?#[]@!$&'()*+,;=")


@st.composite
def pct_respelled(draw: st.DrawFn, text: str) -> str:
    """``text`` with some of its unreserved characters percent-encoded (UTF-8, hex
    in either case): reserved ones mean something else when encoded (RFC 3986 2.2)."""
    out = []
    for ch in text:
        if ch not in RESERVED and draw(st.booleans()):
            hexes = [f"{b:02X}" if draw(st.booleans()) else f"{b:02x}" for b in ch.encode()]
            out.append("".join("%" + h for h in hexes))
        else:
            out.append(ch)
    return "".join(out)


@st.composite
def url_and_respelling(draw: st.DrawFn) -> tuple[str, str]:
    """A URL and another spelling of it that normalize must map to the same string:
    case of scheme and host, percent-encoding, a default port, dot segments, a
    fragment, empty and tracking query parameters, surrounding whitespace."""
    scheme = draw(st.sampled_from(["http", "https"]))
    labels = draw(st.lists(HOST_LABELS, min_size=1, max_size=3))
    segments = draw(st.lists(PATH_TEXT, max_size=4))
    query = draw(st.lists(st.from_regex(r"[a-z]{1,3}=[a-z0-9]{0,3}", fullmatch=True), max_size=3))
    plain = f"{scheme}://{'.'.join(labels)}/{'/'.join(segments)}"
    plain += "?" + "&".join(query) if query else ""

    respelled_labels = []
    for label in labels:  # ASCII letters in any case (RFC 3986 6.2.2.1), some escaped
        cased = "".join(c.upper() if c.isascii() and draw(st.booleans()) else c for c in label)
        respelled_labels.append(draw(pct_respelled(cased)))
    host = ".".join(respelled_labels)
    port = draw(st.sampled_from(["", ":", ":80" if scheme == "http" else ":443"]))
    path = "/".join(draw(pct_respelled(s)) for s in segments)
    if draw(st.booleans()):
        path = "./" + path
    if draw(st.booleans()) and segments:
        path = "x/../" + path
    tracking = draw(st.sampled_from(["", "utm_source=fuzz", "gclid=1", "PHPSESSID=f"]))
    tracking_last = draw(st.booleans())
    pieces = [*query, tracking] if tracking_last else [tracking, *query]
    respelled_query = "&".join(pieces) + draw(st.sampled_from(["", "&", "&&"]))
    fragment = draw(st.sampled_from(["", "#", "#top", "#a b"]))
    scheme_spelling = draw(st.sampled_from([scheme, scheme.upper(), scheme.title()]))
    respelled = f"{scheme_spelling}://{host}{port}/{path}"
    respelled += ("?" + respelled_query if respelled_query else "") + fragment
    return plain, draw(st.sampled_from(["", " ", "\t"])) + respelled


@fuzz(url_and_respelling(), max_examples=300)
@example(("http://ª0/", "http://ª%30/"))  # a host mixing raw and escaped text was bad_host
@example(("http://bücher.example/", "HTTP://b%C3%BCcher%2Eexample:80/#x"))
def test_equivalent_spellings_normalize_alike(pair: tuple[str, str]) -> None:
    plain, respelled = pair
    assert normal_form(respelled) == normal_form(plain)


# --- resolution -----------------------------------------------------------------------

REFERENCES = st.one_of(
    st.sampled_from(["", ".", "..", "./", "../", "/", "//", "?", "#", "g;x", "//g", "?y", "#s"]),
    PATHS,
    URL_SHAPED,
    st.text(max_size=12),
)


@fuzz(URLS, REFERENCES, st.text(max_size=6), max_examples=300)
@example("http://a/b/c/d;p?q", "../../../g", "")
def test_resolve_gives_a_reference_or_url_error(base: str, reference: str, fragment: str) -> None:
    try:
        resolved = resolve(base, reference)
    except UrlError as exc:
        assert exc.reason == "no_scheme"
        return
    assert split_uri(resolved).scheme is not None
    normal_form(resolved)  # never anything but a URL or UrlError
    try:
        normalized = normalize(base)
    except UrlError:
        return
    # RFC 3986 5.2.2: a same-document reference is the base itself.
    assert normalize(resolve(normalized, "#" + fragment)) == normalized
    assert normalize(resolve(normalized, "")) == normalized


@fuzz(PATHS, max_examples=300)
@example("/a/..//b")
def test_removing_dot_segments_twice_changes_nothing(path: str) -> None:
    once = remove_dot_segments(path)
    assert remove_dot_segments(once) == once
    assert not once.startswith("/") or all(s not in (".", "..") for s in once.split("/"))
