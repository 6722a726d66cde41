"""Benchmark: the fuzz properties of tests/fuzz, with many more examples.

    .venv/bin/python bench/bench_fuzz.py [--examples 20000] [--seconds 120] [--seed 0]
        [--only url robots ...]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_fuzz.py --examples 200 --results /tmp/fuzz-smoke.jsonl

The properties are the test suite's own (``tests/fuzz/properties.py``: the
same function, strategies, deadline, hang guard and ``@example``
regressions); only the number of examples and their seeds differ. Each
property runs in batches, batch k under hypothesis seed ``--seed + k``, until
it has run ``--examples`` examples or spent ``--seconds`` (a budget per
property: the HTTP client's examples are real exchanges, some waiting out a
timeout, and get far fewer in the time). A batch holds at most ``--batch``
examples, and no more than the time left holds at the rate so far, so where
the budget binds two runs may give a seed different numbers of examples. A
batch that fails is recorded with its seed and hypothesis's shrunk example,
and the property goes on with its next batch; failures are counted once per
exception type and line raising it (the first example kept).

"Examples" counts calls of the property, the explicit regressions and
hypothesis's own replays included. One JSON line per run is appended to
bench/results/fuzz.jsonl (or ``--results``) with, per property, the examples
run, seconds, failures found, and whether its batches ran short (hypothesis
ran out of distinct inputs to try); and the commit and machine (load
included). The process exits 1 if any property failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fuzz: the properties

from bench_politeness import append_line, commit, line_head, machine
from hypothesis import seed
from tests.fuzz.properties import SUBJECTS, Hang, Property, load_all

ROOT = Path(__file__).resolve().parents[1]
FIRST_BATCH = 20  # examples, before the property's rate is known


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--examples", type=int, default=20_000, help="per property")
    p.add_argument("--seconds", type=float, default=120.0, help="budget per property")
    p.add_argument("--batch", type=int, default=1_000, help="examples per hypothesis run")
    p.add_argument("--seed", type=int, default=0, help="seed of the first batch")
    p.add_argument("--only", nargs="*", default=[], choices=SUBJECTS, metavar="SUBJECT")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "fuzz.jsonl")
    return p.parse_args()


def failure(exc: BaseException, batch_seed: int) -> dict[str, Any]:
    """What a failing batch found: the error, where, and hypothesis's example."""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    notes = getattr(exc, "__notes__", [])  # hypothesis's "Failing test case: ..."
    return {
        "error": f"{type(exc).__name__}: {str(exc)[:300]}",
        "at": f"{Path(where.filename).name}:{where.lineno}" if where else None,
        "example": "\n".join(notes)[:2_000],
        "seed": batch_seed,
    }


def run_property(prop: Property, args: argparse.Namespace) -> dict[str, Any]:
    """Batches of the property until the examples or the seconds are used up."""
    examples = batches = short_batches = 0
    failures: dict[str, dict[str, Any]] = {}
    started = time.monotonic()

    def count() -> None:
        nonlocal examples
        examples += 1

    while examples < args.examples and (spent := time.monotonic() - started) < args.seconds:
        batch_seed = args.seed + batches
        # The budget is checked between batches, so a batch is sized to what the
        # time left holds at the rate so far (the first one is small).
        fits = int((args.seconds - spent) * examples / spent) if examples else FIRST_BATCH
        size = max(1, min(args.batch, args.examples - examples, fits))
        before = examples
        test = prop.test(prop.config(derandomize=False, max_examples=size), each=count)
        try:
            seed(batch_seed)(test)()
        except (Exception, Hang) as exc:  # hypothesis raises its shrunk failure
            found = failure(exc, batch_seed)  # one bug: one exception type raised at one line
            key = f"{type(exc).__name__} at {found['at']}"
            failures.setdefault(key, found | {"batches": 0})["batches"] += 1
        else:
            # A batch that passed with far fewer examples than asked for: hypothesis
            # ran out of distinct inputs.
            short_batches += examples - before < size // 2
        batches += 1
        if short_batches >= 3:
            break  # the strategies have no more distinct inputs: more seeds add nothing
    return {
        "examples": examples,
        "batches": batches,
        "seconds": round(time.monotonic() - started, 1),
        "exhausted": short_batches >= 3,
        "failures": len(failures),
        "failed": list(failures.values()),
    }


def main() -> int:
    args = parse_args()
    started = time.time()
    sha, before = commit(), machine()  # the machine's load before the run
    properties = {
        name: prop
        for name, prop in load_all().items()
        if not args.only or name.partition("/")[0] in args.only
    }
    results: dict[str, dict[str, Any]] = {}
    for name, prop in properties.items():
        results[name] = run_property(prop, args)
        shown = {k: v for k, v in results[name].items() if k != "failed"}
        print(json.dumps({"property": name, **shown}), flush=True)
    line = {
        **line_head("fuzz", sha, before, args),
        "properties": results,
        "examples": sum(r["examples"] for r in results.values()),
        "failures": sum(r["failures"] for r in results.values()),
        "wall_s": round(time.time() - started, 1),
    }
    append_line(args.results, line)
    print(json.dumps({k: line[k] for k in ("commit", "examples", "failures", "wall_s")}))
    return 1 if line["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
