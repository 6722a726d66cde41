"""Benchmark: the kill campaign -- crawls killed at random, each checked
against an uninterrupted crawl of the same web.

    .venv/bin/python bench/bench_kills.py [--seeds 6] [--kills 4] [--first-seed 0]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_kills.py --seeds 1 --kills 1 --results /tmp/kills-smoke.jsonl

For each seed (the test web's generator seed and the kill plan's), on a web
of five hosts (``trawl.devtools.kills.small_web``):

1. an uninterrupted ``trawl cycle`` (two cycles, fixed logical times) makes
   the reference crawl;
2. a chain of ``--kills`` runs of the same command on a second root, each
   killed with SIGKILL to its whole process tree (driver, JVM, Python
   workers). A kill lands either at a random moment of the run (uniform
   between 2 s and 0.8 x the reference run's wall time) or, one time in
   three, at a random fault point of ``trawl.faults`` reached a random number of
   times (a MERGE about to commit or just committed, a WARC file half
   written, a table written and not yet marked, a stage's start);
   after half the kills (``--stage-reruns``) the interrupted stage runs
   alone first (``trawl updatedb --segment ...``), as an operator would,
   and must end with exit 0;
3. a last run of the same command, not killed;
4. ``check_crawl``: every table and every WARC file against the reference
   (URLs lost, rows/events/records doubled, half-merged segments,
   unreadable WARC files, references that miss their record, leases left).

A planned kill that finds the run already ended (the run finished before
the moment or never reached the point) is no kill: the figures count the
kills made. A chain survives when its last run exits 0 and every check
holds; a chain that does not is recorded with its plan, so it can be
replayed. One JSON line per campaign goes to bench/results/kills.jsonl (or
``--results``) with the commit and the machine (load included). The process
exits 1 if any chain failed.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_politeness import append_line, commit, line_head, machine

from trawl.devtools.kills import JOBS, Aim, Run, check_crawl, command, run_once, small_web
from trawl.store.files import CrawlRoot
from trawl.testweb import TestWeb

ROOT = Path(__file__).resolve().parents[1]

# fault points and how many times a two-cycle crawl of the small web reaches
# each at least (a name@N beyond that is simply not reached: no kill)
FAULTS = {
    "stage:generate": 2,
    "stage:fetch": 2,
    "stage:updatedb": 2,
    "stage:dedup": 2,
    "stage:events": 2,
    "merge:crawldb": 5,
    "merged:crawldb": 5,
    "merged:content": 2,
    "merge:events": 2,
    "merged:events": 2,
    "merge:hostdb": 2,
    "fetch:before-write": 2,
    "unmarked:fetch": 2,
    "warc:mid-file": 12,
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=6, help="chains, one per seed")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--kills", type=int, default=4, help="planned kills per chain")
    p.add_argument("--fault-share", type=float, default=1 / 3, help="kills at fault points")
    p.add_argument(
        "--stage-reruns", type=float, default=0.5,
        help="share of kills after which the interrupted stage runs alone first",
    )  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the crawls (printed)")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "kills.jsonl")
    return p.parse_args()


def plan(rng: random.Random, kills: int, share: float, run_s: float) -> list[Aim]:
    aims = []
    for _ in range(kills):
        if rng.random() < share:
            name = rng.choice(sorted(FAULTS))
            aims.append(Aim(fault=f"{name}@{rng.randint(1, FAULTS[name])}"))
        else:
            # the reference's wall time includes a cold start: a run ends sooner
            aims.append(Aim(after_s=round(rng.uniform(2.0, 0.8 * run_s), 1)))
    return aims


def describe(aim: Aim) -> str:
    return aim.fault if aim.fault else f"{aim.after_s}s"


def entry(aim: str, run: Run, killed: bool, stage: str) -> dict[str, Any]:
    out = {"aim": aim, "exit": run.returncode, "s": run.seconds, "killed": killed,
           "stage": stage, "stray": run.stray}  # fmt: skip
    if run.returncode not in (0, -9):
        out["tail"] = run.tail[-8:]
    return out


def chain(seed: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    started = time.time()
    with TestWeb(small_web(seed), folder / "web", n_seeds=5) as web:
        ref_root, root = str(folder / "reference"), str(folder / "killed")
        reference = run_once(command("cycle", ref_root, web), None, ref_root)
        if reference.returncode != 0:
            raise SystemExit(f"seed {seed}: the reference crawl failed: {reference.tail[-10:]}")
        runs: list[dict[str, Any]] = []
        for aim in plan(rng, args.kills, args.fault_share, reference.seconds):
            run = run_once(command("cycle", root, web), aim, root)
            killed = run.killed or (aim.fault is not None and run.returncode == 1)
            runs.append(entry(describe(aim), run, killed, run.stage))
            stage = re.fullmatch(r"(\d+)/(\w+)", run.stage)
            if killed and stage and stage[2] in JOBS and rng.random() < args.stage_reruns:
                # the operator's way: the interrupted stage alone, to its end
                job, cycle = stage[2], int(stage[1])
                alone = run_once(command(job, root, web, cycle), None, root)
                runs.append(entry(f"{job} alone", alone, False, f"{cycle}/{job}"))
        last = run_once(command("cycle", root, web), None, root)
    verdict = check_crawl(CrawlRoot.of(root), CrawlRoot.of(ref_root))
    # a fault point in a Python worker kills the worker, not the driver: the
    # run fails with exit 1 (local mode does not retry a task); count it
    made = sum(1 for r in runs if r["killed"])
    return {
        "seed": seed,
        "reference_s": reference.seconds,
        "runs": runs,
        "kills_made": made,
        "last_exit": last.returncode,
        "failed_checks": {k: verdict.problems[k] for k in verdict.failed},
        "counter_values_differ": len(verdict.notes["counter_values_differ"]),
        "stage_reruns": sum(1 for r in runs if r["aim"].endswith(" alone")),
        "survived": last.returncode == 0
        and not verdict.failed
        and all(r["exit"] == 0 for r in runs if r["aim"].endswith(" alone")),
        "wall_s": round(time.time() - started, 1),
    }


def main() -> int:
    args = parse_args()
    started = time.time()
    sha, before = commit(), machine()
    chains = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        folder = Path(tempfile.mkdtemp(prefix=f"trawl-kills-{seed}-"))
        try:
            result = chain(seed, args, folder)
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        if args.keep:
            result["folder"] = str(folder)
        chains.append(result)
        print(json.dumps(result), flush=True)
    line = {
        **line_head("kills", sha, before, args),
        "chains": chains,
        "kills_made": sum(c["kills_made"] for c in chains),
        "kills_in_surviving_chains": sum(c["kills_made"] for c in chains if c["survived"]),
        "chains_survived": sum(c["survived"] for c in chains),
        "wall_s": round(time.time() - started, 1),
    }
    append_line(args.results, line)
    summary = ("commit", "kills_made", "kills_in_surviving_chains", "chains_survived", "wall_s")
    print(json.dumps({k: line[k] for k in summary}))
    return 0 if line["chains_survived"] == len(chains) else 1


if __name__ == "__main__":
    sys.exit(main())
