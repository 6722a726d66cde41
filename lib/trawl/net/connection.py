"""The connection of one exchange: TCP to a pinned address (TLS verified
against the URL's host), or to a proxy and through a tunnel.

``trawl.net.client.HttpClient`` makes them and pools them; what they add to
``http.client``'s is the exchange's limits (a response reads under the
``deadline`` and ``read_timeout_s`` of the exchange in progress, set before
each request: ``trawl.net.response.BoundedResponse``), the pinned address
(connecting to any other than the one the resolver checked would reopen DNS
rebinding: ``trawl.net.resolver``) and the proxy: a connection ``via`` a
proxy connects to it, and for https opens its ``tunnel`` (``CONNECT``,
``trawl.net.proxy``) before the TLS handshake, whose SNI and certificate
check are the target's either way. A proxy that cannot be reached is
``FetchError("proxy")``, not a connect error of the target.
"""

from __future__ import annotations

import http.client
import math
import socket
import ssl
import time

from trawl.config import ProxyEndpoint
from trawl.net.proxy import Tunnel, unreachable
from trawl.net.response import BoundedResponse

__all__ = ["Connection", "PinnedTLSConnection"]


class Connection(http.client.HTTPConnection):
    """HTTP/1.1 to a pinned address, or to a proxy (``via``), through a
    tunnel if ``tunnel`` is set; the response of the exchange in progress
    reads under that exchange's ``deadline`` (set before each request)."""

    deadline = math.inf
    read_timeout_s = math.inf
    via: ProxyEndpoint | None = None  # the proxy connected to; None: the target
    tunnel: Tunnel | None = None  # opened once connected to the proxy

    def connect(self) -> None:
        if self.via is None:
            super().connect()
            return
        try:
            super().connect()
        except OSError as exc:
            raise unreachable(self.via, exc) from exc
        if self.tunnel is not None:  # the CONNECT's wait counts as connecting
            limit = math.inf if self.timeout is None else self.timeout
            self.tunnel.open(self.sock, min(self.deadline, time.monotonic() + limit), limit)
            self.sock.settimeout(self.timeout)  # for the TLS handshake

    # http.client calls ``self.response_class(sock, method=...)``: a method
    # serves as well as a class, and binds the limits of this connection.
    def response_class(  # type: ignore[override]
        self,
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
    ) -> http.client.HTTPResponse:
        return BoundedResponse(sock, self.deadline, self.read_timeout_s, method)


class PinnedTLSConnection(Connection):
    """HTTPS to a pinned address: TCP to the IP (or to the proxy, then
    through the tunnel to the IP), TLS SNI and certificate verification
    against the URL's host name (RFC 9110 4.3.4, RFC 6066 3)."""

    default_port = 443

    def __init__(
        self, host: str, port: int, timeout: float, context: ssl.SSLContext, server_hostname: str
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._context = context
        self._server_hostname = server_hostname

    def connect(self) -> None:
        super().connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname)
