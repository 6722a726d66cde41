"""Requests through an HTTP proxy: absolute-form for http://, a CONNECT tunnel for https://.

Which proxy a request goes through, if any, is ``trawl.config.proxy``'s
(``ProxySettings.route``, from ``[http] proxy``/``no_proxy`` or the
environment); how it goes through is this module's, for
``trawl.net.client``:

- an **http://** target is asked of the proxy with the absolute-form
  request-target, ``GET http://host:port/path HTTP/1.1`` (RFC 9112 3.2.2),
  the fields sent direct (Host first), and ``Proxy-Authorization`` when the
  proxy has credentials (RFC 9110 11.7.2). The proxy forwards it in
  origin-form; a 407 is the proxy's own answer (RFC 9110 15.5.8), anything
  else is the origin's as relayed (a 502 or 504 the proxy makes up cannot
  be told from the origin's: it is recorded as the answer, a 5xx to retry);
- an **https://** target is reached through a tunnel (``Tunnel``):
  ``CONNECT ip:port`` in authority-form (RFC 9110 9.3.6, RFC 9112 3.2.3);
  any 2xx opens it, anything else is refused; then TLS runs end to end with
  the target -- SNI and certificate checked against the target's host name
  (RFC 6066 3, RFC 9110 4.3.4) exactly as direct -- and the request inside
  is the direct one. The proxy sees neither path nor fields.

**CONNECT names the checked address, not the host name** (curl sends the
name). The SSRF guard (``trawl.net.resolver``) judges the address the name
resolved to, and the connection must go to exactly that address or DNS
rebinding reopens the hole: a DNS server that answers trawl with a public
address and the proxy, a moment later, with 10.0.0.5 or 169.254.169.254
would turn the proxy -- which sits inside the VPC -- into a way into the
operator's own network. With the address the tunnel ends where the guard
looked, the per-IP politeness clock (``trawl.fetch.politeness``) counts the
address really contacted, and WARC-IP-Address is exact. The origin still
sees the name, in SNI and Host, as when connecting direct. The cost: a proxy
that allows or logs by domain (Squid's ``dstdomain``) sees only addresses,
and one that refuses CONNECT to an address refuses every https:// target
(each a "proxy" error quoting the proxy's answer).

http:// targets cannot keep that: a proxy MUST take the target's host from
an absolute-form request-target and ignore Host (RFC 9112 3.2.2), so naming
the address there would give the origin ``Host: 93.184.215.14`` and break
name-based virtual hosting. The proxy resolves the name itself: the guard
still refuses a name that resolves to a private address for trawl, but the
defence against rebinding on plain http through a proxy is the proxy's own
egress rule (deny private destinations there). WARC-IP-Address of such an
exchange is the address trawl resolved, as Heritrix records the address of
its own DNS lookup.

**What is recorded** is the exchange with the target, as Heritrix records
it: the request record holds the origin-form request the target sees (Host,
our fields), never the absolute-form line or Proxy-Authorization
(``trawl.net.request.request_head`` is built from the fields before
``on_the_wire`` adds the credentials); the response record holds the answer
as relayed (a proxy may add Via). Credentials never reach a message of
ours: errors name the proxy as ``host:port``.

**Errors** are ``FetchError("proxy")`` -- a proxy that cannot be reached,
that does not answer a CONNECT, refuses it (a 407 says whether credentials
were sent) or answers a forwarded request with 407 -- so they count as
network errors (the outcome is a retry, the host's failure count grows) with
their own counter, ``fetch/why/retry/proxy``. A TLS failure inside a tunnel
is the target's (``"tls"``); what fails once the request is sent is what it
would be direct (``"read"``, ``"timeout"``).
"""

from __future__ import annotations

import http.client
import socket
from dataclasses import dataclass

from trawl.config import ProxyEndpoint
from trawl.net.request import Target
from trawl.net.response import BoundedResponse, FetchError

