"""Run the benchmarks, then write their summary table into docs/benchmarks.md.

    .venv/bin/python bench/run.py                  # every benchmark, one after another
    .venv/bin/python bench/run.py --only scale fetch
    .venv/bin/python bench/run.py --table-only     # rewrite the table from bench/results/

Each benchmark is its own script (see its docstring) and appends one JSON
line with the machine's facts (cores, memory, load, versions) to
``bench/results/<name>.jsonl``; this runner starts them in turn, each in a
fresh process with the default full-size arguments below, and stops at the
first that fails unless ``--keep-going``. The table between the
``bench:begin`` and ``bench:end`` markers of docs/benchmarks.md is then rebuilt from
the newest full (non-smoke) line of each file, so a row always names the
commit and date it was measured at. Full runs take long on 2 cores (scale
alone is about an hour); run them on a quiet machine: several of the
figures are throughput.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BENCH_DOC = ROOT / "docs" / "benchmarks.md"  # the page that holds the table
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

# simhash at two distances, MinHash at four thresholds (the default 0.6 among them)
DEDUP_QUALITY_SETTINGS = ["--distances", "3", "5", "--thresholds", "0.5", "0.6", "0.7", "0.8"]

# name -> the script's arguments for the full run, in the order they run
BENCHES: dict[str, list[str]] = {
    "fetch": ["bench/bench_fetch.py"],
    "politeness": ["bench/bench_politeness.py"],
    "scale": ["bench/bench_scale.py"],
    "traps": ["bench/bench_traps.py"],
    "dedup_join": ["bench/bench_dedup_join.py"],
    "dedup_quality": ["bench/bench_dedup_quality.py", *DEDUP_QUALITY_SETTINGS],
    "freshness": ["bench/bench_freshness.py"],
    "stages": ["bench/bench_stages.py"],
    "small_path": ["bench/bench_small_path.py"],
    "query": ["bench/bench_query.py"],
    "fuzz": ["bench/bench_fuzz.py"],
    "kills": ["bench/bench_kills.py"],
    "plan_build": ["bench/bench_plan_build.py"],
}


def newest(name: str) -> dict[str, Any] | None:
    """The newest full-run summary line of a results file (smoke runs and
    per-size detail lines are skipped)."""
    path = RESULTS / f"{name}.jsonl"
    if not path.exists():
        return None
    for line in reversed(path.read_text().splitlines()):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("smoke") or row.get("kind", "summary") != "summary":
            continue
        return row
    return None


def _n(x: float | int | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def fetch_row(r: dict[str, Any]) -> str:
    c = r["crawlers"]
    stage, scrapy, e2e = c["trawl_fetch_stage"], c["scrapy"], c["trawl_end_to_end"]
    ratio = stage["pages_per_s"] / scrapy["pages_per_s"] if scrapy["pages_per_s"] else None
    return (
        f"{r['web']['hosts']:,} hosts, {stage['pages']:,} pages: fetch stage "
        f"{_n(stage['pages_per_s'], 1)} pages/s ({_n(stage['cpu_s_per_1000_pages'], 1)} CPU-s "
        f"per 1,000), Scrapy {_n(scrapy['pages_per_s'], 1)} pages/s "
        f"({_n(scrapy['cpu_s_per_1000_pages'], 1)}); ratio {_n(ratio, 2)}; end to end "
        f"{_n(e2e['wall_s'])} s vs Scrapy {_n(scrapy['wall_s'])} s; trawl's gaps under the "
        f"minimum {r['politeness']['trawl']['gaps_below_min']}{_stamp_lag(r)}; "
        f"{_checks(r.get('checks', {}))}"
    )


def _stamp_lag(r: dict[str, Any]) -> str:
    """How many of trawl's short gaps its own timings confirm (lines since that check)."""
    t = r["politeness"]["trawl"]
    if "short_gaps_confirmed" not in t:
        return ""
    return (
        f" ({t['short_gaps_confirmed']} confirmed by its own timings, "
        f"{t['short_gaps_stamp_lag']} the web's stamp lag)"
    )


def _checks(checks: dict[str, bool]) -> str:
    failed = [name for name, ok in checks.items() if not ok]
    return f"failed: {', '.join(failed)}" if failed else "all checks pass"


