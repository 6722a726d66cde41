"""Benchmark: time-averaged freshness of recrawl policies on the test web, at equal budget.

    .venv/bin/python bench/bench_freshness.py [--hosts 100] [--ips 25]
        [--pages-per-host 5 12] [--cycles 20] [--budget 0.1] [--seed 1]
        [--policies lagrangian adaptive uniform] [--workdir DIR]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_freshness.py --hosts 10 --cycles 2 \
        --results /tmp/freshness-smoke.jsonl

The web is ``WebModel.generate`` without sitemaps, throttles or extra
Crawl-delays, so the page set is fixed and every cycle fetches what generate
chose; its 200 pages change as Poisson processes of known rates (the default
spread: 10 % never, the rest log-uniform from once in 180 days to hourly).
Every URL of the model is injected, so the crawl knows the whole web from
the start (as ``bench/freshness_sim.py`` assumes) and the comparison is
about recrawling alone: cycle 0, at ``T0``, fetches everything (404s, 410s
and robots-denied URLs are then gone for 90 days, 301s wait 90 days, 500s
are retried in cycles 1-3); hosts whose robots.txt answers 5xx are blocked
by a host policy (``block_robots_outages`` says why). Cycles 1..N, one
logical day apart, have the same budget ``B = budget x pages``
(``generate.top_n``), with politeness and the per-host/domain caps loose
enough that only ``top_n`` binds. The test web is moved to each cycle's
logical time (``TestWeb.set_time``) before its fetch. The policies run in
turn in one Spark session, each in a fresh crawl folder with its own test
web (and access log) on one port, so every policy sees the same URLs.

Policies (``--policies``) and what makes them comparable at equal budget:

- ``lagrangian``, ``change_prob``: ``[schedule]`` defaults (1-day minimum
  interval; ``top_n`` picks by the revisit index); ``lagrangian_p50`` the
  Lagrangian with ``schedule.due_change_prob`` = 0.5 (a page is a candidate
  once it has changed with probability 0.5, not after the minimum
  interval);
- ``uniform``: ``fetch_interval_s`` = 1 day, so every page is due every
  cycle and the least recently read ``B`` are taken: round-robin with period
  pages/B days (the simulator's uniform). With the interval set to pages/B
  days instead (``uniform_due``) nothing is due for the pages/B - 1 cycles
  after the full crawl, and the budget idles;
- ``adaptive``: Nutch's AdaptiveFetchSchedule (x1.4 unchanged, x0.8
  changed, sync_delta) from a starting interval of pages/B days, as the
  simulator starts it (it then idles until that interval has passed);
  ``adaptive_1d`` starts from 1 day instead (everything due from cycle 1,
  so the budget binds at once).

Freshness is the share of pages (tracked: 200 and not robots-disallowed)
whose stored copy is the live version. The stored version after each visit
comes from the test web's access log (a 200 or 304 records the logical
``at`` and the ``version`` served or held); a copy taken at ``t`` is fresh
until the page's first change after ``t`` (``WebModel.change_times``) or
the next visit, so the time average over ``[T0 + 1 day, T0 + (N + 1)
days]`` -- every cycle's fetches count for one day -- is exact. Also
recorded: freshness sampled just after each cycle's fetches, due URLs and
page fetches per cycle (the equal-budget check), the 304 share of
revisits, freshness, revisits and probes (revisits while every earlier one
found a change) by true change rate, and the mean absolute log-error of
crawldb's ``change_rate`` against the true rate (and of the prior alone).

A run takes tens of minutes; with ``--workdir`` its state is kept there
(finished cycles, the phase of the one under way, each policy's result) and
running the same command again resumes it. Output: a table on stdout, and
once every policy is done one JSON line per policy and a summary line
appended to bench/results/freshness.jsonl (or ``--results``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench_politeness import append_line, commit, machine
from pyspark.sql import SparkSession

from trawl.config import load_config
from trawl.crawldb.policy import RuleChange
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.stages.ranking import due_urls
from trawl.store.policy import PolicyStore
from trawl.store.session import build_spark
from trawl.store.tables import read_table
from trawl.testweb import EPOCH, TestWeb, WebModel
from trawl.testweb.model import make_url

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "freshness.jsonl"
DAY = timedelta(days=1)
DAY_S = 86_400.0
T0 = EPOCH + timedelta(days=10)  # the full crawl; the web has changed for 10 days by then
# name -> (schedule.policy, starting/uniform interval: "1d" or "budget" = pages/B days)
VARIANTS = {
    "lagrangian": ("lagrangian", None),
    "change_prob": ("change_prob", None),
    "adaptive": ("adaptive", "budget"),
    "adaptive_1d": ("adaptive", "1d"),
    "uniform": ("uniform", "1d"),
    "uniform_due": ("uniform", "budget"),
    "lagrangian_p50": ("lagrangian", None),
}
# settings a variant adds to its policy's: the Lagrangian with a revisit
# threshold (a page is due once it has changed with probability 0.5)
EXTRA_SETTINGS = {"lagrangian_p50": ["schedule.due_change_prob=0.5"]}
# true change rate (per day) buckets: (upper bound, name)
RATE_BUCKETS = ((0.0, "static"), (0.1, "slow<0.1/d"), (1.0, "0.1-1/d"), (math.inf, "fast>1/d"))

Page = tuple[str, str]  # (host, path)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--ips", type=int, default=25)
    ap.add_argument("--pages-per-host", type=int, nargs=2, default=[5, 12], metavar=("MIN", "MAX"))
    ap.add_argument("--seed", type=int, default=1, help="test web seed")
    ap.add_argument("--cycles", type=int, default=20, help="recrawl cycles after the full crawl")
    ap.add_argument("--budget", type=float, default=0.1, help="fetches per cycle / tracked pages")
    ap.add_argument(
        "--policies",
        nargs="+",
        choices=list(VARIANTS),
        default=["lagrangian", "adaptive", "uniform"],
    )
    ap.add_argument("--threads", type=int, default=16, help="fetch.threads_per_task")
    ap.add_argument(
        "--workdir",
        type=Path,
        help="keep the crawls here; re-running with it resumes an interrupted run",
    )
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    return ap.parse_args()


def tracked_pages(model: WebModel) -> list[Page]:
    """The pages freshness is measured on: 200 and fetchable under robots.txt."""
    return [
        (h.name, p.path)
        for h in model.hosts
        for p in h.pages
        if p.status == 200 and not model.is_disallowed(h.name, p.path)
    ]


def write_seeds(model: WebModel, port: int, path: Path) -> int:
    """Every URL of the model (errors and disallowed ones too: cycle 0 settles
    them, so no later cycle discovers and spends budget on them)."""
    urls = [make_url(h.name, p.path, port) for h in model.hosts for p in h.pages]
    path.write_text("".join(f"{u}\n" for u in urls), encoding="utf-8")
    return len(urls)


def base_settings(args: argparse.Namespace) -> list[str]:
    """Overrides shared by every policy: loose politeness, only top_n binds."""
    return [
        'fetch.allow_networks=["127.0.0.0/8"]',
        "politeness.min_delay_s=0.05",
        "politeness.delay_factor=0",
        f"fetch.threads_per_task={args.threads}",
        "fetch.tasks=2",
        "fetch.time_limit_s=600",
        "generate.max_per_host=100000",
        "generate.max_per_domain=100000",
        "generate.fetch_window_s=100000",
        "spark.master=local[2]",
        "spark.shuffle_partitions=2",
        "crawl.host_buckets=2",
        "spark.log_level=ERROR",
    ]


def policy_settings(name: str, budget: int, tracked: int) -> list[str]:
    policy, interval = VARIANTS[name]
    out = [f"schedule.policy={policy}"]
    if interval == "1d":
        out.append(f"schedule.fetch_interval_s={DAY_S}")
    elif interval == "budget":
        out.append(f"schedule.fetch_interval_s={tracked / budget * DAY_S}")
    return out + EXTRA_SETTINGS.get(name, [])


def block_robots_outages(root: str, model: WebModel) -> list[str]:
    """Block the hosts whose robots.txt answers 5xx, as an operator would
    (``trawl policy set --block``). RFC 9309 2.3.1.4 makes their pages
    unfetchable, and the fetcher defers them (retry in a day) without a
    request, so each cycle they would take the head of the fetch list
    (never read: top priority under every policy) and eat the budget."""
    store = PolicyStore(root)
    hosts = [h.name for h in model.hosts if h.robots_status >= 500]
    for name in hosts:
        store.set(
            "host",
            name,
            RuleChange(blocked=True),
            set_by="bench_freshness",
            reason="robots.txt answers 5xx",
            at=datetime.now(UTC),
        )
    return hosts


def due_count(ctx: JobContext) -> int:
    """URLs generate may pick at ``ctx.at`` (generate's own filter)."""
    return due_urls(read_table(ctx.spark, ctx.root, "crawldb"), ctx).count()


def fetch_counts(got: dict[str, Any]) -> dict[str, int]:
    """A fetch job's page outcomes: success, notmodified, and the rest."""
    pages = {
        k.removeprefix("fetch/page/"): v for k, v in got.items() if k.startswith("fetch/page/")
    }
    ok, same = pages.pop("success", 0), pages.pop("notmodified", 0)
    return {"success": ok, "notmodified": same, "other": sum(pages.values())}


def run_cycle(ctx: JobContext, web: TestWeb, state: Path) -> dict[str, Any]:
    """generate -> fetch -> updatedb, resuming after the last phase ``state`` records
    (a re-run generate keeps its segment's picks, updatedb is idempotent)."""
    row = json.loads(state.read_text()) if state.exists() else {"seconds": 0.0}
    began = time.monotonic()
    if "generated" not in row:
        row["due"] = due_count(ctx)
        row["generated"] = run_generate(ctx)["urls"]
        row["generate_s"] = round(time.monotonic() - began, 1)
        _save(state, row, began)
    if "success" not in row:
        web.set_time(ctx.at)
        fetched = time.monotonic()
        row.update(fetch_counts(run_fetch(ctx)))
        row["fetch_s"] = round(time.monotonic() - fetched, 1)
        _save(state, row, began)
    run_updatedb(ctx)
    row["seconds"] = round(row["seconds"] + time.monotonic() - began, 1)
    return row


def _save(state: Path, row: dict[str, Any], began: float) -> None:
    state.write_text(json.dumps({**row, "seconds": row["seconds"] + time.monotonic() - began}))


def crawl_policy(
    spark: SparkSession, name: str, args: argparse.Namespace, web: TestWeb, budget: int
) -> dict[str, Any]:
    """Inject, full crawl at T0, then ``args.cycles`` daily cycles of ``budget``;
    picks up after the last finished cycle recorded in the policy's folder."""
    folder = web.out_dir.parent
    tracked = len(tracked_pages(web.model))
    common = [f"dns.hosts_file={web.hosts_file}", *base_settings(args)]
    common += policy_settings(name, budget, tracked)
    root, seeds = str(folder / "crawl"), folder / "seeds.txt"
    injected = write_seeds(web.model, web.port, seeds)
    full = load_config(None, [*common, f"generate.top_n={injected}"], environ={})
    recrawl = load_config(None, [*common, f"generate.top_n={budget}"], environ={})
    if not (folder / "blocked.json").exists():
        run_inject(JobContext(spark, full, root, "inject", T0), [str(seeds)])
        blocked = block_robots_outages(root, web.model)
        (folder / "blocked.json").write_text(json.dumps(blocked))
    done = folder / "cycles.jsonl"
    rows = [json.loads(line) for line in done.read_text().splitlines()] if done.exists() else []
    for i in range(len(rows), args.cycles + 1):
        at = T0 + i * DAY
        ctx = JobContext(spark, full if i == 0 else recrawl, root, segment_id(at), at)
        rows.append({"cycle": i, **run_cycle(ctx, web, folder / "cycle.json")})
        with done.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rows[-1]) + "\n")
        (folder / "cycle.json").unlink(missing_ok=True)
        print(json.dumps({"policy": name, **rows[-1]}), flush=True)
    cols = ["url", "change_rate", "change_visits", "fetches", "status"]
    crawldb = [r.asDict() for r in read_table(spark, root, "crawldb").select(*cols).collect()]
    return {
        "settings": common[1:],
        "seeds_injected": injected,
        "blocked_hosts": json.loads((folder / "blocked.json").read_text()),
        "cycles": rows,
        "crawldb": crawldb,
    }


