"""Tests for trawl.crawldb.changerate: change-rate estimation and the revisit policy.

Synthetic pages are Poisson processes drawn with fixed seeds, so every
number here is deterministic; tolerances are about the estimator's spread,
not about timing. The last tests run a small bench/freshness_sim.py web.
"""

from __future__ import annotations

import importlib.util
import math
import random
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from trawl.crawldb.changerate import (
    DAY_S,
    AdaptiveSchedule,
    ChangeRateModel,
    ChangeStats,
    bias_reduced_rate,
    change_probability,
    estimate_rate,
    first_visit,
    lastmod_age,
    lastmod_contradicts,
    mle_rate,
    observe,
    overdue,
    priority,
    probing,
    revisit_interval_s,
    revisit_value,
)

ROOT = Path(__file__).resolve().parents[2]
NO_MEMORY_LIMIT = ChangeRateModel(memory_s=math.inf)
NO_PRIOR = ChangeRateModel(memory_s=math.inf, prior_visits=0.0)

History = list[tuple[float, bool]]


def poisson_history(rng: random.Random, rate: float, intervals: Iterator[float]) -> History:
    """(interval, changed) per visit of a page changing at ``rate``."""
    return [(t, rng.random() < -math.expm1(-rate * t)) for t in intervals]


def regular(n: int, interval: float) -> Iterator[float]:
    return iter([interval] * n)


def spread(rng: random.Random, n: int, interval: float) -> Iterator[float]:
    return iter([interval * rng.uniform(0.25, 1.75) for _ in range(n)])


def record(history: History, memory_s: float = math.inf) -> ChangeStats:
    stats = ChangeStats()
    for t, changed in history:
        stats = observe(stats, t, changed, memory_s)
    return stats


def naive_rate(history: History) -> float:
    return sum(c for _, c in history) / sum(t for t, _ in history)


# --- estimator ---------------------------------------------------------------


@pytest.mark.parametrize("rate_per_day", [0.05, 0.3, 1.0, 2.0])
@pytest.mark.parametrize("irregular", [False, True])
def test_mean_estimate_is_close_to_the_true_rate(rate_per_day: float, irregular: bool) -> None:
    rng, rate = random.Random(7), rate_per_day / DAY_S
    estimates = []
    for _ in range(200):
        steps = spread(rng, 40, DAY_S) if irregular else regular(40, DAY_S)
        estimates.append(estimate_rate(record(poisson_history(rng, rate, steps)), NO_MEMORY_LIMIT))
    assert statistics.mean(estimates) == pytest.approx(rate, rel=0.12)


@pytest.mark.parametrize("rate_per_day", [1.0, 2.0])
def test_naive_estimate_misses_changes_of_fast_pages_and_ours_does_not(
    rate_per_day: float,
) -> None:
    rng, rate = random.Random(11), rate_per_day / DAY_S
    histories = [poisson_history(rng, rate, regular(40, DAY_S)) for _ in range(200)]
    naive = statistics.mean(naive_rate(h) for h in histories)
    ours = statistics.mean(estimate_rate(record(h), NO_MEMORY_LIMIT) for h in histories)
    assert naive < 0.7 * rate  # several changes per visit look like one
    assert ours == pytest.approx(rate, rel=0.1)


@pytest.mark.parametrize("visits, changes", [(10, 0), (10, 3), (10, 9), (40, 17), (5, 5)])
def test_regular_intervals_without_prior_give_cho_garcia_molina(visits: int, changes: int) -> None:
    history = [(DAY_S, k < changes) for k in range(visits)]
    got = estimate_rate(record(history), NO_PRIOR)
    want = max(NO_PRIOR.rate_bounds[0], bias_reduced_rate(visits, changes, DAY_S))
    assert got == pytest.approx(want, rel=1e-12)


def test_irregular_intervals_track_the_maximum_likelihood_estimate() -> None:
    rng = random.Random(3)
    for rate_per_day in (0.1, 0.5, 1.5):
        history = poisson_history(rng, rate_per_day / DAY_S, spread(rng, 400, DAY_S))
        mle = mle_rate(history)
        assert estimate_rate(record(history), NO_PRIOR) == pytest.approx(mle, rel=0.1)


