"""Headless Chromium on the DevTools protocol, for tests that look at a page as
a reader's browser shows it: what it requested and got, what it logged, what
its script left in the DOM, and a screenshot.

``Browser`` starts Debian's ``/usr/bin/chromium`` (``scripts/setup.sh``
installs it) with ``--remote-debugging-port=0``, reads the port it chose from
``<user-data-dir>/DevToolsActivePort`` and talks to it over one WebSocket
(websocket-client, a dev dependency) with the flat session protocol: every
``open()`` makes a tab in a browser context of its own (nothing cached or
stored by an earlier visit), enables the Page, Network, Runtime and Log
domains before it navigates, and returns a ``Visit`` once the load event has
fired and the network has then been idle for ``IDLE_S`` (no request in
flight).

It reaches nothing but the servers it is told to (``reach``), whatever the
page or the browser itself tries:

* every request goes to a proxy at a closed loopback port, so it fails there,
  except those for ``reach`` (``--proxy-bypass-list``). ``<-loopback>``
  withdraws Chromium's implicit bypass of localhost and 127.0.0.0/8, so
  another server on loopback (the live site a test archived) is refused too;
* host names resolve to nothing (``--host-resolver-rules``), so not even a
  DNS query leaves the machine;
* the background services that call home (component and Safe Browsing
  updates, sync, metrics, field trials, translation) are switched off as far
  as flags go. Not all the way: Debian's Chromium 156 still asks
  clients2.google.com for the time, update.googleapis.com for components and
  accounts.google.com at start (seen on a listening "proxy"); the closed
  proxy is what stops them.

``tests/warc/test_browser_replay.py`` checks this on a loopback server
outside ``reach``, which must see no request.

Chromium runs in a process group of its own, killed whole when the ``with``
block ends, a failing test included.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import pytest
import websocket

CHROMIUM = Path("/usr/bin/chromium")
CLOSED_PORT = 9  # discard: nobody listens on it on loopback
STARTUP_S = 30.0  # for DevToolsActivePort to appear (it takes under a second)
CALL_S = 30.0  # for one DevTools command to be answered
IDLE_S = 0.5  # no request in flight this long after the load event: the page has settled
WINDOW = (1280, 800)

# What would make Chromium reach out on its own, off: background networking
# covers component, variations (field trial) and Safe Browsing updates; the
# rest are among the flags chrome-launcher (Lighthouse's) and Puppeteer start
# Chromium with for the same reason.
QUIET_FLAGS = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",  # records, never uploads
    "--no-pings",  # <a ping>
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",  # no STUN past the proxy
)


@dataclass
class Request:
    """One request the page made, and what came of it."""

    url: str
    type: str  # the resource type: Document, Stylesheet, Image, Script, ...
    status: int | None = None  # None: no response came
    mime: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # the response's, lower-cased
    remote: str | None = None  # "ip:port" the response came from
    failure: str | None = None  # Network.loadingFailed's errorText (net::ERR_...)
    finished: bool = False
    # A worker's own script (a service worker's, say): the page's log sees it
    # sent, but its answer only in the worker's, so it is never waited for.
    worker: bool = False

    @property
    def ok(self) -> bool:
        """Answered below 400 (a redirect hop is no failure) and loaded whole."""
        return self.failure is None and self.status is not None and self.status < 400


@dataclass
class Message:
    """A console message or log entry: ``source`` is "console" for the page's
    own ``console.*`` calls, else the Log domain's (network, security, ...)."""

    source: str
    level: str
    text: str
    url: str = ""


