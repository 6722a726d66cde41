"""Hostile hosts for the test web: servers that attack a crawler instead of serving it.

The open web has servers that drip one byte a second, stream without end,
send a few kilobytes that inflate to gigabytes, loop redirects, send heads no
parser should accept, reset connections, or whose names point at private
networks. A crawler must end each of these within its own limits and leave the
rest of the crawl undisturbed. ``TestWeb(..., hostile=True)`` serves this
catalogue next to the model's hosts so tests can check exactly that.

How the hosts are laid out, and why:

* Each host does one thing wrong, under a fixed name ``<kind>.hostile.test``
  (``HOSTILE_HOSTS`` maps kind -> name). On every path but ``/robots.txt`` -
  a plain 404, so robots rules allow everything - except on the redirect
  hosts, whose robots.txt is part of the trap (RFC 9309 2.3.1.2: a crawler
  follows at least five redirects, and may stop after that).
* Every served host has its own loopback address in 127.0.9.0/24, clear of
  the model's 127.0.1.x and up (``generate.loopback_ip``; ``TestWeb`` checks).
  Per-address politeness would otherwise queue them behind each other, and a
  slow host would hold up the others for reasons that are not the test's.
* Two names are never served: ``nowhere.hostile.test`` is left out of the
  hosts file (it does not resolve), ``private.hostile.test`` is pinned to a
  private address nobody listens on (the SSRF guard must refuse it before any
  connection; ``fetch.allow_networks`` of 127.0.0.0/8 does not cover it).
* Behaviours write raw bytes to the connection, since they are made to break
  HTTP, which ``BaseHTTPRequestHandler`` would not let them do. Long-running
  ones wait on the test web's stop event between writes and end as soon as a
  write fails or the client has hung up, so ``TestWeb.stop()`` and a client
  giving up both end them within one pause (at most a second). Every hostile
  connection closes after one response.

``HostileHost`` records, beside the behaviour, what a crawler with trawl's
limits should make of ``/`` (outcome, truncation, error, robots decision).
Where that depends on the limits, it assumes the hostile test's settings:
read timeout 2 s, total 4 s, minimum rate 512 bytes/s over 2 s, raw body cap
1 MB, decoded cap 10 MB (the default).
"""

from __future__ import annotations

import functools
import ipaddress
import random
import select
import socket
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

HOSTILE_NET = ipaddress.IPv4Network("127.0.9.0/24")
PRIVATE_ADDRESS = "192.168.255.1"  # RFC 1918; pinned, never listened on
SUFFIX = ".hostile.test"
BOMB_BYTES = 200 * 2**20  # what each bomb inflates to: 200 MiB of zeros


Behaviour = Callable[["_Wire", str], None]  # writes the answer to one path


@dataclass(frozen=True)
class HostileHost:
    """One host of the catalogue and what a crawler should record for ``/``."""

    kind: str
    name: str
    address: str | None  # pinned in the hosts file; None: left out, never resolves
    about: str  # what the server does
    outcome: str  # fetch outcome of "/" (a trawl.crawldb.status.FetchOutcome value)
    truncated: str | None = None  # WARC-Truncated reason of the body of "/"
    error: str | None = None  # how the fetch row's error starts
    robots: str | None = "status_4xx"  # robots decision; None: robots.txt never asked
    limit: str = ""  # the crawler limit (or guard) that ends it
    paths: tuple[str, ...] = ("/",)  # pages a test may ask for, "/" first
    serve: Behaviour | None = field(default=None, repr=False, compare=False)

    @property
    def served(self) -> bool:
        """Whether the test web listens on its address."""
        return self.serve is not None


# -- the wire -------------------------------------------------------------------


