"""Benchmark: a 10-cycle crawl of the test web with its crawler traps.

    .venv/bin/python bench/bench_traps.py [--hosts 30] [--ips 6] [--cycles 10]
        [--min-delay 0.05] [--set section.key=value ...] [--keep]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_traps.py --hosts 6 --cycles 2 \
        --results /tmp/traps-smoke.jsonl

The web is ``WebModel.generate`` (no sitemaps) with ``TestWeb(traps=True)``:
a calendar, faceted search, two session-id hosts (one known parameter name,
one only learnable), relative links that echo their path, a link farm of
500 hosts under one registered domain, and a soft-404 host
(``trawl.testweb.traps``). Every model host's home page and every trap
entrance is a seed. The crawl is the normal path (``trawl.runner``: inject,
then generate -> fetch -> updatedb -> dedup per daily cycle on the logical
clock, as ``trawl cycle``) in this process on Spark ``local[2]``, with
trawl's default trap caps and budgets unless ``--set`` says otherwise.

Checked, per cycle, and recorded:

- each trap host's pages fetched stay within ``generate.max_per_host``, and
  its new URLs within ``traps.max_new_per_host`` (per path pattern within
  ``traps.max_new_per_pattern``);
- the link farm's domain fetches at most its budget (nothing outside links
  to it: ``budget.min_pages``), the rest deferred, not dropped; its entrance
  is seeded, so a budget group of its own (``budget.seed_host_pages``) and
  counted apart;
- seeded or not, no trap host costs more than ``TRAP_REQUESTS`` page
  requests over the first ``TRAP_CYCLES`` cycles (pattern reputation and the
  other caps; checked when the run has that many cycles);
- the ordinary hosts are crawled completely (every page a perfect polite
  crawler reaches from the seeds, ``WebModel.reachable``, is fetched);
- every URL kept out has a reason (``rejected``, counted by reason);
- on the two soft-404 hosts (a 200 error page that echoes the path, and a
  302 home for every missing path) each missing path fetched is a soft 404
  and no real page is; the longest counter run per trap host is recorded.

The process exits 1 when a check fails. One JSON line per run is appended
to bench/results/traps.jsonl (or ``--results``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench_politeness import append_line, commit, machine
from pyspark.sql import functions as F

from trawl.config import Config, load_config
from trawl.crawldb.budgets import path_pattern
from trawl.runner import (
    JobContext,
    run_dedup,
    run_fetch,
    run_generate,
    run_inject,
    run_updatedb,
    segment_id,
)
from trawl.store.session import build_spark
from trawl.store.tables import read_segment_table, read_table
from trawl.store.views import register_views
from trawl.testweb import TestWeb, WebModel
from trawl.testweb.traps import (
    FARM_DOMAIN,
    SOFT404_MOVED,
    TRAP_HOSTS,
    is_trap,
    kind_of,
    real_paths,
)

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 12, 1, tzinfo=UTC)


# Issue 27's bar: a trap host, seeded or found by links, costs at most this
# many page requests over the first six cycles at default settings.
TRAP_CYCLES = 6
TRAP_REQUESTS = 60


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--hosts", type=int, default=30)
    p.add_argument("--ips", type=int, default=6)
    p.add_argument("--cycles", type=int, default=10)
    p.add_argument("--min-delay", type=float, default=0.05)
    p.add_argument("--set", action="append", default=[], dest="overrides")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "traps.jsonl")
    p.add_argument("--keep", action="store_true", help="keep the crawl root and say where")
    return p.parse_args()


def config(args: argparse.Namespace, web: TestWeb) -> Config:
    return load_config(
        None,
        [
            "spark.master=local[2]",
            "spark.shuffle_partitions=4",
            f"dns.hosts_file={web.hosts_file}",
            'fetch.allow_networks=["127.0.0.0/8"]',
            f"politeness.min_delay_s={args.min_delay}",
            "fetch.time_limit_s=300",
            *args.overrides,
        ],
        environ={},
    )


def site(host: str) -> str:
    """The trap a host belongs to (the farm's 500 hosts are one), or "ordinary"."""
    return kind_of(host) if is_trap(host) else "ordinary"


def cycle_facts(spark: Any, root: str, segment: str) -> dict[str, Any]:
    """Pages fetched and new URLs added in ``segment``, per trap."""
    fetch = read_segment_table(spark, root, segment, "fetch").filter("kind = 'page'")
    fetched = fetch.filter("outcome <> 'not_reached'").groupBy("host").count().collect()
    crawldb = read_table(spark, root, "crawldb").filter(F.col("discovered_segment") == segment)
    new = crawldb.select("host", "url").collect()
    per_host: dict[str, dict[str, int]] = defaultdict(lambda: {"fetched": 0, "new": 0})
    for r in fetched:
        per_host[r["host"]]["fetched"] = r["count"]
    for r in new:
        per_host[r["host"]]["new"] += 1
    by_site: dict[str, dict[str, int]] = defaultdict(Counter)  # type: ignore[arg-type]
    for host, counts in per_host.items():
        by_site[site(host)].update(counts)
    return {
        "per_host": dict(per_host),
        "by_site": {k: dict(v) for k, v in by_site.items()},
        "max_new_per_pattern": max(
            Counter(path_pattern(r["url"]) for r in new).values(), default=0
        ),
    }


def trap_requests(cycles: list[dict[str, Any]]) -> dict[str, int]:
    """Page requests per trap host over the first ``TRAP_CYCLES`` cycles."""
    total: Counter[str] = Counter()
    for cyc in cycles[:TRAP_CYCLES]:
        for host, c in cyc["per_host"].items():
            if is_trap(host):
                total[host] += c["fetched"]
    return dict(total.most_common())


def verdicts(cfg: Config, cycles: list[dict[str, Any]]) -> dict[str, bool]:
    g, t, b = cfg.generate, cfg.traps, cfg.budget
    trap_hosts = [(h, c) for cyc in cycles for h, c in cyc["per_host"].items() if is_trap(h)]
    entrance = TRAP_HOSTS["linkfarm"]  # seeded: its own budget group
    farm = [
        sum(c["fetched"] for h, c in cyc["per_host"].items()
            if site(h) == "linkfarm" and h != entrance)
        for cyc in cycles
    ]  # fmt: skip
    checks = {
        "trap_hosts_within_fetch_cap": all(c["fetched"] <= g.max_per_host for _, c in trap_hosts),
        "trap_hosts_within_new_cap": all(c["new"] <= t.max_new_per_host for _, c in trap_hosts),
        "patterns_within_new_cap": all(
            c["max_new_per_pattern"] <= t.max_new_per_pattern for c in cycles
        ),
        "farm_within_budget": max(farm, default=0) <= b.min_pages,
    }
    if len(cycles) >= TRAP_CYCLES:
        checks["trap_hosts_within_requests"] = (
            max(trap_requests(cycles).values(), default=0) <= TRAP_REQUESTS
        )
    return checks


def completeness(spark: Any, root: str, model: WebModel, seeds: list[str]) -> dict[str, Any]:
    ordinary = [u for u in seeds if not is_trap(urlsplit(u).hostname or "")]
    want = {(h, p) for h, p in model.reachable(ordinary) if not is_trap(h)}
    got = set()
    counters = read_table(spark, root, "counters").select("segment").distinct().collect()
    for seg in sorted(r[0] for r in counters):
        try:
            fetch = read_segment_table(spark, root, seg, "fetch")
        except Exception:  # inject's segment has no fetch table
            continue
        for r in fetch.filter("kind = 'page' AND outcome <> 'not_reached'").collect():
            if not is_trap(r["host"]):
                got.add((r["host"], urlsplit(r["url"]).path))
    missing = sorted(want - got)
    return {"reachable": len(want), "fetched": len(want & got), "missing": missing[:20]}


def soft404_facts(spark: Any, root: str) -> dict[str, dict[str, int]]:
    """Per soft-404 trap host: the pages it has (``real_paths``, and on the
    redirecting host its one real redirect, ``SOFT404_MOVED``) fetched as
    pages, and the paths it does not have fetched as soft 404s or as
    something else (a miss)."""
    register_views(spark, root)
    pages = spark.table("fetch")
    out = {}
    for kind in ("soft404", "soft404_redirect"):
        host, real = TRAP_HOSTS[kind], real_paths(kind)
        if kind == "soft404_redirect":
            real = real | frozenset(SOFT404_MOVED)
        facts: Counter[str] = Counter()
        for r in pages.filter((F.col("host") == host) & (F.col("kind") == "page")).collect():
            if r["outcome"] == "not_reached":
                continue
            exists = urlsplit(r["url"]).path in real
            facts["real_ok" if exists and r["outcome"] != "soft404" else
                  "real_soft404" if exists else
                  "missing_soft404" if r["outcome"] == "soft404" else
                  "missing_other"] += 1  # fmt: skip
        out[host] = dict(facts)
    return out


def main() -> int:
    args = parse_args()
    out = Path(tempfile.mkdtemp(prefix="trawl-traps-"))
    started = time.time()
    model = WebModel.generate(args.seed, hosts=args.hosts, ips=args.ips, sitemaps=0.0)
    try:
        with TestWeb(model, out / "web", n_seeds=args.hosts, traps=True) as web:
            cfg = config(args, web)
            spark = build_spark(cfg)
            root = str(out / "crawl")
            seeds = web.seeds_file.read_text().split()
            run_inject(JobContext(spark, cfg, root, segment_id(T0), T0), [str(web.seeds_file)])
            cycles = []
            for day in range(args.cycles):
                at = T0 + timedelta(days=day)
                ctx = JobContext(spark, cfg, root, segment_id(at), at)
                t = time.time()
                run_generate(ctx)
                run_fetch(ctx)
                run_updatedb(ctx)
                run_dedup(ctx)
                facts = cycle_facts(spark, root, ctx.segment)
                facts.update(cycle=day, seconds=round(time.time() - t, 1))
                cycles.append(facts)
                print(json.dumps({k: v for k, v in facts.items() if k != "per_host"}), flush=True)
            complete = completeness(spark, root, model, seeds)
            rejected = {
                r["reason"]: r["count"]
                for r in read_table(spark, root, "rejected").groupBy("reason").count().collect()
            }
            crawldb = read_table(spark, root, "crawldb")
            deferred = crawldb.filter("deferred_reason IS NOT NULL").count()
            farm_urls = crawldb.filter(F.col("domain") == FARM_DOMAIN).count()
            runs = crawldb.groupBy("host").agg(F.max("counter_run").alias("run")).collect()
            counter_runs = {r["host"]: r["run"] for r in runs if is_trap(r["host"]) and r["run"]}
            soft404 = soft404_facts(spark, root)
    finally:
        if args.keep:
            print(f"kept the crawl in {out}", file=sys.stderr)
        else:
            shutil.rmtree(out, ignore_errors=True)
    checks = verdicts(cfg, cycles)
    checks["ordinary_hosts_complete"] = complete["fetched"] == complete["reachable"] > 0
    checks["soft404s_found"] = all(
        f.get("missing_soft404", 0) > 0 and not f.get("missing_other") and not f.get("real_soft404")
        for f in soft404.values()
    )
    line = {
        "bench": "traps",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "caps": {
            "generate.max_per_host": cfg.generate.max_per_host,
            "traps.max_new_per_host": cfg.traps.max_new_per_host,
            "traps.max_new_per_pattern": cfg.traps.max_new_per_pattern,
            "budget.min_pages": cfg.budget.min_pages,
        },
        "trap_hosts": TRAP_HOSTS,
        "cycles": [{k: v for k, v in c.items() if k != "per_host"} for c in cycles],
        "trap_requests": trap_requests(cycles),
        "ordinary": complete,
        "rejected_by_reason": rejected,
        "deferred_urls": deferred,
        "farm_urls_known": farm_urls,
        "max_counter_run": counter_runs,
        "soft404": soft404,
        "checks": checks,
        "wall_s": round(time.time() - started, 1),
    }
    append_line(args.results, line)
    print(json.dumps({"checks": checks, "ordinary": complete, "rejected": rejected,
                      "trap_requests": trap_requests(cycles)}))  # fmt: skip
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