def test_mle_solves_its_equation_and_handles_degenerate_histories() -> None:
    history = [(DAY_S, True), (3 * DAY_S, False), (0.5 * DAY_S, True), (2 * DAY_S, False)]
    rate = mle_rate(history)
    lhs = sum(t / math.expm1(rate * t) for t, c in history if c)
    assert lhs == pytest.approx(5 * DAY_S, rel=1e-9)
    assert mle_rate([(DAY_S, False)] * 3) == 0.0
    assert mle_rate([(DAY_S, True)] * 3) == math.inf


# --- prior, bounds, forgetting ------------------------------------------------


def test_prior_gives_the_default_rate_without_visits() -> None:
    model = ChangeRateModel()
    assert estimate_rate(ChangeStats(), model) == pytest.approx(model.default_rate_per_s)


def test_prior_keeps_one_and_two_visits_sane() -> None:
    model = ChangeRateModel()
    lam0 = model.default_rate_per_s

    def rate(*changed: bool) -> float:
        return estimate_rate(record([(DAY_S, c) for c in changed]), model)

    # A change seen: faster than the prior, more so after two, but finite and
    # below what one always-changing daily visit could justify (ln 3 per day).
    assert lam0 < rate(True) < rate(True, True) < math.log(3) / DAY_S
    # No change seen: slower than the prior, but not "never changes".
    assert lam0 / 5 < rate(False, False) < rate(False) < lam0
    # Without the prior one changed visit is Cho's ln(1.5/0.5) per day.
    assert estimate_rate(record([(DAY_S, True)]), NO_PRIOR) == pytest.approx(math.log(3) / DAY_S)


def test_estimates_stay_within_the_bounds() -> None:
    model = ChangeRateModel()
    lo, hi = model.rate_bounds
    assert (lo, hi) == (1 / (900 * DAY_S), 10 / DAY_S)
    every_second = record([(1.0, True)] * 50)
    assert estimate_rate(every_second, model) == hi
    never = record([(model.max_interval_s, False)] * 200)
    assert estimate_rate(never, model) == lo
    assert estimate_rate(record([(DAY_S, False)] * 5), NO_PRIOR) == lo  # nothing to go on


def test_update_visit_by_visit_equals_the_whole_history_weighted_by_age() -> None:
    rng = random.Random(5)
    history = poisson_history(rng, 0.4 / DAY_S, spread(rng, 60, 3 * DAY_S))
    memory = 30 * DAY_S
    stepwise = record(history, memory)
    times = [sum(t for t, _ in history[: k + 1]) for k in range(len(history))]
    weights = [math.exp(-(times[-1] - at) / memory) for at in times]
    expected = ChangeStats(
        visits=sum(weights),
        changes=sum(w for w, (_, c) in zip(weights, history, strict=True) if c),
        unchanged_s=sum(w * t for w, (t, c) in zip(weights, history, strict=True) if not c),
        inv_interval=sum(w / t for w, (t, _) in zip(weights, history, strict=True)),
        inv_changed=sum(w / t for w, (t, c) in zip(weights, history, strict=True) if c),
    )
    for name in ("visits", "changes", "unchanged_s", "inv_interval", "inv_changed"):
        assert getattr(stepwise, name) == pytest.approx(getattr(expected, name), rel=1e-9)
    assert record(history) == record(history, math.inf)  # no memory limit: plain sums


def test_forgetting_relearns_a_page_that_slowed_down() -> None:
    daily_then_quiet = [(DAY_S, True)] * 30 + [(7 * DAY_S, False)] * 12  # 12 quiet weeks
    model = ChangeRateModel(memory_s=30 * DAY_S)
    forgetful = estimate_rate(record(daily_then_quiet, model.memory_s), model)
    stubborn = estimate_rate(record(daily_then_quiet), NO_MEMORY_LIMIT)
    assert forgetful < 0.05 / DAY_S
    assert stubborn > 0.25 / DAY_S  # still remembers the daily changes


# --- policy --------------------------------------------------------------------


def test_probing_while_every_visit_changed() -> None:
    assert not probing(ChangeStats())
    assert probing(record([(DAY_S, True)] * 3))
    assert not probing(record([(DAY_S, True), (DAY_S, False), (DAY_S, True)]))


