"""A page trawl archived, replayed by pywb, looks right in a real browser.

``test_pywb_replay`` holds the archived bytes to what was sent; this module
holds the replayed page to what a reader sees: headless Chromium
(``tests.browser``) opens it in pywb's rewritten, top-level replay mode
(``/<coll>/<timestamp>/<url>`` with pywb's frame off: the page is the top
document, with no banner; ``tests.warc.pywb`` says why) and must load its
image, its stylesheet, the stylesheet's background image and its script, all
from pywb and all with 200, run the script, paint the images, and log no
error.

The site is a small stdlib server on 127.0.0.1, captured exchange by
exchange into a WARC with trawl's own writer (request head as sent, response
as received) and then stopped, so that replay has nothing to fall back to
but the archive; the browser could not reach it anyway (``tests.browser``
sends everything but pywb and the viewer to a closed proxy; the last test
proves it on a server that is up). The same capture is replayed from the
WARC file and from a WACZ package of it made by ``trawl.warc.wacz`` with
trawl's own CDXJ index.

The WACZ is also opened the way its readers open one, in ReplayWeb.page
(``tests.warc.replaywebpage``: the viewer reads the package by byte ranges
in the browser), where the page must load, run its script, decode its image
and apply its stylesheet with its image, and log no error but the viewer's
own.

A page whose image was never captured must come out as a failed request
(pywb's 404, the viewer's) in the browser's log: the harness can see a
broken replay.

One pywb server (a collection per form), one viewer and one browser serve
the module.
The screenshot stays in the test's directory; with ``TRAWL_KEEP_SCREENSHOT``
set to a path it is copied there too, for the docs (both forms give the
same picture; the last one taken stays).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from matplotlib.image import imread

from tests.browser import Browser, Request, Visit
from tests.loopback import serving
from tests.warc.pywb import Replay, pywb_serving
from tests.warc.replaywebpage import Viewer, byte_range, open_replayed, viewer_serving
from trawl.warc.cdxj import write_index
from trawl.warc.wacz import PageCapture, pages, write_wacz
from trawl.warc.writer import WarcWriter

FETCHED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)  # the first capture; one a second after
TIMESTAMP = "20260301120000"  # FETCHED_AT as pywb's 14 digits
LOGO_RGB, BACKGROUND_RGB = (200, 30, 40), (20, 90, 200)
LOGO_SIZE = 48  # px, square


def png(size: int, rgb: tuple[int, int, int]) -> bytes:
    """A ``size`` x ``size`` PNG of one colour (PNG spec: IHDR, IDAT, IEND;
    8-bit truecolour, each scanline led by filter type 0)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    scanlines = (b"\x00" + bytes(rgb) * size) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanlines))
        + chunk(b"IEND", b"")
    )


