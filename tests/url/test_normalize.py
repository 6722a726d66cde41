"""Tests for trawl.url.normalize: RFC 3986 resolution, normalisation and derived keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from trawl.url import normalize as urlnorm
from trawl.url.normalize import (
    UrlError,
    host_bucket,
    host_of,
    normalize,
    registered_domain,
    remove_dot_segments,
    resolve,
    url_fingerprint,
)

CONFORMANCE = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"


def _resolution_cases() -> list[Any]:
    with (CONFORMANCE / "rfc3986_resolution.json").open(encoding="utf-8") as fh:
        cases = json.load(fh)["cases"]
    return [pytest.param(c, id=f"{c['rfc_section']}:{c['reference']!r}") for c in cases]


RESOLUTION_CASES = _resolution_cases()


def test_conformance_file_has_all_rfc_examples() -> None:
    assert len(RESOLUTION_CASES) == 42


# --------------------------------------------------------------------------- resolve


@pytest.mark.parametrize("case", RESOLUTION_CASES)
def test_resolve_rfc3986_section_5_4(case: dict[str, Any]) -> None:
    acceptable = case.get("expected_alternatives", [case["expected"]])
    assert resolve(case["base"], case["reference"]) in acceptable


def test_resolve_is_strict_for_same_scheme_reference() -> None:
    # RFC 3986 5.2.2 strict parser: a reference with a scheme is used as is.
    assert resolve("http://a/b/c/d;p?q", "http:g") == "http:g"


@pytest.mark.parametrize(
    ("base", "reference", "expected"),
    [
        ("http://a", "g", "http://a/g"),  # 5.2.3: authority and empty base path
        ("http://a", "?x", "http://a?x"),  # 5.2.2: empty ref path keeps base path
        ("http://a/b?q#f", "", "http://a/b?q"),  # base fragment is never inherited
        ("http://a/b/", "//h:8080/./x/../y", "http://h:8080/y"),
        ("https://a/b/c", "../../../../", "https://a/"),
        ("http://a/b/c", "mailto:x@y", "mailto:x@y"),
        ("foo:bar/baz", "qux", "foo:bar/qux"),  # no authority: merge on the raw path
    ],
)
def test_resolve_more_cases(base: str, reference: str, expected: str) -> None:
    assert resolve(base, reference) == expected


def test_resolve_rejects_relative_base() -> None:
    with pytest.raises(UrlError) as exc:
        resolve("/relative/base", "g")
    assert exc.value.reason == "no_scheme"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b/c/./../../g", "/a/g"),  # RFC 3986 5.2.4 example 1
        ("mid/content=5/../6", "mid/6"),  # RFC 3986 5.2.4 example 2
        ("", ""),
        ("/", "/"),
        ("/..", "/"),
        ("..", ""),
        ("/a/..", "/"),
        ("/a/b/.", "/a/b/"),
        ("a/../../b", "/b"),  # the RFC algorithm as written: "/.." leaves the "/"
        ("/a//../b", "/a/b"),
        ("/.../b", "/.../b"),
    ],
)
def test_remove_dot_segments(path: str, expected: str) -> None:
    assert remove_dot_segments(path) == expected


# --------------------------------------------------------------------------- normalize


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # whitespace, case of scheme and host, default port, empty path
        ("  HTTP://WWW.Example.COM  ", "http://www.example.com/"),
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/x", "https://example.com/x"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com:8080", "http://example.com:8080/"),
        ("http://example.com:/p", "http://example.com/p"),
        # path case is kept; host trailing dot dropped
        ("http://example.com./A/B", "http://example.com/A/B"),
        # IDNA (UTS #46 non-transitional)
        ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://straße.de/", "http://xn--strae-oqa.de/"),
        ("http://例え。テスト/", "http://xn--r8jz45g.xn--zckzah/"),
        ("http://%C3%BC.example/", "http://xn--tda.example/"),
        ("http://%65xample.com/", "http://example.com/"),
        ("http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"),
        # IP literals
        ("http://[2001:DB8::0001]:8080/", "http://[2001:db8::1]:8080/"),
        ("http://127.0.0.1:80/x", "http://127.0.0.1/x"),
        # userinfo kept, empty userinfo dropped
        ("http://User:Pw@Example.com/", "http://User:Pw@example.com/"),
        ("http://@example.com/", "http://example.com/"),
        ("http://a@b@example.com/", "http://a%40b@example.com/"),
        # dot segments, including percent-encoded dots (6.2.2.2 before 6.2.2.3)
        ("http://a/b/c/./../../g", "http://a/g"),
        ("http://a/%2E%2E/%2e/b", "http://a/b"),
        ("http://a/../../x", "http://a/x"),
        ("http://a/b//c", "http://a/b//c"),
        # fragment
        ("http://a/b#frag", "http://a/b"),
        ("http://a/b?q#", "http://a/b?q"),
        # percent-encoding
        ("http://a/%7euser/%e2%82%ac", "http://a/~user/%E2%82%AC"),
        ("http://a/%41%5a%2d%2e%5f%7E", "http://a/AZ-._~"),
        ("http://a/%2f%3f%23%25", "http://a/%2F%3F%23%25"),
        ("http://a/a b", "http://a/a%20b"),
        ("http://a/ü", "http://a/%C3%BC"),
        ("http://a/100%", "http://a/100%25"),
        ("http://a/%zz", "http://a/%25zz"),
        ('http://a/<>"{}|\\^`', "http://a/%3C%3E%22%7B%7D%7C%5C%5E%60"),
        ("http://a/[x]", "http://a/%5Bx%5D"),
        ("http://a/p?q=a b&r=é", "http://a/p?q=a%20b&r=%C3%A9"),
        ("http://a/p?q=%2b+%26&r=/?:@", "http://a/p?q=%2B+%26&r=/?:@"),
        ("http://a/p:q@r;s=t,u!$'()*", "http://a/p:q@r;s=t,u!$'()*"),
        # ASCII tab/newline inside the URL are removed (WHATWG URL)
        ("http://a/b\n/c\t?d\r", "http://a/b/c?d"),
        # tracking parameters, order kept, empty "?" and "&&" dropped
        ("http://a/?utm_source=x&b=2&a=1&gclid=3", "http://a/?b=2&a=1"),
        ("http://a/?z=1&y=2&x=3", "http://a/?z=1&y=2&x=3"),
        ("http://a/?utm_medium=m&utm_campaign=c", "http://a/"),
        ("http://a/?", "http://a/"),
        ("http://a/?&", "http://a/"),
        ("http://a/?a=1&&b=2&", "http://a/?a=1&b=2"),
        ("http://a/?fbclid=1&msclkid=2&mc_cid=3&mc_eid=4&_ga=5&yclid=6", "http://a/"),
        ("http://a/?utm%5Fsource=x&k", "http://a/?k"),
        ("http://a/?utm_source", "http://a/"),
        ("http://a/?UTM_SOURCE=x", "http://a/?UTM_SOURCE=x"),  # names are case-sensitive
        ("http://a/?gclid2=x&xgclid=y", "http://a/?gclid2=x&xgclid=y"),  # exact names only
        ("http://a/?q=utm_source", "http://a/?q=utm_source"),  # values are not names
        # other schemes with an authority are normalised too (filtering is UrlFilter's job)
        ("FTP://Example.com:21/x", "ftp://example.com:21/x"),
    ],
)
def test_normalize(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    ("strip_params", "url", "expected"),
    [
        ((), "http://a/?utm_source=x&b=1", "http://a/?utm_source=x&b=1"),
        (
            ("sid", "ref*"),
            "http://a/?sid=1&referrer=2&ref=3&utm_source=4",
            "http://a/?utm_source=4",
        ),
        (["*"], "http://a/?x=1&y=2", "http://a/"),
        (iter(["b"]), "http://a/?a=1&b=2", "http://a/?a=1"),  # any iterable, consumed once
    ],
)
def test_normalize_custom_strip_params(strip_params: Any, url: str, expected: str) -> None:
    assert normalize(url, strip_params=strip_params) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("example.com/path", "no_scheme"),
        ("//example.com/path", "no_scheme"),
        ("", "no_scheme"),
        ("1http://example.com/", "bad_scheme"),
        ("ht tp://example.com/", "bad_scheme"),
        ("http://", "no_host"),
        ("http:///path", "no_host"),
        ("http:example.com", "no_host"),
        ("mailto:someone@example.com", "no_host"),
        ("http://:8080/", "no_host"),
        ("http://user@/", "no_host"),
        ("http://example.com:99999/", "bad_port"),
        ("http://example.com:0/", "bad_port"),
        ("http://example.com:http/", "bad_port"),
        ("http://example.com:-1/", "bad_port"),
        ("http://example.com:8:8/", "bad_port"),
        ("http://example.com:٨٠/", "bad_port"),  # non-ASCII digits
        ("http://exa mple.com/", "bad_host"),
        ("http://ex..com/", "bad_host"),
        ("http://example.com../", "bad_host"),
        ("http://-bad.com/", "bad_host"),
        ("http://" + "a" * 64 + ".com/", "bad_host"),
        ("http://" + ".".join(["a" * 60] * 5) + "/", "bad_host"),
        ("http://%FF.com/", "bad_host"),
        ("http://ex<ample.com/", "bad_host"),
        ("http://[::1/", "unparsable"),
        ("http://[::1]x/", "unparsable"),
        ("http://[not-ipv6]/", "bad_host"),
        ("http://[fe80::1%25eth0]/", "bad_host"),
        ("http://a/\ud800", "unparsable"),
    ],
)
def test_normalize_rejects(url: str, reason: str) -> None:
    with pytest.raises(UrlError) as exc:
        normalize(url)
    assert exc.value.reason == reason
    assert exc.value.url == url


def test_url_error_is_value_error() -> None:
    with pytest.raises(ValueError, match="no_host"):
        normalize("http://")


MESSY_URLS = [
    "  HTTP://User@WWW.Example.COM:80/a/./b/../c/%7euser/%e2%82%ac?utm_source=x&b=2#frag ",
    "https://Bücher.example.:443",
    "http://example.com/a b/ü?q=a b&x=%zz&&y=%",
    "http://[2001:DB8::0001]:8080/x/../y/.",
    "http://a/%2E%2E/%2e/b/%2e",
    "http://a/..//x/%2E%2E/y",
    "http://a/%252E%252E/",
    "http://a/b?utm_source=1&%75tm_medium=2",
    "http://a/b?q=%2b%2B%2f&r=%C3%a9",
    "http://例え。テスト/パス?クエリ=値#フラグメント",
    'http://a/<>"{}|\\^`[]',
    "http://a@b:c@d.example:0443/",
    "http://a/?&&",
    "http://a/p;x=1/../q;y=2",
    "http://a/\x00\x7f",
]


@pytest.mark.parametrize("url", MESSY_URLS)
def test_normalize_is_idempotent(url: str) -> None:
    once = normalize(url)
    assert normalize(once) == once
    assert once.isascii()
    assert "#" not in once


# --------------------------------------------------------------------------- derived keys


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://WWW.Example.com:8080/x", "www.example.com"),
        ("https://user:pw@Example.COM./", "example.com"),
        ("http://Bücher.example/", "xn--bcher-kva.example"),
        ("http://[2001:DB8::1]:80/", "[2001:db8::1]"),
        ("http://10.0.0.1/", "10.0.0.1"),
        (" http://example.com ", "example.com"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


@pytest.mark.parametrize(
    ("url", "reason"),
    [("example.com", "no_scheme"), ("http:///x", "no_host"), ("http://a:x/", "bad_port")],
)
def test_host_of_rejects(url: str, reason: str) -> None:
    with pytest.raises(UrlError) as exc:
        host_of(url)
    assert exc.value.reason == reason


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.com", "example.com"),
        ("example.com", "example.com"),
        ("a.b.c.example.co.uk", "example.co.uk"),
        ("WWW.BBC.CO.UK.", "bbc.co.uk"),
        ("foo.blogspot.com", "blogspot.com"),  # ICANN suffixes only, not private ones
        ("co.uk", "co.uk"),  # a public suffix on its own
        ("com", "com"),
        ("localhost", "localhost"),
        ("site-7.test", "site-7.test"),  # special-use TLD, unknown to the PSL
        ("a.b.site-7.test", "site-7.test"),
        ("intranet.corp", "intranet.corp"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("127.0.0.1", "127.0.0.1"),
        ("[2001:db8::1]", "[2001:db8::1]"),
        ("2001:db8::1", "2001:db8::1"),
    ],
)
def test_registered_domain(host: str, domain: str) -> None:
    assert registered_domain(host) == domain


def test_registered_domain_never_fetches(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("tldextract tried to fetch the public suffix list")

    monkeypatch.setattr(requests.Session, "send", no_network)
    urlnorm._extractor.cache_clear()
    try:
        assert registered_domain("news.bbc.co.uk") == "bbc.co.uk"
        assert urlnorm._extractor().suffix_list_urls == ()
    finally:
        urlnorm._extractor.cache_clear()


def test_extractor_is_built_once() -> None:
    assert urlnorm._extractor() is urlnorm._extractor()


@pytest.mark.parametrize(
    ("url", "fp"),
    [
        # Pinned: url_fp is stored in the crawl db, so the hash must never change.
        ("http://example.com/", -6875015816531586568),
        ("", 0),
    ],
)
def test_url_fingerprint_is_pinned(url: str, fp: int) -> None:
    assert url_fingerprint(url) == fp


def test_url_fingerprint_is_signed_64_bit_and_distinct() -> None:
    urls = [f"http://example.com/page/{i}" for i in range(2000)]
    fps = [url_fingerprint(u) for u in urls]
    assert len(set(fps)) == len(urls)
    assert all(-(2**63) <= fp < 2**63 for fp in fps)
    assert any(fp < 0 for fp in fps)
    assert any(fp >= 2**32 for fp in fps)


@pytest.mark.parametrize(
    ("host", "buckets", "bucket"),
    [("example.com", 64, 51), ("example.com", 1, 0), ("", 7, 0)],
)
def test_host_bucket_is_pinned(host: str, buckets: int, bucket: int) -> None:
    assert host_bucket(host, buckets) == bucket


def test_host_bucket_range_and_spread() -> None:
    hosts = [f"site-{i}.test" for i in range(5000)]
    buckets = [host_bucket(h, 16) for h in hosts]
    assert all(0 <= b < 16 for b in buckets)
    counts = [buckets.count(b) for b in range(16)]
    assert min(counts) > 5000 / 16 * 0.8
    assert max(counts) < 5000 / 16 * 1.2


@pytest.mark.parametrize("buckets", [0, -4])
def test_host_bucket_rejects_non_positive(buckets: int) -> None:
    with pytest.raises(ValueError, match="buckets"):
        host_bucket("example.com", buckets)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test/x?PHPSESSID=abc&page=2", "http://a.test/x?page=2"),
        ("http://a.test/x?page=2&phpsessid=abc", "http://a.test/x?page=2"),
        ("http://a.test/x?sid=1", "http://a.test/x"),
        ("http://a.test/x?ASPSESSIONIDQQGGQ=1&a=b", "http://a.test/x?a=b"),
        ("http://a.test/cart;jsessionid=0A1B2C?x=1", "http://a.test/cart?x=1"),
        ("http://a.test/a;JSESSIONID=0A/b;v=2", "http://a.test/a/b;v=2"),
        # names that only start like one are kept
        ("http://a.test/x?side=1&sids=2", "http://a.test/x?side=1&sids=2"),
        ("http://a.test/a;version=1", "http://a.test/a;version=1"),
    ],
)
def test_session_parameters_are_dropped(url: str, expected: str) -> None:
    assert normalize(url) == expected
    assert normalize(expected) == expected


def test_session_parameters_can_be_kept() -> None:
    url = "http://a.test/x?sid=1"
    assert normalize(url, session_params=()) == url
    assert normalize("http://a.test/x?vt=9&a=1", session_params=("vt",)) == "http://a.test/x?a=1"
