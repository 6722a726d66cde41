"""Benchmark: the fixed cost of each Spark stage on a small crawl, job by job.

    .venv/bin/python bench/bench_stages.py [--hosts 60] [--pages 3 12] [--cycles 2]
        [--step-days 7] [--seed 1] [--workdir DIR] [--results bench/results/stages.jsonl]
        [--set KEY=VALUE]

On a crawl this small every stage is mostly fixed cost: Spark jobs, Delta log
reads and commits, the driver's planning between them. That cost is what a
newcomer's first crawl, the test suite and the tail of every cycle pay, so it
is measured on its own here. The test web (``fetch_testweb.py``'s parity web,
``--hosts`` hosts of ``--pages`` pages) runs in its own process; trawl runs
inject, then ``--cycles`` cycles of generate -> fetch -> updatedb -> dedup ->
events (``trawl.runner``) on Spark ``local[2]`` with Spark's event log on,
``--step-days`` logical days apart: cycle 1 crawls the web in a fresh session
(a fresh JVM), cycle 2 revisits it a week later in the same session (every
page due again: conditional GETs, robots.txt fetched again), so the line tells
the first cycle's cost from a later cycle's. Per stage the line records the
wall time, the Spark jobs it ran (those started from the stage's helper
threads included), the seconds inside jobs and outside them (the driver:
planning, Delta log work, Python), the five call sites that ran the most jobs,
the py4j calls and the CPU seconds of the driver's JVM (in local mode also the
executor's) and of the Python driver; per cycle, its wall time, the seconds
spent fetching (the fetch stage's longest job) and the rest, the cycle's fixed
cost (issue 29's target: 12 s), and the CPU seconds of the stages around the
fetch; and the seconds Spark's analyzer and optimizer rules took in the last
cycle, in all and for the costliest rules. CPU seconds drift less than wall
time where the machine's speed varies with its neighbours: compare runs on
both.
One JSON line per run is appended to bench/results/stages.jsonl (or
``--results``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from bench_fetch import Web
from bench_politeness import append_line, commit, machine
from proctree import CLOCK_TICKS, stat_fields

from trawl.config import load_config
from trawl.runner import (
    JobContext,
    run_dedup,
    run_events,
    run_fetch,
    run_generate,
    run_inject,
    run_updatedb,
    segment_id,
)
from trawl.store.session import build_spark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "stages.jsonl"
AT = datetime(2026, 11, 30, tzinfo=UTC)
PHASE = "trawl.bench.stage"  # the Spark local property that names each job's stage


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=60, help="test web hosts")
    ap.add_argument("--pages", type=int, nargs=2, default=(3, 12), metavar=("MIN", "MAX"))
    ap.add_argument("--cycles", type=int, default=2)
    ap.add_argument(
        "--step-days", type=float, default=7.0,
        help="logical days between cycles: after a week every page is due again, so "
        "cycle 2 revisits the web (conditional GETs) in the session cycle 1 warmed",
    )  # fmt: skip
    ap.add_argument("--seed", type=int, default=1, help="test web seed")
    ap.add_argument("--workdir", type=Path, help="kept when given (default: a temp folder)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a config override after the bench's own (repeatable), e.g. "
        "spark.conf.spark.sql.adaptive.enabled=false",
    )  # fmt: skip
    return ap.parse_args()


def event_lines(log_dir: Path) -> list[dict[str, Any]]:
    """Spark's event log, uncompressed (``spark.eventLog.compress`` is off)."""
    lines = []
    for path in sorted(p for p in log_dir.rglob("*") if p.is_file()):
        with path.open(encoding="utf-8") as fh:
            lines += [json.loads(line) for line in fh if line.startswith("{")]
    return lines


