"""ReplayWeb.page replaying a WACZ on loopback, for the browser tests: trawl's
package opened the way its readers open one, in Webrecorder's viewer, which
reads it in the browser itself (a service worker fetching the WACZ by byte
ranges), where pywb (``tests.warc.pywb``) unpacks it on a server.

``scripts/setup.sh`` puts the viewer's built ``ui.js`` and ``sw.js`` (npm
package ``replaywebpage``, AGPL-3.0, used by the tests only) in
``.replaywebpage/``; missing is a failure naming the script, not a skip.

``viewer_serving`` serves one WACZ and the viewer on 127.0.0.1 from a stdlib
``ThreadingHTTPServer``:

* ``/?url=<archived URL>&ts=<14 digits>``: an embed page, a
  ``<replay-web-page>`` element with the WACZ as its source and
  ``embed="replayonly"`` (the archived page alone: no location bar, no
  sidebar), as the viewer's embedding guide writes it, added to the page
  once the viewer's worker is active (``EMBED`` says why);
* ``/ui.js``; ``/replay/sw.js`` and ``/replay/ui.js`` for the element's
  ``replayBase``: the worker's scope is ``/replay/``, where it serves the
  viewer's own page (``sw.js?serveIndex=1``), which loads ``ui.js`` from there;
* ``/archive.wacz``: the WACZ, answering HEAD and one byte range (RFC 9110
  14): ``bytes=a-b``, ``bytes=a-`` and the suffix ``bytes=-n`` that the
  viewer starts with, to find the ZIP's end of central directory (``n`` may
  exceed the file: then all of it, still 206 with its Content-Range); a
  first byte at or past the end is 416; anything else (several ranges,
  another unit, a malformed one) is ignored and answered 200 whole, as 14.2
  allows. Every request for it is kept (``Viewer.reads``): the worker's
  reads do not appear in the page's network log.

``open_replayed`` opens an archived URL in the viewer in a ``tests.browser``
tab and waits until the archived page, two same-origin frames down (the
element's iframe holds the viewer's page, whose own iframe holds the archived
one at ``/replay/w/<collection>/<ts>mp_/<url>``), has loaded whole; the test
looks into it with ``Replayed.evaluate``, and at its requests, answered by the
worker, in the tab's log.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.browser import IDLE_S, Browser, Message, Request, Visit
from tests.loopback import serving

ROOT = Path(__file__).resolve().parents[2]
VIEWER_DIR = ROOT / ".replaywebpage"
VIEWER_FILES = {"/ui.js": "ui.js", "/replay/ui.js": "ui.js", "/replay/sw.js": "sw.js"}
WACZ_PATH = "/archive.wacz"
WAIT_S = 30.0  # for the archived page to load in the viewer (it takes two or three seconds)

# The element in a template, put in the page once the viewer's worker is
# active: its frame (at /replay/, in the worker's scope) is then the worker's
# from its first load. Without this the frame's first load comes from the
# server (a 404: the worker serves that page) and the element reloads it, up
# to three times, until the worker controls it; on a busy machine three may
# not be enough.
EMBED = """<!doctype html>
<html><head><meta charset="utf-8"><title>ReplayWeb.page</title>
<link rel="icon" href="data:,">
<style>html, body {{ margin: 0; height: 100%; }}</style>
<script src="/ui.js"></script>
</head><body>
<template id="viewer">
<replay-web-page source="{source}" url="{url}" ts="{ts}" replayBase="/replay/"
  embed="replayonly"></replay-web-page>
</template>
<script type="module">
const registration = await navigator.serviceWorker.register(
  "/replay/sw.js?serveIndex=1", {{scope: "/replay/"}});  // the script URL the element registers
