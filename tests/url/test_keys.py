"""Tests for trawl.url.keys: host, registered domain, url_fp and host bucket."""

from __future__ import annotations

import pytest
import requests

from trawl.url import keys as urlkeys
from trawl.url.keys import (
    domains_with_private_suffixes,
    host_bucket,
    host_of,
    icann_registered_domain,
    registered_domain,
    url_fingerprint,
)
from trawl.url.resolution import UrlError


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
        # the PSL's private section: a site under a private suffix is its own domain
        ("alice.github.io", "alice.github.io"),
        ("www.alice.github.io", "alice.github.io"),
        ("Bob.GitHub.io.", "bob.github.io"),
        ("foo.blogspot.com", "foo.blogspot.com"),
        ("bucket.s3.amazonaws.com", "bucket.s3.amazonaws.com"),
        ("www.amazonaws.com", "amazonaws.com"),  # not under a private suffix
        ("a.b.ec2.compute-1.amazonaws.com", "b.ec2.compute-1.amazonaws.com"),  # *.compute-1
        ("github.io", "github.io"),  # a private suffix on its own
        ("s3.amazonaws.com", "s3.amazonaws.com"),
        ("ec2.compute-1.amazonaws.com", "ec2.compute-1.amazonaws.com"),  # by the wildcard
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


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("alice.github.io", "github.io"),
        ("foo.blogspot.com", "blogspot.com"),
        ("bucket.s3.amazonaws.com", "amazonaws.com"),
        ("www.example.co.uk", "example.co.uk"),
        ("github.io", "github.io"),
        ("site-7.test", "site-7.test"),
        ("10.0.0.1", "10.0.0.1"),
    ],
)
def test_icann_registered_domain_is_the_rule_before_the_private_section(
    host: str, domain: str
) -> None:
    assert icann_registered_domain(host) == domain


def test_domains_with_private_suffixes_are_the_old_values_the_new_rule_splits() -> None:
    split = domains_with_private_suffixes()
    assert {"github.io", "blogspot.com", "amazonaws.com", "appspot.com"} <= split
    assert not {"example.com", "co.uk", "bbc.co.uk", "site-7.test", "localhost"} & split
    # every host whose domain the private section changes had one of these before
    for host in ("alice.github.io", "bucket.s3.amazonaws.com", "a.b.ec2.compute-1.amazonaws.com"):
        assert registered_domain(host) != icann_registered_domain(host)
        assert icann_registered_domain(host) in split
    assert registered_domain("www.example.co.uk") == icann_registered_domain("www.example.co.uk")


def test_registered_domain_never_fetches(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("tldextract tried to fetch the public suffix list")

    monkeypatch.setattr(requests.Session, "send", no_network)
    urlkeys._extractor.cache_clear()
    try:
        assert registered_domain("news.bbc.co.uk") == "bbc.co.uk"
        assert registered_domain("news.carol.github.io") == "carol.github.io"
        assert icann_registered_domain("news.carol.github.io") == "github.io"
        assert urlkeys._extractor().suffix_list_urls == ()
        urlkeys.domains_with_private_suffixes.cache_clear()
        assert "github.io" in domains_with_private_suffixes()
    finally:
        urlkeys._extractor.cache_clear()
        urlkeys.domains_with_private_suffixes.cache_clear()


def test_extractor_is_built_once() -> None:
    assert urlkeys._extractor() is urlkeys._extractor()


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
