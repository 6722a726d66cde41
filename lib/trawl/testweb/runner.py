"""Blocking entry point: serve the synthetic web until SIGINT or SIGTERM.

``run`` is what ``trawl testweb`` and ``python -m trawl.testweb`` call to
demo the crawler against a web on loopback. It prints where the hosts and
seed files are so they can be handed to a crawl's ``dns.hosts_file`` and seed
list, then sleeps until signalled and shuts the server down cleanly. Its
clock stays where ``at`` puts it (default: the epoch); a process that drives
the crawl's logical time serves ``TestWeb`` itself and calls ``set_time``.
"""

from __future__ import annotations

import signal
import threading
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from trawl.testweb.changes import EPOCH
from trawl.testweb.model import DEFAULT_AGENT, WebModel
from trawl.testweb.server import TestWeb
from trawl.testweb.traps import TRAP_HOSTS


def run(
    seed: int,
    hosts: int,
    port: int,
    out_dir: Path,
    *,
    ips: int = 60,
    n_seeds: int = 3,
    agent: str = DEFAULT_AGENT,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
    at: datetime = EPOCH,
    dup_families: int = 0,
    traps: bool = False,
    requisites: bool = False,
) -> None:
    """Generate the web for ``seed``, serve it on ``port`` (0: any) until signalled.

    ``stop`` lets a caller (or a test) end the run without a signal; signal
    handlers are only installed when called from the main thread. ``at`` is
    the logical time the web answers as of; ``dup_families`` the number of
    near-duplicate families the web publishes (``trawl.testweb.dups``);
    ``traps`` serves the crawler traps of ``trawl.testweb.traps`` as well,
    their entrances last in the seeds file; ``requisites`` gives pages
    stylesheets, images, a script and a font (``trawl.testweb.requisites``).
    """
    model = WebModel.generate(
        seed,
        hosts=hosts,
        ips=min(ips, hosts),
        agent=agent,
        dup_families=dup_families,
        requisites=requisites,
    )
    stop = stop or threading.Event()
    previous = _install_handlers(stop)
    try:
        web = TestWeb(model, Path(out_dir), port=port, n_seeds=n_seeds, traps=traps, at=at)
        with web:
            lines = [
                f"testweb seed={seed}: {len(model.hosts)} hosts, {model.page_count} pages"
                f" on {len(model.ips)} IPs, port {web.port}, as of {web.time.isoformat()}"
                + (f", {dup_families} near-duplicate families" if dup_families else "")
                + (f", {len(TRAP_HOSTS)} crawler traps" if traps else "")
                + (f", page requisites (CDN {model.cdn_host})" if requisites else ""),
                f"hosts file: {web.hosts_file}",
                f"seeds file: {web.seeds_file}",
                f"access log: {web.access_log}",
            ]
            print("\n".join(lines), file=out, flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _install_handlers(stop: threading.Event) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return {signum: signal.signal(signum, _on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