# -- freshness from the access log ------------------------------------------


def page_visits(log: list[dict[str, Any]], pages: set[Page]) -> dict[Page, list[tuple[float, int]]]:
    """(logical time, version stored after it) of every 200/304 on a tracked page."""
    visits: dict[Page, list[tuple[float, int]]] = defaultdict(list)
    for rec in log:
        key = (rec["host"], rec["path"])
        if key in pages and rec["status"] in (200, 304) and rec.get("version") is not None:
            visits[key].append((datetime.fromisoformat(rec["at"]).timestamp(), rec["version"]))
    for seq in visits.values():
        seq.sort()
    return visits


def change_instants(model: WebModel, pages: list[Page], until: datetime) -> dict[Page, list[float]]:
    return {p: [c.timestamp() for c in model.change_times(*p, until)] for p in pages}


def fresh_time(
    visits: list[tuple[float, int]], changes: list[float], lo: float, hi: float
) -> float:
    """Seconds of [lo, hi) during which the stored copy was the live version:
    a copy taken at t is fresh until the first change after t (or the next visit)."""
    total = 0.0
    for k, (t, _) in enumerate(visits):
        until = visits[k + 1][0] if k + 1 < len(visits) else hi
        nxt = bisect.bisect_right(changes, t)
        stale_at = changes[nxt] if nxt < len(changes) else math.inf
        total += max(0.0, min(stale_at, until, hi) - max(t, lo))
    return total


