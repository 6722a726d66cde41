"""Simulator: time-averaged freshness of revisit policies at an equal fetch budget.

    .venv/bin/python bench/freshness_sim.py [--pages 2000] [--budget 0.05 0.2]
        [--cycles 90] [--seed 1] [--static 0.1] [--drift 0.0]
        [--history 10] [--no-lastmod] [--policies trawl change_prob ...]
        [--set memory_s=inf ...] [--results PATH]

The web: ``--pages`` pages whose changes are Poisson processes with known
rates, log-uniform between once an hour and once in 180 days, plus a share
(``--static``) that never change; with ``--drift`` that share of pages draws
a new rate half-way through. Importance is equal, or Zipf (weight 1/rank,
ranks shuffled independently of the rates); both runs use the same rates and
change times. Pages exist ``--history`` days before time 0 (the test web's
pages are ten days old when the freshness benchmark starts). Every page is
fetched at time 0 (the initial full crawl); then each daily cycle fetches
``budget x pages`` URLs chosen by the policy, which sees "changed since my
last visit: yes/no" and the served version's Last-Modified (the latest
change, or the page's creation), unless ``--no-lastmod``.

Freshness is exact: a page is fresh from a fetch until the first change
after it, so integrating those spans over the simulated change times gives
the time-averaged share of fresh pages (``F``) and its importance-weighted
form (``F_w``), over the whole run and over its second half (``*_late``,
once the estimators have learnt).

Policies:

- ``trawl``: ``trawl.crawldb.changerate`` defaults (estimated rate, dated by
  Last-Modified, Lagrangian index, probing, overdue first);
- ``change_prob``: the same estimator, ranked by importance x P(changed);
- ``nutch``: Nutch's AdaptiveFetchSchedule as shipped (x1.4 unchanged, x0.8
  changed, sync_delta 0.3, 60 s to 90 days as ``db.fetch.interval.max``
  enforces), the generator's order (score, then fetch time), due pages
  only; ``nutch_nosync`` without sync_delta. It starts from the
  budget-matched interval (pages/budget days): Nutch's own 30-day default
  would leave most of the budget unused for the first month;
- ``uniform``: round-robin, the pages fetched longest ago first;
- ``oracle``: the Lagrangian index with the true rates: a bound, not a policy.

Results go to stdout as a table and, one JSON line per (importance, budget,
policy), to bench/results/freshness_sim.jsonl (or ``--results``).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import heapq
import json
import math
import operator
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trawl.crawldb.changerate import (
    DAY_S,
    AdaptiveSchedule,
    ChangeRateModel,
    estimate_rate,
    first_visit,
    lastmod_age,
    observe,
    overdue,
    priority,
    probing,
    revisit_interval_s,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "freshness_sim.jsonl"
FASTEST_PER_DAY, SLOWEST_DAYS = 24.0, 180.0
POLICIES = ("trawl", "change_prob", "nutch", "nutch_nosync", "uniform", "oracle")


@dataclass
class Web:
    """Pages with known change rates and their change times (seconds)."""

    rates: list[float]  # per second, the rate of the first half (0: static)
    weights: list[float]
    changes: list[list[float]]  # sorted change times per page
    tiebreak: list[float]  # a fixed random order among equal priorities
    history_s: float = 0.0  # pages exist (version 0) from -history_s on
    lastmod: bool = True  # servers send a true Last-Modified

    def last_modified(self, page: int, at_s: float) -> float | None:
        """The Last-Modified served at ``at_s``: the latest change, or creation."""
        if not self.lastmod:
            return None
        times = self.changes[page]
        k = bisect.bisect_right(times, at_s)
        return times[k - 1] if k else -self.history_s

    def next_change(self, page: int, after_s: float) -> float:
        times = self.changes[page]
        k = bisect.bisect_right(times, after_s)
        return times[k] if k < len(times) else math.inf


def poisson_times(rng: random.Random, rate: float, start: float, end: float) -> list[float]:
    out: list[float] = []
    t = start
    while rate > 0:
        t += rng.expovariate(rate)
        if t >= end:
            break
        out.append(t)
    return out


def draw_rate(rng: random.Random, static: float) -> float:
    if rng.random() < static:
        return 0.0
    lo, hi = math.log(1.0 / (SLOWEST_DAYS * DAY_S)), math.log(FASTEST_PER_DAY / DAY_S)
    return math.exp(rng.uniform(lo, hi))


def make_web(
    pages: int,
    horizon_s: float,
    seed: int,
    zipf: bool,
    static: float = 0.1,
    drift: float = 0.0,
    history_s: float = 0.0,
    lastmod: bool = True,
) -> Web:
    """The same seed gives the same rates and change times for either importance."""
    rng = random.Random(seed)
    rates = [draw_rate(rng, static) for _ in range(pages)]
    changes = []
    for rate in rates:
        if rng.random() < drift:
            mid = horizon_s / 2
            later = draw_rate(rng, static)
            before = poisson_times(rng, rate, -history_s, mid)
            changes.append(before + poisson_times(rng, later, mid, horizon_s))
        else:
            changes.append(poisson_times(rng, rate, -history_s, horizon_s))
    ranks = list(range(1, pages + 1))
    rng.shuffle(ranks)
    weights = [1.0 / r for r in ranks] if zipf else [1.0] * pages
    tiebreak = [rng.random() for _ in range(pages)]
    return Web(rates, weights, changes, tiebreak, history_s, lastmod)


class Policy:
    """What a crawler knows and does: pick a cycle's fetches, learn from each."""

    def __init__(self, web: Web, budget: int) -> None:
        self.web, self.budget = web, budget
        self.last_s = [0.0] * len(web.rates)  # the initial full crawl at time 0

    def choose(self, now: float) -> list[int]:
        raise NotImplementedError

    def learn(self, page: int, now: float, changed: bool) -> None:
        """Called before ``last_s[page]`` moves to ``now``."""

    def top(self, keys: Mapping[int, tuple[float, ...]]) -> list[int]:
        return heapq.nsmallest(self.budget, keys, key=keys.__getitem__)