@dataclass
class Visit:
    """A page opened by ``Browser.open``, still open: look at it with
    ``evaluate`` and ``screenshot`` until the browser closes. Its requests,
    messages and exceptions are those until the page settled."""

    url: str
    requests: list[Request]  # in the order sent; each hop of a redirect is one
    messages: list[Message]
    exceptions: list[str]  # uncaught, as Chromium describes them (with the stack)
    navigation_error: str | None  # Page.navigate's errorText, when the page itself failed
    _call: Callable[..., dict[str, Any]] = field(repr=False)

    @property
    def errors(self) -> list[Message]:
        """Console errors (``console.error``, ``console.assert``) and error log entries."""
        return [m for m in self.messages if m.level in ("error", "assert")]

    def failed(self) -> list[Request]:
        """Requests answered 400 or above, or not at all, or not loaded whole."""
        return [r for r in self.requests if r.finished and not r.ok]

    def evaluate(self, expression: str, frame: str | None = None) -> Any:
        """The value of ``expression`` in the page (promises awaited), as JSON
        gives it; an exception it throws fails the test. With ``frame`` (an id
        from ``frames``) in that frame's document instead, in a world of the
        test's own (``Page.createIsolatedWorld``): the frame's DOM, none of its
        script's globals."""
        where: dict[str, Any] = {}
        if frame is not None:
            world = self._call("Page.createIsolatedWorld", frameId=frame, worldName="tests")
            where["contextId"] = world["executionContextId"]
        result = self._call(
            "Runtime.evaluate",
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
            **where,
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {_describe(result['exceptionDetails'])}")
        return result["result"].get("value")

    def frames(self) -> dict[str, str]:
        """Every frame of the page by id, nested ones (those of iframes in a
        shadow root too) included: its URL as it is now."""
        found: dict[str, str] = {}
        pending = [self._call("Page.getFrameTree")["frameTree"]]
        while pending:
            node = pending.pop()
            found[node["frame"]["id"]] = node["frame"]["url"]
            pending.extend(node.get("childFrames", []))
        return found

    def screenshot(self, path: Path) -> Path:
        """The viewport as a PNG file at ``path``."""
        shot = self._call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


class Browser:
    """Headless Chromium reaching only ``reach`` (URLs or ``host:port``);
    its profile, its log and the DevTools port file live under ``workdir``."""

    def __init__(self, workdir: Path, reach: Iterable[str]) -> None:
        self._dir = workdir
        self._reach = [_host_port(r) for r in reach]
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: websocket.WebSocket | None = None
        self._next_id = 0
        self._events: list[dict[str, Any]] = []  # read while waiting for an answer

    # --- lifecycle ------------------------------------------------------------------

    def __enter__(self) -> Self:
        if not os.access(CHROMIUM, os.X_OK):
            pytest.fail(f"{CHROMIUM} missing: run `bash scripts/setup.sh` (it installs chromium)")
        profile = self._dir / "profile"
        profile.mkdir(parents=True)
        try:
            self._proc = self._launch(profile)
            port, path = self._devtools_endpoint(profile)
            # A socket of our own: websocket-client would go through a proxy
            # the shell names. suppress_origin: Chromium refuses a DevTools
            # client that sends an Origin header unless started with
            # --remote-allow-origins.
            self._ws = websocket.create_connection(
                f"ws://127.0.0.1:{port}{path}", timeout=CALL_S, suppress_origin=True,
                socket=socket.create_connection(("127.0.0.1", port), timeout=CALL_S),
            )  # fmt: skip
        except BaseException:
            self._kill()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ws is not None:
            self._ws.close()
        self._kill()

    def _launch(self, profile: Path) -> subprocess.Popen[bytes]:
        allowed = ";".join(["<-loopback>", *self._reach])
        argv = [
            str(CHROMIUM), "--headless=new", "--remote-debugging-port=0",
            f"--user-data-dir={profile}", "--no-sandbox", "--disable-gpu",
            f"--proxy-server=http://127.0.0.1:{CLOSED_PORT}", f"--proxy-bypass-list={allowed}",
            f"--host-resolver-rules={self._resolver_rules()}", *QUIET_FLAGS,
            f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars", "--mute-audio",
            "about:blank",
        ]  # fmt: skip
        with (self._dir / "chromium.log").open("wb") as log:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killed whole in _kill
            )  # fmt: skip

    def _resolver_rules(self) -> str:
        """Every name fails to resolve, IP literals included, but those of ``reach``."""
        hosts = dict.fromkeys(r.rpartition(":")[0] for r in self._reach)
        return ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {host}" for host in hosts)])

    def _devtools_endpoint(self, profile: Path) -> tuple[int, str]:
        """The port and browser path Chromium wrote to DevToolsActivePort."""
        assert self._proc is not None
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                pytest.fail(f"chromium exited {self._proc.returncode}:\n{self._log_tail()}")
            lines = active.read_text().split() if active.exists() else []
            if len(lines) == 2:  # written whole: the port, then the path
                return int(lines[0]), lines[1]
            time.sleep(0.05)
        pytest.fail(f"chromium wrote no DevToolsActivePort in {STARTUP_S} s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        return (self._dir / "chromium.log").read_text(errors="replace")[-4000:]

    def _kill(self) -> None:
        """SIGTERM to the whole group (browser, zygote, renderers, network and
        GPU services), then SIGKILL to whatever is left of it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        with suppress(ProcessLookupError):  # the leader gone, children may linger
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    # --- visits ---------------------------------------------------------------------

    def open(
        self, url: str, wait_s: float = 15.0, until: Callable[[Visit], bool] | None = None
    ) -> Visit:
        """Open ``url`` in a new tab of a new browser context, and wait for its
        load event and then ``IDLE_S`` of no request in flight, ``wait_s`` at
        most (then the test fails, naming what was still loading).

        ``until``, when given, says instead when the page has settled: once
        its load event has fired, as soon as ``until(visit)`` holds, whatever
        is in flight. For an app that goes on after its load event and may
        leave a request open for good (a ``fetch()`` whose body it never
        reads is in flight until garbage-collected); the page's requests and
        messages are read meanwhile."""
        context = self._call("Target.createBrowserContext")["browserContextId"]
        target = self._call("Target.createTarget", url="about:blank", browserContextId=context)
        session = self._call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        page = _PageLog(session["sessionId"])
        self._events = []  # the new tab's life starts here

        def call(method: str, **params: Any) -> dict[str, Any]:
            return self._call(method, _session=page.session, **params)

        for domain in ("Page", "Network", "Runtime", "Log"):
            call(f"{domain}.enable")
        call("Network.setCacheDisabled", cacheDisabled=True)  # every resource from the server
        navigated = call("Page.navigate", url=url)
        visit = Visit(
            url, page.sent, page.messages, page.exceptions, navigated.get("errorText"), call
        )
        ready = (lambda: until(visit)) if until is not None else None
        self._settle(page, time.monotonic() + wait_s, url, ready)
        return visit

    def _settle(
        self, page: _PageLog, deadline: float, url: str, ready: Callable[[], bool] | None
    ) -> None:
        """Read the tab's events until it has loaded and then been idle
        ``IDLE_S``, or is ``ready`` when that is given."""
        quiet_since = time.monotonic()
        while True:
            now = time.monotonic()
            if page.in_flight():
                quiet_since = now
            if page.loaded and (ready() if ready else now - quiet_since >= IDLE_S):
                return
            if now > deadline:
                pending = [r.url for r in page.in_flight()]
                raise AssertionError(
                    f"{url} not settled: loaded={page.loaded}, still loading {pending}"
                    + (", not ready" if ready else "")
                )
            for event in self._drain(timeout=0.05):
                page.record(event)

    # --- the protocol ---------------------------------------------------------------

    def _call(self, method: str, _session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; the events that come before
        it are kept for ``_drain``."""
        assert self._ws is not None
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if _session is not None:
            message["sessionId"] = _session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + CALL_S
        while time.monotonic() < deadline:
            reply = self._receive(deadline - time.monotonic())
            if reply is None:
                continue
            if reply.get("id") != self._next_id:
                self._events.append(reply)
                continue
            if "error" in reply:
                raise AssertionError(f"DevTools {method} failed: {reply['error']}")
            result: dict[str, Any] = reply.get("result", {})
            return result
        raise AssertionError(f"DevTools {method}: no answer in {CALL_S} s")

    def _drain(self, timeout: float) -> list[dict[str, Any]]:
        """The events kept, then those arriving within ``timeout``."""
        events, self._events = self._events, []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            message = self._receive(left)
            if message is None:
                break
            events.append(message)
        return events

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        assert self._ws is not None
        self._ws.settimeout(max(timeout, 0.001))
        try:
            text = self._ws.recv()
        except websocket.WebSocketTimeoutException:
            return None
        message: dict[str, Any] = json.loads(text)
        return message


class _PageLog:
    """What one tab's events say: its requests by id, its messages, its
    exceptions, whether its load event fired."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.sent: list[Request] = []  # in order, each hop of a redirect
        self.requests: dict[str, Request] = {}  # by id: the latest hop
        self.messages: list[Message] = []
        self.exceptions: list[str] = []
        self.loaded = False

    def in_flight(self) -> list[Request]:
        return [r for r in self.sent if not (r.finished or r.worker)]

    def record(self, event: dict[str, Any]) -> None:
        if event.get("sessionId") != self.session:
            return  # another tab's, or the browser's own
        params = event.get("params", {})
        match event.get("method"):
            case "Page.loadEventFired":
                self.loaded = True
            case "Network.requestWillBeSent":
                self._sent(params)
            case "Network.responseReceived":
                if (request := self.requests.get(params["requestId"])) is not None:
                    _answered(request, params["response"])
            case "Network.loadingFinished":
                if (request := self.requests.get(params["requestId"])) is not None:
                    request.finished = True
            case "Network.loadingFailed":
                if (request := self.requests.get(params["requestId"])) is not None:
                    request.failure = params.get("errorText") or "failed"
                    request.finished = True
            case "Runtime.consoleAPICalled":
                text = " ".join(_describe_value(arg) for arg in params.get("args", []))
                self.messages.append(Message("console", params["type"], text))
            case "Runtime.exceptionThrown":
                self.exceptions.append(_describe(params["exceptionDetails"]))
            case "Log.entryAdded":
                entry = params["entry"]
                self.messages.append(
                    Message(entry["source"], entry["level"], entry["text"], entry.get("url", ""))
                )

    def _sent(self, params: dict[str, Any]) -> None:
        if params["request"]["url"].startswith("data:"):
            return  # nothing leaves the page (Chromium's error pages are made of these)
        earlier = self.requests.get(params["requestId"])
        if earlier is not None and "redirectResponse" in params:  # that hop is over
            _answered(earlier, params["redirectResponse"])
            earlier.finished = True
        url = params["request"]["url"]
        request = Request(url, params.get("type", "Other"))
        request.worker = not params.get("loaderId") and params.get("documentURL") == url
        self.requests[params["requestId"]] = request
        self.sent.append(request)


def _answered(request: Request, response: dict[str, Any]) -> None:
    request.status = int(response["status"])
    request.mime = response.get("mimeType")
    request.headers = {k.lower(): v for k, v in response.get("headers", {}).items()}
    if response.get("remoteIPAddress"):
        request.remote = f"{response['remoteIPAddress']}:{response.get('remotePort')}"


def _describe(details: dict[str, Any]) -> str:
    """An exception as Chromium words it: its description (message and
    stack) when it has one, else the details' text."""
    exception = details.get("exception") or {}
    return str(exception.get("description") or details.get("text", "exception"))


def _describe_value(arg: dict[str, Any]) -> str:
    if "value" in arg:
        return str(arg["value"])
    return str(arg.get("description", arg.get("type", "")))


def _host_port(server: str) -> str:
    """``http://127.0.0.1:8080/x`` or ``127.0.0.1:8080`` -> ``127.0.0.1:8080``."""
    if "//" not in server:
        server = "//" + server
    parts = urlsplit(server)
    if not parts.hostname or not parts.port:
        raise ValueError(f"reach wants a host and a port: {server!r}")
    return f"{parts.hostname}:{parts.port}"
