"""``TestWeb``: serve a ``WebModel`` on loopback from one process.

One listening socket per distinct IP of the model (127.0.1.x), all on the
same port, so a crawler that resolves names through the written hosts file
sees many hosts spread over fewer IPs, exactly like shared hosting. One
acceptor thread multiplexes the listeners with a selector; every connection
gets its own handler thread (HTTP/1.1 keep-alive), so many fetch threads can
be served at once and a slow host does not hold up the others.

The web answers as of a logical time, its clock (``set_time``; the epoch
until set): the process running the crawl moves it with the crawl's ``--at``,
so pages change, and sitemaps' lastmods move, on the crawl's time scale.

Every request is appended to ``access.jsonl`` with wall-clock ``start``
(request parsed) and ``end`` (response fully written) times, which is what
the politeness audit measures, and the logical time ``at`` and page
``version`` it was answered with, from which freshness can be computed.
``stop()`` closes listeners, forces open keep-alive connections shut and
joins every thread it started.

With ``hostile=True`` the hosts of ``trawl.testweb.hostile`` are served too,
each on its own 127.0.9.x listener; their requests are handed to that module,
which writes raw bytes, and are logged with ``"hostile": true``. With
``traps=True`` the crawler traps of ``trawl.testweb.traps`` are served on
127.0.10.x, as ordinary keep-alive responses built by that module, and logged
with ``"trap": <kind>``; their entrances are appended to ``seeds.txt``.
With ``estate=n`` the first ``n`` hosts of ``trawl.testweb.estate``, an
operator's sites under one registered domain, are served the same way, each
on its own 127.0.11.x listener, and logged with ``"estate": true``; their home
pages are appended to ``seeds.txt``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import selectors
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

from trawl.testweb import estate, hostile, traps
from trawl.testweb.changes import EPOCH
from trawl.testweb.estate import MAX_HOSTS as ESTATE_MAX_HOSTS
from trawl.testweb.model import WebModel, make_url
from trawl.testweb.render import Conditions, respond

BIND_ATTEMPTS = 20
# A page the traps or the estate built: status, header fields, body.
BuiltPage = tuple[int, tuple[tuple[str, str], ...], bytes]


class _AccessLog:
    """Thread-safe, line-flushed JSONL appender."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _Server(ThreadingHTTPServer):
    """One listener; shares the model, log and connection registry with its siblings."""

    daemon_threads = False  # joined in server_close()
    request_queue_size = 256  # listen backlog: many fetch threads connect at once
    timeout = 0.5  # handle_request() wait; the selector already saw the listener ready

    def __init__(self, ip: str, port: int, web: TestWeb) -> None:
        self.web = web
        super().__init__((ip, port), _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the address (slow on 127.0.1.x)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (or stop() cutting them off) are not worth a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "trawl-testweb/1"
    timeout = 30.0  # backstop for idle keep-alive connections
    disable_nagle_algorithm = True  # headers and body are separate writes

    def setup(self) -> None:
        super().setup()
        self.server.web._register(self.connection)

    def finish(self) -> None:
        self.server.web._unregister(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence stderr logging; requests go to access.jsonl instead."""

    def do_GET(self) -> None:
        self._serve(send_body=True)

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def _serve(self, send_body: bool) -> None:
        start = time.time()
        web = self.server.web
        path = self.path
        host = self.headers.get("Host", "")
        if path.startswith(("http://", "https://")):  # absolute-form request target
            parts = urlsplit(path)
            host = parts.netloc
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = host.strip().lower().rsplit(":", 1)[0] if host else ""
        local_ip = self.connection.getsockname()[0]
        if web.hostile and hostile.is_hostile(host):
            self._serve_hostile(host, path, local_ip, start)
            return
        if web.traps and traps.serves(host):
            page = traps.respond(host, path, web.port, [h.name for h in web.model.hosts])
            mark: dict[str, Any] = (
                {"trap": traps.kind_of(host)} if traps.is_trap(host) else {"blogroll": True}
            )
            self._serve_built(host, path, local_ip, start, send_body, page, mark)
            return
        if web.estate and estate.is_estate(host, web.estate):
            built = estate.respond(host, path)
            self._serve_built(host, path, local_ip, start, send_body, built, {"estate": True})
            return
        at = web.time
        resp = respond(
            web.model, host, path, web.port, local_ip, at=at, conditions=self._conditions()
        )
        if resp.delay:
            time.sleep(resp.delay)
        self._send(resp.status, resp.headers, resp.body, send_body)
        web._log(
            self._record(
                host, path, local_ip, start, resp.status, len(resp.body) if send_body else 0
            )
            | {
                "retry_after": dict(resp.headers).get("Retry-After"),
                "at": at.isoformat(),
                "version": resp.version,
            }
        )

    def _send(
        self, status: int, headers: Sequence[tuple[str, str]], body: bytes, send_body: bool
    ) -> None:
        """Write one response; the connection stays open unless the web is stopping."""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if status != 304:  # RFC 9110 8.6: a 304's length would be the 200's
            self.send_header("Content-Length", str(len(body)))
        if self.server.web.stopping:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        if send_body:
            self.wfile.write(body)
        self.wfile.flush()

    def _record(
        self, host: str, path: str, local_ip: str, start: float, status: int, sent: int
    ) -> dict[str, Any]:
        """The access-log fields every request has (the audits read them)."""
        return {
            "host": host,
            "ip": local_ip,
            "path": path,
            "method": self.command,
            "start": start,
            "end": time.time(),
            "status": status,
            "bytes": sent,
            "user_agent": self.headers.get("User-Agent", ""),
            "client_port": self.client_address[1],
        }

    def _conditions(self) -> Conditions:
        """If-None-Match (repeated fields joined, RFC 9110 5.3) and If-Modified-Since
        (ignored unless it is one field: 13.1.3)."""
        none_match = self.headers.get_all("If-None-Match")
        modified_since = self.headers.get_all("If-Modified-Since") or []
        return Conditions(
            ", ".join(none_match) if none_match else None,
            modified_since[0] if len(modified_since) == 1 else None,
        )

    def _serve_hostile(self, host: str, path: str, local_ip: str, start: float) -> None:
        """A host of ``trawl.testweb.hostile``: it writes to the raw connection."""
        web = self.server.web
        status, sent = hostile.serve_hostile(self, host, path, web._stop_event)
        # status 0: no status line was sent
        web._log(
            self._record(host, path, local_ip, start, status, sent)
            | {"retry_after": None, "at": web.time.isoformat(), "version": None, "hostile": True}
        )

    def _serve_built(
        self,
        host: str,
        path: str,
        local_ip: str,
        start: float,
        send_body: bool,
        page: BuiltPage,
        mark: dict[str, Any],
    ) -> None:
        """A host of ``trawl.testweb.traps`` or ``trawl.testweb.estate``: an
        ordinary response built there, logged with ``mark`` (what it came from:
        ``"trap": <kind>``, ``"estate": true``)."""
        web = self.server.web
        status, headers, body = page
        self._send(status, headers, body, send_body)
        web._log(
            self._record(host, path, local_ip, start, status, len(body) if send_body else 0)
            | {"retry_after": None, "at": web.time.isoformat(), "version": None}
            | mark
        )


class TestWeb:
    """The synthetic web, served on loopback; use as a context manager.

    ``start()`` binds, writes ``hosts``, ``seeds.txt`` and opens
    ``access.jsonl`` (appending) in ``out_dir``; ``stop()`` undoes it all.
    ``hostile=True`` also serves the catalogue of ``trawl.testweb.hostile``
    (its names in ``hosts``, never in ``seeds.txt``); ``traps=True`` the traps
    of ``trawl.testweb.traps`` (their names in ``hosts``, their entrances at
    the end of ``seeds.txt``); ``estate=n`` the first ``n`` hosts of
    ``trawl.testweb.estate`` (0: none; their names in ``hosts``, their home
    pages last in ``seeds.txt``). ``at`` sets the clock (``set_time``) from
    the start.
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        model: WebModel,
        out_dir: Path,
        port: int = 0,
        n_seeds: int = 3,
        *,
        hostile: bool = False,
        traps: bool = False,
        estate: int = 0,
        at: datetime = EPOCH,
    ) -> None:
        if not 0 <= estate <= ESTATE_MAX_HOSTS:
            raise ValueError(f"estate: 0 to {ESTATE_MAX_HOSTS} hosts, not {estate}")
        self.model = model
        self._time = EPOCH
        self.set_time(at)
        self.hostile = hostile
        self.traps = traps
        self.estate = estate
        self.out_dir = Path(out_dir)
        self.n_seeds = n_seeds
        self.stopping = False
        self._want_port = port
        self._port = 0
        self._servers: list[_Server] = []
        self._conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._log_file: _AccessLog | None = None
        self._acceptor: threading.Thread | None = None
        self._stop_event = threading.Event()

    # -- public surface ----------------------------------------------------

    @property
    def port(self) -> int:
        """The shared listening port (0 before ``start()``)."""
        return self._port

    @property
    def hosts_file(self) -> Path:
        return self.out_dir / "hosts"

    @property
    def seeds_file(self) -> Path:
        return self.out_dir / "seeds.txt"

    @property
    def access_log(self) -> Path:
        return self.out_dir / "access.jsonl"

    @property
    def time(self) -> datetime:
        """The logical time requests are answered as of (aware, UTC)."""
        return self._time

    def set_time(self, at: datetime) -> None:
        """Answer from now on as of ``at`` (aware); safe while serving.

        Each request reads the clock once, so it is answered wholly as of one
        time. The clock may go back as well as forward: content is a pure
        function of the time.
        """
        if at.tzinfo is None:
            raise ValueError("the test web's clock needs an aware datetime (UTC)")
        self._time = at.astimezone(UTC)

    def base_url(self, host: str) -> str:
        """``http://host:port`` for a model host (no trailing slash)."""
        return make_url(host, "", self._port)

    def start(self) -> TestWeb:
        """Bind every IP, write the hosts and seeds files, start serving."""
        if self._servers:
            raise RuntimeError("TestWeb already started")
        self._bind_all()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        hosts_text = self.model.hosts_file_text()
        if self.hostile:
            hosts_text += hostile.hosts_file_text()
        if self.traps:
            hosts_text += traps.hosts_file_text()
        if self.estate:
            hosts_text += estate.hosts_file_text(self.estate)
        self.hosts_file.write_text(hosts_text, encoding="utf-8")
        seeds = self.model.seed_urls(self.n_seeds, self._port)
        if self.traps:
            seeds += traps.seed_urls(self._port)
        if self.estate:
            seeds += estate.seed_urls(self._port, self.estate)
        self.seeds_file.write_text("".join(f"{u}\n" for u in seeds), encoding="utf-8")
        self._log_file = _AccessLog(self.access_log)
        self.stopping = False
        self._stop_event.clear()
        self._acceptor = threading.Thread(target=self._accept_loop, name="testweb-accept")
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Stop accepting, cut open connections, join handler threads, close the log."""
        self.stopping = True
        self._stop_event.set()
        if self._acceptor is not None:
            self._acceptor.join()
            self._acceptor = None
        with self._conn_lock:
            for conn in self._conns:
                _hang_up(conn)
        for server in self._servers:
            server.server_close()  # joins that server's handler threads
        self._servers = []
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> TestWeb:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------

    def _bind_all(self) -> None:
        ips = self.model.ips
        if self.hostile:
            if set(ips) & set(hostile.listen_addresses()):
                raise ValueError("the model's addresses reach into the hostile hosts' 127.0.9.x")
            ips = ips + hostile.listen_addresses()
        if self.traps:
            if any(ipaddress.ip_address(ip) in traps.TRAP_NET for ip in self.model.ips):
                raise ValueError("the model's addresses reach into the traps' 127.0.10.x")
            ips = ips + traps.listen_addresses()
        if self.estate:
            if any(ipaddress.ip_address(ip) in estate.ESTATE_NET for ip in self.model.ips):
                raise ValueError("the model's addresses reach into the estate's 127.0.11.x")
            ips = ips + estate.listen_addresses(self.estate)
        attempts = 1 if self._want_port else BIND_ATTEMPTS
        for _ in range(attempts):
            servers: list[_Server] = []
            try:
                first = _Server(ips[0], self._want_port, self)
                servers.append(first)
                port = first.server_address[1]
                servers.extend(_Server(ip, port, self) for ip in ips[1:])
            except OSError:
                for server in servers:
                    server.server_close()
                if self._want_port:
                    raise
                continue
            self._servers, self._port = servers, int(port)
            return
        raise OSError(f"no port free on all of {len(ips)} loopback IPs")

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as sel:
            for server in self._servers:
                sel.register(server.socket, selectors.EVENT_READ, server)
            while not self._stop_event.is_set():
                for key, _ in sel.select(timeout=0.05):
                    key.data.handle_request()

    def _register(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._conns.add(conn)
            if self.stopping:
                _hang_up(conn)

    def _unregister(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._conns.discard(conn)

    def _log(self, record: dict[str, Any]) -> None:
        if self._log_file is not None:
            self._log_file.write(record)


def _hang_up(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