def fresh_at(visits: list[tuple[float, int]], changes: list[float], t: float) -> bool:
    """Whether the copy stored at ``t`` (visits at ``t`` included) is the live one."""
    k = bisect.bisect_right(visits, (t, math.inf)) - 1
    return k >= 0 and bisect.bisect_right(changes, visits[k][0]) == bisect.bisect_right(changes, t)


def rate_bucket(rate_per_day: float) -> str:
    return next(name for bound, name in RATE_BUCKETS if rate_per_day <= bound)


def freshness(
    model: WebModel, log: list[dict[str, Any]], changes: dict[Page, list[float]], cycles: int
) -> dict[str, Any]:
    """Time-averaged and per-cycle freshness, revisits and 304s, by the access log."""
    pages = list(changes)
    visits = page_visits(log, set(pages))
    lo, hi = (T0 + DAY).timestamp(), (T0 + (cycles + 1) * DAY).timestamp()
    fresh = {p: fresh_time(visits.get(p, []), changes[p], lo, hi) / (hi - lo) for p in pages}
    samples = [
        sum(fresh_at(visits.get(p, []), changes[p], (T0 + c * DAY).timestamp()) for p in pages)
        / len(pages)
        for c in range(cycles + 1)
    ]
    mismatched = sum(
        v != bisect.bisect_right(changes[p], t) for p in pages for t, v in visits.get(p, [])
    )
    statuses: Counter[str] = Counter()
    same_version_200 = 0
    for rec in log:
        key = (rec["host"], rec["path"])
        if rec["path"] == "/robots.txt" or datetime.fromisoformat(rec["at"]).timestamp() < lo:
            continue
        statuses[str(rec["status"])] += 1
        if key in changes and rec["status"] == 200:
            seq = visits[key]
            k = seq.index((datetime.fromisoformat(rec["at"]).timestamp(), rec["version"]))
            same_version_200 += k > 0 and seq[k - 1][1] == rec["version"]
    by_rate = _by_rate(model, pages, fresh, visits, lo)
    revisits = statuses["200"] + statuses["304"]
    probes = sum(probe_revisits(visits.get(p, [])) for p in pages)
    return {
        "probe_revisits": probes,
        "never_revisited": sum(len(visits.get(p, [])) < 2 for p in pages),
        "freshness": statistics.fmean(fresh.values()),
        "freshness_by_cycle": [round(s, 4) for s in samples],
        "never_fetched": sum(p not in visits for p in pages),
        "version_mismatches": mismatched,
        "recrawl_statuses": dict(sorted(statuses.items())),
        "share_304": statuses["304"] / revisits if revisits else None,
        "unchanged_200": same_version_200,
        "by_rate": by_rate,
    }


