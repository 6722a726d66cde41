"""What ``[http] proxy`` and ``[http] no_proxy`` mean, and how the proxy
variables of the environment fill them.

Executors in a data-lake VPC often reach the web only through an HTTP proxy.
The settings say which proxy a request goes through; how it goes through
(absolute-form, CONNECT) is ``trawl.net.proxy``'s. Parsing lives here, in the
config layer, so that a wrong value is a ``ConfigError`` when the config is
loaded on the driver, not a failed task on an executor.

``proxy`` is one of:

- ``""``: none configured; the environment's, if any (below);
- ``http://[user:password@]host[:port]``: every target through that proxy;
- ``http=URL; https=URL``: a proxy per target scheme, a scheme left out
  going direct (the rules syntax of Chromium's ``--proxy-server``). This is
  also how an environment whose ``HTTP_PROXY`` and ``HTTPS_PROXY`` differ, or
  that sets only one of them, is written into the config.

A proxy URL without a scheme is taken as ``http://`` (curl and requests do
the same); the port defaults to the scheme's, 80 (RFC 9110 4.2.1; curl would
take 1080). Only ``http://`` proxies are supported: TLS to the proxy
(``https://``) and SOCKS are refused. ``user:password`` is percent-decoded
(RFC 3986 3.2.1) and sent as ``Proxy-Authorization: Basic`` (RFC 7617,
UTF-8). The password never appears in a message of ours, nor in ``repr``.

``no_proxy`` entries (and ``NO_PROXY``) follow curl (7.86+) and requests:

- ``*`` alone: every target goes direct;
- a name: that host and its subdomains, on label boundaries (curl's rule;
  requests' plain suffix match would let ``ample.com`` catch
  ``example.com``); a leading ``.`` or ``*.`` is dropped, case and a
  trailing dot ignored;
- ``name:port``: only requests to that port (as requests does);
- an IP address or CIDR block (IPv6 bare or in brackets): a target written
  as an address in it and -- beyond curl, which does not resolve for this --
  a named target whose *checked* address (``trawl.net.resolver``) is in it:
  trawl resolves every host before it routes a request, so ``10.0.0.0/8`` or
  ``127.0.0.0/8`` covers the names pinned there.

Entries are separated by commas or white space. No target bypasses the proxy
by itself, loopback neither (curl's behaviour; the test web on 127.0.1.x
needs ``127.0.0.0/8`` in ``no_proxy`` when a proxy is set).

The environment, read here only (``trawl.config.load`` calls
``environment_values``): ``http_proxy`` for http:// targets, ``https_proxy``
for https:// ones, ``no_proxy``; the lower-case name first, then upper case
(curl and Python's urllib prefer lower case; curl ignores upper-case
``HTTP_PROXY`` because CGI programs get it from a request header, httpoxy --
trawl is no CGI program). An empty variable counts as unset; ``ALL_PROXY``
is not read (it usually names a SOCKS proxy). Per key, the config wins, as
curl's ``--proxy`` replaces the proxy variables while ``NO_PROXY`` still
applies unless ``--noproxy`` is given: a non-empty ``proxy`` ignores the
proxy variables, a non-empty ``no_proxy`` ignores ``NO_PROXY``, and
``no_proxy = ["*"]`` turns an environment's proxy off.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "NoProxy",
    "ProxyEndpoint",
    "ProxySettings",
    "environment_values",
    "parse_no_proxy",
    "parse_proxy_url",
]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_SCHEMES = ("http", "https")  # the target schemes a proxy can be named for
_ENTRY_SPLIT = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class ProxyEndpoint:
    """Where a proxy listens, and the ``Proxy-Authorization`` value for it
    (None: no credentials); the value is kept out of ``repr``."""

    host: str  # a name or an address (IPv6 without brackets)
    port: int
    authorization: str | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """``host:port`` for messages: never the credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class NoProxy:
    """The targets that go direct (see the module docstring)."""

    everything: bool = False
    names: tuple[tuple[str, int | None], ...] = ()  # (domain, port or None: any)
    networks: tuple[tuple[IPNetwork, int | None], ...] = ()

    def covers(self, host: str, port: int, address: str | None = None) -> bool:
        """Does ``host`` (port ``port``, checked address ``address``) go direct?"""
        if self.everything:
            return True
        name = host.strip("[]").lower().rstrip(".")
        for domain, only in self.names:
            if only in (None, port) and (name == domain or name.endswith("." + domain)):
                return True
        ips = {ip for ip in (_address(name), _address(address or "")) if ip is not None}
        return any(
            only in (None, port) and any(ip in net for ip in ips) for net, only in self.networks
        )


@dataclass(frozen=True)
class ProxySettings:
    """Which proxy a request goes through: one per target scheme, or None
    (direct), and the targets that go direct whatever their scheme."""

    http: ProxyEndpoint | None = None
    https: ProxyEndpoint | None = None
    no_proxy: NoProxy = NoProxy()

    @classmethod
    def parse(cls, proxy: str, no_proxy: Sequence[str] = ()) -> ProxySettings:
        """The settings of ``[http] proxy`` and ``no_proxy``; ``ValueError``
        (without the password) if either cannot be used."""
        per_scheme = _per_scheme(proxy)
        return cls(per_scheme.get("http"), per_scheme.get("https"), parse_no_proxy(no_proxy))

    def route(self, scheme: str, host: str, port: int, address: str) -> ProxyEndpoint | None:
        """The proxy for a request to ``scheme://host:port`` at ``address``
        (None: connect directly)."""
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or self.no_proxy.covers(host, port, address):
            return None
        return proxy