# The icon link keeps Chromium from asking for /favicon.ico, which is no part of the page.
PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Replayed</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/style.css">
</head><body>
<h1>An archived page</h1>
<p>Captured by trawl's WARC writer; replayed from the archive alone.</p>
<p><img id="logo" src="/img/logo.png" width="{LOGO_SIZE}" height="{LOGO_SIZE}" alt="logo">
an image</p>
<div class="banner"></div><p>a stylesheet's background image</p>
<p id="status">app.js did not run</p>
<script src="/app.js"></script>
</body></html>
"""
APP_JS = b"""document.documentElement.dataset.appRan = "1";
document.getElementById("status").textContent = "app.js ran";
"""
BROKEN = """<!doctype html>
<html><head><meta charset="utf-8"><title>Broken</title><link rel="icon" href="data:,"></head>
<body><img id="missing" src="/img/missing.png" alt="never captured"></body></html>
"""
SITE: dict[str, tuple[str, bytes]] = {  # path: Content-Type, body
    "/": ("text/html; charset=utf-8", PAGE.encode()),
    "/style.css": (
        "text/css",
        b".banner { width: 160px; height: 40px; background: url(/img/bg.png); }\n",
    ),
    "/img/logo.png": ("image/png", png(LOGO_SIZE, LOGO_RGB)),
    "/img/bg.png": ("image/png", png(8, BACKGROUND_RGB)),
    "/app.js": ("text/javascript", APP_JS),
    "/broken.html": ("text/html; charset=utf-8", BROKEN.encode()),
    "/img/missing.png": ("image/png", png(8, (0, 0, 0))),  # served, never captured
}
CAPTURED = [path for path in SITE if path != "/img/missing.png"]
REQUISITES = ["/style.css", "/img/logo.png", "/img/bg.png", "/app.js"]
COLLECTIONS = ("warc", "wacz")


# --- the live site and its capture --------------------------------------------------------------


class _Site(BaseHTTPRequestHandler):
    """``SITE``, over HTTP/1.0 (one exchange per connection, so a capture
    reads to the end); anything else 404."""

    server: _SiteServer

    def do_GET(self) -> None:
        self.server.requests += 1
        mime, body = SITE.get(self.path, ("text/plain", b"not found\n"))
        self.send_response(200 if self.path in SITE else 404)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: requests are counted instead."""


class _SiteServer(ThreadingHTTPServer):
    requests = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def live_site() -> Iterator[_SiteServer]:
    """``SITE`` on 127.0.0.1 while the block runs."""
    with serving(_SiteServer(("127.0.0.1", 0), _Site), "live-site") as server:
        yield server


@dataclass(frozen=True)
class Exchange:
    """One GET as it went over the wire."""

    request_head: bytes
    status_line: str
    headers: list[tuple[str, str]]
    body: bytes


def fetch(url: str) -> Exchange:
    """GET ``url`` on a socket of its own: the request head exactly as sent,
    the response exactly as received (the server closes after it)."""
    parts = urlsplit(url)
    head = (
        f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "User-Agent: trawl-test/0.1\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head)
        received = b"".join(iter(lambda: sock.recv(65536), b""))
    response_head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = response_head.decode("iso-8859-1").split("\r\n")
    headers = [(name, value.strip()) for name, _, value in (ln.partition(":") for ln in lines)]
    return Exchange(head, status_line, headers, body)


def capture(origin: str, warc: Path) -> None:
    """Fetch ``CAPTURED`` from ``origin`` into the WARC file ``warc``, a
    second apart from ``FETCHED_AT`` on."""
    with WarcWriter(warc, "trawl test") as writer:
        for i, path in enumerate(CAPTURED):
            exchange = fetch(origin + path)
            assert exchange.status_line.split()[1] == "200", (path, exchange.status_line)
            writer.write_exchange(
                url=origin + path, ip="127.0.0.1", fetched_at=FETCHED_AT + timedelta(seconds=i),
                request_head=exchange.request_head, status_line=exchange.status_line,
                response_headers=exchange.headers, body=exchange.body,
            )  # fmt: skip


def package(warc: Path, origin: str, out: Path) -> Path:
    """The WACZ ``trawl export wacz`` would make of ``warc``: trawl's CDXJ
    index of it and its HTML pages."""
    index = warc.with_name("index.cdxj")
    write_index([warc], index, sort=True)
    captured = [
        PageCapture(origin + path, FETCHED_AT + timedelta(seconds=i), 200, SITE[path][0])
        for i, path in enumerate(CAPTURED)
    ]
    write_wacz(out, [warc], index, pages(captured), created=FETCHED_AT, software="trawl test")
    return out


# --- fixtures: one archive, one pywb, one browser for the module --------------------------------


@dataclass(frozen=True)
class Archive:
    origin: str  # the live site's, now down
    replay: Replay  # pywb
    viewer: Viewer  # ReplayWeb.page, the WACZ


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archive]:
    root = tmp_path_factory.mktemp("replay")
    warc = root / "site-00000.warc.gz"
    with live_site() as site:
        capture(site.origin, warc)
        assert site.requests == len(CAPTURED)
    wacz = package(warc, site.origin, root / "site.wacz")
    with (
        pywb_serving(root / "pywb", {"warc": [warc], "wacz": [wacz]}) as replay,
        viewer_serving(wacz) as viewer,
    ):
        yield Archive(site.origin, replay, viewer)


