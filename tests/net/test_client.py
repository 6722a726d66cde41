"""HttpClient against real loopback servers (plain and TLS) that misbehave on cue."""

from __future__ import annotations

import gc
import gzip
import socket
import socketserver
import ssl
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import brotli
import pytest

from trawl.net import client as httpclient
from trawl.net.client import HttpClient
from trawl.net.request import DEFAULT_ACCEPT
from trawl.net.response import FetchError, HttpResponse

UA = "trawl-test/0.1 (+http://example.invalid/bot)"
TEXT = b"<html><body>" + b"hello trawl " * 500 + b"</body></html>"
BOMB_SIZE = 20_000_000


def _bomb() -> bytes:
    out = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1_000_000)
    return b"".join(out.compress(zeros) for _ in range(BOMB_SIZE // len(zeros))) + out.flush()


def _raw_deflate(data: bytes) -> bytes:
    out = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return out.compress(data) + out.flush()


# -- the test server --------------------------------------------------------------
#
# A route gets the connection and the raw request head and returns True to keep
# the connection open for the next request (HTTP/1.1 keep-alive).

Route = Callable[["Handler", bytes], bool]
ROUTES: dict[str, Route] = {}


def route(path: str) -> Callable[[Route], Route]:
    def register(fn: Route) -> Route:
        ROUTES[path] = fn
        return fn

    return register


def respond(
    h: Handler, body: bytes, *fields: str, status: str = "200 OK", version: str = "HTTP/1.1"
) -> None:
    head = [f"{version} {status}", *fields]
    if not any(f.lower().startswith(("content-length", "transfer-encoding")) for f in fields):
        head.append(f"Content-Length: {len(body)}")
    h.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


@route("/echo")
def _echo(h: Handler, head: bytes) -> bool:
    respond(h, head, "Content-Type: text/plain")
    return True


@route("/gzip")
def _gzip(h: Handler, head: bytes) -> bool:
    respond(h, gzip.compress(TEXT), "Content-Type: text/html", "Content-Encoding: gzip")
    return True


@route("/gzip-members")
def _gzip_members(h: Handler, head: bytes) -> bool:
    respond(h, gzip.compress(b"first ") + gzip.compress(b"second"), "Content-Encoding: gzip")
    return True


@route("/deflate-zlib")
def _deflate_zlib(h: Handler, head: bytes) -> bool:
    respond(h, zlib.compress(TEXT), "Content-Encoding: deflate")
    return True


@route("/deflate-raw")
def _deflate_raw(h: Handler, head: bytes) -> bool:
    respond(h, _raw_deflate(TEXT), "Content-Encoding: deflate")
    return True


@route("/bomb")
def _bomb_route(h: Handler, head: bytes) -> bool:
    respond(h, h.server.bomb, "Content-Encoding: gzip")  # type: ignore[attr-defined]
    return True


@route("/corrupt-gzip")
def _corrupt_gzip(h: Handler, head: bytes) -> bool:
    respond(h, b"\x1f\x8b\x08\x00 this is not gzip at all", "Content-Encoding: gzip")
    return True


@route("/cut-gzip")
def _cut_gzip(h: Handler, head: bytes) -> bool:
    respond(h, gzip.compress(TEXT)[:40], "Content-Encoding: gzip")
    return True


@route("/br")
def _br(h: Handler, head: bytes) -> bool:
    respond(h, brotli.compress(TEXT), "Content-Type: text/html", "Content-Encoding: br")
    return True


@route("/br-bomb")
def _br_bomb(h: Handler, head: bytes) -> bool:
    respond(h, BR_BOMB, "Content-Encoding: br")
    return True


@route("/corrupt-br")
def _corrupt_br(h: Handler, head: bytes) -> bool:
    respond(h, b"\x8b\x03\x80hello\x03", "Content-Encoding: br")
    return True


@route("/zstd")
def _zstd(h: Handler, head: bytes) -> bool:
    respond(h, b"(\xb5/\xfd not really zstd", "Content-Encoding: zstd")
    return True


@route("/chunked")
def _chunked(h: Handler, head: bytes) -> bool:
    respond(h, b"", "Transfer-Encoding: chunked", "Content-Type: text/plain")
    for part in (b"hello ", b"chunked ", b"world"):
        h.sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
    h.sock.sendall(b"0\r\n\r\n")
    return True


@route("/chunked-gzip")
def _chunked_gzip(h: Handler, head: bytes) -> bool:
    data = gzip.compress(TEXT)
    respond(h, b"", "Transfer-Encoding: chunked", "Content-Encoding: gzip")
    for i in range(0, len(data), 100):
        part = data[i : i + 100]
        h.sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
    h.sock.sendall(b"0\r\n\r\n")
    return True


@route("/big")
def _big(h: Handler, head: bytes) -> bool:
    respond(h, b"x" * 200_000)
    return False


@route("/big-until-close")
def _big_until_close(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"y" * 200_000)
    return False


@route("/drip")
def _drip(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n")
    for _ in range(10000):
        if h.server.stop.wait(0.02):  # type: ignore[attr-defined]
            break
        h.sock.sendall(b"z")
    return False


@route("/stall")
def _stall(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\nsome bytes")
    h.server.stop.wait(2)  # type: ignore[attr-defined]
    return False


@route("/redirect")
def _redirect(h: Handler, head: bytes) -> bool:
    respond(h, b"moved", "Location: /echo", status="301 Moved Permanently")
    return True


@route("/hang")
def _hang(h: Handler, head: bytes) -> bool:
    h.server.stop.wait(5)  # type: ignore[attr-defined]
    return False


@route("/fields")
def _fields(h: Handler, head: bytes) -> bool:
    respond(h, b"ok", "Set-Cookie: a=1", "X-Dup: one", "Set-Cookie: b=2", "x-dup: two")
    return True


@route("/short")
def _short(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
    return False


@route("/short-chunked")
def _short_chunked(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n20\r\nhal")
    return False


@route("/garbage")
def _garbage(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"SPAM SPAM SPAM\r\n\r\n")
    return False


@route("/huge-field")
def _huge_field(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\nbody")
    return False


@route("/many-fields")
def _many_fields(h: Handler, head: bytes) -> bool:
    respond(h, b"body", *(f"X-Field-{i}: {i}" for i in range(150)))
    return False


@route("/slow-head")
def _slow_head(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(10000):  # one byte every 20 ms: no read timeout, never a whole head
        if h.server.stop.wait(0.02):  # type: ignore[attr-defined]
            break
        h.sock.sendall(b"a")
    return False


@route("/continue-flood")
def _continue_flood(h: Handler, head: bytes) -> bool:
    for _ in range(100_000):  # interim responses without end (RFC 9110 15.2)
        if h.server.stop.wait(0.001):  # type: ignore[attr-defined]
            break
        h.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    return False


@route("/bad-chunk")
def _bad_chunk(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
    return False


@route("/cut-head")
def _cut_head(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Half: ab")
    return False  # close inside the fields


@route("/slam")
def _slam(h: Handler, head: bytes) -> bool:
    return False  # close without a word


@route("/http10")
def _http10(h: Handler, head: bytes) -> bool:
    h.sock.sendall(b"HTTP/1.0 200 Fine\r\nContent-Type: text/plain\r\n\r\nold school")
    return False


@route("/not-modified")
def _not_modified(h: Handler, head: bytes) -> bool:
    respond(h, b"", 'ETag: "v1"', "Content-Encoding: gzip", status="304 Not Modified")
    return True


@route("/then-close")
def _then_close(h: Handler, head: bytes) -> bool:
    respond(h, b"bye")  # says nothing about closing, then closes: a keep-alive timeout
    return False


class Handler(socketserver.BaseRequestHandler):
    sock: socket.socket

    def handle(self) -> None:
        server = self.server
        with server.lock:  # type: ignore[attr-defined]
            server.connections += 1  # type: ignore[attr-defined]
        try:
            self.sock = self._wrap(self.request)
        except (OSError, ssl.SSLError):
            return  # the client refused our certificate
        try:
            self.sock.settimeout(3)
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = self.sock.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                head += b"\r\n\r\n"
                path = head.split(b" ", 2)[1].decode().split("?")[0]
                if not ROUTES.get(path, _echo)(self, head):
                    return
        except OSError:
            pass  # the client hung up on a truncated body: expected
        finally:
            if self.sock is not self.request:
                self.sock.close()

    def _wrap(self, sock: socket.socket) -> socket.socket:
        context: ssl.SSLContext | None = self.server.tls  # type: ignore[attr-defined]
        if context is None:
            return sock
        sock.settimeout(3)
        return context.wrap_socket(sock, server_side=True)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.tls = tls
        self.connections = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.bomb = BOMB

    @property
    def port(self) -> int:
        return int(self.server_address[1])


BOMB = _bomb()
BR_BOMB = brotli.compress(bytes(BOMB_SIZE), quality=5)  # about 100 bytes


def _serve(tls: ssl.SSLContext | None) -> Iterator[Server]:
    server = Server(tls)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()  # joins the handler threads
        thread.join()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    yield from _serve(None)


@pytest.fixture
def client() -> Iterator[HttpClient]:
    with HttpClient(
        UA,
        connect_timeout_s=1,
        read_timeout_s=1,
        total_timeout_s=3,
        max_content_bytes=50_000,
        max_decompressed_bytes=100_000,
    ) as c:
        yield c


def url(server: Server, path: str, host: str = "test.example") -> str:
    return f"http://{host}:{server.port}{path}"


def fetch(client: HttpClient, server: Server, path: str, **kw: object) -> HttpResponse:
    return client.get(url(server, path), "127.0.0.1", **kw)  # type: ignore[arg-type]


# -- what is sent -----------------------------------------------------------------


def test_request_head_is_exactly_what_the_server_received(
    client: HttpClient, server: Server
) -> None:
    resp = client.get(
        f"http://Test.Example:{server.port}/echo?q=%2f&name=caf\u00e9#frag",
        "127.0.0.1",
        {"If-None-Match": '"abc"', "If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"},
    )
    assert resp.body == resp.request_head  # byte for byte, nothing added or re-encoded
    assert (
        resp.request_head
        == (
            f"GET /echo?q=%2f&name=caf%C3%A9 HTTP/1.1\r\n"
            f"Host: test.example:{server.port}\r\n"
            f"User-Agent: {UA}\r\n"
            f"Accept: {DEFAULT_ACCEPT}\r\n"
            f"Accept-Encoding: gzip, deflate, br\r\n"
            f'If-None-Match: "abc"\r\n'
            f"If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n"
            f"\r\n"
        ).encode()
    )
    assert (resp.status, resp.reason, resp.http_version, resp.ip) == (
        200,
        "OK",
        "HTTP/1.1",
        "127.0.0.1",
    )
    assert resp.truncated is None and resp.decode_error is None
    assert 0 <= resp.ttfb_s <= resp.elapsed_s < 1


def test_extra_headers_replace_ours_but_not_host(client: HttpClient, server: Server) -> None:
    resp = fetch(client, server, "/echo", extra_headers={"accept": "text/plain"})
    assert b"\r\naccept: text/plain\r\nAccept-Encoding" in resp.body
    assert resp.body.count(b"ccept:") == 1
    with pytest.raises(ValueError, match="may not set"):
        fetch(client, server, "/echo", extra_headers={"Host": "evil.example"})
    with pytest.raises(ValueError, match="invalid request header"):
        fetch(client, server, "/echo", extra_headers={"X-Evil": "a\r\nHost: b"})


def test_empty_accept_encoding_asks_for_identity(server: Server) -> None:
    with HttpClient(UA, accept_encoding="", max_idle_connections=0) as c:
        resp = fetch(c, server, "/echo")
    assert b"\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n" in resp.body
    assert resp.body == resp.request_head


# -- what comes back -------------------------------------------------------------


def test_response_fields_keep_order_and_repeats(client: HttpClient, server: Server) -> None:
    resp = fetch(client, server, "/fields")
    assert resp.headers == [
        ("Set-Cookie", "a=1"),
        ("X-Dup", "one"),
        ("Set-Cookie", "b=2"),
        ("x-dup", "two"),
        ("Content-Length", "2"),
    ]
    assert resp.header("x-DUP") == "one"
    assert resp.header("missing") is None


@pytest.mark.parametrize("path", ["/gzip", "/deflate-zlib", "/deflate-raw", "/chunked-gzip", "/br"])
def test_content_codings_are_decoded(client: HttpClient, server: Server, path: str) -> None:
    resp = fetch(client, server, path)
    assert resp.body == TEXT
    assert resp.raw_body != TEXT and len(resp.raw_body) < len(TEXT)  # still coded
    assert resp.truncated is None and resp.decode_error is None


def test_concatenated_gzip_members_are_all_decoded(client: HttpClient, server: Server) -> None:
    assert fetch(client, server, "/gzip-members").body == b"first second"


def test_chunked_body_is_dechunked(client: HttpClient, server: Server) -> None:
    resp = fetch(client, server, "/chunked")
    assert resp.raw_body == resp.body == b"hello chunked world"
    assert resp.header("transfer-encoding") == "chunked"


@pytest.mark.parametrize(("path", "bomb"), [("/bomb", BOMB), ("/br-bomb", BR_BOMB)])
def test_bomb_stops_at_the_decompressed_cap(
    client: HttpClient, server: Server, path: str, bomb: bytes
) -> None:
    started = time.monotonic()
    resp = fetch(client, server, path)
    assert len(resp.raw_body) == len(bomb) < 50_000  # the wire bytes were small
    assert resp.body == bytes(100_000)
    assert resp.truncated == "length"
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/corrupt-gzip", "gzip: "),
        ("/cut-gzip", "gzip: stream ends early"),
        ("/corrupt-br", "br: "),
        ("/zstd", "unsupported content-coding: zstd"),
    ],
)
def test_undecodable_body_keeps_raw_bytes(
    client: HttpClient, server: Server, path: str, error: str
) -> None:
    resp = fetch(client, server, path)
    assert resp.status == 200
    assert resp.body == b""
    assert resp.raw_body
    assert resp.decode_error is not None and resp.decode_error.startswith(error)


def test_not_modified_has_no_body_and_no_decode_error(client: HttpClient, server: Server) -> None:
    resp = fetch(client, server, "/not-modified", extra_headers={"If-None-Match": '"v1"'})
    assert (resp.status, resp.body, resp.decode_error) == (304, b"", None)


def test_redirect_is_returned_not_followed(client: HttpClient, server: Server) -> None:
    resp = fetch(client, server, "/redirect")
    assert (resp.status, resp.header("location"), resp.body) == (301, "/echo", b"moved")


def test_http_1_0_response(client: HttpClient, server: Server) -> None:
    resp = fetch(client, server, "/http10")
    assert (resp.http_version, resp.reason, resp.body) == ("HTTP/1.0", "Fine", b"old school")


# -- limits ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/big", "/big-until-close"])
def test_body_over_the_raw_cap_is_truncated(client: HttpClient, server: Server, path: str) -> None:
    resp = fetch(client, server, path)
    assert resp.truncated == "length"
    assert len(resp.raw_body) == 50_000
    assert resp.body == resp.raw_body


@pytest.mark.parametrize("path", ["/drip", "/stall"])
def test_slow_body_stops_at_the_total_time_limit(server: Server, path: str) -> None:
    # /drip never pauses long enough for a read timeout; /stall pauses past
    # the total limit but not the read timeout: each read's wait is capped.
    with HttpClient(UA, read_timeout_s=1.5, total_timeout_s=0.5) as c:
        started = time.monotonic()
        resp = fetch(c, server, path)
    took = time.monotonic() - started
    assert resp.truncated == "time"
    assert 0 < len(resp.raw_body) < 10_000
    assert resp.elapsed_s > 0.45 and took < 0.9


def test_slow_drip_stops_at_the_minimum_transfer_rate(server: Server) -> None:
    # /drip sends 50 bytes/s, each byte well inside the read timeout: only the
    # rate, judged after one window of body, ends it long before the total limit.
    with HttpClient(
        UA,
        read_timeout_s=1,
        total_timeout_s=5,
        min_transfer_rate_bps=500,
        transfer_rate_window_s=0.4,
    ) as c:
        resp = fetch(c, server, "/drip")
    assert resp.truncated == "time"
    assert 0 < len(resp.raw_body) < 10_000
    assert 0.4 <= resp.elapsed_s - resp.ttfb_s < 2


def test_minimum_transfer_rate_spares_a_fast_body(server: Server) -> None:
    with HttpClient(
        UA, max_content_bytes=500_000, min_transfer_rate_bps=1e6, transfer_rate_window_s=0.01
    ) as c:
        resp = fetch(c, server, "/big")
    assert resp.truncated is None
    assert len(resp.raw_body) == 200_000


@pytest.mark.parametrize(
    ("path", "got"),
    [("/short", b"0123456789"), ("/short-chunked", b"hellohal"), ("/bad-chunk", b"hello")],
)
def test_connection_lost_mid_body_keeps_what_came(
    client: HttpClient, server: Server, path: str, got: bytes
) -> None:
    resp = fetch(client, server, path)
    assert resp.truncated == "disconnect"
    assert resp.raw_body == got


def test_no_answer_is_a_read_timeout(server: Server) -> None:
    with HttpClient(UA, read_timeout_s=0.3) as c:
        started = time.monotonic()
        with pytest.raises(FetchError) as info:
            fetch(c, server, "/hang")
    assert info.value.kind == "timeout"
    assert time.monotonic() - started < 1


def test_refused_port_is_a_connect_error(client: HttpClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: the kernel refuses
        with pytest.raises(FetchError) as info:
            client.get(f"http://test.example:{port}/", "127.0.0.1")
    assert info.value.kind == "connect"


@pytest.mark.parametrize(
    ("path", "kind", "says"),
    [
        ("/garbage", "protocol", "BadStatusLine"),
        ("/huge-field", "protocol", "LineTooLong"),  # http.client: 64 KiB per line
        ("/many-fields", "protocol", "more than 100 headers"),
        ("/slam", "read", "RemoteDisconnected"),
        ("/cut-head", "read", "inside the response head"),  # not a 200 with no body
    ],
)
def test_broken_responses(
    client: HttpClient, server: Server, path: str, kind: str, says: str
) -> None:
    with pytest.raises(FetchError) as info:
        fetch(client, server, path)
    assert info.value.kind == kind
    assert says in str(info.value)
    assert str(info.value).isprintable()  # the peer's bytes are quoted, never raw


@pytest.mark.parametrize("path", ["/slow-head", "/continue-flood"])
def test_endless_head_stops_at_the_total_time_limit(server: Server, path: str) -> None:
    # Bytes keep coming, so no read times out; http.client reads the head line
    # by line, so only a deadline on every socket read can stop it.
    with HttpClient(UA, read_timeout_s=1, total_timeout_s=0.5) as c:
        started = time.monotonic()
        with pytest.raises(FetchError) as info:
            fetch(c, server, path)
    assert info.value.kind == "timeout"
    assert "total time limit" in str(info.value)
    assert time.monotonic() - started < 1.5


# -- connections -----------------------------------------------------------------


def test_connection_is_reused_for_the_same_host(client: HttpClient, server: Server) -> None:
    before = server.connections
    for path in ("/echo", "/gzip", "/chunked", "/redirect"):
        fetch(client, server, path)
    assert server.connections - before == 1
    client.get(url(server, "/echo", host="other.example"), "127.0.0.1")
    assert server.connections - before == 2  # another host name: its own connection


def test_truncated_exchange_does_not_reuse_the_connection(
    client: HttpClient, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the idle check blinded, only the client's own bookkeeping keeps a
    # connection with unread body bytes out of the pool.
    monkeypatch.setattr(httpclient, "wait_for_read", lambda sock, timeout: False)
    before = server.connections
    assert fetch(client, server, "/big").truncated == "length"
    with pytest.raises(FetchError):
        fetch(client, server, "/garbage")
    resp = fetch(client, server, "/echo")
    assert resp.status == 200 and resp.body == resp.request_head
    assert server.connections - before == 3


def test_idle_connection_closed_by_server_is_replaced(
    client: HttpClient, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Make the idle check miss the close, as in a race with the server's
    # keep-alive timeout: the GET must be retried once on a new connection.
    monkeypatch.setattr(httpclient, "wait_for_read", lambda sock, timeout: False)
    before = server.connections
    assert fetch(client, server, "/then-close").body == b"bye"
    time.sleep(0.05)
    resp = fetch(client, server, "/echo")
    assert resp.status == 200 and resp.body == resp.request_head
    assert server.connections - before == 2


def test_no_pool_sends_connection_close(server: Server) -> None:
    before = server.connections
    with HttpClient(UA, max_idle_connections=0) as c:
        for _ in range(2):
            assert b"Connection: close" in fetch(c, server, "/echo").body
    assert server.connections - before == 2


def test_pooled_connections_are_closed_when_the_client_is_dropped(server: Server) -> None:
    # fetcher.py never calls close(): dropping the client must not leave
    # sockets to the garbage collector (ResourceWarning is an error here).
    c = HttpClient(UA)
    fetch(c, server, "/echo")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del c
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_client_is_safe_across_threads(client: HttpClient, server: Server) -> None:
    results: list[bytes] = []

    def work(i: int) -> None:
        for _ in range(5):
            resp = client.get(url(server, f"/echo?t={i}", host=f"h{i}.example"), "127.0.0.1")
            results.append(resp.body[: resp.body.index(b"\r\n")])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted(
        f"GET /echo?t={i} HTTP/1.1".encode() for i in range(4) for _ in range(5)
    )


# -- TLS -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server(certs: Path) -> Iterator[Server]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "leaf.pem", certs / "leaf.key")
    yield from _serve(context)


def test_https_verifies_against_the_host_name_not_the_ip(tls_server: Server, certs: Path) -> None:
    with HttpClient(UA, connect_timeout_s=1, read_timeout_s=1, ca_certs=str(certs / "ca.pem")) as c:
        resp = c.get(f"https://test.example:{tls_server.port}/echo", "127.0.0.1")
        assert resp.status == 200 and resp.body == resp.request_head
        assert f"Host: test.example:{tls_server.port}\r\n".encode() in resp.body
        with pytest.raises(FetchError) as info:
            c.get(f"https://other.example:{tls_server.port}/echo", "127.0.0.1")
        assert info.value.kind == "tls"


def test_https_rejects_an_untrusted_certificate(tls_server: Server) -> None:
    with HttpClient(UA, connect_timeout_s=1) as c, pytest.raises(FetchError) as info:
        c.get(f"https://test.example:{tls_server.port}/echo", "127.0.0.1")
    assert info.value.kind == "tls"


def test_ip_must_be_an_address(client: HttpClient) -> None:
    with pytest.raises(ValueError):
        client.get("http://example.com/", "example.com")