def _by_rate(
    model: WebModel,
    pages: list[Page],
    fresh: dict[Page, float],
    visits: dict[Page, list[tuple[float, int]]],
    lo: float,
) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Page]] = defaultdict(list)
    for p in pages:
        groups[rate_bucket(model.change_rate(*p))].append(p)
    return {
        name: {
            "pages": len(group),
            "freshness": round(statistics.fmean(fresh[p] for p in group), 4),
            "revisits": sum(t >= lo for p in group for t, _ in visits.get(p, [])),
            "probes": sum(probe_revisits(visits.get(p, [])) for p in group),
            "never_revisited": sum(len(visits.get(p, [])) < 2 for p in group),
        }
        for _, name in RATE_BUCKETS
        if (group := groups.get(name))
    }


def probe_revisits(visits: list[tuple[float, int]]) -> int:
    """Revisits made while every earlier revisit had found a change (trawl's
    ``probing``: the rate is only known from below), the full crawl's visit
    being the first, which observes nothing."""
    probes = 0
    for k in range(2, len(visits)):
        probes += all(visits[j][1] != visits[j - 1][1] for j in range(1, k))
    return probes


def rate_error(
    model: WebModel, crawldb: list[dict[str, Any]], prior_per_s: float
) -> dict[str, Any]:
    """Mean |ln(estimate / true rate)| over tracked pages that change."""
    errors, prior_errors, static = [], [], []
    for row in crawldb:
        parts = urlsplit(row["url"])
        info = model.host(parts.hostname or "")
        page = None if info is None else info.page(parts.path or "/")
        if page is None or page.status != 200 or row["change_rate"] is None:
            continue
        if page.change_rate == 0:
            static.append(row["change_rate"] * DAY_S)
            continue
        true = page.change_rate / DAY_S
        errors.append(abs(math.log(row["change_rate"] / true)))
        prior_errors.append(abs(math.log(prior_per_s / true)))
    return {
        "pages": len(errors),
        "mean_abs_log_error": statistics.fmean(errors) if errors else None,
        "prior_mean_abs_log_error": statistics.fmean(prior_errors) if prior_errors else None,
        "static_pages_median_estimate_per_day": statistics.median(static) if static else None,
    }


