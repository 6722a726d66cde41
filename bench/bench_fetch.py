"""Benchmark: trawl's fetch stage and whole crawl beside Scrapy, on one test web.

    .venv/bin/python bench/bench_fetch.py [--hosts 2000] [--pages 3 12]
        [--min-delay 1.0] [--seed 1] [--tasks 2] [--threads 64]
        [--max-cycles 20] [--follow-depth 10] [--crawlers scrapy trawl] [--timeout 3600]
        [--trawl-set SECTION.KEY=VALUE ...] [--results bench/results/fetch.jsonl] [--keep]
    smoke check (60 hosts of 2-6 pages; the line says "smoke": true):
    .venv/bin/python bench/bench_fetch.py --smoke

The smoke run's time is almost all trawl's Spark jobs (inject and five
cycles): minutes on an idle 2-core machine, 25 at a load average of 10.

One run serves one test web (``fetch_testweb.py``: ``WebModel.generate``
less what the crawlers handle differently by design -- one loopback address
per host, no throttling, Crawl-delay, sitemaps or slow hosts; see there) in
a process of its own, with every fetchable host's homepage as a seed, and
crawls it twice from those seeds, each crawler in its own process:

* Scrapy 2.19 (``scrapy_bench_spider.py``, in ``.venv-scrapy``, made here
  if missing): links followed within the web's hosts, robots.txt obeyed,
  ``CONCURRENT_REQUESTS_PER_DOMAIN = 1``, ``DOWNLOAD_DELAY`` = ``--min-delay``
  timed from the end of the previous response, each response archived in
  WARC with warcio;
* trawl (``fetch_trawl.py``): inject, then generate -> fetch -> updatedb
  cycles until nothing is due, ``politeness.min_delay_s`` = ``--min-delay``,
  ``delay_factor`` 0 and no soft-404 probe (Scrapy has neither), and
  ``fetch.follow_depth`` = ``--follow-depth`` (links followed within a
  segment, as Scrapy follows them within its one run, to new hosts too:
  ``fetch.follow_new_hosts``; 0 leaves every link to the next cycle, as
  Nutch does by default).

``--min-delay`` (default 1 s) with ``--hosts`` hosts (default 2,000, about
10,000 pages six links deep) lets the web take up to hosts / min-delay
requests a second; on two cores both crawlers top out far below that, so the
CPU, not politeness, is the limit while most hosts have work (the tail of
each crawl, and of each trawl segment, when few hosts are left, is bound by
politeness: a host's 12 pages take at least 11 gaps).

Numbers per crawler, each over its whole process tree (``proctree``: driver,
JVM and PySpark workers for trawl): pages (HTML answered 200, robots.txt
excluded), wall seconds, pages/s, CPU seconds per 1,000 pages and peak
memory (RSS and PSS summed over the tree). trawl is reported twice: its
fetch stages alone (``run_fetch``: fetch tasks, fetch table, counters, WARC
index; ``fetching_s`` is the part between its first and last request) and
end to end (inject to the last updatedb; the Spark session's start-up apart),
with the CPU its JVM spent compiling (``jit_cpu_s``) and the driver JVM's
options (``spark.driver_jit``).
The test web's own CPU per 1,000 pages (over the crawler's whole run, its
idle polling included) says whether the server was a limit.
Ratios: trawl/Scrapy pages/s of the fetch stage, and wall time end to end.

Checks, from the test web's access log split by User-Agent: both crawlers
fetched the same pages (differences counted by reason: Scrapy reads a 5xx
robots.txt as an empty one and crawls the host, trawl treats it as a
complete disallow, RFC 9309 2.3.1.4), both against the pages a perfect
polite crawler reaches (``WebModel.reachable``), and neither broke
politeness (``politeness_audit``: overlaps, and gaps below ``--min-delay``
per host and per address). One JSON line is appended to
bench/results/fetch.jsonl (or ``--results``); the process exits 1 when a
check fails.

The web stamps a response's end only once its handler thread has the GIL
back, so under load a logged gap can be shorter than the real one. trawl's
short gaps are therefore each checked against trawl's own timing of the two
requests (``fetch_trawl.py`` writes them from the fetch rows), which bounds
the true gap from below: the crawler began sending the next request no
later than the web received it, and finished reading the previous response
no earlier than the web finished sending it (``trawl.testweb.crawlergaps``).
A gap is ``short_gaps_stamp_lag`` when that bound reaches the required gap,
else ``short_gaps_confirmed`` (so is one whose requests are not found in the
timings); ``requests_unmatched`` counts the logged requests the timings
lack. trawl is polite with no host or address overlap and no confirmed
short gap. Its gaps per address are the gaps per host when each address
serves one host, as here (``ip_gaps_are_host_gaps``; the address's
requirement, the minimum, is at most the host's), so they are covered by
that check; were an address shared, its short gaps would count as logged.
Scrapy keeps the plain check: there are no Scrapy-side timings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import proctree
from bench_politeness import append_line, commit, machine
from fetch_testweb import parity_model

from trawl.testweb import WebModel, politeness_audit
from trawl.testweb.audit import read_log, short_gaps
from trawl.testweb.crawlergaps import crawler_gap_check, read_timings, unmatched_requests

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results" / "fetch.jsonl"
SCRAPY_VENV = ROOT / ".venv-scrapy"
SCRAPY_PACKAGES = ("scrapy==2.19.0", "warcio", "psutil")
#: (hosts, pages per host) of the smoke and the full run
SMOKE = (60, (2, 6))
FULL = (2000, (3, 12))
#: Pages on hosts whose robots.txt answers 5xx: Scrapy parses the error page as
#: an empty robots.txt (allow all); trawl, as RFC 9309 2.3.1.4 says, disallows all.
ROBOTS_5XX = "robots_txt_5xx_host"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, help=f"test web hosts ({FULL[0]}; smoke {SMOKE[0]})")
    ap.add_argument("--pages", type=int, nargs=2, metavar=("MIN", "MAX"), help="pages per host")
    ap.add_argument(
        "--min-delay", type=float, default=1.0, help="seconds between requests to a host"
    )
    ap.add_argument("--seed", type=int, default=1, help="test web seed")
    ap.add_argument("--tasks", type=int, default=2, help="trawl fetch.tasks")
    ap.add_argument("--threads", type=int, default=64, help="trawl fetch.threads_per_task")
    ap.add_argument("--max-cycles", type=int, default=20, help="trawl cycles at most")
    ap.add_argument(
        "--follow-depth", type=int, default=10, help="trawl fetch.follow_depth (0: cycles only)"
    )
    ap.add_argument(
        "--crawlers", nargs="+", choices=("scrapy", "trawl"), default=["scrapy", "trawl"]
    )
    ap.add_argument(
        "--trawl-set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a trawl setting for its crawl (recorded), e.g. spark.driver_jit=tiered",
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per crawler at most")
    ap.add_argument("--smoke", action="store_true", help="a tiny run, marked as such")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    args = ap.parse_args()
    hosts, pages = SMOKE if args.smoke else FULL
    args.hosts = args.hosts or hosts
    args.pages = tuple(args.pages or pages)
    return args


def scrapy_python() -> Path:
    """``.venv-scrapy``'s interpreter, making the virtualenv first if it is missing."""
    python = SCRAPY_VENV / "bin" / "python"
    check = [str(python), "-c", "import scrapy, warcio"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"making {SCRAPY_VENV} ({' '.join(SCRAPY_PACKAGES)})", flush=True)
    subprocess.run(["python3", "-m", "venv", str(SCRAPY_VENV)], check=True)
    subprocess.run(
        [str(SCRAPY_VENV / "bin" / "pip"), "install", "-q", *SCRAPY_PACKAGES], check=True
    )
    return python


