"""One HTTP/1.1 GET to a pinned address over a kept-alive connection.

``HttpClient.get(url, ip)`` connects to ``ip`` - the address ``trawl.net.resolver``
picked and checked; connecting anywhere else would reopen DNS rebinding -
sends the URL's host in ``Host`` and TLS SNI and verifies the certificate
against that name (RFC 9110 4.3.4, RFC 6066 3). What is sent is
``trawl.net.request``'s; the answer is read and recorded by
``trawl.net.response`` (``HttpResponse``), under the limits this client
holds: ``connect_timeout_s`` (TCP + TLS handshake), ``read_timeout_s`` (any
wait for bytes), ``total_timeout_s`` (wall time of the whole ``get``),
``min_transfer_rate_bps`` over ``transfer_rate_window_s``,
``max_content_bytes`` (raw body) and ``max_decompressed_bytes`` (decoded
under a bound, so a bomb is never held whole). Redirects are returned, not
followed.

No response head is ``FetchError``, its ``kind`` saying where: an oversized
or malformed head - a status line that is not HTTP, a field line over 64 KiB,
more than 100 fields: ``http.client``'s limits - is ``"protocol"``; a head
the peer closed before its blank line is ``"read"`` (RFC 9112 8); the total
time running out before the head is ``"timeout"``.

Connections are kept alive (RFC 9112 9.3) in a pool of idle ones keyed by
(scheme, ip, port, host), so a host's next URL skips TCP and TLS handshakes:
the crawler fetches a host's URLs one after another. An idle connection the
server closed, or older than ``idle_timeout_s``, is not reused; if a reused one
dies before any response byte the GET is retried once on a new connection
(RFC 9112 9.3.1: allowed for idempotent requests). ``max_idle_connections=0``
sends ``Connection: close`` instead. The client is shared by a fetch task's
threads: each exchange owns its connection and only the pool is locked.

With a proxy (``proxy``: ``trawl.config.ProxySettings``, routed per request)
the connection goes to the proxy instead: an http:// request in
absolute-form, an https:// one through a CONNECT tunnel to ``ip``; the
request recorded is the one the target sees, and a proxy that cannot be
reached or refuses is ``FetchError("proxy")`` (``trawl.net.proxy``).
Connections through a proxy are pooled by target like direct ones.
"""

from __future__ import annotations

import http.client
import ipaddress
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import NoReturn

from urllib3.util import wait_for_read

from trawl.config import Config, ProxyEndpoint, ProxySettings
from trawl.net.coding import decode_body
from trawl.net.connection import Connection, PinnedTLSConnection
from trawl.net.proxy import Tunnel, authority_form, on_the_wire, refused
from trawl.net.request import (
    DEFAULT_ACCEPT,
    Target,
    check_field,
    parse_target,
    request_fields,
    request_head,
)
from trawl.net.response import (
    FetchError,
    FetchErrorKind,
    HttpResponse,
    content_codings,
    read_body,
)

__all__ = ["HttpClient"]

_PoolKey = tuple[str, str, int, str]