def parse_proxy_url(text: str) -> ProxyEndpoint:
    """``http://[user:password@]host[:port]`` -> ``ProxyEndpoint``, or ``ValueError``."""
    text = text.strip()
    if "://" not in text:
        text = "http://" + text  # curl and requests take a bare host:port as http://
    shown = _redacted(text)
    try:
        parts = urlsplit(text)
        port = parts.port or 80  # RFC 9110 4.2.1: the http scheme's default
    except ValueError:
        raise ValueError(f"bad host or port in proxy URL {shown}") from None
    if parts.scheme.lower() != "http":
        raise ValueError(f"only http:// proxies (no TLS to the proxy, no SOCKS): {shown}")
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"a proxy URL is http://[user:password@]host[:port], got {shown}")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return ProxyEndpoint(parts.hostname, port, authorization)


def parse_no_proxy(entries: Iterable[str]) -> NoProxy:
    """``no_proxy`` entries (each may hold several, comma- or space-separated)."""
    if isinstance(entries, str):
        entries = (entries,)
    names: list[tuple[str, int | None]] = []
    networks: list[tuple[IPNetwork, int | None]] = []
    for entry in (e for item in entries for e in _ENTRY_SPLIT.split(item) if e):
        if entry == "*":
            return NoProxy(everything=True)
        host, port = _split_port(entry)
        try:
            networks.append((ipaddress.ip_network(host, strict=False), port))
        except ValueError:
            names.append((host.lower().removeprefix("*.").lstrip(".").rstrip("."), port))
    return NoProxy(False, tuple(n for n in names if n[0]), tuple(networks))


def environment_values(
    environ: Mapping[str, str], keys: Collection[str] = ("proxy", "no_proxy")
) -> dict[str, Any]:
    """The ``[http]`` ``keys`` the environment gives a value: ``proxy`` (from
    http_proxy/https_proxy), ``no_proxy``. ``ValueError`` naming the variable
    if its value cannot be used (a variable not read is not judged)."""
    values: dict[str, Any] = {}
    proxy = _environment_proxy(environ) if "proxy" in keys else ""
    if proxy:
        values["proxy"] = proxy
    name, no_proxy = _variable(environ, "no_proxy")
    if no_proxy and "no_proxy" in keys:
        values["no_proxy"] = [_checked(name, no_proxy, parse_no_proxy)]
    return values


def _environment_proxy(environ: Mapping[str, str]) -> str:
    """The ``proxy`` value of http_proxy and https_proxy ("" if neither is set)."""
    urls = {}
    for scheme in _SCHEMES:
        name, url = _variable(environ, f"{scheme}_proxy")
        if url:
            urls[scheme] = _checked(name, url, parse_proxy_url)
    if len(urls) == 2 and urls["http"] == urls["https"]:
        return urls["http"]
    return "; ".join(f"{scheme}={url}" for scheme, url in urls.items())


def _checked(name: str, value: str, parse: Callable[[str], object]) -> str:
    """``value`` if ``parse`` takes it, else ``ValueError`` naming the variable."""
    try:
        parse(value)
    except ValueError as exc:
        raise ValueError(f"environment {name}: {exc}") from None
    return value


def _variable(environ: Mapping[str, str], lower: str) -> tuple[str, str]:
    """(name, value) of the lower-case variable if set and non-empty, else
    of the upper-case one (value "" when neither is)."""
    for name in (lower, lower.upper()):
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return lower.upper(), ""


def _per_scheme(proxy: str) -> dict[str, ProxyEndpoint]:
    """``proxy`` as {target scheme: proxy}; see the module docstring."""
    proxy = proxy.strip()
    if not proxy:
        return {}
    if not re.match(r"[\w.+-]+\s*=", proxy):  # no "=" in a URL's scheme or host
        endpoint = parse_proxy_url(proxy)
        return {scheme: endpoint for scheme in _SCHEMES}
    routes: dict[str, ProxyEndpoint] = {}
    for rule in filter(None, (r.strip() for r in proxy.split(";"))):
        scheme, sep, url = (part.strip() for part in rule.partition("="))
        if not sep or scheme.lower() not in _SCHEMES or scheme.lower() in routes:
            raise ValueError(f"want http=URL; https=URL, got {_redacted(rule)!r}")
        routes[scheme.lower()] = parse_proxy_url(url)
    return routes


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host[:port]``, ``[v6][:port]``, a bare IPv6 address or CIDR -> (host, port)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif entry.count(":") == 1:
        host, _, port = entry.partition(":")
    else:
        host, port = entry, ""  # a name, an IPv4 address, or a bare IPv6 one
    if port and not port.isdigit():
        raise ValueError(f"bad port in {entry!r}")
    return host, int(port) if port else None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _redacted(text: str) -> str:
    """``text`` with all before its last ``@`` -- user and password, which may
    hold an ``@`` -- replaced by ``***``, a scheme kept."""
    userinfo, at, rest = text.rpartition("@")
    if not at:
        return text
    scheme, sep, _ = userinfo.partition("://")
    return f"{scheme}{sep}***@{rest}" if sep else f"***@{rest}"
