"""One HTTP/1.1 GET with hard limits, recorded exactly for WARC and the parser.

``HttpClient.get(url, ip)`` connects to ``ip`` - the address ``trawl.net.resolver``
picked and checked; connecting anywhere else would reopen DNS rebinding -
sends the URL's host in ``Host`` and TLS SNI and verifies the certificate
against that name. The ``HttpResponse`` holds ``request_head``, the request
line and fields byte for byte as sent (written by us through ``http.client``'s
``putrequest(skip_host=True, skip_accept_encoding=True)``: urllib3's pool would
add a User-Agent and re-encode the target, ``%2f`` -> ``%2F``); ``headers`` in
arrival order with repeats; ``raw_body``, de-chunked but still content-coded
(what WARC stores); ``body`` with gzip/x-gzip/deflate/br undone (RFC 9110 8.4,
``trawl.net.coding``).

Limits, all hard, because a server may be hostile rather than slow:
``connect_timeout_s`` (TCP + TLS handshake), ``read_timeout_s`` (any wait for
bytes), ``total_timeout_s`` (wall time of the whole ``get``),
``min_transfer_rate_bps`` (bytes per second over the last
``transfer_rate_window_s`` of the body, judged once the body has been read for
a whole window: a 1 byte/s drip never trips the read timeout, and without this
would hold a fetch thread for the whole ``total_timeout_s``),
``max_content_bytes`` (raw body) and ``max_decompressed_bytes`` (decoded
under a bound, so a bomb is never held whole). The response is read through
``_DeadlineReader``, which gives every socket read the smaller of the read
timeout and the time left, so the total limit holds in the head, in chunk-size
lines and in trailers too, where ``http.client`` reads line by line (a head
dripped one byte at a time, or an endless run of ``100 Continue``, would
otherwise never end). An oversized or malformed head - a status line that is
not HTTP, a field line over 64 KiB, more than 100 fields: ``http.client``'s
limits - is ``FetchError("protocol")``; a head the peer closed before its
blank line is ``FetchError("read")``, where ``http.client`` alone would make it
a complete response with no body (RFC 9112 8). A limit hit mid-body keeps what came
and sets ``truncated`` to the WARC 1.1 reason: "length", "time" (total time or
transfer rate), or "disconnect" when the peer closed early or broke the
framing. Redirects are returned, not followed.

Connections are kept alive (RFC 9112 9.3) in a pool of idle ones keyed by
(scheme, ip, port, host), so a host's next URL skips TCP and TLS handshakes:
the crawler fetches a host's URLs one after another. An idle connection the
server closed, or older than ``idle_timeout_s``, is not reused; if a reused one
dies before any response byte the GET is retried once on a new connection
(RFC 9112 9.3.1: allowed for idempotent requests). ``max_idle_connections=0``
sends ``Connection: close`` instead. The client is shared by a fetch task's
threads: each exchange owns its connection and only the pool is locked.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import math
import re
import socket
import ssl
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

from urllib3.util import wait_for_read

from trawl.net.coding import decode_body

Truncation = Literal["length", "time", "disconnect"]
FetchErrorKind = Literal["invalid_url", "connect", "tls", "timeout", "read", "protocol"]
DEFAULT_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_READ_SIZE = 65_536
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.6.2
_BAD_VALUE = re.compile(r"[\r\n\x00]")  # RFC 9110 5.5: no CR, LF or NUL in a field value
_CALLER_MAY_NOT_SET = {"host", "content-length", "transfer-encoding"}  # target and framing
_RATE_SAMPLES = 10  # samples kept per transfer-rate window (bounds the memory of the check)
_PoolKey = tuple[str, str, int, str]


@dataclass(frozen=True)
class HttpResponse:
    url: str
    status: int
    reason: str
    http_version: str  # "HTTP/1.1" or "HTTP/1.0"
    headers: list[tuple[str, str]]  # as received: order and repeats kept
    raw_body: bytes  # de-chunked, still content-coded, at most max_content_bytes
    body: bytes  # content-decoded, at most max_decompressed_bytes; b"" if undecodable
    truncated: Truncation | None
    request_head: bytes  # request line + fields + blank line, exactly as sent
    ip: str
    elapsed_s: float  # start of get() to the end of the body
    ttfb_s: float  # start of get() to the parsed response head
    decode_error: str | None = None  # why ``body`` is empty although ``raw_body`` is not

    def header(self, name: str) -> str | None:
        """The first value of field ``name`` (case-insensitive, RFC 9110 5.1), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