class TrawlPolicy(Policy):
    """``trawl.crawldb.changerate``: estimate from the record, rank by ``priority``."""

    def __init__(self, web: Web, budget: int, model: ChangeRateModel, oracle: bool) -> None:
        super().__init__(web, budget)
        self.model, self.oracle = model, oracle
        n, lo = len(web.rates), model.rate_bounds[0]
        self.stats = [first_visit(lastmod_age(0.0, web.last_modified(i, 0.0))) for i in range(n)]
        estimates = [estimate_rate(stats, model) for stats in self.stats]
        self.rate = [max(lo, r) for r in web.rates] if oracle else estimates
        self.probe = [False] * n
        self.due_s = [revisit_interval_s(r, model) for r in self.rate]

    def choose(self, now: float) -> list[int]:
        model, w, tie = self.model, self.web.weights, self.web.tiebreak
        rate, probe, due = self.rate, self.probe, self.due_s
        keys = {
            i: (
                -float(overdue(now - last, model)),
                -priority(rate[i], now - last, w[i], model, probe[i]),
                tie[i],
            )
            for i, last in enumerate(self.last_s)
            if now >= due[i] - 1.0
        }
        return self.top(keys)

    def learn(self, page: int, now: float, changed: bool) -> None:
        age = lastmod_age(now, self.web.last_modified(page, now))
        interval = now - self.last_s[page]
        stats = observe(self.stats[page], interval, changed, self.model.memory_s, age)
        self.stats[page] = stats
        if not self.oracle:
            self.rate[page] = estimate_rate(stats, self.model)
            self.probe[page] = probing(stats)
        interval = revisit_interval_s(self.rate[page], self.model, self.probe[page])
        self.due_s[page] = now + interval


class NutchPolicy(Policy):
    """AdaptiveFetchSchedule; the generator takes due pages by score, then fetch time."""

    def __init__(self, web: Web, budget: int, schedule: AdaptiveSchedule) -> None:
        super().__init__(web, budget)
        n, first = len(web.rates), len(web.rates) / budget * DAY_S
        self.schedule, self.interval_s, self.next_s = schedule, [first] * n, [first] * n
        self.modified_s = [0.0] * n

    def choose(self, now: float) -> list[int]:
        w, tie, nxt = self.web.weights, self.web.tiebreak, self.next_s
        return self.top({i: (-w[i], nxt[i], tie[i]) for i in range(len(nxt)) if nxt[i] <= now + 1})

    def learn(self, page: int, now: float, changed: bool) -> None:
        interval, nxt, modified = self.schedule.next_fetch(
            self.interval_s[page], changed, now, self.modified_s[page]
        )
        self.interval_s[page], self.next_s[page], self.modified_s[page] = interval, nxt, modified


class UniformPolicy(Policy):
    """Round-robin: the pages fetched longest ago first."""

    def choose(self, now: float) -> list[int]:
        tie = self.web.tiebreak
        return self.top({i: (last, tie[i]) for i, last in enumerate(self.last_s)})


