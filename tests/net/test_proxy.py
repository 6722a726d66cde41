"""HttpClient through a forward proxy (trawl.net.proxy) against real loopback servers.

The proxy is a small threaded one written here, on 127.0.0.1: CONNECT
tunnels and absolute-form forwarding, optional Basic credentials, and a log
of what it relayed. The origins are ``tests/net/test_client.py``'s servers,
whose ``/echo`` answers with the request head exactly as received, so a test
sees what the target saw.
"""

from __future__ import annotations

import base64
import http.client
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.net.test_client import UA, Server, _serve
from trawl.config import ProxySettings, load_config
from trawl.net.client import HttpClient
from trawl.net.proxy import absolute_form, authority_form
from trawl.net.request import parse_target
from trawl.net.response import FetchError, HttpResponse

USER, PASSWORD = "crawler", "s3cr:t@pw"  # ":" and "@" percent-encoded in the URL
USERINFO = "crawler:s3cr%3At%40pw"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
VIA = "1.1 test-proxy"
AUTH_REQUIRED = (
    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
)
_DROPPED = {"proxy-authorization", "proxy-connection"}  # hop-by-hop, the proxy's own
_REFRAMED = {"content-length", "transfer-encoding", "connection", "keep-alive"}


# -- the proxy --------------------------------------------------------------------


@dataclass(frozen=True)
class Relayed:
    """One request the proxy took: what it was asked, with which credentials,
    and the address it connected to for it (None: it refused)."""

    method: str
    target: str
    authorization: str | None
    upstream: str | None
    head: bytes


