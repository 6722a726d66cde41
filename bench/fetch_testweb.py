"""The fetch benchmark's test web: a parity web, served from its own process.

    .venv/bin/python bench/fetch_testweb.py --out DIR [--seed 1] [--hosts 1000]
        [--pages 3 12]

``parity_model`` is ``WebModel.generate`` with what the two crawlers of
``bench_fetch.py`` handle differently *by design* taken out, so both are
asked for the same work and the same politeness:

* one loopback address per host (``loopback_ip(i)`` for host i): trawl keeps
  a politeness clock per host *and* per address, Scrapy only per host
  (``CONCURRENT_REQUESTS_PER_DOMAIN``); with no shared addresses the two
  rules coincide;
* no throttled hosts (429/503 + Retry-After: Scrapy retries them at once,
  trawl backs off), no Crawl-delay (Scrapy does not read it), no sitemaps
  (Scrapy's ``Spider`` does not read robots.txt ``Sitemap:`` lines), no slow
  hosts (``slow``: a fixed sleep before every response, which only measures
  the server), no near-duplicate families.

Left as generated: robots.txt variants (404, 5xx, open, ``*`` rules, rules
for the ``trawl`` agent, which both crawlers obey as ``trawl``), page
statuses (404/410/500/301) and ``rel=nofollow`` links.

Run as a script it serves the model (``TestWeb``, with every fetchable
host's homepage in ``seeds.txt``) until SIGTERM/SIGINT, after writing
``DIR/ready.json`` (port, pid, hosts file, seeds file, access log). It runs
in its own process so that the server's CPU is not counted as a crawler's.

The access log is the politeness audit's clock, so its stamps must be taken
when things happen: a handler thread that has written a response waits for
the GIL before it stamps the end, and under a crawler that keeps both cores
busy that wait reached 48 ms with Python's default 5 ms switch interval
(three gaps of 0.95-0.99 s logged against 1.003 s timed by trawl's fetch
rows). The interval is set to 0.5 ms here.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

from trawl.testweb import TestWeb, WebModel
from trawl.testweb.generate import loopback_ip


def parity_model(seed: int, hosts: int, pages: tuple[int, int]) -> WebModel:
    """The generated web with the by-design differences removed (module docstring)."""
    model = WebModel.generate(
        seed,
        hosts=hosts,
        ips=hosts,
        pages_per_host=pages,
        throttled=0.0,
        crawl_delays=0.0,
        sitemaps=0.0,
        change_rates=None,
        dup_families=0,
    )
    plain = tuple(
        replace(h, ip=loopback_ip(i), slow=0.0, crawl_delay=None, throttle=None, sitemaps=None)
        for i, h in enumerate(model.hosts)
    )
    return WebModel(model.seed, model.agent, plain)


def serve(model: WebModel, out: Path) -> None:
    """Serve until SIGTERM or SIGINT; ``out/ready.json`` says where."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with TestWeb(model, out, n_seeds=len(model.hosts)) as web:
        ready = {
            "pid": os.getpid(),
            "port": web.port,
            "hosts_file": str(web.hosts_file),
            "seeds_file": str(web.seeds_file),
            "access_log": str(web.access_log),
        }
        tmp = out / "ready.json.tmp"
        tmp.write_text(json.dumps(ready), encoding="utf-8")
        tmp.rename(out / "ready.json")
        while not stop.wait(0.5):
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--pages", type=int, nargs=2, default=(3, 12), metavar=("MIN", "MAX"))
    args = ap.parse_args()
    sys.setswitchinterval(0.0005)  # the log's stamps, see the module docstring
    serve(parity_model(args.seed, args.hosts, tuple(args.pages)), args.out)


if __name__ == "__main__":
    main()