class HttpClient:
    """GET one URL at a time, thread-safe; see the module docstring."""

    def __init__(
        self,
        user_agent: str,
        connect_timeout_s: float = 5,
        read_timeout_s: float = 10,
        total_timeout_s: float = 30,
        max_content_bytes: int = 2_000_000,
        max_decompressed_bytes: int = 10_000_000,
        accept_encoding: str = "gzip, deflate, br",
        *,
        min_transfer_rate_bps: float = 0.0,
        transfer_rate_window_s: float = 10.0,
        accept: str = DEFAULT_ACCEPT,
        max_idle_connections: int = 32,
        idle_timeout_s: float = 30.0,
        ca_certs: str | None = None,
        proxy: ProxySettings | None = None,
    ) -> None:
        check_field("User-Agent", user_agent)
        self.user_agent = user_agent
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.total_timeout_s = total_timeout_s
        self.max_content_bytes = max_content_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self.min_transfer_rate_bps = min_transfer_rate_bps  # 0: no minimum
        self.transfer_rate_window_s = transfer_rate_window_s
        # RFC 9110 12.5.3: no Accept-Encoding would allow any coding; "identity" asks for none.
        self.accept_encoding = accept_encoding or "identity"
        self.accept = accept
        self.max_idle_connections = max_idle_connections
        self.idle_timeout_s = idle_timeout_s
        self.ca_certs = ca_certs
        self.proxy = proxy or ProxySettings()  # none: every request direct
        self._tls: ssl.SSLContext | None = None  # made on first use: loading CAs takes ~50 ms
        self._idle: OrderedDict[_PoolKey, tuple[float, Connection]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: Config, user_agent: str) -> HttpClient:
        """The client of ``http.*``, sending ``user_agent``."""
        h = cfg.http
        return cls(
            user_agent,
            connect_timeout_s=h.connect_timeout_s,
            read_timeout_s=h.read_timeout_s,
            total_timeout_s=h.total_timeout_s,
            max_content_bytes=h.max_content_bytes,
            max_decompressed_bytes=h.max_decompressed_bytes,
            accept_encoding=h.accept_encoding,
            min_transfer_rate_bps=h.min_transfer_rate_bps,
            transfer_rate_window_s=h.transfer_rate_window_s,
            max_idle_connections=h.max_idle_connections,
            proxy=ProxySettings.parse(h.proxy, h.no_proxy),
        )

    # -- public ----------------------------------------------------------------

    def get(
        self,
        url: str,
        ip: str,
        extra_headers: Mapping[str, str] | None = None,
        not_after: float | None = None,
        started: float | None = None,
    ) -> HttpResponse:
        """GET ``url`` from ``ip``; ``FetchError`` if no response head arrives.

        ``extra_headers`` (e.g. If-None-Match, If-Modified-Since) are sent after
        ours and replace ours of the same name; Host and framing fields are
        refused (``ValueError``). ``not_after`` (a ``time.monotonic()`` reading)
        brings the total time limit forward, e.g. to a fetch task's deadline.
        ``started`` (a ``time.monotonic()`` reading, by default now) is when
        the caller began the request: ``elapsed_s`` and ``ttfb_s`` count from
        it, so a caller that stamped its wall-clock start just after it gets
        start + elapsed no earlier than the body's end.
        """
        started = time.monotonic() if started is None else started
        deadline = started + self.total_timeout_s
        if not_after is not None:
            deadline = min(deadline, not_after)
        target = parse_target(url)
        ip = str(ipaddress.ip_address(ip.strip("[]")))  # ValueError: not an address
        fields = self._request_fields(target, extra_headers)
        key = (target.scheme, ip, target.port, target.host)  # one route per key: proxy or not
        proxy = self.proxy.route(target.scheme, target.host, target.port, ip)
        conn, resp = self._open(key, target, fields, deadline, proxy)
        ttfb = time.monotonic() - started
        try:
            raw, truncated = read_body(
                resp,
                self.max_content_bytes,
                self.min_transfer_rate_bps,
                self.transfer_rate_window_s,
            )
        except BaseException:
            conn.close()
            raise
        finally:
            resp.close()
        if truncated is None and not resp.will_close:
            self._checkin(key, conn)
        else:
            conn.close()
        headers = [(str(name), str(value)) for name, value in resp.msg.items()]
        body, hit_cap, error = decode_body(
            raw, content_codings(headers), self.max_decompressed_bytes, truncated is not None
        )
        return HttpResponse(
            url=url,
            status=resp.status,
            reason=resp.reason,
            http_version="HTTP/1.0" if resp.version == 10 else "HTTP/1.1",
            headers=headers,
            raw_body=raw,
            body=body,
            truncated=truncated or ("length" if hit_cap else None),
            request_head=request_head(target.request_target, fields),
            ip=ip,
            elapsed_s=time.monotonic() - started,
            ttfb_s=ttfb,
            decode_error=error,
        )

    def close(self) -> None:
        """Close the idle connections (in-flight ones close when they finish)."""
        with self._lock:
            idle = [conn for _, conn in self._idle.values()]
            self._idle.clear()
        for conn in idle:
            conn.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A safety net for owners that never call close(): no socket is left to
        # the garbage collector (ResourceWarning).
        if hasattr(self, "_idle"):
            self.close()

    # -- request ---------------------------------------------------------------

    def _request_fields(
        self, target: Target, extra: Mapping[str, str] | None
    ) -> list[tuple[str, str]]:
        ours = [
            ("User-Agent", self.user_agent),
            ("Accept", self.accept),
            ("Accept-Encoding", self.accept_encoding),
        ]
        if self.max_idle_connections <= 0:
            ours.append(("Connection", "close"))  # RFC 9112 9.6
        return request_fields(target, ours, extra)

    def _open(
        self,
        key: _PoolKey,
        target: Target,
        fields: list[tuple[str, str]],
        deadline: float,
        proxy: ProxyEndpoint | None,
    ) -> tuple[Connection, http.client.HTTPResponse]:
        """Send the request and read the response head: (conn, response)."""
        request_target, sent = on_the_wire(target, fields, proxy)
        for attempt in range(2):
            conn = self._checkout(key) if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = self._connect(target, key[1], deadline, proxy)
            conn.deadline, conn.read_timeout_s = deadline, self.read_timeout_s
            try:
                conn.sock.settimeout(self._wait(self.read_timeout_s, deadline))  # for sending
                conn.putrequest("GET", request_target, skip_host=True, skip_accept_encoding=True)
                for name, value in sent:
                    conn.putheader(name, value)
                conn.endheaders()
                return conn, _answer(conn.getresponse(), conn, request_target)
            except Exception as exc:
                conn.close()
                if reused and isinstance(exc, ConnectionError):
                    continue  # the server closed the idle connection: retry once
                _raise_fetch_error(exc, f"GET {target.request_target}", connecting=False)
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect(
        self, target: Target, ip: str, deadline: float, proxy: ProxyEndpoint | None
    ) -> Connection:
        """A new connection to ``ip``, or to ``proxy`` (tunnelled for https)."""
        timeout = self._wait(self.connect_timeout_s, deadline)
        host, port = (ip, target.port) if proxy is None else (proxy.host, proxy.port)
        conn: Connection
        if target.scheme == "https":
            conn = PinnedTLSConnection(host, port, timeout, self._tls_context(), target.host)
            if proxy is not None:
                conn.tunnel = Tunnel(proxy, authority_form(ip, target.port), self.user_agent)
        else:
            conn = Connection(host, port, timeout=timeout)
        conn.deadline, conn.read_timeout_s, conn.via = deadline, self.read_timeout_s, proxy
        try:
            conn.connect()
        except Exception as exc:
            conn.close()
            where = f"connect to {ip} port {target.port} for {target.host}"
            if proxy is not None:
                where += f" through proxy {proxy.address}"
            _raise_fetch_error(exc, where, connecting=True)
        return conn

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:  # verify_mode CERT_REQUIRED, check_hostname True
                self._tls = ssl.create_default_context(cafile=self.ca_certs)
            return self._tls

    # -- deadline --------------------------------------------------------------

    @staticmethod
    def _wait(limit: float, deadline: float) -> float:
        """A timeout for the next step: ``limit`` but never past ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise FetchError("timeout", "total time limit reached before the response")
        return min(limit, left)

    # -- pool ------------------------------------------------------------------

    def _checkout(self, key: _PoolKey) -> Connection | None:
        with self._lock:
            entry = self._idle.pop(key, None)
        if entry is None:
            return None
        idle_since, conn = entry
        fresh = time.monotonic() - idle_since < self.idle_timeout_s
        # Readable while idle means the server closed it (EOF) or sent junk.
        if fresh and conn.sock is not None and not wait_for_read(conn.sock, timeout=0.0):
            return conn
        conn.close()
        return None

    def _checkin(self, key: _PoolKey, conn: Connection) -> None:
        evicted = []
        with self._lock:
            if key in self._idle or self.max_idle_connections <= 0:
                evicted.append(conn)
            else:
                self._idle[key] = (time.monotonic(), conn)
                while len(self._idle) > self.max_idle_connections:
                    evicted.append(self._idle.popitem(last=False)[1][1])
        for old in evicted:
            old.close()


def _answer(
    resp: http.client.HTTPResponse, conn: Connection, request_target: str
) -> http.client.HTTPResponse:
    """``resp``, unless it is a forwarding proxy's 407 (RFC 9110 15.5.8): that
    is the proxy's own answer, not the target's, so ``FetchError("proxy")``."""
    if conn.via is not None and conn.tunnel is None and resp.status == 407:
        resp.close()
        raise refused(conn.via, f"GET {request_target}", resp.status, resp.reason)
    return resp


def _raise_fetch_error(exc: Exception, where: str, connecting: bool) -> NoReturn:
    """Raise ``exc`` as a ``FetchError`` (or as itself if it is not a network error)."""
    kind: FetchErrorKind
    if isinstance(exc, FetchError):  # already says what failed (a proxy's refusal)
        raise exc
    if isinstance(exc, TimeoutError):
        kind = "connect" if connecting else "timeout"
    elif isinstance(exc, ssl.SSLError):  # handshake, certificate verification
        kind = "tls"
    elif isinstance(exc, ConnectionError | http.client.RemoteDisconnected):
        kind = "connect" if connecting else "read"
    elif isinstance(exc, http.client.HTTPException):  # bad status line, too many fields
        kind = "protocol"
    elif isinstance(exc, OSError):
        kind = "connect" if connecting else "read"
    else:
        raise exc
    detail = str(exc)
    if not detail.isprintable():  # e.g. a status line of raw bytes: no CR/LF in logs and rows
        detail = repr(detail)
    raise FetchError(kind, f"{where}: {type(exc).__name__}: {detail}") from exc
