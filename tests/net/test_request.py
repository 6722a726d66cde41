"""Tests for trawl.net.request: the request target and the User-Agent value.

What goes on the wire byte for byte is checked against a real server in
``tests/net/test_client.py``."""

from __future__ import annotations

import pytest

from trawl.net.request import parse_target, request_fields, user_agent_string
from trawl.net.response import FetchError


@pytest.mark.parametrize(
    ("given", "scheme", "port", "authority", "target"),
    [
        ("http://Example.COM:80/a b?x=1#f", "http", 80, "example.com", "/a%20b?x=1"),
        ("HTTPS://example.com", "https", 443, "example.com", "/"),
        ("https://[2001:db8::1]:8443/p?", "https", 8443, "[2001:db8::1]:8443", "/p?"),
        ("http://user:pw@example.com:8080?q", "http", 8080, "example.com:8080", "/?q"),
    ],
)
def test_parse_target(given: str, scheme: str, port: int, authority: str, target: str) -> None:
    t = parse_target(given)
    assert (t.scheme, t.port, t.authority, t.request_target) == (scheme, port, authority, target)


@pytest.mark.parametrize("bad", ["ftp://example.com/", "http:///path", "http://example.com:99999/"])
def test_parse_target_rejects(bad: str) -> None:
    with pytest.raises(FetchError) as info:
        parse_target(bad)
    assert info.value.kind == "invalid_url"


def test_user_agent_string() -> None:
    assert user_agent_string("trawl", "0.1.0", "http://contact") == "trawl/0.1.0 (+http://contact)"
    assert user_agent_string("trawl", "0.1.0", None) == "trawl/0.1.0"
    with pytest.raises(ValueError):
        user_agent_string("my bot", "1", None)
    with pytest.raises(ValueError):
        user_agent_string("trawl", "1", "http://x/(y)")


@pytest.mark.parametrize(
    "name", ["Host", "content-length", "Transfer-Encoding", "Proxy-Authorization"]
)
def test_extra_fields_may_not_set_the_target_framing_or_proxy_credentials(name: str) -> None:
    target = parse_target("http://example.com/")
    assert request_fields(target, [], {"X-Ok": "1"}) == [("Host", "example.com"), ("X-Ok", "1")]
    with pytest.raises(ValueError, match=f"may not set {name}"):
        request_fields(target, [], {name: "x"})