def make_policy(name: str, web: Web, budget: int, model: ChangeRateModel) -> Policy:
    nutch = AdaptiveSchedule(max_interval_s=90 * DAY_S)  # db.fetch.interval.max forces 90 d
    if name == "nutch":
        return NutchPolicy(web, budget, nutch)
    if name == "nutch_nosync":
        return NutchPolicy(web, budget, dataclasses.replace(nutch, sync_delta=False))
    if name == "uniform":
        return UniformPolicy(web, budget)
    if name == "change_prob":
        model = dataclasses.replace(model, priority="change_prob")
    return TrawlPolicy(web, budget, model, oracle=name == "oracle")


def simulate(
    web: Web, policy: str, budget: int, cycles: int, model: ChangeRateModel | None = None
) -> dict[str, Any]:
    """Run ``cycles`` daily cycles after a full crawl at 0; freshness over [0, end)."""
    crawler = make_policy(policy, web, budget, model or ChangeRateModel())
    n, last = len(web.rates), crawler.last_s
    end, late = (cycles + 1) * DAY_S, (cycles + 1) * DAY_S / 2
    fresh, fresh_late = [0.0] * n, [0.0] * n

    def account(i: int, until: float) -> None:
        stale_at = min(web.next_change(i, last[i]), until)
        fresh[i] += stale_at - last[i]
        fresh_late[i] += max(0.0, stale_at - max(last[i], late))

    fetches = 0
    for cycle in range(1, cycles + 1):
        now = cycle * DAY_S
        for i in crawler.choose(now):
            changed = web.next_change(i, last[i]) <= now
            account(i, now)
            crawler.learn(i, now, changed)
            last[i] = now
            fetches += 1
    for i in range(n):
        account(i, end)
    w, total_w = web.weights, sum(web.weights)
    return {
        "F": sum(fresh) / (n * end),
        "F_w": sum(map(operator.mul, w, fresh)) / (total_w * end),
        "F_late": sum(fresh_late) / (n * (end - late)),
        "F_w_late": sum(map(operator.mul, w, fresh_late)) / (total_w * (end - late)),
        "budget_used": fetches / (budget * cycles),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--budget", type=float, nargs="+", default=[0.05, 0.2], help="share/day")
    ap.add_argument("--cycles", type=int, default=90)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--static", type=float, default=0.1, help="share of pages that never change")
    ap.add_argument("--drift", type=float, default=0.0, help="share whose rate changes mid-run")
    ap.add_argument("--history", type=float, default=10.0, help="days pages exist before the crawl")
    ap.add_argument("--no-lastmod", dest="lastmod", action="store_false",
                    help="no Last-Modified: visits only say changed or not")  # fmt: skip
    ap.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="ChangeRateModel")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    return ap.parse_args(argv)


def model_from(settings: Sequence[str]) -> ChangeRateModel:
    """``--set memory_s=inf priority=change_prob``: ChangeRateModel fields."""
    kwargs: dict[str, Any] = {}
    for item in settings:
        key, _, text = item.partition("=")
        kwargs[key] = text if key == "priority" else float(text)
    return ChangeRateModel(**kwargs)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    model = model_from(args.set)
    horizon = (args.cycles + 1) * DAY_S
    params = {k: v for k, v in vars(args).items() if k not in ("results", "policies", "set")}
    model_fields = dataclasses.asdict(model).items()
    params["model"] = {k: "inf" if v == math.inf else v for k, v in model_fields}  # JSON has no inf
    started, lines = time.perf_counter(), []
    print(f"{'importance':<10} {'budget':>6} {'policy':<12} {'F':>6} {'F_w':>6} "
          f"{'F_late':>6} {'F_w_late':>8} {'used':>5}")  # fmt: skip
    for zipf in (False, True):
        web = make_web(
            args.pages, horizon, args.seed, zipf, args.static, args.drift,
            args.history * DAY_S, args.lastmod,
        )  # fmt: skip
        for share in args.budget:
            budget = max(1, round(share * args.pages))
            for policy in args.policies:
                res = simulate(web, policy, budget, args.cycles, model)
                importance = "zipf" if zipf else "equal"
                print(f"{importance:<10} {share:>6.2f} {policy:<12} {res['F']:>6.3f} "
                      f"{res['F_w']:>6.3f} {res['F_late']:>6.3f} {res['F_w_late']:>8.3f} "
                      f"{res['budget_used']:>5.2f}")  # fmt: skip
                lines.append({"importance": importance, "budget": share, "policy": policy, **res})
    elapsed = time.perf_counter() - started
    print(f"{elapsed:.1f} s")
    record = {
        "bench": "freshness_sim",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "params": params,
        "elapsed_s": round(elapsed, 2),
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    with args.results.open("a") as fh:
        for line in lines:
            fh.write(json.dumps({**record, **line}) + "\n")


if __name__ == "__main__":
    main()