def politeness_row(r: dict[str, Any]) -> str:
    a = r["audit"]
    return (
        f"{a['requests']:,} requests to {a['hosts']} hosts: {a['hosts_with_overlap']} host "
        f"overlaps, {a['gaps_below_min']} gaps under the minimum; efficiency "
        f"{_n(r['efficiency'], 3)}"
    )


def scale_row(r: dict[str, Any]) -> str:
    parts = []
    for s in r["sizes"]:
        written = sum(m.get("numTargetBytesAdded", 0) for m in s["updatedb"]["merges"])
        share = written / max(1, s["updatedb"]["crawldb_before"]["bytes"])
        parts.append(
            f"{s['urls'] / 1e6:g}M URLs: generate {_n(s['generate']['s'])} s + updatedb "
            f"{_n(s['updatedb']['s'])} s, peak {_n(s['updatedb']['peak_mb'] / 1024, 1)} GiB, "
            f"updatedb wrote {share:.1%} of crawldb"
        )
    g = r["growth"]
    return "; ".join(parts) + f"; growth exponent (cycle) {g.get('cycle_s')}"


def traps_row(r: dict[str, Any]) -> str:
    o = r["ordinary"]
    costs = r.get("trap_requests") or {}
    most = max(costs.items(), key=lambda kv: kv[1], default=None)
    cost = f"; most page requests of a trap host in six cycles {most[1]} ({most[0]})"
    return (
        f"{len(r['cycles'])} cycles: ordinary hosts {o['fetched']} of {o['reachable']} "
        f"pages; {r['deferred_urls']:,} URLs deferred{cost if most else ''}; "
        f"{_checks(r['checks'])}"
    )


def dedup_join_row(r: dict[str, Any]) -> str:
    pairs = ", ".join(
        f"{n / 1e6:g}M pages {_n(s)} s" for n, s in zip(r["sizes"], r["total_s"], strict=True)
    )
    method = r.get("dedup", {}).get("method", "simhash")
    return f"{method}: {pairs}; growth exponent {r['growth_exponent']}"


def dedup_quality_row(r: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}: precision {p:.2f}, recall {q:.2f}" for k, (p, q) in r["precision_recall"].items()
    )


def freshness_row(r: dict[str, Any]) -> str:
    return ", ".join(
        f"{k} {v['freshness']:.3f}" for k, v in r["policies"].items() if "freshness" in v
    ) + (f" (mean freshness, budget {r['budget_per_cycle']} pages a cycle)")


def stages_row(r: dict[str, Any]) -> str:
    stages = r["stages"]
    total = sum(s["wall_s"] for s in stages)
    jobs = sum(s["jobs"] for s in stages)
    each = ", ".join(f"{s['stage']} {_n(s['wall_s'], 1)} s" for s in stages)
    fixed = "".join(
        f"; {c['cycle']}: fixed cost {_n(c['fixed_s'], 1)} s of {_n(c['wall_s'], 1)} s "
        f"(fetching {_n(c['fetching_s'], 1)} s"
        + (
            f"; driver CPU outside the fetch {_n(c['cpu_outside_fetch_s'], 1)} s"
            if "cpu_outside_fetch_s" in c
            else ""
        )
        + ")"
        for c in r.get("cycles", [])
    )
    return (
        f"{r['params']['hosts']} hosts, {r['params']['cycles']} cycles: {_n(total)} s, "
        f"{jobs:,} Spark jobs ({each}){fixed}"
    )


def small_path_row(r: dict[str, Any]) -> str:
    def best(runs: list[list[float]], i: int) -> str:
        return _n(min(run[i] for run in runs), 2)

    return (
        "; ".join(
            f"crawldb of {s['rows']:,} rows: read {best(s['small_read_merge_s'], 0)} s small path, "
            f"{best(s['spark_read_merge_s'], 0)} s Spark; 1k-row MERGE "
            f"{best(s['small_read_merge_s'], 1)} s small path, "
            f"{best(s['spark_read_merge_s'], 1)} s Spark"
            for s in r["sizes"]
        )
        + " (best of the runs)"
    )


