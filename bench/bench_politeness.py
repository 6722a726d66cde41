"""Benchmark: a real crawl of a hostile test web, audited for politeness.

    .venv/bin/python bench/bench_politeness.py [--hosts 600] [--ips 100]
        [--cycles 2] [--time-limit 120] [--min-delay 0.5] [--max-crawl-delay 8]
        [--threads 64] [--throttled 0.06] [--crawl-delays 0.06] [--seeds all]
    smoke check (a minute or two; results kept out of the recorded ones):
    .venv/bin/python bench/bench_politeness.py --hosts 120 --ips 20 --time-limit 30 \
        --cycles 1 --results /tmp/politeness-smoke.jsonl

The web has hosts sharing loopback addresses (Zipf: a few addresses carry
dozens of hosts), and -- at raised shares -- rate-limited hosts answering
429 or 503 with Retry-After in seconds or as an HTTP-date, hosts failing
every 4th-6th request with 503 + Retry-After, and Crawl-delays of 1-5 s plus
a few (10-45 s) above ``robots.max_crawl_delay_s``. With ``--seeds all``
every page of the model is injected, so each address has work from the first
cycle and the crawl is bound by politeness, not by link discovery.

The crawl is the normal path (``trawl.runner``: inject, then generate ->
fetch -> updatedb per cycle) in this process on Spark ``local[2]``. The test
web's access log is then audited (``trawl.testweb.audit``, whose docstring
defines the required gap and the efficiency) with each fetch job's
wall-clock span as a window: violations are counted against what each host
asked for; efficiency is reported against the required gaps alone
(``efficiency``) and with the crawler's Mercator rest after slow responses
allowed for (``efficiency_rules``: ``delay_factor`` x response time, at
most ``max_delay_s``). ``address_idle_s`` says where an address's time went
beyond the minimum gap, by what the response before the wait was: a failure
(429, 5xx, with or without Retry-After), a host with a Crawl-delay, a slow
response, or none of these (the crawler had nothing ready: task start-up,
generate's per-address budget, thread hand-over).

One JSON line per run is appended to bench/results/politeness.jsonl (or
``--results``): machine facts, settings, the web's make-up, per-cycle
counters, the audit and both efficiencies.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from trawl.config import Config, load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.store.session import build_spark
from trawl.testweb import TestWeb, WebModel, politeness_audit
from trawl.testweb.audit import read_log
from trawl.testweb.model import make_url

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "politeness.jsonl"
AT = datetime(2026, 11, 30, tzinfo=UTC)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=600)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1, help="test web seed")
    ap.add_argument("--cycles", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=120.0, help="fetch.time_limit_s")
    ap.add_argument("--min-delay", type=float, default=0.5, help="politeness.min_delay_s")
    ap.add_argument("--max-crawl-delay", type=float, default=8.0, help="robots.max_crawl_delay_s")
    ap.add_argument("--threads", type=int, default=64, help="fetch.threads_per_task")
    ap.add_argument("--tasks", type=int, default=2, help="fetch.tasks")
    ap.add_argument("--throttled", type=float, default=0.06, help="share of throttled hosts")
    ap.add_argument("--crawl-delays", type=float, default=0.06, help="share with Crawl-delay")
    ap.add_argument("--seeds", choices=("all", "home"), default="all", help="inject every page")
    ap.add_argument("--keep", action="store_true", help="keep the crawl and web folders")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    return ap.parse_args()


def settings(args: argparse.Namespace, web: TestWeb) -> list[str]:
    """The ``--set`` overrides of the crawl, as recorded with the result."""
    return [
        f"dns.hosts_file={web.hosts_file}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        f"politeness.min_delay_s={args.min_delay}",
        f"robots.max_crawl_delay_s={args.max_crawl_delay}",
        f"fetch.time_limit_s={args.time_limit}",
        f"fetch.tasks={args.tasks}",
        f"fetch.threads_per_task={args.threads}",
        # generate hands out no more per address than fits in the fetch window
        f"generate.fetch_window_s={args.time_limit}",
        "spark.master=local[2]",
        "spark.shuffle_partitions=4",
        "spark.log_level=ERROR",
    ]


def write_seeds(model: WebModel, web: TestWeb, which: str, path: Path) -> int:
    """Every page of the model (``all``) or every homepage (``home``)."""
    urls = [
        make_url(h.name, p.path, web.port)
        for h in model.hosts
        for p in (h.pages if which == "all" else h.pages[:1])
    ]
    path.write_text("".join(f"{u}\n" for u in urls), encoding="utf-8")
    return len(urls)


def machine() -> dict[str, Any]:
    def pkg(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "load_avg_1m": round(os.getloadavg()[0], 2),  # other work on the machine
        "cores": os.cpu_count(),
        "memory_gb": round(memory / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pkg("pyspark"),
        "delta_spark": pkg("delta-spark"),
    }


def append_line(path: Path, line: dict[str, Any]) -> None:
    """Append one JSON line to a results file (made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def line_head(bench: str, sha: str | None, before: dict[str, Any], args: Any) -> dict[str, Any]:
    """The fields every results line starts with: what ran, when, on which
    commit and machine (its load at the start and now), with which
    arguments."""
    return {
        "bench": bench,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": sha,
        "machine": before | {"load_avg_1m_end": round(os.getloadavg()[0], 2)},
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }


def commit() -> str | None:
    """The checked-out commit, read from .git without running git (a linked
    worktree's .git is a file naming its own git folder)."""
    git = ROOT / ".git"
    try:
        if git.is_file():
            git = Path(git.read_text().strip().removeprefix("gitdir: "))
        ref = (git / "HEAD").read_text().strip()
        if not ref.startswith("ref: "):
            return ref[:12]
        name = ref[5:]
        common = git / "commondir"
        if common.exists():
            git = (git / common.read_text().strip()).resolve()
        loose = git / name
        if loose.exists():
            return loose.read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + name):
                return line.split()[0][:12]
    except OSError:
        return None
    return None