class Web:
    """The test web in its own process (``fetch_testweb.py``)."""

    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.ready_file = out / "ready.json"
        cmd = [sys.executable, str(BENCH / "fetch_testweb.py"), "--out", str(out)]
        cmd += ["--seed", str(args.seed), "--hosts", str(args.hosts)]
        cmd += ["--pages", *map(str, args.pages)]
        self.proc = subprocess.Popen(cmd)
        deadline = time.monotonic() + 120
        while not self.ready_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the test web did not start")
            time.sleep(0.2)
        self.info: dict[str, Any] = json.loads(self.ready_file.read_text(encoding="utf-8"))

    def cpu_s(self) -> float:
        return proctree.cpu_s(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_crawler(cmd: list[str], log: Path, timeout: float, web: Web) -> dict[str, Any]:
    """Run one crawler's process (its own process group); wall, exit code, web CPU."""
    web_cpu, started = web.cpu_s(), time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout)
        except BaseException:  # the time limit, or this process told to stop
            os.killpg(proc.pid, signal.SIGKILL)  # the group this call started
            proc.wait()
            code = None
            if not isinstance(sys.exc_info()[1], subprocess.TimeoutExpired):
                raise
    return {
        "exit_code": code,
        "process_wall_s": round(time.monotonic() - started, 1),
        "web_cpu_s": round(web.cpu_s() - web_cpu, 2),
    }


