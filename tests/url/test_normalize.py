"""Tests for trawl.url.normalize: RFC 3986 normalisation, tracking and session parameters."""

from __future__ import annotations

from typing import Any

import pytest

from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError

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