@pytest.fixture(scope="module")
def browser(archive: Archive, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    reach = [archive.replay.base_url, archive.viewer.base_url]
    with Browser(tmp_path_factory.mktemp("browser"), reach=reach) as b:
        yield b


def replayed(visit: Visit, replay: Replay, coll: str) -> dict[str, list[Request]]:
    """The visit's requests by the archived URL pywb replayed for them
    (``<base>/<coll>/<timestamp><modifier>/<url>``: ``im_`` for an image,
    ``cs_`` a stylesheet, ``js_`` a script, ``oe_`` an image a stylesheet
    names, none the page)."""
    form = re.compile(re.escape(f"{replay.base_url}/{coll}/") + r"\d*(?:[a-z]{2}_)?/(.+)")
    out: dict[str, list[Request]] = {}
    for request in visit.requests:
        if match := form.fullmatch(request.url):
            out.setdefault(match.group(1), []).append(request)
    return out


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("coll", COLLECTIONS)
def test_the_archived_page_replays_whole_in_a_browser(
    archive: Archive, browser: Browser, coll: str, tmp_path: Path
) -> None:
    replay = archive.replay
    visit = browser.open(replay.url(coll, archive.origin + "/", TIMESTAMP))
    assert visit.navigation_error is None
    # every request went to pywb, each URL once, and none failed
    assert [r.url for r in visit.requests if not r.url.startswith(replay.base_url + "/")] == []
    assert visit.failed() == []
    by_url = replayed(visit, replay, coll)
    assert all(len(requests) == 1 for requests in by_url.values()), by_url
    for path in ["/", *REQUISITES]:
        assert archive.origin + path in by_url, f"{path} not requested: {list(by_url)}"
        [request] = by_url[archive.origin + path]
        assert (request.status, request.remote) == (200, f"127.0.0.1:{replay.port}"), path
        # from the archive: pywb dates what it replays (RFC 7089 Memento-Datetime)
        assert "memento-datetime" in request.headers, (path, request.headers)
    # the script ran, the image decoded, the stylesheet applied with its image
    assert visit.evaluate("document.documentElement.dataset.appRan") == "1"
    assert visit.evaluate("document.getElementById('logo').naturalWidth") == LOGO_SIZE
    background = visit.evaluate(
        "getComputedStyle(document.querySelector('.banner')).backgroundImage"
    )
    assert "/img/bg.png" in background
    # pywb 2.10 (wombat.js, non-framed) logs nothing here, so no message is ignored
    assert (visit.errors, visit.exceptions) == ([], [])
    shot = visit.screenshot(tmp_path / f"replay-{coll}.png")
    assert painted(shot, LOGO_RGB) >= LOGO_SIZE * LOGO_SIZE
    assert painted(shot, BACKGROUND_RGB) >= 160 * 40
    if keep := os.environ.get("TRAWL_KEEP_SCREENSHOT"):
        shutil.copyfile(shot, keep)


def painted(png_file: Path, rgb: tuple[int, int, int]) -> int:
    """How many pixels of the screenshot are exactly ``rgb``."""
    pixels = (imread(png_file)[..., :3] * 255).round().astype(np.uint8)
    return int(np.all(pixels == np.array(rgb, dtype=np.uint8), axis=-1).sum())


def test_an_image_never_captured_is_a_failed_request(archive: Archive, browser: Browser) -> None:
    replay = archive.replay
    visit = browser.open(replay.url("warc", archive.origin + "/broken.html", TIMESTAMP))
    missing = archive.origin + "/img/missing.png"
    [request] = replayed(visit, replay, "warc")[missing]
    assert visit.failed() == [request]
    assert (request.status, request.remote) == (404, f"127.0.0.1:{replay.port}")
    assert [m.url for m in visit.errors] == [request.url]  # "Failed to load resource: ... 404"
    assert visit.evaluate("document.getElementById('missing').naturalWidth") == 0


def test_the_wacz_replays_whole_in_replaywebpage(
    archive: Archive, browser: Browser, tmp_path: Path
) -> None:
    viewer = archive.viewer
    replayed = open_replayed(browser, viewer, archive.origin + "/", TIMESTAMP)
    assert replayed.visit.navigation_error is None
    # every request went to the viewer's server or its worker, and none
    # failed but the viewer's own (Replayed.viewer_own)
    assert [r.url for r in replayed.visit.requests if not r.url.startswith(viewer.base_url)] == []
    assert replayed.failed() == []
    by_url = replayed.archived()
    for path in ["/", *REQUISITES]:
        answers = [r.status for r in by_url.get(archive.origin + path, []) if r.status != 302]
        assert answers == [200], (path, answers)  # a 302 is the viewer's hop to its own form
    # the script ran, the image decoded, the stylesheet applied with its image
    assert replayed.evaluate("document.documentElement.dataset.appRan") == "1"
    assert replayed.evaluate("document.getElementById('logo').naturalWidth") == LOGO_SIZE
    background = replayed.evaluate(
        "getComputedStyle(document.querySelector('.banner')).backgroundImage"
    )
    assert "/img/bg.png" in background
    assert (replayed.errors, replayed.visit.exceptions) == ([], [])
    shot = replayed.screenshot(tmp_path / "replaywebpage.png")
    assert painted(shot, LOGO_RGB) >= LOGO_SIZE * LOGO_SIZE
    assert painted(shot, BACKGROUND_RGB) >= 160 * 40
    # the worker read the package from the server by ranges, its end first
    assert viewer.reads and {read.status for read in viewer.reads} == {206}
    assert any(read.range and read.range.startswith("bytes=-") for read in viewer.reads)


def test_an_image_never_captured_fails_in_replaywebpage(archive: Archive, browser: Browser) -> None:
    replayed = open_replayed(browser, archive.viewer, archive.origin + "/broken.html", TIMESTAMP)
    [request] = replayed.archived()[archive.origin + "/img/missing.png"]
    assert replayed.failed() == [request] and request.status == 404
    assert [m.url for m in replayed.errors] == [request.url]  # not the viewer's own
    assert replayed.evaluate("document.getElementById('missing').naturalWidth") == 0


@pytest.mark.parametrize(
    ("header", "span"),
    [
        (None, None),
        ("bytes=0-", (0, 99)),
        ("bytes=10-19", (10, 19)),
        ("bytes=90-200", (90, 99)),  # a last byte past the end: up to the end
        ("bytes=-10", (90, 99)),
        ("bytes=-65558", (0, 99)),  # a suffix longer than the file: all of it
        ("bytes=100-", ()),  # a first byte past the end: 416
        ("bytes=-0", ()),
        ("bytes=0-1,5-6", None),  # several ranges: the whole, 200
        ("bytes=5-1", None),  # invalid: ignored
        ("items=0-1", None),
    ],
)
def test_the_viewers_server_answers_byte_ranges(
    header: str | None, span: tuple[int, int] | tuple[()] | None
) -> None:
    assert byte_range(header, 100) == span


def test_the_browser_reaches_nothing_but_the_replay_server(browser: Browser) -> None:
    with live_site() as site:  # up, on loopback, and still out of reach
        direct = browser.open(site.origin + "/")
        named = browser.open("http://example.com/")
        assert site.requests == 0
    assert direct.navigation_error == named.navigation_error == "net::ERR_PROXY_CONNECTION_FAILED"
    assert [(r.url, r.status) for r in direct.requests] == [(site.origin + "/", None)]
