"""How long an analyst waits: ``trawl stats`` and ``trawl sql`` from the shell.

    .venv/bin/python bench/bench_query.py                       # makes a demo crawl first
    .venv/bin/python bench/bench_query.py --crawl demo/crawl    # an existing crawl
    .venv/bin/python bench/bench_query.py --engines duckdb spark --repeat 3

Each command runs as a user runs it: a fresh ``trawl`` process, wall time
from start to exit (interpreter start, imports, reading the Delta logs, the
query, printing). Without ``--crawl`` it first runs ``trawl demo`` into a
temporary folder (the crawl the issue names: "on the demo crawl"). The
target is under 3 s for each command on the default engine (DuckDB over
delta-rs, no JVM); ``--engines spark`` adds the Spark path for comparison.

One JSON line per run is appended to bench/results/query.jsonl (or
``--results``): machine facts, the crawl's size, and per engine and command
every wall time, its median, and whether it met the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_politeness import append_line, commit, machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "query.jsonl"
TRAWL = str(Path(sys.executable).with_name("trawl"))
TARGET_S = 3.0
COMMANDS: dict[str, list[str]] = {
    "stats": ["stats"],
    "sql status": ["sql", "SELECT status, count(*) FROM crawldb GROUP BY 1"],
    "sql fetch by segment": [
        "sql",
        "SELECT segment, outcome, count(*) AS n FROM fetch GROUP BY 1, 2 ORDER BY 1, 2",
    ],
}


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    return wall


def urls_in(crawl: str) -> int:
    out = subprocess.run(
        [TRAWL, "sql", "--crawl", crawl, "--json", "SELECT count(*) AS n FROM crawldb"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return int(json.loads(out.splitlines()[0])["n"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--crawl", help="an existing crawl root (default: make a demo crawl)")
    ap.add_argument("--engines", nargs="+", default=["duckdb"], choices=["duckdb", "spark"])
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-query-") as tmp:
        crawl = args.crawl
        demo_s = None
        if crawl is None:
            started = time.perf_counter()
            subprocess.run([TRAWL, "demo", "--out", tmp], check=True, capture_output=True)
            demo_s = round(time.perf_counter() - started, 1)
            crawl = str(Path(tmp) / "crawl")
        engines: dict[str, Any] = {}
        for engine in args.engines:
            per: dict[str, Any] = {}
            for name, command in COMMANDS.items():
                argv = [TRAWL, command[0], "--crawl", crawl, "--engine", engine, *command[1:]]
                walls = [round(timed(argv), 3) for _ in range(args.repeat)]
                median = statistics.median(walls)
                per[name] = {"wall_s": walls, "median_s": round(median, 3),
                             "within_target": median < TARGET_S}  # fmt: skip
                print(f"{engine:7} {name:22} median {median:6.2f} s  {walls}", flush=True)
            engines[engine] = per
        line = {
            "bench": "query",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": commit(),
            "machine": machine(),
            "params": {
                "engines": args.engines,
                "repeat": args.repeat,
                "crawl": "demo" if args.crawl is None else args.crawl,
            },
            "crawl": {"urls": urls_in(crawl), "demo_s": demo_s},
            "target_s": TARGET_S,
            "engines": engines,
            "checks": {
                "duckdb_within_target": all(
                    c["within_target"] for c in engines.get("duckdb", {}).values()
                )
            },
        }
    append_line(args.results, line)
    return 0 if all(line["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