def recv_head(sock: socket.socket) -> bytes | None:
    """A request head, read byte by byte so nothing past it is taken (a
    tunnel's first bytes stay in the socket); None at end of input."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            return None
        head += byte
    return head


def fields_of(head: bytes) -> list[tuple[str, str]]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(n, v.strip()) for n, _, v in (line.partition(":") for line in lines if line)]


class ProxyHandler(socketserver.BaseRequestHandler):
    server: Proxy

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(5)
        try:
            while (head := recv_head(sock)) is not None:
                method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
                fields = fields_of(head)
                auth = next((v for n, v in fields if n.lower() == "proxy-authorization"), None)
                if self.server.credentials and auth != self.server.credentials:
                    self.server.note(Relayed(method, target, auth, None, head))
                    sock.sendall(AUTH_REQUIRED)
                    return
                if method == "CONNECT":
                    return self.tunnel(sock, target, auth, head)
                self.forward(sock, target, auth, head)
        except OSError:
            pass  # a client gone mid-exchange

    def tunnel(self, sock: socket.socket, authority: str, auth: str | None, head: bytes) -> None:
        host, _, port = authority.rpartition(":")
        if int(port) in self.server.refused_ports:
            self.server.note(Relayed("CONNECT", authority, auth, None, head))
            sock.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        self.server.note(Relayed("CONNECT", authority, auth, f"{host.strip('[]')}:{port}", head))
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        except OSError:
            sock.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        with upstream:
            back = threading.Thread(target=pipe, args=(upstream, sock))
            back.start()
            pipe(sock, upstream)
            back.join()

    def forward(self, sock: socket.socket, url: str, auth: str | None, head: bytes) -> None:
        """An absolute-form request, sent on in origin-form (RFC 9112 3.2.2,
        3.2.1) without the proxy's fields, its answer re-framed with Via."""
        parts = urlsplit(url)
        address = self.server.names.get(parts.hostname or "", parts.hostname or "")
        port = parts.port or 80
        self.server.note(Relayed("GET", url, auth, f"{address}:{port}", head))
        origin_form = (parts.path or "/") + (f"?{parts.query}" if "?" in url else "")
        lines = [f"GET {origin_form} HTTP/1.1"]
        lines += [f"{n}: {v}" for n, v in fields_of(head) if n.lower() not in _DROPPED]
        with socket.create_connection((address, port), timeout=5) as upstream:
            upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            answer = http.client.HTTPResponse(upstream, method="GET")
            answer.begin()
            body = answer.read()
        out = [f"HTTP/1.1 {answer.status} {answer.reason}"]
        out += [f"{n}: {v}" for n, v in answer.getheaders() if n.lower() not in _REFRAMED]
        out += [f"Via: {VIA}", f"Content-Length: {len(body)}"]
        sock.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until ``source`` ends, then end ``sink``'s direction."""
    with suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class Proxy(socketserver.ThreadingTCPServer):
    """A forward proxy on 127.0.0.1; ``names`` is its own DNS (host -> address)."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(
        self,
        names: dict[str, str] | None = None,
        credentials: str | None = None,
        refused_ports: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.names = names or {}
        self.credentials = credentials
        self.refused_ports = refused_ports
        self.log: list[Relayed] = []
        self._lock = threading.Lock()

    def note(self, entry: Relayed) -> None:
        with self._lock:
            self.log.append(entry)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, userinfo: str | None = None) -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"


@contextmanager
def running_proxy(**kw: object) -> Iterator[Proxy]:
    proxy = Proxy(**kw)  # type: ignore[arg-type]
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join()


def dead_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- fixtures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def origin() -> Iterator[Server]:
    yield from _serve(None)


@pytest.fixture(scope="module")
def tls_origin(certs: Path) -> Iterator[Server]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "leaf.pem", certs / "leaf.key")
    yield from _serve(context)


NAMES = {"test.example": "127.0.0.1", "other.example": "127.0.0.1"}
ProxyFactory = Callable[..., Proxy]


@pytest.fixture
def start_proxy() -> Iterator[ProxyFactory]:
    with_cleanup: list[Iterator[Proxy]] = []

    def start(**kw: object) -> Proxy:
        running = running_proxy(names=NAMES, **kw)
        with_cleanup.append(running)  # type: ignore[arg-type]
        return running.__enter__()

    yield start
    for running in with_cleanup:
        running.__exit__(None, None, None)  # type: ignore[attr-defined]


def client(proxy: str, certs: Path | None = None, no_proxy: tuple[str, ...] = ()) -> HttpClient:
    return HttpClient(
        UA,
        connect_timeout_s=1,
        read_timeout_s=1,
        total_timeout_s=3,
        ca_certs=str(certs / "ca.pem") if certs else None,
        proxy=ProxySettings.parse(proxy, no_proxy),
    )


def get(
    c: HttpClient, scheme: str, port: int, path: str = "/echo", host: str = "test.example"
) -> HttpResponse:
    return c.get(f"{scheme}://{host}:{port}{path}", "127.0.0.1")


def fails(c: HttpClient, scheme: str, port: int) -> FetchError:
    with pytest.raises(FetchError) as info:
        get(c, scheme, port)
    return info.value


# -- http:// through the proxy ------------------------------------------------------


def test_an_http_target_is_asked_of_the_proxy_in_absolute_form(
    origin: Server, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    with client(proxy.url()) as c:
        resp = get(c, "http", origin.port, "/echo?q=%2f&empty=")
    url = f"http://test.example:{origin.port}/echo?q=%2f&empty="
    assert [(e.method, e.target, e.upstream) for e in proxy.log] == [
        ("GET", url, f"127.0.0.1:{origin.port}")
    ]
    assert proxy.log[0].head.startswith(f"GET {url} HTTP/1.1\r\n".encode())
    # the target saw the origin-form request, byte for byte the one recorded
    assert resp.header("via") == VIA
    assert resp.body == resp.request_head
    assert resp.request_head.startswith(
        f"GET /echo?q=%2f&empty= HTTP/1.1\r\nHost: test.example:{origin.port}\r\n".encode()
    )
    assert resp.ip == "127.0.0.1"


# -- https:// through a tunnel ------------------------------------------------------


def test_an_https_target_is_tunnelled_to_the_checked_address(
    tls_origin: Server, certs: Path, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    with client(proxy.url(), certs) as c:
        first = get(c, "https", tls_origin.port)
        again = get(c, "https", tls_origin.port, "/echo?again")
    authority = f"127.0.0.1:{tls_origin.port}"
    # one CONNECT, to the address the resolver checked, kept alive for the second GET
    assert [(e.method, e.target) for e in proxy.log] == [("CONNECT", authority)]
    assert proxy.log[0].head.startswith(
        f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {UA}\r\n".encode()
    )
    for resp in (first, again):
        assert resp.body == resp.request_head  # end to end: the proxy saw no field of it
        assert f"Host: test.example:{tls_origin.port}\r\n".encode() in resp.body
    assert again.request_head.startswith(b"GET /echo?again HTTP/1.1\r\n")


def test_the_certificate_is_checked_against_the_target_through_the_tunnel(
    tls_origin: Server, certs: Path, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy()
    with client(proxy.url(), certs) as c, pytest.raises(FetchError) as info:
        get(c, "https", tls_origin.port, host="other.example")
    assert info.value.kind == "tls"  # the leaf names test.example, not other.example
    assert [e.target for e in proxy.log] == [f"127.0.0.1:{tls_origin.port}"]


# -- credentials --------------------------------------------------------------------


def test_credentials_go_to_the_proxy_and_nowhere_else(
    origin: Server, tls_origin: Server, certs: Path, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(credentials=BASIC)
    with client(proxy.url(USERINFO), certs) as c:
        plain = get(c, "http", origin.port)
        tunnelled = get(c, "https", tls_origin.port)
    assert [(e.method, e.authorization) for e in proxy.log] == [("GET", BASIC), ("CONNECT", BASIC)]
    for resp in (plain, tunnelled):
        assert resp.status == 200
        # neither what the target received nor what is recorded holds them
        for seen in (resp.body, resp.request_head):
            assert b"Proxy-Authorization" not in seen
            assert BASIC.split()[1].encode() not in seen


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize(
    ("userinfo", "says"),
    [(None, "wants http://user:password@"), ("crawler:wrong", "credentials refused")],
)
def test_a_407_is_a_proxy_error(
    origin: Server,
    tls_origin: Server,
    certs: Path,
    start_proxy: ProxyFactory,
    scheme: str,
    userinfo: str | None,
    says: str,
) -> None:
    proxy = start_proxy(credentials=BASIC)
    port = origin.port if scheme == "http" else tls_origin.port
    with client(proxy.url(userinfo), certs) as c:
        error = fails(c, scheme, port)
    assert error.kind == "proxy"
    assert f"proxy 127.0.0.1:{proxy.port} refused" in str(error)
    assert "407 Proxy Authentication Required" in str(error) and says in str(error)
    assert "wrong" not in str(error)
    assert len(proxy.log) == 1 and proxy.log[0].upstream is None  # nothing reached the target


# -- refusals and a dead proxy --------------------------------------------------------


def test_a_refused_connect_is_a_proxy_error(
    tls_origin: Server, certs: Path, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(refused_ports=frozenset({tls_origin.port}))
    with client(proxy.url(), certs) as c:
        forbidden = fails(c, "https", tls_origin.port)
        gone = dead_port()
        bad_gateway = fails(c, "https", gone)  # the proxy cannot reach the target
    assert forbidden.kind == bad_gateway.kind == "proxy"
    assert str(forbidden) == (
        f"proxy 127.0.0.1:{proxy.port} refused CONNECT 127.0.0.1:{tls_origin.port}: 403 Forbidden"
    )
    assert str(bad_gateway).endswith(f"CONNECT 127.0.0.1:{gone}: 502 Bad Gateway")


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_dead_proxy_is_a_proxy_error(origin: Server, certs: Path, scheme: str) -> None:
    port = dead_port()
    with client(f"http://{USERINFO}@127.0.0.1:{port}", certs) as c:
        error = fails(c, scheme, origin.port)
    assert error.kind == "proxy"
    assert f"proxy 127.0.0.1:{port} unreachable: ConnectionRefusedError" in str(error)
    assert PASSWORD not in str(error) and "s3cr" not in str(error)


# -- what goes direct ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("no_proxy", "direct"),
    [
        (("test.example",), True),
        ((".example",), True),
        (("127.0.0.0/8",), True),  # the checked address, not the name
        (("*",), True),
        (("est.example",), False),  # label boundaries, not a plain suffix
        (("test.example:1",), False),  # another port
        ((), False),
    ],
)
def test_no_proxy_targets_go_direct(
    origin: Server, start_proxy: ProxyFactory, no_proxy: tuple[str, ...], direct: bool
) -> None:
    proxy = start_proxy()
    with client(proxy.url(), no_proxy=no_proxy) as c:
        resp = get(c, "http", origin.port)
    assert resp.status == 200
    assert (proxy.log == []) is direct
    assert (resp.header("via") is None) is direct


def test_the_environment_proxy_reaches_the_client_through_the_config(
    origin: Server, start_proxy: ProxyFactory
) -> None:
    proxy = start_proxy(credentials=BASIC)
    environ = {"http_proxy": proxy.url(USERINFO), "NO_PROXY": "other.example"}
    with HttpClient.from_config(load_config(None, [], environ=environ), UA) as c:
        through = get(c, "http", origin.port)
        direct = get(c, "http", origin.port, host="other.example")
        # https_proxy unset: https targets go direct (through the proxy, a 502)
        refused = fails(c, "https", dead_port())
    assert through.header("via") == VIA and direct.header("via") is None
    assert refused.kind == "connect"
    assert [(e.target, e.authorization) for e in proxy.log] == [
        (f"http://test.example:{origin.port}/echo", BASIC)
    ]


def test_request_targets_for_a_proxy() -> None:
    # RFC 9112 3.2.3: a CONNECT names host:port, an IPv6 address in brackets
    assert authority_form("2001:db8::1", 443) == "[2001:db8::1]:443"
    assert authority_form("93.184.215.14", 8443) == "93.184.215.14:8443"
    # RFC 9112 3.2.2: the whole URI, the port only when it is not the default
    assert absolute_form(parse_target("http://Example.com:80/a b?q#f")) == (
        "http://example.com/a%20b?q"
    )
