"""Benchmark: crawl cycles against the test web; pages/s and politeness efficiency.

    .venv/bin/python bench/bench_cycle.py [--hosts 300] [--ips 60] [--cycles 3]
        [--min-delay 0.5] [--time-limit 120]

Per cycle it records, from the segment's fetch table:
- ``pages_per_s``: pages fetched successfully / wall time of the fetch job;
- ``requests_per_s``: every request made (pages and robots.txt) / fetch time;
- ``politeness_efficiency``: requests made / requests the politeness rules
  allowed in the fetch window. Hosts on one IP share one clock, so per IP the
  allowed count is min(demand, window / mean required gap + 1), where demand
  is what the segment wanted from that IP (requests made + URLs not reached)
  and the required gap is the mean of the gaps the scheduler had to keep
  there (max of min delay, Crawl-delay, delay_factor x response time). 1.0
  means the crawler used every slot politeness allowed.

Results are appended as one JSON line per run to bench/results/cycle.jsonl.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trawl.config import load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.store.session import build_spark
from trawl.store.tables import read_segment_table
from trawl.testweb import TestWeb, WebModel, politeness_audit

RESULTS = Path(__file__).resolve().parent / "results" / "cycle.jsonl"


def efficiency(rows: list[dict[str, Any]], window_s: float) -> float:
    """Requests made / requests politeness allowed in the window, over all IPs."""
    by_ip: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["fetched_at"]):
        slot = by_ip.setdefault(row["ip"] or row["host"], {"made": [], "unmet": 0})
        if row["outcome"] == "not_reached":
            slot["unmet"] += 1
        elif row["http_status"] is not None or row["kind"] == "robots":
            slot["made"].append(row["delay_s"] or 0.0)
    made = allowed = 0.0
    for slot in by_ip.values():
        owed = slot["made"][:-1]  # the gap after the last request was never waited
        gap = sum(owed) / len(owed) if owed else 0.0
        demand = len(slot["made"]) + slot["unmet"]
        made += len(slot["made"])
        allowed += min(demand, window_s / gap + 1) if gap > 0 else demand
    return made / allowed if allowed else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--ips", type=int, default=60)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--min-delay", type=float, default=0.5)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--seeds", type=int, default=40)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="trawl-bench-"))
    model = WebModel.generate(1, hosts=args.hosts, ips=args.ips)
    record: dict[str, Any] = {
        "bench": "cycle",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip(),
        "params": vars(args),
        "cycles": [],
    }
    try:
        with TestWeb(model, out / "web", n_seeds=args.seeds) as web:
            cfg = load_config(
                None,
                [
                    f"dns.hosts_file={web.hosts_file}",
                    'fetch.allow_networks=["127.0.0.0/8"]',
                    f"politeness.min_delay_s={args.min_delay}",
                    f"fetch.time_limit_s={args.time_limit}",
                ],
            )
            spark = build_spark(cfg)
            root = str(out / "crawl")
            at = datetime(2026, 11, 30, tzinfo=UTC)
            run_inject(JobContext(spark, cfg, root, "inject", at), [str(web.seeds_file)])
            for i in range(args.cycles):
                ctx = JobContext(
                    spark, cfg, root, segment_id(at + timedelta(hours=i)), at + timedelta(hours=i)
                )
                run_generate(ctx)
                started = time.monotonic()
                got = run_fetch(ctx)
                fetch_s = time.monotonic() - started
                rows = [
                    r.asDict()
                    for r in read_segment_table(spark, root, ctx.segment, "fetch").collect()
                ]
                starts = [
                    r["fetched_at"]
                    for r in rows
                    if r["fetched_at"] and r["outcome"] != "not_reached"
                ]
                window = (max(starts) - min(starts)).total_seconds() if starts else 0.0
                run_updatedb(ctx)
                pages = got.get("fetch/page/success", 0)
                requests = sum(1 for r in rows if r["http_status"] is not None)
                record["cycles"].append(
                    {
                        "segment": ctx.segment,
                        "pages": pages,
                        "requests": requests,
                        "fetch_job_s": round(fetch_s, 1),
                        "fetch_window_s": round(window, 1),
                        "pages_per_s": round(pages / fetch_s, 2),
                        "requests_per_s": round(requests / fetch_s, 2),
                        "politeness_efficiency": round(efficiency(rows, window), 3),
                    }
                )
                print(json.dumps(record["cycles"][-1]), flush=True)
            audit = politeness_audit(web.access_log, args.min_delay)
            record["audit"] = audit.as_dict()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps(record["audit"]))


if __name__ == "__main__":
    main()