class FetchError(Exception):
    """The exchange failed before a response head arrived; ``kind`` says where."""

    def __init__(self, kind: FetchErrorKind, message: str) -> None:
        super().__init__(kind, message)  # args as given: picklable for Spark
        self.kind: FetchErrorKind = kind
        self.message = message

    def __str__(self) -> str:
        return self.message


def user_agent_string(agent_name: str, version: str, contact_url: str | None) -> str:
    """``name/version (+contact)``: a product token plus a comment (RFC 9110 10.1.5)."""
    if not _TOKEN.fullmatch(agent_name) or not _TOKEN.fullmatch(version):
        raise ValueError(f"agent name and version must be tokens: {agent_name!r} {version!r}")
    if not contact_url:
        return f"{agent_name}/{version}"
    if re.search(r"[()\\\x00-\x1f\x7f]", contact_url):  # RFC 9110 5.6.5 comment text
        raise ValueError(f"contact URL not allowed in a comment: {contact_url!r}")
    return f"{agent_name}/{version} (+{contact_url})"


@dataclass(frozen=True)
class Target:
    """What a URL means for the request: where to connect and what to send."""

    scheme: str
    host: str  # lower-case, IPv6 without brackets: for SNI and certificate checks
    port: int
    authority: str  # the Host field value (RFC 9110 7.2): port only if not the default
    request_target: str  # origin-form (RFC 9112 3.2.1): path and query, no fragment


