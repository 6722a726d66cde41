"""trawl.config.proxy: the proxy settings' syntax, NO_PROXY matching, and
how the environment fills ``[http] proxy`` and ``no_proxy``."""

from __future__ import annotations

import pytest

from trawl.config import (
    ConfigError,
    ProxyEndpoint,
    ProxySettings,
    from_dict,
    load_config,
    parse_no_proxy,
    parse_proxy_url,
)

A = "http://a.proxy:3128"
B = "http://b.proxy:8080"


# --------------------------------------------------------------------------- proxy URLs


@pytest.mark.parametrize(
    ("text", "host", "port", "authorization"),
    [
        ("http://proxy.corp:3128", "proxy.corp", 3128, None),
        ("proxy.corp:3128", "proxy.corp", 3128, None),  # no scheme: http:// (curl, requests)
        ("HTTP://Proxy.Corp/", "proxy.corp", 80, None),  # the http scheme's port
        ("http://[fd00::1]:3128", "fd00::1", 3128, None),
        # RFC 3986 3.2.1 percent-decoding, then RFC 7617: base64("user:p:w@x")
        ("http://user:p%3Aw%40x@10.0.0.1:3128", "10.0.0.1", 3128, "Basic dXNlcjpwOndAeA=="),
        ("http://user@10.0.0.1:3128", "10.0.0.1", 3128, "Basic dXNlcjo="),
    ],
)
def test_proxy_urls(text: str, host: str, port: int, authorization: str | None) -> None:
    assert parse_proxy_url(text) == ProxyEndpoint(host, port, authorization)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("https://user:hunter2@proxy:443", "only http:// proxies"),
        ("socks5://user:hunter2@proxy:1080", "only http:// proxies"),
        ("http://user:hunter2@proxy:99999", "bad host or port"),
        ("http://user:hunter2@proxy:3128/path", "a proxy URL is"),
        ("http://user:hunter2@:3128", "a proxy URL is"),
        ("http://user:hun@ter2@proxy:port", "bad host or port"),
    ],
)
def test_bad_proxy_urls_are_refused_without_the_password(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_proxy_url(text)
    assert "hunter2" not in str(info.value) and "ter2" not in str(info.value)
    assert "***@" in str(info.value)


def test_credentials_stay_out_of_repr() -> None:
    settings = ProxySettings.parse("http://user:hunter2@proxy:3128")
    assert "hunter2" not in repr(settings) and "Basic" not in repr(settings)
    assert settings.http is not None and settings.http.address == "proxy:3128"


def test_one_proxy_or_one_per_scheme() -> None:
    both = ProxySettings.parse(A)
    assert both.http == both.https == parse_proxy_url(A)
    split = ProxySettings.parse(f"http={A}; https={B}")
    assert (split.http, split.https) == (parse_proxy_url(A), parse_proxy_url(B))
    only = ProxySettings.parse(f"https={B}")
    assert (only.http, only.https) == (None, parse_proxy_url(B))
    assert ProxySettings.parse("") == ProxySettings()
    for bad in (f"ftp={A}", f"http={A}; http={B}", f"http={A}; {B}", "ftp=u:hunter2@p:1"):
        with pytest.raises(ValueError, match="want http=URL; https=URL") as info:
            ProxySettings.parse(bad)
        assert "hunter2" not in str(info.value)


def test_route_by_scheme_then_no_proxy() -> None:
    settings = ProxySettings.parse(f"https={B}", ["intranet.corp"])
    b = parse_proxy_url(B)
    assert settings.route("https", "example.com", 443, "93.184.215.14") == b
    assert settings.route("http", "example.com", 80, "93.184.215.14") is None  # no http proxy
    assert settings.route("https", "wiki.intranet.corp", 443, "93.184.215.14") is None


# --------------------------------------------------------------------------- no_proxy


@pytest.mark.parametrize(
    ("entries", "host", "port", "address", "covered"),
    [
        (["*"], "example.com", 443, "93.184.215.14", True),
        (["example.com"], "example.com", 443, None, True),
        (["example.com"], "www.Example.COM.", 443, None, True),  # subdomain, case, root dot
        (["example.com"], "badexample.com", 443, None, False),  # label boundaries
        (["example.com"], "example.com.evil", 443, None, False),
        ([".example.com"], "example.com", 443, None, True),  # a leading dot is ignored
        (["*.example.com"], "a.example.com", 443, None, True),
        (["example.com:8080"], "example.com", 8080, None, True),
        (["example.com:8080"], "example.com", 443, None, False),
        (["a.test, b.test  c.test"], "c.test", 80, None, True),  # commas and spaces
        (["a.test,b.test"], "d.test", 80, None, False),
        (["10.0.0.0/8"], "10.1.2.3", 80, None, True),  # an address written in the URL
        (["10.0.0.0/8"], "intranet.corp", 80, "10.1.2.3", True),  # the checked address
        (["10.0.0.0/8"], "example.com", 80, "93.184.215.14", False),
        (["192.168.1.5"], "192.168.1.5", 80, None, True),
        (["[::1]:8080"], "::1", 8080, None, True),
        (["fd00::/8"], "intranet.corp", 443, "fd12::7", True),
        (["2001:db8::1"], "[2001:db8::1]", 443, None, True),
        ([], "example.com", 80, "93.184.215.14", False),
        (["localhost"], "127.0.0.1", 80, "127.0.0.1", False),  # names do not match addresses
    ],
)
def test_no_proxy_entries(
    entries: list[str], host: str, port: int, address: str | None, covered: bool
) -> None:
    assert parse_no_proxy(entries).covers(host, port, address) is covered


def test_a_bad_no_proxy_port_is_refused() -> None:
    with pytest.raises(ValueError, match="bad port"):
        parse_no_proxy(["example.com:http"])
    with pytest.raises(ConfigError, match=r"http\.no_proxy: .*bad port"):
        load_config(None, ['http.no_proxy=["example.com:x"]'], environ={})


# --------------------------------------------------------------------------- the environment


@pytest.mark.parametrize(
    ("environ", "proxy", "no_proxy"),
    [
        ({}, "", ()),
        ({"HTTPS_PROXY": A, "HTTP_PROXY": A}, A, ()),
        ({"https_proxy": A, "HTTPS_PROXY": B, "http_proxy": A}, A, ()),  # lower case first
        ({"https_proxy": "", "HTTPS_PROXY": B}, f"https={B}", ()),  # empty counts as unset
        ({"HTTP_PROXY": A}, f"http={A}", ()),  # https targets go direct, as with curl
        ({"http_proxy": A, "https_proxy": B}, f"http={A}; https={B}", ()),
        ({"HTTPS_PROXY": A, "NO_PROXY": "corp,.intranet"}, f"https={A}", ("corp,.intranet",)),
        ({"no_proxy": "a.test", "NO_PROXY": "b.test"}, "", ("a.test",)),
        ({"ALL_PROXY": "socks5://x:1080", "FTP_PROXY": A}, "", ()),  # not read
    ],
)
def test_the_environment_fills_the_unset_keys(
    environ: dict[str, str], proxy: str, no_proxy: tuple[str, ...]
) -> None:
    cfg = load_config(None, [], environ=environ)
    assert (cfg.http.proxy, cfg.http.no_proxy) == (proxy, no_proxy)


@pytest.mark.parametrize(
    ("overrides", "environ", "proxy", "no_proxy"),
    [
        ([f"http.proxy={B}"], {"HTTPS_PROXY": A, "NO_PROXY": "corp"}, B, ("corp",)),
        (['http.no_proxy=["*"]'], {"HTTPS_PROXY": A, "NO_PROXY": "corp"}, f"https={A}", ("*",)),
        ([], {"TRAWL__HTTP__PROXY": B, "HTTPS_PROXY": A}, B, ()),
        ([f"http.proxy={B}"], {"HTTPS_PROXY": "socks5://broken:1080"}, B, ()),  # not read
    ],
)
def test_the_config_wins_key_by_key(
    overrides: list[str], environ: dict[str, str], proxy: str, no_proxy: tuple[str, ...]
) -> None:
    cfg = load_config(None, overrides, environ=environ)
    assert (cfg.http.proxy, cfg.http.no_proxy) == (proxy, no_proxy)


def test_no_proxy_star_turns_an_environment_proxy_off() -> None:
    cfg = load_config(None, ['http.no_proxy=["*"]'], environ={"HTTPS_PROXY": A})
    settings = ProxySettings.parse(cfg.http.proxy, cfg.http.no_proxy)
    assert settings.route("https", "example.com", 443, "93.184.215.14") is None


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"HTTPS_PROXY": "socks5://u:hunter2@x:1080"}, "environment HTTPS_PROXY: only http://"),
        ({"http_proxy": "http://u:hunter2@x:nope"}, "environment http_proxy: bad host or port"),
        ({"no_proxy": "example.com:x"}, "environment no_proxy: bad port"),
    ],
)
def test_a_bad_variable_is_a_config_error_naming_it(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_config(None, [], environ=environ)
    assert "hunter2" not in str(info.value)


def test_a_bad_proxy_setting_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError, match=r"http\.proxy: only http://") as info:
        load_config(None, ["http.proxy=https://u:hunter2@proxy:443"], environ={})
    assert "hunter2" not in str(info.value)


def test_executors_get_the_drivers_values_not_their_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = load_config(None, [], environ={"HTTPS_PROXY": A})
    monkeypatch.setenv("HTTPS_PROXY", B)  # what an executor's environment might say
    assert from_dict(cfg.to_dict()) == cfg
    assert from_dict(cfg.to_dict()).http.proxy == f"https={A}"
    assert from_dict({}).http.proxy == ""