def crawl_scrapy(args: argparse.Namespace, web: Web, out: Path) -> dict[str, Any]:
    result = out / "scrapy.json"
    cmd = [str(scrapy_python()), str(BENCH / "scrapy_bench_spider.py")]
    cmd += ["--web", str(web.ready_file), "--warc", str(out / "scrapy.warc.gz")]
    cmd += ["--out", str(result), "--min-delay", str(args.min_delay)]
    ran = run_crawler(cmd, out / "scrapy.log", args.timeout, web)
    if not result.exists():
        raise RuntimeError(f"the Scrapy run failed ({ran}); see {out / 'scrapy.log'}")
    got: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    return got | {"run": ran}


def crawl_trawl(args: argparse.Namespace, web: Web, out: Path) -> dict[str, Any]:
    result = out / "trawl.json"
    cmd = [sys.executable, str(BENCH / "fetch_trawl.py"), "--web", str(web.ready_file)]
    cmd += ["--crawl", str(out / "crawl"), "--out", str(result)]
    cmd += ["--timings", str(out / "trawl-timings.jsonl")]
    cmd += ["--min-delay", str(args.min_delay), "--tasks", str(args.tasks)]
    cmd += ["--threads", str(args.threads), "--max-cycles", str(args.max_cycles)]
    cmd += ["--set", f"fetch.follow_depth={args.follow_depth}"]
    for setting in args.trawl_set:
        cmd += ["--set", setting]
    ran = run_crawler(cmd, out / "trawl.log", args.timeout, web)
    if not result.exists():
        raise RuntimeError(f"the trawl run failed ({ran}); see {out / 'trawl.log'}")
    got: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    return got | {"run": ran}


def numbers(pages: int, wall_s: float, cpu_s: float, memory: dict[str, Any]) -> dict[str, Any]:
    """The per-crawler figures the result line compares."""
    return {
        "pages": pages,
        "wall_s": round(wall_s, 2),
        "pages_per_s": round(pages / wall_s, 2) if wall_s else None,
        "cpu_s": round(cpu_s, 2),
        "cpu_s_per_1000_pages": round(1000 * cpu_s / pages, 2) if pages else None,
        "peak_rss_mb": memory.get("rss_mb"),
        "peak_pss_mb": memory.get("pss_mb"),
    }


def own_log(log: list[dict[str, Any]], agent_prefix: str, out: Path) -> Path:
    """The access-log lines of one crawler (by User-Agent), as a file of their own."""
    path = out / f"access-{agent_prefix.split('/')[0]}.jsonl"
    mine = [r for r in log if str(r.get("user_agent", "")).startswith(agent_prefix)]
    path.write_text("".join(json.dumps(r) + "\n" for r in mine), encoding="utf-8")
    return path


def fetched_pages(path: Path) -> set[tuple[str, str]]:
    """(host, path) answered 200 to a GET, robots.txt left out (every other 200 is HTML)."""
    return {
        (r["host"], r["path"])
        for r in read_log(path)
        if r["status"] == 200 and r["method"] == "GET" and r["path"] != "/robots.txt"
    }


def fetching_s(path: Path, windows: list[list[float]]) -> float:
    """Seconds from the first request's start to the last one's end, per fetch window."""
    log = read_log(path)
    total = 0.0
    for lo, hi in windows:
        inside = [r for r in log if lo <= r["start"] <= hi]
        if inside:
            total += max(r["end"] for r in inside) - min(r["start"] for r in inside)
    return total


AUDIT_KEYS = (
    *("requests", "hosts", "max_in_flight_per_host", "hosts_with_overlap", "ips_with_overlap"),
    *("min_gap_s", "gaps_below_min", "gaps_below_required", "ip_gaps_below_min"),
    *("short_gaps_by_reason", "worst_short_gaps", "efficiency"),
)


def audit(path: Path, args: argparse.Namespace, model: WebModel, windows: Any) -> dict[str, Any]:
    report = politeness_audit(
        path, args.min_delay, model=model, agent=model.agent, windows=windows, mode="both"
    ).as_dict()
    out = {k: report[k] for k in AUDIT_KEYS}
    out["polite"] = not (
        report["hosts_with_overlap"] or report["gaps_below_required"] or report["ip_gaps_below_min"]
    )
    return out