def web_facts(model: WebModel, cap_s: float) -> dict[str, Any]:
    throttles = Counter(
        f"{h.throttle.kind}-{h.throttle.status}-{'date' if h.throttle.http_date else 'seconds'}"
        for h in model.hosts
        if h.throttle is not None
    )
    delays = [h.crawl_delay for h in model.hosts if h.robots_status == 200 and h.crawl_delay]
    per_ip = Counter(h.ip for h in model.hosts)
    return {
        "hosts": len(model.hosts),
        "ips": len(model.ips),
        "max_hosts_per_ip": max(per_ip.values()),
        "shared_ips": sum(n > 1 for n in per_ip.values()),
        "pages": model.page_count,
        "throttled_hosts": dict(sorted(throttles.items())),
        "crawl_delay_hosts": len(delays),
        "crawl_delay_above_cap_hosts": sum(d > cap_s for d in delays),
        "slow_hosts": sum(h.slow > 0 for h in model.hosts),
    }


def address_idle(
    log: list[dict[str, Any]],
    model: WebModel,
    windows: list[tuple[float, float]],
    min_delay_s: float,
) -> dict[str, float]:
    """Seconds addresses waited beyond ``min_delay_s``, by the response before the wait."""
    idle: Counter[str] = Counter()
    for lo, hi in windows:
        by_ip: dict[str, list[dict[str, Any]]] = {}
        for rec in log:
            if lo <= rec["start"] <= hi:
                by_ip.setdefault(rec["ip"], []).append(rec)
        for recs in by_ip.values():
            recs.sort(key=lambda r: r["start"])
            for before, after in itertools.pairwise(recs):
                idle[_wait_cause(before, model)] += max(
                    0.0, after["start"] - before["end"] - min_delay_s
                )
    return {cause: round(seconds, 1) for cause, seconds in idle.most_common()}


def _wait_cause(rec: dict[str, Any], model: WebModel) -> str:
    host = model.host(rec["host"])
    if rec["status"] == 429 or rec["status"] >= 500:
        kind = "robots" if rec["path"] == "/robots.txt" else "page"
        return f"after_{kind}_{rec['status']}" + ("_retry_after" if rec.get("retry_after") else "")
    if host is not None and host.crawl_delay_for(model.agent):
        return "after_crawl_delay_host"
    if rec["end"] - rec["start"] > 0.05:
        return "after_slow_response"
    return "other"