def jobs_by_stage(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each job's stage (the local property), call site and start and end (ms)."""
    jobs: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["Event"] == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            jobs[e["Job ID"]] = {
                "stage": props.get(PHASE),
                "site": (props.get("callSite.short") or "").split(" at ")[-1][:80],
                "start": e["Submission Time"],
                "end": e["Submission Time"],
            }
        elif e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in jobs:
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in jobs.values():
        out[str(job["stage"])].append(job)
    return out


def summary(name: str, wall_s: float, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Jobs run, seconds in jobs (their union: AQE runs some at once) and out."""
    spans = sorted((j["start"], j["end"]) for j in jobs)
    busy_ms, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            busy_ms += end - max(start, reach)
            reach = end
    busy = busy_ms / 1000
    sites = Counter(j["site"] or "(Delta/Spark internal)" for j in jobs)
    return {
        "stage": name,
        "wall_s": round(wall_s, 2),
        "jobs": len(jobs),
        "in_jobs_s": round(busy, 2),
        "outside_jobs_s": round(wall_s - busy, 2),
        "top_sites": sites.most_common(5),
    }


def crawl(
    args: argparse.Namespace, web: Web, work: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    log_dir = work / "eventlog"
    log_dir.mkdir(parents=True)
    overrides = [
        f"dns.hosts_file={web.info['hosts_file']}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        "politeness.min_delay_s=0.2",
        "politeness.delay_factor=0.0",
        "traps.soft404_probe=false",
        "fetch.threads_per_task=16",
        "fetch.follow_depth=3",
        "spark.master=local[2]",
        "spark.shuffle_partitions=4",
        "spark.log_level=ERROR",
        "spark.conf.spark.eventLog.enabled=true",
        "spark.conf.spark.eventLog.compress=false",
        f"spark.conf.spark.eventLog.dir=file://{log_dir}",
        *args.set,
    ]
    cfg = load_config(None, overrides, environ={})
    began = time.monotonic()
    spark = build_spark(cfg)
    walls: list[tuple[str, float]] = [("session", time.monotonic() - began)]
    root = str(work / "crawl")
    calls = count_py4j_calls()
    py4j: dict[str, int] = {}
    cpu: dict[str, tuple[float, float]] = {}
    jvm = jvm_pid()

    def stage(name: str, job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        spark.sparkContext.setLocalProperty(PHASE, name)
        calls.clear()
        before = cpu_seconds(jvm)
        began = time.monotonic()
        got = job()
        walls.append((name, time.monotonic() - began))
        after = cpu_seconds(jvm)
        cpu[name] = (after[0] - before[0], after[1] - before[1])
        py4j[name] = calls.total()
        print(f"[stages] {name}: {walls[-1][1]:.1f} s", file=sys.stderr, flush=True)
        return got

    stage("inject", lambda: run_inject(JobContext(spark, cfg, root, "inject", AT),
                                       [web.info["seeds_file"]]))  # fmt: skip
    rules = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor
    for i in range(args.cycles):
        at = AT + timedelta(days=args.step_days * i)
        ctx = JobContext(spark, cfg, root, segment_id(at), at)
        rules.resetMetrics()  # what the last cycle's planning spends, below
        if not stage(f"c{i + 1}.generate", partial(run_generate, ctx))["urls"]:
            break
        for name, run in (("fetch", run_fetch), ("updatedb", run_updatedb),
                          ("dedup", run_dedup), ("events", run_events)):  # fmt: skip
            stage(f"c{i + 1}.{name}", partial(run, ctx))
    rule_times = top_rules(rules.dumpTimeSpent())
    spark.stop()
    jobs = jobs_by_stage(event_lines(log_dir))
    stages = [
        {
            **summary(name, wall, jobs.get(name, [])),
            "py4j_calls": py4j.get(name, 0),
            "jvm_cpu_s": round(cpu.get(name, (0.0, 0.0))[0], 2),
            "py_cpu_s": round(cpu.get(name, (0.0, 0.0))[1], 2),
        }
        for name, wall in walls
    ]
    return stages, cycle_costs(stages, jobs), rule_times


def top_rules(dump: str, top: int = 12) -> dict[str, Any]:
    """Spark's analyzer and optimizer rules that took the driver the most
    time in the last cycle (``RuleExecutor.dumpTimeSpent``): each one's
    seconds and runs, and how many of those changed the plan; with the
    total over every rule. A rule that runs on every DataFrame call and
    rarely changes anything is where the calls' analysis goes."""
    total = re.search(r"Total time: ([0-9.]+) seconds", dump)
    found = []
    for m in re.finditer(r"^(\S+)\s+(\d+) / (\d+)\s+(\d+) / (\d+)\s*$", dump, re.M):
        name, eff_ns, ns, eff_runs, runs = m.groups()
        found.append({"rule": name.rsplit(".", 1)[-1], "s": round(int(ns) / 1e9, 3),
                      "effective_s": round(int(eff_ns) / 1e9, 3), "runs": int(runs),
                      "effective_runs": int(eff_runs)})  # fmt: skip
    found.sort(key=lambda r: -r["s"])
    return {"total_s": float(total.group(1)) if total else None, "top": found[:top]}


def jvm_pid() -> int | None:
    """The driver JVM's process (PySpark's gateway runs spark-submit, which
    becomes the JVM), or None when it cannot be told."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    return proc.pid if proc is not None else None


def cpu_seconds(jvm: int | None) -> tuple[float, float]:
    """CPU seconds used so far by the driver JVM (user and system, every
    thread; 0 when unknown) and by this Python process. On a machine whose
    speed drifts with its neighbours, CPU seconds move less than wall time:
    a comparison of two runs looks at both."""
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    py = used.ru_utime + used.ru_stime
    fields = stat_fields(jvm) if jvm is not None else None
    if fields is None:
        return 0.0, py
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, py  # utime, stime


class Py4jCalls:
    """Round trips from Python to the driver's JVM, from every thread, since
    the last ``clear``: each Column function and DataFrame method is one or
    more, and each costs the driver a little."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self._n += 1

    def clear(self) -> None:
        with self._lock:
            self._n = 0

    def total(self) -> int:
        with self._lock:
            return self._n


def count_py4j_calls() -> Py4jCalls:
    """Count every command PySpark sends the JVM (py4j's client connection)."""
    from py4j.clientserver import ClientServerConnection

    calls = Py4jCalls()
    send = ClientServerConnection.send_command

    def counted(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        calls.add()
        return send(self, command, *args, **kwargs)

    ClientServerConnection.send_command = counted  # type: ignore[method-assign]
    return calls


def cycle_costs(
    stages: list[dict[str, Any]], jobs: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Per cycle that fetched: its wall time, the time spent fetching (the
    fetch stage's longest job, the one whose tasks fetch), and the rest, the
    cycle's fixed cost."""
    out = []
    for cycle in sorted({s["stage"].split(".")[0] for s in stages if "." in s["stage"]}):
        parts = [s for s in stages if s["stage"].startswith(f"{cycle}.")]
        fetch_jobs = jobs.get(f"{cycle}.fetch", [])
        if not fetch_jobs:
            continue
        fetching = max(j["end"] - j["start"] for j in fetch_jobs) / 1000
        wall = sum(s["wall_s"] for s in parts)
        # the driver's CPU seconds in the stages around the fetch
        cpu = sum(s["jvm_cpu_s"] + s["py_cpu_s"] for s in parts if s["stage"] != f"{cycle}.fetch")
        out.append({"cycle": cycle, "wall_s": round(wall, 2), "fetching_s": round(fetching, 2),
                    "fixed_s": round(wall - fetching, 2),
                    "cpu_outside_fetch_s": round(cpu, 2)})  # fmt: skip
    return out


def main() -> None:
    args = parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="trawl-bench-stages-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    began, load = time.monotonic(), machine()
    web = Web(args, work / "web")
    try:
        stages, cycles, rules = crawl(args, web, work)
    finally:
        web.stop()
    line = {
        "bench": "stages",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": load,
        "params": {
            "hosts": args.hosts,
            "pages": list(args.pages),
            "cycles": args.cycles,
            "step_days": args.step_days,
            "set": args.set,
        },
        "stages": stages,
        "cycles": cycles,
        "rules_last_cycle": rules,
        "seconds": round(time.monotonic() - began, 1),
    }
    append_line(args.results, line)
    for s in stages:
        print(f"{s['stage']:>12}: {s['wall_s']:6.1f} s, {s['jobs']:3d} jobs, "
              f"{s['in_jobs_s']:5.1f} s in jobs, {s['outside_jobs_s']:5.1f} s outside, "
              f"{s['py4j_calls']:5d} py4j calls, CPU {s['jvm_cpu_s']:5.1f} s JVM "
              f"{s['py_cpu_s']:4.1f} s Python")  # fmt: skip
    for c in cycles:
        print(f"{c['cycle']:>12}: {c['wall_s']:6.1f} s, of which fetching {c['fetching_s']:.1f} s, "
              f"fixed cost {c['fixed_s']:.1f} s (driver CPU outside the fetch "
              f"{c['cpu_outside_fetch_s']:.1f} s)")  # fmt: skip
    if rules["total_s"] is not None:
        top = ", ".join(f"{r['rule']} {r['s']:.2f} s" for r in rules["top"][:5])
        print(f"{'rules':>12}: {rules['total_s']:.1f} s in the last cycle's analysis and "
              f"optimisation ({top})")  # fmt: skip
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