def one_host_per_ip(log: list[dict[str, Any]]) -> bool:
    """Each address in the log served one host: its gaps are that host's."""
    hosts_at: dict[str, set[str]] = {}
    for rec in log:
        hosts_at.setdefault(rec["ip"], set()).add(rec["host"])
    return all(len(hosts) == 1 for hosts in hosts_at.values())


def checked_audit(
    path: Path, args: argparse.Namespace, model: WebModel, windows: Any, timings: Path
) -> dict[str, Any]:
    """``audit``, with each short gap checked against the crawler's own timings
    and ``polite`` judged on what that check confirms (module docstring)."""
    out = audit(path, args, model, windows)
    own, log = read_timings(timings), read_log(path)
    short = short_gaps(path, args.min_delay, model=model, agent=model.agent)
    checks = crawler_gap_check(short, own)
    confirmed = sum(c.confirmed for c in checks)
    out |= {
        "timed_requests": len(own),
        "requests_unmatched": unmatched_requests(log, own),
        "short_gaps_confirmed": confirmed,
        "short_gaps_stamp_lag": len(checks) - confirmed,
        "short_gap_checks": [c.as_dict() for c in checks[:5]],  # the worst by the web's gap
        "ip_gaps_are_host_gaps": one_host_per_ip(log),
    }
    ip_short = 0 if out["ip_gaps_are_host_gaps"] else out["ip_gaps_below_min"]
    out["polite"] = not (
        out["hosts_with_overlap"] or out["ips_with_overlap"] or confirmed or ip_short
    )
    return out


def why_different(key: tuple[str, str], model: WebModel, expected: set[Any]) -> str:
    host = model.host(key[0])
    if host is not None and host.robots_status >= 500:
        return ROBOTS_5XX
    return "reachable_by_model" if key in expected else "not_reachable_by_model"


def compare_pages(
    got: dict[str, set[tuple[str, str]]], model: WebModel, seeds: list[str]
) -> dict[str, Any]:
    """Which pages one crawler fetched and the other did not, by reason."""
    reach = model.reachable(seeds, model.agent)
    expected = {k for k in reach if model.expected_status(*k) == 200}
    out: dict[str, Any] = {"expected_pages": len(expected)}
    for name, pages in got.items():
        out[f"{name}_missed_expected"] = len(expected - pages)
    if len(got) == 2:
        (a, pa), (b, pb) = got.items()
        for name, only in ((a, pa - pb), (b, pb - pa)):
            reasons = Counter(why_different(k, model, expected) for k in only)
            out[f"only_{name}"] = {
                "pages": len(only),
                "by_reason": dict(reasons),
                "examples": [f"{h}{p}" for h, p in sorted(only)[:5]],
            }
        by_design = {k for k in pa ^ pb if why_different(k, model, expected) == ROBOTS_5XX}
        out["same_pages_but_robots_5xx"] = not (pa ^ pb) - by_design
    return out