# -- the run ----------------------------------------------------------------


def budget_check(cycles: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """Page requests per recrawl cycle against the budget (cycle 0 left out)."""
    spent = [c["success"] + c["notmodified"] + c["other"] for c in cycles[1:]]
    return {
        "fetches_per_cycle": spent,
        "mean_fetches": statistics.fmean(spent),
        "budget_used": statistics.fmean(spent) / budget,
        "idle_cycles": sum(s < 0.97 * budget for s in spent),
    }


def run_policy(
    spark: SparkSession,
    name: str,
    args: argparse.Namespace,
    run: dict[str, Any],
    budget: int,
    changes: dict[Page, list[float]],
) -> dict[str, Any]:
    """Crawl (or finish crawling) with one policy, then measure; the result is
    kept in the policy's folder so a resumed run does not crawl it again."""
    folder = Path(run["workdir"]) / name
    result = folder / "result.json"
    if result.exists():
        return dict(json.loads(result.read_text()))
    model = make_model(args)
    with TestWeb(model, folder / "web", port=run.get("port", 0)) as web:
        run.setdefault("port", web.port)  # every policy's URLs carry the same port
        save_run(run)
        crawl = crawl_policy(spark, name, args, web, budget)
    prior = 1.0 / load_config(None, [], environ={}).schedule.prior_change_interval_s
    out = {
        "policy": name,
        "settings": crawl["settings"],
        "seeds_injected": crawl["seeds_injected"],
        "blocked_hosts": crawl["blocked_hosts"],
        **freshness(model, page_log(web.access_log), changes, args.cycles),
        **budget_check(crawl["cycles"], budget),
        "rate_error": rate_error(model, crawl["crawldb"], prior),
        "cycles": crawl["cycles"],
        "crawl_s": round(sum(c["seconds"] for c in crawl["cycles"]), 1),
    }
    result.write_text(json.dumps(out))
    return out


def page_log(path: Path) -> list[dict[str, Any]]:
    """The access log's page requests, one per (host, path, logical time): a
    fetch re-run after an interruption asks again, and the last answer counts."""
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line) if line.strip() else None
            if rec is not None and rec["path"] != "/robots.txt":
                latest[rec["host"], rec["path"], rec["at"]] = rec
    return list(latest.values())