__all__ = ["Tunnel", "absolute_form", "authority_form", "on_the_wire", "refused", "unreachable"]


@dataclass(frozen=True)
class Tunnel:
    """A CONNECT to ask of ``proxy``: a tunnel to ``authority`` (RFC 9110 9.3.6)."""

    proxy: ProxyEndpoint
    authority: str  # authority-form, the checked address: see the module docstring
    user_agent: str  # names the crawler to the proxy's operator too, as curl does

    def head(self) -> bytes:
        """The CONNECT request: Host is the authority (RFC 9110 7.2, 9.3.6)."""
        fields = [("Host", self.authority), ("User-Agent", self.user_agent)]
        if self.proxy.authorization:
            fields.append(("Proxy-Authorization", self.proxy.authorization))
        lines = [f"CONNECT {self.authority} HTTP/1.1", *(f"{n}: {v}" for n, v in fields)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def open(self, sock: socket.socket, until: float, read_timeout_s: float) -> None:
        """Ask the proxy connected on ``sock`` for the tunnel; return once it is
        open. ``FetchError("proxy")`` if it is refused or not answered by
        ``until`` (a monotonic reading). A proxy sends nothing after its 2xx
        until the client speaks; bytes it did send would be lost with the
        reader, and the TLS handshake would fail on them."""
        what = f"CONNECT {self.authority}"
        answer = BoundedResponse(sock, until, read_timeout_s, "CONNECT")
        try:
            sock.sendall(self.head())
            answer.begin()
        except (OSError, http.client.HTTPException) as exc:
            raise FetchError(
                "proxy", f"proxy {self.proxy.address} gave no answer to {what}: {_detail(exc)}"
            ) from exc
        finally:
            answer.close()  # closes the reader, not the socket
        if not 200 <= answer.status < 300:  # RFC 9110 9.3.6: any 2xx opens the tunnel
            raise refused(self.proxy, what, answer.status, answer.reason)


def absolute_form(target: Target) -> str:
    """The request-target a proxy is asked for (RFC 9112 3.2.2): the whole URI."""
    return f"{target.scheme}://{target.authority}{target.request_target}"


def authority_form(ip: str, port: int) -> str:
    """A CONNECT's request-target (RFC 9112 3.2.3), IPv6 in brackets (RFC 3986 3.2.2)."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def on_the_wire(
    target: Target, fields: list[tuple[str, str]], proxy: ProxyEndpoint | None
) -> tuple[str, list[tuple[str, str]]]:
    """The request-target and fields a GET puts on the wire: to a proxy that
    forwards it (http://), absolute-form and the proxy's credentials; direct
    or inside a tunnel, origin-form and ``fields`` -- what is recorded."""
    if proxy is None or target.scheme != "http":
        return target.request_target, fields
    if proxy.authorization:
        fields = [*fields, ("Proxy-Authorization", proxy.authorization)]
    return absolute_form(target), fields


def refused(proxy: ProxyEndpoint, what: str, status: int, reason: str) -> FetchError:
    """A proxy's refusal; for a 407 (RFC 9110 15.5.8), whether credentials were sent."""
    detail = _printable(f"{status} {reason}".strip())
    if status == 407:
        sent = proxy.authorization is not None
        detail += " (credentials refused)" if sent else " (wants http://user:password@ in proxy)"
    return FetchError("proxy", f"proxy {proxy.address} refused {what}: {detail}")


def unreachable(proxy: ProxyEndpoint, exc: OSError) -> FetchError:
    """A proxy that cannot be connected to: the crawl's egress is down."""
    return FetchError("proxy", f"proxy {proxy.address} unreachable: {_detail(exc)}")


def _detail(exc: Exception) -> str:
    return _printable(f"{type(exc).__name__}: {exc}")


def _printable(text: str) -> str:
    """``text`` for a log line or a row: a proxy's bytes are not trusted."""
    return text if text.isprintable() else repr(text)