class _Wire:
    """One hostile exchange on the raw connection: bytes out, the stop flag,
    and what was sent (status and body bytes, for the access log)."""

    def __init__(self, handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        self.handler = handler
        self.sock: socket.socket = handler.connection
        self.stop = stop
        self.status = 0  # 0: no status line sent
        self.sent = 0

    def head(self, status: int, *fields: str) -> None:
        self.status = status
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *fields]
        lines.append("Connection: close")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def body(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.sent += len(data)

    def page(self, status: int, body: bytes, *fields: str) -> None:
        self.head(status, f"Content-Length: {len(body)}", *fields)
        self.body(body)

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the test web stops or the client hung up."""
        return not self.stop.wait(seconds) and not self._client_gone()

    def _client_gone(self) -> bool:
        poller = select.poll()  # not select(): no limit on descriptor numbers
        poller.register(self.sock, select.POLLIN)
        if not poller.poll(0):
            return False  # nothing to read: still there
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""  # EOF: it closed its end
        except OSError:
            return True  # reset

    def reset(self) -> None:
        """Abort with a TCP RST (SO_LINGER on, timeout 0) instead of a FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.handler.rfile.close()  # its reference would put off the real close
        self.sock.close()


# -- behaviours -----------------------------------------------------------------

HTML = "Content-Type: text/html; charset=utf-8"


def _html(title: str, *links: str) -> bytes:
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    head = f"<!DOCTYPE html><html><head><title>{title}</title></head>"
    return f"{head}<body><ul>{items}</ul></body></html>".encode()


def _not_found(w: _Wire) -> None:
    w.page(404, _html("not found"), HTML)


def _calm(w: _Wire, path: str) -> None:
    pages = {"/": ("home", "/a", "/b"), "/a": ("page a", "/", "/b"), "/b": ("page b", "/a")}
    if path not in pages:
        return _not_found(w)
    title, *links = pages[path]
    w.page(200, _html(title, *links), HTML)


def _drip(w: _Wire, path: str) -> None:
    w.head(200, "Content-Length: 100000", HTML)
    for _ in range(100_000):
        if not w.pause(1.0):
            return
        w.body(b"<")


def _slow_head(w: _Wire, path: str) -> None:
    w.status = 200
    w.raw(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while w.pause(0.25):
        w.raw(b"a")


def _endless(w: _Wire, path: str) -> None:
    w.head(200, "Transfer-Encoding: chunked", HTML)
    chunk = b"<p>" + b"endless " * 511 + b"\n"  # 4 KiB
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    while w.pause(0.1):
        w.raw(framed)
        w.sent += len(chunk)


def _huge(w: _Wire, path: str) -> None:
    w.head(200, f"Content-Length: {BOMB_BYTES}", "Content-Type: application/octet-stream")
    block = bytes(65_536)
    while w.sent < BOMB_BYTES and not w.stop.is_set():
        w.body(block)  # fails once the client hangs up


@functools.cache
def gzip_bomb() -> bytes:
    """``BOMB_BYTES`` zeros as one gzip member of about 200 kB (made once).

    Compressing 200 MiB takes seconds, so one MiB is deflated and repeated:
    after ``Z_FULL_FLUSH`` the compressor starts afresh on a byte boundary
    (RFC 1951 3.2.3, no back-references across it), so every further MiB of
    zeros gives the same bytes. Header and trailer are written here (RFC 1952
    2.3: CRC-32 and size of the whole data, mod 2**32).
    """
    zeros = bytes(2**20)
    count = BOMB_BYTES // len(zeros)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw deflate
    first = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no flags, no mtime
    trailer = struct.pack("<II", crc, BOMB_BYTES % 2**32)
    return header + first + again * (count - 1) + packer.flush() + trailer


@functools.cache
def brotli_bomb() -> bytes:
    """``BOMB_BYTES`` zeros, br-coded (about 300 bytes, made once)."""
    import brotli  # a project dependency, but not the stdlib: only the bomb needs it

    packer = brotli.Compressor(quality=5)
    zeros = bytes(2**20)
    parts = [packer.process(zeros) for _ in range(BOMB_BYTES // len(zeros))]
    return b"".join(parts) + bytes(packer.finish())


def _gzip_bomb(w: _Wire, path: str) -> None:
    w.page(200, gzip_bomb(), HTML, "Content-Encoding: gzip")


def _brotli_bomb(w: _Wire, path: str) -> None:
    w.page(200, brotli_bomb(), HTML, "Content-Encoding: br")


def _redirect(w: _Wire, status: int, location: str) -> None:
    w.page(status, _html("moved", location), HTML, f"Location: {location}")


def _redirect_loop(w: _Wire, path: str) -> None:
    loop = {"/robots.txt": "/robots-loop.txt", "/robots-loop.txt": "/robots.txt", "/": "/loop"}
    _redirect(w, 302, loop.get(path, "/"))


def _redirect_chain(w: _Wire, path: str) -> None:
    if path in ("/", "/robots.txt"):
        return _redirect(w, 301, "/r/1")
    step = path.removeprefix("/r/")
    if not step.isdigit() or not 1 <= int(step) <= 30:
        return _not_found(w)
    if int(step) < 30:
        return _redirect(w, 301, f"/r/{int(step) + 1}")
    w.page(200, _html("the end of the chain", "/"), HTML)


def _big_header(w: _Wire, path: str) -> None:
    w.status = 200
    w.raw(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 2**20 + b"\r\nContent-Length: 2\r\n\r\nok")


def _many_headers(w: _Wire, path: str) -> None:
    w.page(200, b"ok", *(f"X-Field-{i}: {i}" for i in range(1000)))


def _garbage_status(w: _Wire, path: str) -> None:
    w.raw(b"\x16\x03\x01\x00\xa5\x01 NOT HTTP AT ALL\r\nContent-Length: 2\r\n\r\nok")


def _broken_headers(w: _Wire, path: str) -> None:
    w.status = 200
    body = _html("broken headers", "/")
    w.raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Nul: a\x00b\r\n"
        b"this line has no colon\r\n: no name\r\nContent-Length: 999999\r\n\r\n"
    )
    # http.client stops reading fields at the line without a colon, so it never
    # sees the Content-Length after it: the body ends when the connection does.
    w.body(body)


def _html_as_png(w: _Wire, path: str) -> None:
    w.page(200, _html("an image, says the header", "/a", "/b"), "Content-Type: image/png")


def _binary_as_html(w: _Wire, path: str) -> None:
    w.page(200, random.Random(9).randbytes(65_536), HTML)


GARBAGE_HTML = (
    b"<html><head><title>gar\x00bage \xff\xfe</title><body><p>unclosed <b>bold <i>"
    b"<a href='/a'>one<table><tr><td>cell<a href=/b>two</a>\x00\x01\x02 \xc3\x28 \xed\xa0\x80"
    b'<a href="/c\x00d">nul</a><<<>>></p></i></td>'
    + b"<div>" * 100_000
    + b"<a href='/deep'>deep</a><span"
)


def _garbage_html(w: _Wire, path: str) -> None:
    w.page(200, GARBAGE_HTML, "Content-Type: text/html")


def _reset_mid_body(w: _Wire, path: str) -> None:
    w.head(200, "Content-Length: 100000", HTML)
    w.body(b"<p>" * 3_333 + b"<")
    if w.pause(0.3):  # stall mid-body, then abort; Linux still hands the client
        w.reset()  # what reached its buffer before the reset arrived


def _reset_at_once(w: _Wire, path: str) -> None:
    w.reset()


# -- the catalogue --------------------------------------------------------------


def _served(
    n: int,
    kind: str,
    serve: Behaviour,
    about: str,
    outcome: str,
    truncated: str | None = None,
    error: str | None = None,
    limit: str = "",
    robots: str = "status_4xx",
    paths: tuple[str, ...] = ("/",),
) -> HostileHost:
    """The ``n``-th served host: ``<kind>.hostile.test`` on 127.0.9.n."""
    name = kind.replace("_", "-") + SUFFIX
    address = str(HOSTILE_NET[n])
    return HostileHost(
        kind, name, address, about, outcome, truncated, error, robots, limit, paths, serve
    )


CATALOGUE: tuple[HostileHost, ...] = (
    _served(1, "calm", _calm, "a well-behaved little site: /, /a, /b", "success",
            paths=("/", "/a", "/b")),
    _served(2, "drip", _drip, "200, 100 kB promised, 1 byte/s", "success",
            truncated="time", limit="http.min_transfer_rate_bps"),
    _served(3, "slow_head", _slow_head, "the response head at 4 bytes/s, never ending",
            "retry", error="timeout: GET /: TimeoutError: total time limit",
            limit="http.total_timeout_s"),
    _served(4, "endless", _endless, "a chunked body, 4 KiB every 0.1 s, never ending",
            "success", truncated="time", limit="http.total_timeout_s"),
    _served(5, "huge", _huge, "Content-Length 200 MiB, sent as fast as it goes", "success",
            truncated="length", limit="http.max_content_bytes"),
    _served(6, "gzip_bomb", _gzip_bomb, "200 kB of gzip that inflate to 200 MiB", "success",
            truncated="length", limit="http.max_decompressed_bytes"),
    _served(7, "brotli_bomb", _brotli_bomb, "300 bytes of br that inflate to 200 MiB",
            "success", truncated="length", limit="http.max_decompressed_bytes"),
    _served(8, "redirect_loop", _redirect_loop,
            "/ -> /loop -> /; robots.txt -> robots-loop.txt -> robots.txt", "redir_temp",
            robots="too_many_redirects", limit="5 robots.txt redirects", paths=("/", "/loop")),
    _served(9, "redirect_chain", _redirect_chain,
            "/ and robots.txt -> /r/1 -> /r/2 ... -> /r/30, a page", "redir_perm",
            robots="too_many_redirects", limit="5 robots.txt redirects",
            paths=("/", "/r/29", "/r/30")),
    _served(10, "big_header", _big_header, "a header field line of 1 MiB", "retry",
            error="protocol: GET /: LineTooLong", limit="http.client: 64 KiB a line"),
    _served(11, "many_headers", _many_headers, "1000 header fields", "retry",
            error="protocol: GET /: HTTPException: got more than 100 headers",
            limit="http.client: 100 fields"),
    _served(12, "garbage_status", _garbage_status, "a status line that is not HTTP", "retry",
            error="protocol: GET /: BadStatusLine", limit="http.client: status line",
            paths=("/", "/again")),
    _served(13, "broken_headers", _broken_headers,
            "field lines without a colon, a NUL in a value, then a body", "success",
            limit="none: http.client stops at the bad line, the body is kept"),
    _served(14, "html_as_png", _html_as_png, "an HTML page with links labelled image/png",
            "success", limit="parse: only HTML types are parsed", paths=("/", "/other.png")),
    _served(15, "binary_as_html", _binary_as_html, "64 KiB of random bytes as text/html",
            "success", limit="parse: never raises"),
    _served(16, "garbage_html", _garbage_html,
            "unclosed tags, NULs, invalid UTF-8, 100k nested divs", "success",
            limit="parse: never raises", paths=("/", "/more")),
    _served(17, "reset_mid_body", _reset_mid_body, "10 kB of a 100 kB body, then a TCP RST",
            "success", truncated="disconnect", limit="the peer's reset"),
    _served(18, "reset_at_once", _reset_at_once, "a TCP RST instead of an answer", "retry",
            error="read: GET /: ConnectionResetError", limit="the peer's reset"),
    HostileHost("unresolvable", "nowhere" + SUFFIX, None, "a name in no hosts file",
                "deferred", error="address: unresolvable", robots=None, limit="resolver"),
    HostileHost("private", "private" + SUFFIX, PRIVATE_ADDRESS,
                f"pinned to {PRIVATE_ADDRESS}, never listened on", "blocked",
                error="address: private", robots=None, limit="SSRF guard"),
)  # fmt: skip
HOSTILE_HOSTS: dict[str, str] = {h.kind: h.name for h in CATALOGUE}
BY_NAME: dict[str, HostileHost] = {h.name: h for h in CATALOGUE}
_ROBOTS_TRAPS = frozenset({"redirect_loop", "redirect_chain"})


def listen_addresses() -> list[str]:
    """The loopback addresses the test web must listen on for the catalogue."""
    return [h.address for h in CATALOGUE if h.served and h.address is not None]


def hosts_file_text() -> str:
    """hosts(5) lines for the catalogue (the unresolvable name left out)."""
    lines = ["# trawl testweb: hostile hosts"]
    lines += [f"{h.address} {h.name}" for h in CATALOGUE if h.address is not None]
    return "\n".join(lines) + "\n"


def is_hostile(host: str) -> bool:
    """Whether ``host`` is a hostile host the test web serves."""
    entry = BY_NAME.get(host)
    return entry is not None and entry.served


def serve_hostile(
    handler: BaseHTTPRequestHandler, host: str, path: str, stop: threading.Event
) -> tuple[int, int]:
    """Answer ``path`` on hostile ``host`` over the handler's raw connection.

    Returns (status sent, 0 if none; body bytes sent) for the access log. The
    connection is closed afterwards; a client hanging up ends the behaviour.
    """
    entry = BY_NAME[host]
    assert entry.serve is not None, f"{host} is not served"
    wire = _Wire(handler, stop)
    handler.close_connection = True
    try:
        if path == "/robots.txt" and entry.kind not in _ROBOTS_TRAPS:
            _not_found(wire)
        else:
            entry.serve(wire, path)
    except OSError:
        pass  # the client hung up, or stop() cut the connection: the end either way
    return wire.status, wire.sent