def query_row(r: dict[str, Any]) -> str:
    parts = [
        f"{engine} {name} {_n(c['median_s'], 2)} s"
        for engine, commands in r["engines"].items()
        for name, c in commands.items()
    ]
    return (
        f"{r['crawl']['urls']:,} URLs, median wall from the shell: {', '.join(parts)} "
        f"(target {r['target_s']:g} s); {_checks(r['checks'])}"
    )


def fuzz_row(r: dict[str, Any]) -> str:
    props = r["properties"]
    failed = [name for name, p in props.items() if p["failures"]]
    return (
        f"{r['examples']:,} examples over {len(props)} properties "
        f"(URL, robots.txt, sitemaps, HTML, WARC, HTTP client): {r['failures']} failures"
        + (f" ({', '.join(failed)})" if failed else "")
    )


def kills_row(r: dict[str, Any]) -> str:
    chains = r["chains"]
    at_points = sum(1 for c in chains for run in c["runs"] if run["killed"] and "@" in run["aim"])
    failed = [str(c["seed"]) for c in chains if not c["survived"]]
    alone = sum(c.get("stage_reruns", 0) for c in chains)
    return (
        f"{len(chains)} seeds x {r['params']['kills']} planned kills: {r['kills_made']} kills "
        f"made ({at_points} at fault points; {alone} followed by the stage alone), "
        f"{r['kills_in_surviving_chains']} in chains that recovered; "
        f"{r['chains_survived']} of {len(chains)} crawls identical to the "
        "uninterrupted one" + (f"; failed seeds: {', '.join(failed)}" if failed else "")
    )


def plan_build_row(r: dict[str, Any]) -> str:
    def span(form: str, key: str) -> str:
        # round 0 warms the session: the later rounds are what a stage pays
        values = [x[key] for x in r["rounds"] if x["form"] == form and x["round"] > 0]
        return f"{_n(min(values), 1)}-{_n(max(values), 1)} s" if values else "none"

    return (
        f"{r['params']['steps']} window steps over {r['params']['rows']:,} rows, warm: built in "
        f"{span('dataframe', 'build_s')} by DataFrame calls, {span('sql', 'build_s')} as one "
        f"SQL statement; run in {span('dataframe', 'run_s')} and {span('sql', 'run_s')}"
    )


ROWS: dict[str, Callable[[dict[str, Any]], str]] = {
    "fetch": fetch_row,
    "politeness": politeness_row,
    "scale": scale_row,
    "traps": traps_row,
    "dedup_join": dedup_join_row,
    "dedup_quality": dedup_quality_row,
    "freshness": freshness_row,
    "stages": stages_row,
    "small_path": small_path_row,
    "query": query_row,
    "fuzz": fuzz_row,
    "kills": kills_row,
    "plan_build": plan_build_row,
}


def table() -> str:
    lines = [
        "| benchmark | measured | commit | load (1 min) | result |",
        "|---|---|---|---|---|",
    ]
    for name in BENCHES:
        row = newest(name)
        command = f"`{' '.join(BENCHES[name])}`"
        if row is None:
            lines.append(f"| {command} | – | – | – | no full run recorded yet |")
            continue
        try:
            result = ROWS[name](row)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            result = f"result line not understood ({type(exc).__name__}: {exc})"
        load = (row.get("machine") or {}).get("load_avg_1m")
        lines.append(
            f"| {command} | {row['date'][:10]} | "
            f"{(row.get('commit') or '–')[:8]} | {_n(load, 1)} | {result} |"
        )
    return "\n".join(lines)


def write_table(doc: Path = BENCH_DOC) -> None:
    """Replace what lies between the markers of ``doc`` with a fresh table."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: the {BEGIN} ... {END} markers are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=list(BENCHES), help="run these only")
    ap.add_argument("--table-only", action="store_true", help="run nothing; rewrite the table")
    ap.add_argument("--keep-going", action="store_true", help="run the rest after a failure")
    args = ap.parse_args()
    failed = []
    if not args.table_only:
        for name in args.only or list(BENCHES):
            started = time.time()
            print(f"bench/run.py: {name} ...", flush=True)
            code = subprocess.call([sys.executable, *BENCHES[name]], cwd=ROOT)
            print(f"bench/run.py: {name} exit {code} in {time.time() - started:.0f} s", flush=True)
            if code:
                failed.append(name)
                if not args.keep_going:
                    break
    write_table()
    if failed:
        print(f"bench/run.py: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