def dated_record(rng: random.Random, rate: float, visits: int, interval: float) -> ChangeStats:
    """Visits every ``interval`` to a page changing at ``rate`` whose server
    sends a true Last-Modified; the page exists from 30 intervals before."""
    t, last_change, changes = -30 * interval, -30 * interval, []
    while True:
        t += rng.expovariate(rate)
        if t > visits * interval:
            break
        changes.append(t)

    def lastmod(at: float) -> float:
        before = [c for c in changes if c <= at]
        return before[-1] if before else last_change

    stats = first_visit(lastmod_age(0.0, lastmod(0.0)))
    for i in range(1, visits + 1):
        at, previous = i * interval, lastmod((i - 1) * interval)
        now = lastmod(at)
        changed = now != previous
        assert not lastmod_contradicts(at, now, previous, changed)
        stats = observe(stats, interval, changed, math.inf, lastmod_age(at, now))
    return stats


@pytest.mark.parametrize("rate_per_day", [0.05, 0.5, 3.0, 24.0])
def test_dated_estimate_tells_fast_pages_apart(rate_per_day: float) -> None:
    rng = random.Random(7)
    rate = rate_per_day / DAY_S
    estimates = [estimate_rate(dated_record(rng, rate, 40, DAY_S), NO_MEMORY_LIMIT)
                 for _ in range(30)]  # fmt: skip
    highest = NO_MEMORY_LIMIT.rate_bounds[1]  # 10 a day: estimates stop there
    assert statistics.mean(estimates) == pytest.approx(min(rate, highest), rel=0.15)
    if rate_per_day >= 3:  # visits alone cannot: every daily visit sees a change
        every_visit = ChangeStats(
            visits=40, changes=40, inv_interval=40 / DAY_S, inv_changed=40 / DAY_S
        )
        assert probing(every_visit)
        assert estimate_rate(every_visit, NO_MEMORY_LIMIT) * DAY_S < 5.0


def test_dated_record_is_no_probe_and_distrust_is_for_good() -> None:
    stats = observe(first_visit(3600.0), DAY_S, True, math.inf, age_s=600.0)
    assert stats.dated and not probing(stats)  # every visit changed, but the dates say how fast
    distrusted = observe(stats, DAY_S, False, math.inf, age_s=DAY_S, distrust=True)
    assert not distrusted.dated and distrusted.dated_exposure_s == -1.0
    later = observe(distrusted, DAY_S, True, math.inf, age_s=60.0)
    assert not later.dated and later.visits == pytest.approx(3.0)
    assert estimate_rate(later, NO_MEMORY_LIMIT) == pytest.approx(
        estimate_rate(replace_dated(later), NO_MEMORY_LIMIT)
    )
    assert first_visit(None) == ChangeStats()


def replace_dated(stats: ChangeStats) -> ChangeStats:
    return ChangeStats(stats.visits, stats.changes, stats.unchanged_s, stats.inv_interval,
                       stats.inv_changed)  # fmt: skip


def test_lastmod_contradictions() -> None:
    at, before = 100 * DAY_S, 90 * DAY_S
    assert not lastmod_contradicts(at, None, before, True)  # no date: nothing to judge
    assert not lastmod_contradicts(at, 95 * DAY_S, before, True)  # moved with the content
    assert not lastmod_contradicts(at, before, before, False)  # stayed with the content
    assert not lastmod_contradicts(at, 95 * DAY_S, None, True)  # nothing to compare with
    assert lastmod_contradicts(at, before, before, True)  # content changed, date did not
    assert lastmod_contradicts(at, 95 * DAY_S, before, False)  # date moved, content did not
    assert lastmod_contradicts(at, at + 2 * DAY_S, before, None)  # from the future
    assert not lastmod_contradicts(at, at + 3600, before, True)  # changed during the fetch
    assert lastmod_age(at, at + 3600) == 0.0 and lastmod_age(at, None) is None