const worker = registration.installing || registration.waiting || registration.active;
while (worker.state !== "activated") {{
  await new Promise(changed => worker.addEventListener("statechange", changed, {{once: true}}));
}}
document.body.append(document.getElementById("viewer").content.cloneNode(true));
</script>
</body></html>
"""

# An archived URL's replay in the viewer: /replay/w/<collection>/<ts><modifier>/<url>,
# the collection a name and, once the viewer has resolved it, the hash of the
# WACZ's page list (":<sha256>"); the modifier pywb's ("mp_" a page, "im_" an
# image, "oe_" a stylesheet, ...). Its redirect from the form without the hash
# is a hop of the same URL.
REPLAY_PATH = r"/replay/w/[^/]+/(?::[0-9a-f]+/)?(\d{14})([a-z]{2}_)?/(.+)"


# --- the server -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """One request for the WACZ, and how it was answered."""

    method: str
    range: str | None  # the Range header as sent
    status: int
    length: int  # body bytes sent (HEAD: 0)


class _ViewerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, wacz: Path) -> None:
        super().__init__(("127.0.0.1", 0), _ViewerSite)
        self.wacz = wacz
        self.reads: list[Read] = []


class _ViewerSite(BaseHTTPRequestHandler):
    """The embed page, the viewer's files and the WACZ; anything else 404."""

    server: _ViewerServer

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        parts = urlsplit(self.path)
        if parts.path == WACZ_PATH:
            self._send_wacz(body)
        elif parts.path in VIEWER_FILES:
            script = (VIEWER_DIR / VIEWER_FILES[parts.path]).read_bytes()
            self._send(HTTPStatus.OK, "text/javascript", script, body)
        elif parts.path == "/":
            query = {name: values[0] for name, values in parse_qs(parts.query).items()}
            page = EMBED.format(
                source=WACZ_PATH,
                url=html.escape(query.get("url", "")),
                ts=html.escape(query.get("ts", "")),
            )
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", page.encode(), body)
        else:
            self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n", body)

    def _send_wacz(self, body: bool) -> None:
        size = self.server.wacz.stat().st_size
        asked = self.headers.get("Range")
        span = byte_range(asked, size)
        headers = {"Accept-Ranges": "bytes"}
        if span is None:
            status, first, last = HTTPStatus.OK, 0, size - 1
        elif not span:
            status, first, last = HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, 0, -1
            headers["Content-Range"] = f"bytes */{size}"  # RFC 9110 15.5.17
        else:
            status, (first, last) = HTTPStatus.PARTIAL_CONTENT, span
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"  # 14.4
        with self.server.wacz.open("rb") as archive:
            archive.seek(first)
            part = archive.read(last + 1 - first)
        self.server.reads.append(Read(self.command, asked, status, len(part) if body else 0))
        self._send(status, "application/wacz", part, body, headers)

    def _send(
        self,
        status: HTTPStatus,
        mime: str,
        data: bytes,
        body: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(data)))  # HEAD: what GET would send
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the WACZ's reads are kept instead."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | tuple[()] | None:
    """The first and last byte (inclusive) of ``size`` that the Range
    ``header`` asks for (RFC 9110 14.1.2); ``()`` when none of it can be
    sent (14.1.1: a first byte at or past the end, an empty suffix, an empty
    file); ``None`` to answer the whole (no header, several ranges, another
    unit, a malformed or invalid one: 14.2 lets a server ignore Range)."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", (header or "").strip())
    if not match or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:  # a suffix: the last n bytes, all of them when n > size
        n = int(last)
        return (max(size - n, 0), size - 1) if n and size else ()
    if last and int(last) < int(first):
        return None  # invalid (14.1.1): ignored
    if int(first) >= size:
        return ()
    return int(first), min(int(last), size - 1) if last else size - 1


@dataclass(frozen=True)
class Viewer:
    """A running server: where it listens, and the WACZ's reads so far."""

    port: int
    reads: list[Read]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, target: str, timestamp: str) -> str:
        """The embed page replaying ``target`` as captured nearest ``timestamp``."""
        return f"{self.base_url}/?{urlencode({'url': target, 'ts': timestamp})}"


def viewer_files() -> Path:
    """``VIEWER_DIR``, failing the test when setup has not filled it."""
    missing = sorted(n for n in set(VIEWER_FILES.values()) if not (VIEWER_DIR / n).is_file())
    if missing:
        pytest.fail(
            f"ReplayWeb.page's {' and '.join(missing)} missing from {VIEWER_DIR}: "
            "run `bash scripts/setup.sh` (it fetches the viewer)"
        )
    return VIEWER_DIR


@contextmanager
def viewer_serving(wacz: Path) -> Iterator[Viewer]:
    """``wacz`` in ReplayWeb.page on 127.0.0.1 while the block runs."""
    viewer_files()
    with serving(_ViewerServer(wacz), "replaywebpage") as server:
        yield Viewer(server.server_address[1], server.reads)