def print_table(runs: list[dict[str, Any]], budget: int) -> None:
    print(f"\n{'policy':<12} {'F':>6} {'F_last':>6} {'fetch/cyc':>9} {'used':>5} {'idle':>4} "
          f"{'304':>5} {'rate_err':>8} {'prior_err':>9} {'crawl_s':>7}")  # fmt: skip
    for r in runs:
        err = r["rate_error"]
        print(f"{r['policy']:<12} {r['freshness']:>6.3f} {r['freshness_by_cycle'][-1]:>6.3f} "
              f"{r['mean_fetches']:>9.1f} {r['budget_used']:>5.2f} {r['idle_cycles']:>4} "
              f"{r['share_304'] or 0:>5.2f} {err['mean_abs_log_error'] or 0:>8.2f} "
              f"{err['prior_mean_abs_log_error'] or 0:>9.2f} {r['crawl_s']:>7.0f}")  # fmt: skip
    print(f"budget B = {budget} fetches per cycle")
    for r in runs:
        parts = [
            f"{k} ({v['pages']}) {v['freshness']:.3f}/{v['revisits']}/{v['probes']}"
            for k, v in r["by_rate"].items()
        ]
        print(f"{r['policy']:<12} F/revisits/probes by rate: " + ", ".join(parts))


def web_facts(model: WebModel, changes: dict[Page, list[float]]) -> dict[str, Any]:
    start = (T0 + DAY).timestamp()
    return {
        "hosts": len(model.hosts),
        "ips": len(model.ips),
        "urls": model.page_count,
        "tracked_pages": len(changes),
        "static_pages": sum(not model.change_rate(*p) for p in changes),
        "changes_in_window": sum(c > start for v in changes.values() for c in v),
    }


def make_model(args: argparse.Namespace) -> WebModel:
    """The benchmark's web: fixed pages (no sitemaps), no throttles or extra delays."""
    return WebModel.generate(
        args.seed,
        hosts=args.hosts,
        ips=min(args.ips, args.hosts),
        pages_per_host=tuple(args.pages_per_host),
        sitemaps=0,
        throttled=0,
        crawl_delays=0,
    )


def load_run(args: argparse.Namespace) -> dict[str, Any]:
    """The run's state (work folder, test web port, parameters), resumed when
    ``--workdir`` already holds one with the same parameters."""
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="trawl-bench-freshness-"))
    params = {k: v for k, v in vars(args).items() if k not in ("workdir", "results", "policies")}
    state = Path(workdir) / "run.json"
    if not state.exists():
        return {"workdir": str(workdir), "params": params, "invocations": 1}
    run = dict(json.loads(state.read_text()))
    if run["params"] != params:
        raise SystemExit(f"{workdir} holds a run with other parameters: {run['params']}")
    run["invocations"] += 1
    return run


def save_run(run: dict[str, Any]) -> None:
    Path(run["workdir"]).mkdir(parents=True, exist_ok=True)
    (Path(run["workdir"]) / "run.json").write_text(json.dumps(run))


def main() -> None:
    args = parse_args()
    model = make_model(args)
    pages = tracked_pages(model)
    budget = max(1, round(args.budget * len(pages)))
    changes = change_instants(model, pages, T0 + (args.cycles + 1) * DAY)
    run = load_run(args)
    save_run(run)
    record: dict[str, Any] = {
        "bench": "freshness",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "params": {**run["params"], "policies": args.policies},
        "web": web_facts(model, changes),
        "budget_per_cycle": budget,
        "t0": T0.isoformat(),
    }
    started = time.monotonic()
    spark = build_spark(load_config(None, base_settings(args), environ={}))
    try:
        runs = [run_policy(spark, name, args, run, budget, changes) for name in args.policies]
    finally:
        spark.stop()
    record["wall_s"] = round(time.monotonic() - started, 1)  # this invocation
    record["invocations"] = run["invocations"]
    record["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    for line in runs:
        append_line(args.results, {**record, "kind": "policy", **line})
    append_line(args.results, {**record, "kind": "summary", "policies": summary(runs)})
    if args.workdir is None:
        shutil.rmtree(run["workdir"], ignore_errors=True)
    print_table(runs, budget)
    print(f"{record['wall_s']:.0f} s in this invocation ({run['invocations']} in all)")


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        r["policy"]: {
            "freshness": round(r["freshness"], 4),
            "mean_fetches": round(r["mean_fetches"], 1),
            "budget_used": round(r["budget_used"], 3),
            "share_304": r["share_304"] and round(r["share_304"], 3),
            "rate_mae_log": r["rate_error"]["mean_abs_log_error"],
        }
        for r in runs
    }


if __name__ == "__main__":
    main()