@pytest.mark.parametrize(
    "rate_per_day, due_prob, probe, want_days",
    [
        (0.1, 0.0, False, 1.0),  # default: a candidate after the minimum interval
        (0.1, 0.5, False, math.log(2) / 0.1),  # half-life of the stored copy
        (5.0, 0.5, False, 1.0),  # bounded below
        (0.001, 0.5, False, 90.0),  # bounded above
        (0.001, 0.5, True, 1.0),  # probing: back after the minimum interval
    ],
)
def test_revisit_interval(
    rate_per_day: float, due_prob: float, probe: bool, want_days: float
) -> None:
    model = ChangeRateModel(due_change_prob=due_prob)
    got = revisit_interval_s(rate_per_day / DAY_S, model, probe)
    assert got == pytest.approx(want_days * DAY_S)


def test_overdue_after_the_maximum_interval() -> None:
    model = ChangeRateModel()
    assert overdue(90 * DAY_S, model) and not overdue(89 * DAY_S, model)
    assert not overdue(None, model)


def test_revisit_value_grows_with_age_towards_the_never_fetched_value() -> None:
    rate = 0.2 / DAY_S
    ages = [0.0, 0.5, 1, 2, 5, 10, 30, 100]
    values = [revisit_value(rate, a * DAY_S) for a in ages]
    assert values[0] == 0.0
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values[-1] == pytest.approx(revisit_value(rate, None), rel=1e-6)
    assert revisit_value(rate, None) == pytest.approx(5 * DAY_S)  # w/λ: fresh time of a copy
    assert revisit_value(rate, 3 * DAY_S, 4.0) == pytest.approx(4 * revisit_value(rate, 3 * DAY_S))


def test_revisit_value_is_accurate_for_tiny_rate_times_age() -> None:
    rate, age = 1e-9, 1e3  # x = 1e-6: 1 - (1+x)e^{-x} is x²/2 - x³/3 + ...
    x = rate * age
    assert revisit_value(rate, age) == pytest.approx((x * x / 2 - x**3 / 3) / rate, rel=1e-6)


def test_lagrangian_gives_fast_pages_less_attention_and_change_probability_more() -> None:
    lagrangian, plain = ChangeRateModel(), ChangeRateModel(priority="change_prob")
    hourly, daily, weekly = 24 / DAY_S, 1 / DAY_S, 1 / (7 * DAY_S)
    age = 3 * DAY_S

    def rank(model: ChangeRateModel) -> list[float]:
        return [priority(r, age, 1.0, model) for r in (hourly, daily, weekly)]

    p_hourly, p_daily, p_weekly = rank(plain)
    assert p_hourly > p_daily > p_weekly  # the page that is stale again in an hour first
    v_hourly, v_daily, v_weekly = rank(lagrangian)
    assert v_hourly < v_daily and v_hourly < v_weekly  # it would be stale within the hour
    assert change_probability(daily, age) == pytest.approx(1 - math.exp(-3))


def test_never_fetched_urls_share_the_scale() -> None:
    lagrangian, plain = ChangeRateModel(), ChangeRateModel(priority="change_prob")
    lam0 = lagrangian.default_rate_per_s
    assert priority(lam0, None, 2.0, lagrangian) == pytest.approx(2.0 / lam0)
    assert priority(lam0, None, 2.0, plain) == 2.0
    # A known page, however long unvisited, is worth at most a new one of its rate.
    assert priority(lam0, 1e9, 2.0, lagrangian) <= priority(lam0, None, 2.0, lagrangian)


def test_probe_is_valued_as_if_its_age_were_unknown() -> None:
    model, rate = ChangeRateModel(), 0.3 / DAY_S
    assert priority(rate, DAY_S, 1.0, model, probe=True) == pytest.approx(1.0 / rate)
    assert priority(rate, DAY_S, 1.0, model) < priority(rate, DAY_S, 1.0, model, probe=True)


def test_model_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="priority"):
        ChangeRateModel(priority="pagerank")
    with pytest.raises(ValueError, match="min_interval_s"):
        ChangeRateModel(min_interval_s=10 * DAY_S, max_interval_s=DAY_S)
    with pytest.raises(ValueError, match="due_change_prob"):
        ChangeRateModel(due_change_prob=1.0)


# --- Nutch's AdaptiveFetchSchedule ---------------------------------------------