def run_cycle(ctx: JobContext) -> tuple[dict[str, Any], tuple[float, float]]:
    """generate -> fetch -> updatedb; the cycle's numbers and its fetch window."""
    began = time.time()
    gen = run_generate(ctx)
    started = time.time()
    got = run_fetch(ctx)
    window = (started, time.time())
    upd = run_updatedb(ctx)
    row = {
        "segment": ctx.segment,
        "generated": gen["urls"],
        "generate_s": round(started - began, 1),
        "fetch_job_s": round(window[1] - window[0], 1),
        "updatedb_s": round(time.time() - window[1], 1),
        "pages_ok": got.get("fetch/page/success", 0),
        "not_reached": got.get("fetch/page/not_reached", 0),
        "deferred": got.get("fetch/page/deferred", 0),
        "retry": got.get("fetch/page/retry", 0),
        "status_429": got.get("fetch/status/429", 0),
        "status_503": got.get("fetch/status/503", 0),
        "new_urls": upd["new_urls"],
    }
    return row, window


def crawl(args: argparse.Namespace, model: WebModel, web: TestWeb, out: Path) -> dict[str, Any]:
    cfg: Config = load_config(None, settings(args, web), environ={})
    spark = build_spark(cfg)
    root = str(out / "crawl")
    seeds = out / "seeds.txt"
    injected = write_seeds(model, web, args.seeds, seeds)
    run_inject(JobContext(spark, cfg, root, "inject", AT), [str(seeds)])
    cycles, windows = [], []
    for i in range(args.cycles):
        at = AT + timedelta(hours=i)
        row, window = run_cycle(JobContext(spark, cfg, root, segment_id(at), at))
        cycles.append(row)
        windows.append(window)
        print(json.dumps(row), flush=True)
    p = cfg.politeness
    kwargs: dict[str, Any] = {"model": model, "windows": windows, "mode": p.mode}
    audit = politeness_audit(web.access_log, p.min_delay_s, agent=cfg.http.agent_name, **kwargs)
    rules = politeness_audit(
        web.access_log,
        p.min_delay_s,
        agent=cfg.http.agent_name,
        delay_factor=p.delay_factor,
        max_delay_s=p.max_delay_s,
        **kwargs,
    )
    log = read_log(web.access_log)
    spark.stop()
    return {
        "settings": settings(args, web)[1:],  # the hosts file path is a temp dir
        "seeds_injected": injected,
        "cycles": cycles,
        "pages_fetched": sum(c["pages_ok"] for c in cycles),
        "log_statuses": dict(sorted(Counter(str(r["status"]) for r in log).items())),
        "retry_after_sent": sum(r.get("retry_after") is not None for r in log),
        "address_idle_s": address_idle(log, model, windows, p.min_delay_s),
        "audit": audit.as_dict(),
        "efficiency": audit.efficiency,
        "efficiency_rules": rules.efficiency,
        "least_efficient_rules": rules.as_dict()["least_efficient"],
    }


def main() -> None:
    args = parse_args()
    model = WebModel.generate(
        args.seed,
        hosts=args.hosts,
        ips=args.ips,
        throttled=args.throttled,
        crawl_delays=args.crawl_delays,
    )
    record: dict[str, Any] = {
        "bench": "politeness",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "params": {k: v for k, v in vars(args).items() if k not in ("keep", "results")},
        "web": web_facts(model, args.max_crawl_delay),
    }
    out = Path(tempfile.mkdtemp(prefix="trawl-bench-politeness-"))
    started = time.monotonic()
    try:
        with TestWeb(model, out / "web") as web:
            record.update(crawl(args, model, web, out))
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
        else:
            print(f"kept {out}", flush=True)
    record["wall_s"] = round(time.monotonic() - started, 1)
    record["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    with args.results.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps(summary(record), indent=1))


def summary(record: dict[str, Any]) -> dict[str, Any]:
    audit = record["audit"]
    keys = ["requests", "hosts", "ips", "hosts_with_overlap", "ips_with_overlap"]
    keys += ["gaps_below_required", "short_gaps_by_reason", "worst_short_gaps"]
    out = {k: audit[k] for k in keys}
    return out | {k: record[k] for k in ("pages_fetched", "efficiency", "efficiency_rules")}


if __name__ == "__main__":
    main()
