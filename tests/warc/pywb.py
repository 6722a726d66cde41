"""pywb's ``wayback`` serving trawl's archives on loopback, for the replay tests.

pywb lives in its own virtualenv, ``.venv-pywb`` (``scripts/setup.sh``; its
pins and its ``brotli`` module clash with ours), and is run as a program,
never imported. ``pywb_serving`` makes one collection per name it is given
with ``wb-manager init`` and ``wb-manager add``, then starts ``wayback`` on
127.0.0.1 and yields a ``Replay`` once the server answers.

A collection takes WARC files, which pywb copies and indexes with its own
indexer, and WACZ packages, which ``wb-manager add --unpack-wacz`` (pywb 2.8
and later) unpacks: it copies the WARC files and merges the package's own
CDXJ index into the collection's, its file names rewritten (pywb 2.10 reads
that index only under a name ending ``.cdx`` or ``.cdx.gz``, as
``trawl.warc.wacz`` names it; given another it warns and adds nothing). A
collection left without an index fails the test rather than replaying
nothing.

Replay is pywb's rewritten mode without its frame (``framed_replay: false``
in the ``config.yaml`` written beside the collections): ``/<coll>/<ts>/<url>``
is the archived page itself, top-level, its links rewritten and wombat.js
loaded, with no banner (pywb puts only ``custom_banner.html``, an empty
comment, into a page replayed so). In the default framed mode a page asked
for at the top level, even as ``mp_``, sends the browser to the frame page
(the head insert's "Fast Top-Frame Redirect"), whose own banner, scripts
and index queries a test of the page would have to tell apart from it.

pywb serves the collections only (no ``--live``, ``--record`` or
``--proxy``), so it has nothing to fetch from the live web; its proxy
variables point at a closed loopback port, so that anything it tried anyway
would fail there.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYWB_BIN = ROOT / ".venv-pywb" / "bin"
STARTUP_S = 20.0  # for wayback to answer (it takes about a second)
CLOSED_PORT = 9  # discard: nobody listens on it on loopback
ACCEPT = "gzip, deflate, br"  # what trawl and browsers send


@dataclass(frozen=True)
class Replay:
    """A running ``wayback``: where it listens, and its replay URLs."""

    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, coll: str, target: str, timestamp: str = "", mod: str = "") -> str:
        """The replay URL of ``target`` in ``coll``, the capture nearest
        ``timestamp`` (14 digits; empty: the latest): with no ``mod`` the page
        as a reader opens it, rewritten; ``id_`` the payload as archived."""
        return f"{self.base_url}/{coll}/{timestamp}{mod}/{target}"


def pywb(tool: str) -> str:
    """A pywb program; missing is a failure (setup installs it), not a skip."""
    path = PYWB_BIN / tool
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} missing: run `bash scripts/setup.sh` (it installs pywb)")
    return str(path)


def offline_env(home: Path) -> dict[str, str]:
    """pywb's environment: every proxy variable at a closed loopback port ..."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    dead = f"http://127.0.0.1:{CLOSED_PORT}"
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        env[name] = env[name.upper()] = dead
    # ... but loopback's: pywb's front end asks its own index and WARC server
    # over HTTP, at localhost on a port of its own
    env["no_proxy"] = env["NO_PROXY"] = "localhost,127.0.0.1"
    env["HOME"] = str(home)  # anything it caches stays in the test's directory
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def pywb_serving(root: Path, collections: Mapping[str, Sequence[Path]]) -> Iterator[Replay]:
    """``wayback`` on 127.0.0.1 serving, under each name, a collection of the
    WARC files (``.warc.gz``) and WACZ packages (``.wacz``) given; ``root``,
    a new directory, holds the collections, pywb's home and its log."""
    root.mkdir()
    (root / "config.yaml").write_text("framed_replay: false\n")  # see the module's docstring
    env = offline_env(root)
    for coll, archives in collections.items():
        _make_collection(root, env, coll, archives)
    port = free_port()
    log_path = root / "wayback.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [pywb("wayback"), "--bind", "127.0.0.1", "--port", str(port), "--threads", "4"],
            cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            _wait_until_up(proc, port, next(iter(collections)), log_path)
            yield Replay(port)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _make_collection(root: Path, env: dict[str, str], coll: str, archives: Sequence[Path]) -> None:
    warcs = [str(a) for a in archives if a.suffix != ".wacz"]
    packages = [str(a) for a in archives if a.suffix == ".wacz"]
    steps = [["init", coll]]
    if warcs:
        steps.append(["add", coll, *warcs])
    if packages:
        steps.append(["add", "--unpack-wacz", coll, *packages])
    index = root / "collections" / coll / "indexes" / "index.cdxj"
    for argv in steps:
        before = _lines(index)
        done = subprocess.run(
            [pywb("wb-manager"), *argv], cwd=root, env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, f"wb-manager {argv}:\n{done.stdout}{done.stderr}"
        # pywb only warns when it adds nothing
        assert argv[0] != "add" or _lines(index) > before, f"wb-manager {argv}:\n{done.stderr}"


def _lines(index: Path) -> int:
    return len(index.read_bytes().splitlines()) if index.exists() else 0


def _wait_until_up(proc: subprocess.Popen[bytes], port: int, coll: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"wayback exited {proc.returncode}:\n{log.read_text(errors='replace')}")
        try:
            status, _, _ = get(port, f"/{coll}/")
        except OSError:
            time.sleep(0.1)
            continue
        assert status == 200, log.read_text(errors="replace")
        return
    pytest.fail(f"wayback not answering after {STARTUP_S} s:\n{log.read_text(errors='replace')}")


def get(port: int, target: str, accept: str = ACCEPT) -> tuple[int, dict[str, str], bytes]:
    """GET ``target`` from 127.0.0.1:``port`` (redirects not followed):
    status, headers (lower-cased names), body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", target, headers={"Accept-Encoding": accept})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()