def test_nutch_adaptive_interval_sequence_without_sync_delta() -> None:
    schedule = AdaptiveSchedule(sync_delta=False, max_interval_s=30 * DAY_S)
    interval, now, days = 10 * DAY_S, 0.0, []
    for changed in (False, False, True, None, True, False, False, False):
        now += interval
        interval, nxt, _ = schedule.next_fetch(interval, changed, now, 0.0)
        assert nxt == pytest.approx(now + interval)
        days.append(round(interval / DAY_S, 6))
    # x1.4 unchanged, x0.8 changed, kept when unknown, capped at 30 days.
    assert days == [14.0, 19.6, 15.68, 15.68, 12.544, 17.5616, 24.58624, 30.0]
    floor = AdaptiveSchedule().next_fetch(70.0, True, 1000.0, 0.0)
    assert floor[0] == 60.0  # db.fetch.schedule.adaptive.min_interval


def test_nutch_adaptive_with_sync_delta() -> None:
    schedule = AdaptiveSchedule()  # nutch-default.xml: sync_delta on, rate 0.3
    # Changed at day 10: modified = fetch time, interval 10 x 0.8.
    interval, nxt, modified = schedule.next_fetch(10 * DAY_S, True, 10 * DAY_S, 0.0)
    assert (interval, nxt, modified) == pytest.approx((8 * DAY_S, 18 * DAY_S, 10 * DAY_S))
    # Unchanged at day 18: 8 x 1.4 = 11.2 > delta 8; next = 18 - 0.3 x 8 + 11.2.
    interval, nxt, modified = schedule.next_fetch(interval, False, 18 * DAY_S, modified)
    assert (interval, nxt, modified) == pytest.approx((11.2 * DAY_S, 26.8 * DAY_S, 10 * DAY_S))
    # Unchanged at day 40: delta 30 > 15.68, so the interval becomes 30 days.
    interval, nxt, _ = schedule.next_fetch(interval, False, 40 * DAY_S, modified)
    assert (interval, nxt) == pytest.approx((30 * DAY_S, 61 * DAY_S))


# --- the simulator: the policy's point, on a small web ---------------------------


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("freshness_sim", ROOT / "bench/freshness_sim.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_default_policy_is_fresher_than_uniform_and_nutch_at_equal_budget(sim: ModuleType) -> None:
    pages, cycles = 300, 60
    web = sim.make_web(pages, (cycles + 1) * DAY_S, seed=1, zipf=False)
    result = {
        p: sim.simulate(web, p, pages // 10, cycles)
        for p in ("trawl", "change_prob", "uniform", "nutch")
    }
    late = {p: r["F_late"] for p, r in result.items()}
    assert late["trawl"] > late["uniform"] + 0.01
    assert late["trawl"] > late["nutch"] + 0.01
    assert late["trawl"] > late["change_prob"] + 0.05
    assert result["trawl"]["F"] > max(result["uniform"]["F"], result["nutch"]["F"])
    assert all(r["budget_used"] == 1.0 for p, r in result.items() if p != "nutch")


def test_dates_beat_uniform_within_twenty_cycles(sim: ModuleType) -> None:
    """The freshness benchmark's setting: pages ten days old at the first
    crawl, 20 daily cycles at a 10 % budget; visits alone lose to uniform."""
    pages, cycles, horizon = 1000, 20, 21 * DAY_S
    dated = sim.make_web(pages, horizon, seed=2, zipf=False, history_s=10 * DAY_S)
    undated = sim.make_web(pages, horizon, seed=2, zipf=False, history_s=10 * DAY_S, lastmod=False)
    fresh = {
        (p, w.lastmod): sim.simulate(w, p, pages // 10, cycles)["F"]
        for p in ("trawl", "uniform", "nutch")
        for w in (dated, undated)
    }
    assert fresh["trawl", True] > fresh["uniform", True] + 0.01
    assert fresh["trawl", True] > fresh["nutch", True] + 0.03
    assert fresh["trawl", False] < fresh["trawl", True] - 0.02


def test_default_policy_follows_importance(sim: ModuleType) -> None:
    pages, cycles = 300, 60
    web = sim.make_web(pages, (cycles + 1) * DAY_S, seed=1, zipf=True)
    trawl = sim.simulate(web, "trawl", pages // 10, cycles)["F_w"]
    uniform = sim.simulate(web, "uniform", pages // 10, cycles)["F_w"]
    assert trawl > uniform + 0.05