def main() -> None:
    args = parse_args()
    # SIGTERM unwinds like Ctrl-C, so the crawler and the test web are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    model = parity_model(args.seed, args.hosts, args.pages)
    record: dict[str, Any] = {
        "bench": "fetch",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "smoke": args.smoke,
        "commit": commit(),
        "machine": machine(),
        "params": {k: v for k, v in vars(args).items() if k not in ("keep", "results", "smoke")},
        "web": {
            "hosts": len(model.hosts),
            "pages": model.page_count,
            "robots_status": dict(Counter(str(h.robots_status) for h in model.hosts)),
        },
    }
    out = Path(tempfile.mkdtemp(prefix="trawl-bench-fetch-"))
    web = Web(args, out / "web")
    try:
        runs = {}
        for name in args.crawlers:
            crawl = crawl_scrapy if name == "scrapy" else crawl_trawl
            runs[name] = crawl(args, web, out)
            print(f"{name}: {json.dumps(runs[name]['run'])}", flush=True)
    finally:
        web.stop()
    try:
        record.update(report(args, model, web, runs, out))
    finally:
        if args.keep:
            print(f"kept {out}", flush=True)
        else:
            shutil.rmtree(out, ignore_errors=True)
    record["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    append_line(args.results, record)
    print(json.dumps({k: record[k] for k in ("crawlers", "ratios", "checks")}, indent=1))
    sys.exit(0 if all(record["checks"].values()) else 1)


CYCLE_KEYS = ("segment", "generated", "generate_s", "updatedb_s", "new_urls")


def scrapy_figures(run: dict[str, Any]) -> dict[str, Any]:
    c = run["crawl"]
    return {"scrapy": numbers(c["pages"], c["wall_s"], c["cpu_s"], c) | {"requests": c["requests"]}}


def trawl_figures(run: dict[str, Any], access: Path) -> dict[str, Any]:
    """The fetch stages alone, the crawl end to end, and each cycle."""
    f, e = run["fetch_stage"], run["end_to_end"]
    stage = numbers(f["pages"], f["wall_s"], f["cpu_s"], f) | {"requests": f["requests"]}
    fetching = fetching_s(access, f["windows"])
    stage["fetching_s"] = round(fetching, 2)
    stage["pages_per_fetching_s"] = round(f["pages"] / fetching, 2) if fetching else None
    whole = numbers(e["pages"], e["wall_s"], e["cpu_s"], e)
    whole |= {k: e[k] for k in ("cycles", "deferred_by_budget", "session_start_s")}
    whole["jit_cpu_s"] = e.get("jit_cpu_s")
    whole["driver_java_options"] = run.get("driver_java_options")
    cycles = [
        {k: c.get(k) for k in CYCLE_KEYS}
        | {k: v for k, v in c.get("fetch", {}).items() if k in ("wall_s", "cpu_s", "pages")}
        for c in run["cycles"]
    ]
    return {"trawl_fetch_stage": stage, "trawl_end_to_end": whole, "trawl_cycles": cycles}


def report(
    args: argparse.Namespace, model: WebModel, web: Web, runs: dict[str, Any], out: Path
) -> dict[str, Any]:
    log = read_log(Path(web.info["access_log"]))
    seeds = Path(web.info["seeds_file"]).read_text(encoding="utf-8").split()
    crawlers: dict[str, Any] = {}
    audits: dict[str, Any] = {}
    pages: dict[str, set[tuple[str, str]]] = {}
    result: dict[str, Any] = {"settings": {"min_delay_s": args.min_delay, "seeds": len(seeds)}}
    for name, run in runs.items():
        access = own_log(log, run["user_agent_prefix"], out)
        pages[name] = fetched_pages(access)
        result["settings"][name] = run["settings"]
        if name == "scrapy":
            crawlers |= scrapy_figures(run)
            audits[name] = audit(access, args, model, None)
            n = run["crawl"]["pages"]
        else:
            crawlers |= trawl_figures(run, access)
            windows = [tuple(w) for w in run["fetch_stage"]["windows"]]
            timings = Path(run["timings"])
            audits[name] = checked_audit(access, args, model, windows, timings)
            n = run["end_to_end"]["pages"]
        per_page = round(1000 * run["run"]["web_cpu_s"] / n, 2) if n else None
        crawlers[f"{name}_run"] = run["run"] | {"web_cpu_s_per_1000_pages": per_page}
    result |= {"crawlers": crawlers, "politeness": audits}
    result["page_sets"] = compare_pages(pages, model, seeds)
    result["ratios"] = ratios(crawlers)
    result["checks"] = {f"{name}_polite": a["polite"] for name, a in audits.items()}
    if len(pages) == 2:
        result["checks"]["same_pages"] = result["page_sets"]["same_pages_but_robots_5xx"]
    return result


def ratios(crawlers: dict[str, Any]) -> dict[str, Any]:
    """trawl / Scrapy: fetch-stage pages/s and CPU per page, end-to-end wall."""
    s = crawlers.get("scrapy")
    f, e = crawlers.get("trawl_fetch_stage"), crawlers.get("trawl_end_to_end")
    if not (s and f and e):
        return {}

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    return {
        "fetch_stage_pages_per_s": ratio(f["pages_per_s"], s["pages_per_s"]),
        "fetching_pages_per_s": ratio(f["pages_per_fetching_s"], s["pages_per_s"]),
        "fetch_stage_cpu_per_page": ratio(f["cpu_s_per_1000_pages"], s["cpu_s_per_1000_pages"]),
        "end_to_end_wall": ratio(e["wall_s"], s["wall_s"]),
        "end_to_end_cpu_per_page": ratio(e["cpu_s_per_1000_pages"], s["cpu_s_per_1000_pages"]),
    }


if __name__ == "__main__":
    main()