# --- a visit --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    """An archived page open in the viewer: the tab (``visit``: the viewer's
    requests and messages and the page's together) and the page's frame."""

    visit: Visit
    viewer: Viewer
    frame: str  # the archived page's frame id, for Visit.evaluate
    target: str  # the archived URL the frame replays

    def evaluate(self, expression: str) -> Any:
        """``expression`` in the archived page's document."""
        return self.visit.evaluate(expression, frame=self.frame)

    def archived(self) -> dict[str, list[Request]]:
        """The tab's requests for the archive's content by the archived URL
        (``REPLAY_PATH``; a redirect's hops are one URL's)."""
        form = re.compile(re.escape(self.viewer.base_url) + REPLAY_PATH)
        out: dict[str, list[Request]] = {}
        for request in self.visit.requests:
            if match := form.fullmatch(request.url):
                out.setdefault(match.group(3), []).append(request)
        return out

    def failed(self) -> list[Request]:
        """The tab's failed requests less the viewer's own 404s (``viewer_own``)."""
        return [r for r in self.visit.failed() if not (r.status == 404 and self.viewer_own(r.url))]

    @property
    def errors(self) -> list[Message]:
        """The tab's console errors less the viewer's own 404s (``viewer_own``):
        Chromium logs each 404 as "Failed to load resource: the server
        responded with a status of 404", its URL with it."""
        return [
            m
            for m in self.visit.errors
            if not (m.source == "network" and "status of 404" in m.text and self.viewer_own(m.url))
        ]

    def viewer_own(self, url: str) -> bool:
        """Whether ``url`` is one of the two the viewer's page (``/replay/``)
        fetches on its own whatever the archive holds, which its worker may
        rightly answer 404:

        * ``/favicon.ico`` at the archived page's origin: for its tab's icon
          the viewer fetches each icon the page names and then that one
          (added to the list by the viewer's wombat.js), until one answers
          200 with a type other than text (ui.js, ``onFavIcons``); a page
          whose icons are none of that (``<link rel="icon" href="data:,">``)
          leads it to ``/favicon.ico``, which an archive without one answers
          404;
        * ``/replay/w/api/c/<collection>?all=1``: the viewer asks for the
          collection's details (``doUpdateInfo``) before its worker has
          loaded the WACZ, answered 404, and again once it has.

        An icon the page names, anything else of the archive, and whatever
        the page itself logs are not the viewer's."""
        base = re.escape(self.viewer.base_url)
        if match := re.fullmatch(base + REPLAY_PATH, url):
            origin = "{0.scheme}://{0.netloc}".format(urlsplit(self.target))
            return match.group(3) == f"{origin}/favicon.ico"
        return re.fullmatch(base + r"/replay/w/api/c/[^/?]+\?all=1", url) is not None

    def screenshot(self, path: Path) -> Path:
        return self.visit.screenshot(path)


def open_replayed(browser: Browser, viewer: Viewer, target: str, timestamp: str) -> Replayed:
    """``target``, as captured nearest ``timestamp``, opened in the viewer:
    once its frame has loaded whole (``document.readyState`` complete, its
    images, stylesheets and scripts with it) and no request for the
    archive's content has then been in flight for ``IDLE_S``."""
    replay = f"{viewer.base_url}/replay/w/"
    found: dict[str, str] = {}
    quiet_since = time.monotonic()

    def settled(visit: Visit) -> bool:
        nonlocal quiet_since
        now = time.monotonic()
        if any(r.url.startswith(replay) and not r.finished for r in visit.requests):
            quiet_since = now
        elif not found:
            found.update(_loaded_frame(visit, viewer))
            quiet_since = now
        return bool(found) and now - quiet_since >= IDLE_S

    # the viewer's own fetch of sw.js (a check that it exists) is never read
    # to its end, so it stays in flight: the tab is settled by `settled`
    visit = browser.open(viewer.url(target, timestamp), wait_s=WAIT_S, until=settled)
    return Replayed(visit, viewer, found["frame"], found["target"])


def _loaded_frame(visit: Visit, viewer: Viewer) -> dict[str, str]:
    """The archived page's frame id and URL, once its document is complete."""
    form = re.compile(re.escape(viewer.base_url) + REPLAY_PATH)
    for frame, url in visit.frames().items():
        match = form.fullmatch(url)
        if not match or match.group(2) != "mp_":
            continue  # the viewer's own frames
        if visit.evaluate("document.readyState", frame=frame) == "complete":
            return {"frame": frame, "target": match.group(3)}
    return {}