def parse_target(url: str) -> Target:
    """Split ``url`` for a request; ``FetchError("invalid_url")`` if it cannot be fetched."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError("invalid_url", f"{url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in _DEFAULT_PORTS or not host or not host.isascii():
        raise FetchError("invalid_url", f"not an http(s) URL with an ASCII host: {url!r}")
    default = _DEFAULT_PORTS[scheme]
    port = default if port is None else port
    literal = f"[{host}]" if ":" in host else host
    authority = literal if port == default else f"{literal}:{port}"
    target = parts.path or "/"
    if "?" in url.partition("#")[0]:  # keep an empty query ("/a?"): RFC 3986 6.2.3
        target += "?" + parts.query
    return Target(scheme, host, port, authority, _encode_target(target))


def _encode_target(target: str) -> str:
    """Percent-encode what may not appear in a request-target (RFC 3986 2.1, 2.5):
    controls, space, DEL and non-ASCII (as UTF-8). Existing escapes are kept."""
    if all("!" <= ch <= "~" for ch in target):
        return target
    return "".join(
        ch if "!" <= ch <= "~" else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
        for ch in target
    )


def _content_codings(headers: list[tuple[str, str]]) -> list[str]:
    codings = [
        item.strip().lower()
        for name, value in headers
        if name.lower() == "content-encoding"
        for item in value.split(",")
    ]
    return [c for c in codings if c and c != "identity"]


def _check_field(name: str, value: str) -> None:
    if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
        raise ValueError(f"invalid request header {name!r}: {value!r}")
    value.encode("latin-1")  # http.client sends values as ISO-8859-1 (RFC 9110 5.5)


class _DeadlineReader(io.RawIOBase):
    """The socket as ``http.client`` reads it, with each wait bounded by the
    read timeout and by the time left until the exchange's deadline."""

    def __init__(self, sock: socket.socket, deadline: float, read_timeout_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # keeps the socket open until closed
        self._deadline = deadline
        self._read_timeout_s = read_timeout_s
        self.eof = False  # the peer closed its end

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("total time limit reached")
        self._sock.settimeout(min(self._read_timeout_s, left))
        try:
            n = self._raw.readinto(buffer)
        except TimeoutError:  # say which limit it was
            if time.monotonic() >= self._deadline:
                raise TimeoutError("total time limit reached") from None
            raise TimeoutError(f"no bytes for {self._read_timeout_s:g} s (read timeout)") from None
        self.eof = self.eof or n == 0
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


class _BoundedResponse(http.client.HTTPResponse):
    """An ``HTTPResponse`` that reads through a ``_DeadlineReader`` and refuses
    a head the peer cut short."""

    def __init__(
        self, sock: socket.socket, deadline: float, read_timeout_s: float, method: str | None
    ) -> None:
        super().__init__(sock, method=method)
        self.fp.close()  # the plain reader made by HTTPResponse; nothing was read from it
        self._reader = _DeadlineReader(sock, deadline, read_timeout_s)
        self.fp = io.BufferedReader(self._reader)

    def begin(self) -> None:
        super().begin()
        # http.client takes end of input for the end of the fields. The head is
        # read line by line and a line is only read past once it is whole, so
        # end of input seen by now means the fields never ended: RFC 9112 8,
        # an incomplete message (else a cut-off head is a 200 with no body).
        if self._reader.eof:
            raise ConnectionAbortedError("the peer closed the connection inside the response head")


class _Connection(http.client.HTTPConnection):
    """HTTP/1.1 to a pinned address; the response of the exchange in progress
    reads under that exchange's ``deadline`` (set before each request)."""

    deadline = math.inf
    read_timeout_s = math.inf

    # http.client calls ``self.response_class(sock, method=...)``: a method
    # serves as well as a class, and binds the limits of this connection.
    def response_class(  # type: ignore[override]
        self,
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
    ) -> http.client.HTTPResponse:
        return _BoundedResponse(sock, self.deadline, self.read_timeout_s, method)


class _TransferRate:
    """Is the body arriving slower than ``floor_bps``, averaged over the last
    ``window_s``? Judged only once the body has been read for a whole window.

    Samples of (time, bytes so far) are kept about ``window_s / _RATE_SAMPLES``
    apart, so the memory is bounded whatever the read pattern; the average is
    taken from the newest sample at least one window old, i.e. over a span of
    one window to one window plus a sample spacing.
    """

    def __init__(self, floor_bps: float, window_s: float, started: float) -> None:
        self.floor_bps = floor_bps
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque([(started, 0)])

    def too_slow(self, received: int, now: float) -> bool:
        if self.floor_bps <= 0 or self.window_s <= 0:
            return False
        if now - self._samples[-1][0] >= self.window_s / _RATE_SAMPLES:
            self._samples.append((now, received))
        while len(self._samples) > 1 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()
        since, then = self._samples[0]
        if now - since < self.window_s:
            return False
        return (received - then) / (now - since) < self.floor_bps


class _PinnedTLSConnection(_Connection):
    """HTTPS to a pinned address: TCP to the IP, TLS SNI and certificate
    verification against the URL's host name (RFC 9110 4.3.4, RFC 6066 3)."""

    default_port = 443

    def __init__(
        self, ip: str, port: int, timeout: float, context: ssl.SSLContext, server_hostname: str
    ) -> None:
        super().__init__(ip, port, timeout=timeout)
        self._context = context
        self._server_hostname = server_hostname

    def connect(self) -> None:
        super().connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname)


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
    ) -> None:
        _check_field("User-Agent", user_agent)
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
        self._tls: ssl.SSLContext | None = None  # made on first use: loading CAs takes ~50 ms
        self._idle: OrderedDict[_PoolKey, tuple[float, _Connection]] = OrderedDict()
        self._lock = threading.Lock()

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
        key = (target.scheme, ip, target.port, target.host)
        conn, resp = self._open(key, target, fields, deadline)
        ttfb = time.monotonic() - started
        try:
            raw, truncated = self._read_body(resp)
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
            raw, _content_codings(headers), self.max_decompressed_bytes, truncated is not None
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
            request_head=_request_head(target.request_target, fields),
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
        fields = [
            ("Host", target.authority),  # RFC 9112 3.2: first, as clients usually do
            ("User-Agent", self.user_agent),
            ("Accept", self.accept),
            ("Accept-Encoding", self.accept_encoding),
        ]
        if self.max_idle_connections <= 0:
            fields.append(("Connection", "close"))  # RFC 9112 9.6
        for name, value in (extra or {}).items():
            _check_field(name, value)
            if name.lower() in _CALLER_MAY_NOT_SET:
                raise ValueError(f"extra_headers may not set {name}")
            same = [i for i, (have, _) in enumerate(fields) if have.lower() == name.lower()]
            if same:
                fields[same[0]] = (name, value)
            else:
                fields.append((name, value))
        return fields

    def _open(
        self, key: _PoolKey, target: Target, fields: list[tuple[str, str]], deadline: float
    ) -> tuple[_Connection, http.client.HTTPResponse]:
        """Send the request and read the response head: (conn, response)."""
        for attempt in range(2):
            conn = self._checkout(key) if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = self._connect(target, key[1], deadline)
            conn.deadline, conn.read_timeout_s = deadline, self.read_timeout_s
            try:
                conn.sock.settimeout(self._wait(self.read_timeout_s, deadline))  # for sending
                conn.putrequest(
                    "GET", target.request_target, skip_host=True, skip_accept_encoding=True
                )
                for name, value in fields:
                    conn.putheader(name, value)
                conn.endheaders()
                return conn, conn.getresponse()
            except Exception as exc:
                conn.close()
                if reused and isinstance(exc, ConnectionError):
                    continue  # the server closed the idle connection: retry once
                _raise_fetch_error(exc, f"GET {target.request_target}", connecting=False)
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect(self, target: Target, ip: str, deadline: float) -> _Connection:
        timeout = self._wait(self.connect_timeout_s, deadline)
        conn: _Connection
        if target.scheme == "https":
            conn = _PinnedTLSConnection(ip, target.port, timeout, self._tls_context(), target.host)
        else:
            conn = _Connection(ip, target.port, timeout=timeout)
        try:
            conn.connect()
        except Exception as exc:
            conn.close()
            where = f"connect to {ip} port {target.port} for {target.host}"
            _raise_fetch_error(exc, where, connecting=True)
        return conn

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:  # verify_mode CERT_REQUIRED, check_hostname True
                self._tls = ssl.create_default_context(cafile=self.ca_certs)
            return self._tls

    # -- response --------------------------------------------------------------

    def _read_body(self, resp: http.client.HTTPResponse) -> tuple[bytes, Truncation | None]:
        """Read the payload in chunks until EOF or a limit (module docstring).

        Each read waits at most the read timeout and never past the deadline
        (``_DeadlineReader``); the transfer rate is judged after every read.
        """
        raw = bytearray()
        cap = self.max_content_bytes
        rate = _TransferRate(
            self.min_transfer_rate_bps, self.transfer_rate_window_s, time.monotonic()
        )
        while True:
            try:
                chunk = resp.read1(min(_READ_SIZE, cap + 1 - len(raw)))
            except TimeoutError:
                return bytes(raw), "time"
            except (OSError, http.client.HTTPException):  # reset, IncompleteRead, TLS
                return bytes(raw), "disconnect"
            if not chunk:
                break
            raw += chunk
            if len(raw) > cap:
                return bytes(raw[:cap]), "length"
            if rate.too_slow(len(raw), time.monotonic()):
                return bytes(raw), "time"
        if resp.length:  # Content-Length promised more than came (RFC 9112 8)
            return bytes(raw), "disconnect"
        return bytes(raw), None

    @staticmethod
    def _wait(limit: float, deadline: float) -> float:
        """A timeout for the next step: ``limit`` but never past ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise FetchError("timeout", "total time limit reached before the response")
        return min(limit, left)

    # -- pool ------------------------------------------------------------------

    def _checkout(self, key: _PoolKey) -> _Connection | None:
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

    def _checkin(self, key: _PoolKey, conn: _Connection) -> None:
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


def _request_head(request_target: str, fields: list[tuple[str, str]]) -> bytes:
    """The bytes ``http.client`` puts on the wire for this request (RFC 9112 2.1, 3)."""
    lines = [f"GET {request_target} HTTP/1.1", *(f"{name}: {value}" for name, value in fields)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _raise_fetch_error(exc: Exception, where: str, connecting: bool) -> NoReturn:
    """Raise ``exc`` as a ``FetchError`` (or as itself if it is not a network error)."""
    kind: FetchErrorKind
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
