"""How often a page changes, and when to revisit it: the recrawl scheduler's maths.

Model. A page changes as a Poisson process with an unknown rate ``λ`` (per
second). At each visit the crawler only learns whether the content differs
from the previous visit (changed yes/no): several changes between two visits
look like one, so ``changes / time`` under-estimates fast pages (a page that
changes hourly, visited daily, looks like "once a day").

Estimator (Cho & Garcia-Molina, "Estimating frequency of change", ACM TOIT
2003). For ``n`` visits at a regular interval ``I`` with ``X`` detected
changes their bias-reduced estimator is ``λ = -ln((n - X + 0.5)/(n + 0.5)) / I``
(``bias_reduced_rate``); for irregular intervals the maximum-likelihood
estimator solves ``Σ_changed t_i/(e^{λ t_i} - 1) = Σ_unchanged t_i``
(``mle_rate``, numerically). That needs every interval; a crawldb row keeps
five sums instead (``ChangeStats``, updated visit by visit by ``observe``):

    n  visits (revisit intervals observed)   X   of them with a change
    U  total length of the unchanged ones    R   Σ 1/t over all intervals
                                             Rc  Σ 1/t over the changed ones

Taking every changed interval at their harmonic mean ``tc = X/Rc`` the MLE
equation becomes ``X tc/(e^{λ tc} - 1) = U``, so ``λ = ln(1 + X tc/U)/tc``;
with Cho's half visit (``tr/2``, ``tr = n/R``) added to ``U`` this is
``estimate_rate``, and for regular intervals it *is* ``bias_reduced_rate``.
Why the harmonic mean: ``t/(e^{λt} - 1)`` is about ``1/λ - t/2`` for short
intervals (any mean does) and ``t e^{-λt}`` for long ones, where the shortest
changed intervals carry the information; an arithmetic mean lets one long
changed interval (say a 90-day overdue visit) hide that the page also changed
within every day it was watched, and fast pages then read slow (in the
simulator about 30 % of the budget went to pages changing more than three
times a day). Mean bias measured over 40 visits with the default prior:
regular intervals from +10 % at λI = 0.05 (the prior's pull) to -6 % at
λI = 2; intervals spread log-normally (σ = 1) up to +19 % for λI of 0.3 to 1,
where the exact MLE reads +5 %. No estimator can tell rates above about
``ln(2n + 1)/I`` apart (every visit sees a change).

Prior. With few visits the estimate is noise (one visit, changed: ``ln 3/I``),
so ``n0`` pseudo-visits at the page's interval ``tr`` are added, each changed
with the probability ``p0 = 1 - e^{-λ0 tr}`` that a page of the default rate
``λ0`` would show: a Beta-like prior on the per-visit change probability,
worth ``n0`` visits whatever the page's interval (a Gamma prior in exposure
time would swamp a daily-visited page). With no visits the estimate is
exactly ``λ0``. The prior is applied when estimating, not stored, so changing
it needs no crawldb rewrite. Estimates are bounded to
``[1/(10 max_interval), 10/min_interval]`` (``rate_bounds``).

Forgetting. ``observe`` fades the old sums by ``e^{-t/memory}`` over each
interval ``t``, so evidence weighs ``e^{-age/memory}`` and a page whose
behaviour changes is re-learnt within a few ``memory``; with ``memory = ∞``
the record is the whole history. (Per-visit decay would never fade the
record of a page that is rarely visited, which is the one that needs it.)

Dates. A visit that only says "changed since the last one" cannot tell a
page that changes hourly from one that changes every other day, when visits
are days apart. A server's Last-Modified can: the version served at a visit
is ``a`` old (``lastmod_age``), so there was a change ``a`` ago and none
since, Poisson likelihood ``λ e^{-λ a}``, while an unchanged visit watched its
whole interval ``t`` (``e^{-λ t}``). The changes before the dated one need not
be counted: the process is memoryless, so dropping the part of the interval
before the last change leaves an exact likelihood. The maximum-likelihood rate
is then ``Xd/Ed``, changes over watched time, and with a Gamma prior of ``a0``
changes at the default rate, ``(Xd + a0)/(Ed + a0/λ0)``; ``a0 = prior_visits
x DATED_PRIOR_SHARE`` is small because one dated change is a measurement, not
a coin toss. The first visit counts half a change (``FIRST_DATED_CHANGE``):
its version began with a change or with the page. This is Cho &
Garcia-Molina's "last date of change known" case (2003, section 6). Dates are
used only while they agree with the content (``lastmod_contradicts``): a
Last-Modified that stays put while the content changes, moves while it does
not (a date stamped on every response), or lies in the future marks the URL
``DISTRUSTED`` and it falls back to the visit-only estimator for good. In
bench/freshness_sim.py (2,000 pages existing 10 days before the first crawl,
20 daily cycles at a 10 % budget) the dates take the Lagrangian policy's
freshness from 0.461, below uniform's 0.477, to 0.500 (``--no-lastmod``
reproduces the first).

Probing. While every visit so far saw a change (``probing``: ``U = 0``) the
rate is only known from below. Such a page is a candidate again after
``min_interval_s`` and valued as if its age were unknown (``w/λ``), so it is
watched at short intervals until it is seen unchanged or its estimate,
rising with each short changed interval, prices it out.

Revisit policy (``revisit_value``). Cho & Garcia-Molina ("Effective page
refresh policies for web crawlers", TODS 2003) show that under a fixed budget
the best revisit frequency is not proportional to ``λ``: pages changing much
faster than the budget allows should get *less* attention. Their Lagrangian
optimum as an index per page (the threshold rule of Azar et al., "Tractable
near-optimal policies for crawling", PNAS 2018): with ``μ`` the price of a
fetch, revisiting every ``τ`` earns ``(w (1 - e^{-λτ})/λ - μ)/τ`` per unit
of time, which is largest where

    V_i(τ) = (w_i/λ_i) (1 - (1 + λ_i τ) e^{-λ_i τ}) = μ,

``τ`` the time since the last visit and ``w_i`` the importance. So refresh
the pages whose ``V`` is highest: ranking by ``V`` and taking the top
``generate.top_n`` finds ``μ`` implicitly. ``V`` grows with
``τ`` to ``w/λ`` (the expected fresh time of a new copy), which is also the
value of a never-fetched URL (``τ = ∞``), so new and known URLs share one
scale. The issue's "importance x probability of change" ``w (1 - e^{-λτ})``
(``change_probability``) is kept as ``priority = "change_prob"``; it ranks
pages that change every hour first, which wastes the budget; so does
``P x 1/λ`` (it tends to ``τ`` for pages that never change).
bench/freshness_sim.py has the numbers.

Due time (``revisit_interval_s``): a page is a candidate again once it has
changed with probability ``due_change_prob``, ``τ = -ln(1 - p)/λ``, bounded
by ``[min_interval_s, max_interval_s]``; past ``max_interval_s`` it is
``overdue`` and ranked before everything else (a page is never left longer).

Spark SQL. ``estimate_rate``, ``change_probability``, ``revisit_value``,
``revisit_interval_s`` and ``overdue`` are closed forms of a few columns
(``+ - * /``, ``ln``, ``exp``, ``expm1``, ``log1p``, ``least``/``greatest``,
``CASE``), as is ``probing`` (``visits > 0 AND unchanged_s = 0``), so
generate can compute them as column expressions; ``observe`` is ``exp`` and
a ``CASE`` on the changed flag. ``mle_rate`` (a root search over a whole
history) is a reference for tests only.

Nutch's ``AdaptiveFetchSchedule`` (``AdaptiveSchedule``) is here for
comparison and compatibility: it multiplies the interval by 1.4 when a page
is unchanged and by 0.8 when it changed (``nutch-default.xml`` values).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

DAY_S = 86_400.0
DISTRUSTED = -1.0  # ChangeStats.dated_exposure_s of a URL whose Last-Modified lied
#: A Last-Modified up to this far after the visit's logical time reads as "just
#: now" (the fetch runs a while after the cycle's time); later, the dates are
#: on another clock and are not used.
LASTMOD_SKEW_S = DAY_S
#: What the first visit's Last-Modified counts as: the version then served
#: began either with a change or with the page's creation, and which is not
#: known, so half a change.
FIRST_DATED_CHANGE = 0.5
DATED_PRIOR_SHARE = 0.1  # the dated estimate's prior: prior_visits x this many changes
RATE_RANGE = 10.0  # estimates are kept within a decade beyond what the intervals can observe
PRIORITIES = ("lagrangian", "change_prob")


@dataclass(frozen=True)
class ChangeStats:
    """The per-URL change record kept in crawldb (sums faded with age)."""

    visits: float = 0.0  # n: revisit intervals observed
    changes: float = 0.0  # X: intervals in which the content changed
    unchanged_s: float = 0.0  # U: total length of the unchanged intervals
    inv_interval: float = 0.0  # R: sum of 1/t over all intervals (per second)
    inv_changed: float = 0.0  # Rc: sum of 1/t over the changed intervals
    # Dated evidence, from Last-Modified (``observe_dated``): changes seen with
    # their date, and the time watched without a change; -1 once distrusted.
    dated_changes: float = 0.0  # Xd
    dated_exposure_s: float = 0.0  # Ed; DISTRUSTED: the server's dates are not used

    @property
    def dated(self) -> bool:
        """Dated evidence is there and trusted: ``estimate_rate`` uses it."""
        return self.dated_exposure_s > 0 or self.dated_changes > 0


@dataclass(frozen=True)
class ChangeRateModel:
    """Parameters of the estimator and the revisit policy (proposed [schedule] keys)."""

    default_rate_per_s: float = 1.0 / (7 * DAY_S)  # λ0: the prior's rate
    prior_visits: float = 1.0  # n0: the prior's weight, in visits
    memory_s: float = 180 * DAY_S  # evidence weighs e^{-age/memory}
    min_interval_s: float = DAY_S
    max_interval_s: float = 90 * DAY_S
    due_change_prob: float = 0.0  # 0: a candidate again after min_interval_s
    priority: str = "lagrangian"  # or "change_prob"

    def __post_init__(self) -> None:
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {self.priority!r}")
        if self.memory_s <= 0 or not 0 <= self.due_change_prob < 1:
            raise ValueError("need memory_s > 0 and 0 <= due_change_prob < 1")
        if not 0 < self.min_interval_s <= self.max_interval_s or self.default_rate_per_s <= 0:
            raise ValueError("need 0 < min_interval_s <= max_interval_s and a positive rate")
        if self.prior_visits < 0:
            raise ValueError("prior_visits must not be negative")

    @property
    def rate_bounds(self) -> tuple[float, float]:
        """(lowest, highest) rate an estimate may take, per second."""
        return 1.0 / (RATE_RANGE * self.max_interval_s), RATE_RANGE / self.min_interval_s


def observe(
    stats: ChangeStats,
    interval_s: float,
    changed: bool,
    memory_s: float = math.inf,
    age_s: float | None = None,
    distrust: bool = False,
) -> ChangeStats:
    """The record after one more visit, ``interval_s`` after the previous one.

    Only visits that compared content count (a 200 with a digest, or a 304):
    ``interval_s`` runs from the last such visit, not from a failed attempt.
    Intervals under a second count as a second. The old sums fade by
    ``e^{-interval/memory_s}``: evidence weighs ``e^{-age/memory_s}``.

    ``age_s``, the served version's age by its Last-Modified
    (``lastmod_age``), adds dated evidence: a change ``age_s`` ago and no
    change since (Poisson likelihood ``λ e^{-λ age}``; the changes before it
    in the interval are not counted, which leaves the estimate unbiased), or
    ``interval_s`` watched without a change. ``distrust``
    (``lastmod_contradicts``) drops the dated evidence for good.
    """
    t = max(interval_s, 1.0)
    decay = math.exp(-t / memory_s)
    if distrust or stats.dated_exposure_s == DISTRUSTED:
        dated_changes, dated_exposure = 0.0, DISTRUSTED
    elif age_s is None:
        dated_changes, dated_exposure = decay * stats.dated_changes, decay * stats.dated_exposure_s
    else:
        dated_changes = decay * stats.dated_changes + (1.0 if changed else 0.0)
        dated_exposure = decay * stats.dated_exposure_s + (min(age_s, t) if changed else t)
    return ChangeStats(
        dated_changes=dated_changes,
        dated_exposure_s=dated_exposure,
        visits=decay * stats.visits + 1.0,
        changes=decay * stats.changes + (1.0 if changed else 0.0),
        unchanged_s=decay * stats.unchanged_s + (0.0 if changed else t),
        inv_interval=decay * stats.inv_interval + 1.0 / t,
        inv_changed=decay * stats.inv_changed + (1.0 / t if changed else 0.0),
    )


def lastmod_contradicts(
    at_s: float, lastmod_s: float | None, previous_lastmod_s: float | None, changed: bool | None
) -> bool:
    """The server's Last-Modified cannot be trusted for this URL: it did not
    move although the content changed, it moved although the content did not
    (a date generated per response), or it lies in the future of the visit."""
    if lastmod_s is None:
        return False
    if lastmod_s > at_s + LASTMOD_SKEW_S:
        return True
    if previous_lastmod_s is None or changed is None:
        return False
    return lastmod_s <= previous_lastmod_s if changed else lastmod_s != previous_lastmod_s


def lastmod_age(at_s: float, lastmod_s: float | None) -> float | None:
    """Seconds the served version had existed at the visit (None: no date)."""
    return None if lastmod_s is None else max(0.0, at_s - lastmod_s)


def first_visit(age_s: float | None) -> ChangeStats:
    """The record after the first content visit: dated evidence only, if its
    Last-Modified gave the version's age (half a change, ``FIRST_DATED_CHANGE``)."""
    if age_s is None:
        return ChangeStats()
    return ChangeStats(dated_changes=FIRST_DATED_CHANGE, dated_exposure_s=age_s)


def estimate_rate(stats: ChangeStats, model: ChangeRateModel) -> float:
    """Change rate (per second) from the record and the prior, within bounds.

    With dated evidence (``ChangeStats.dated``): ``λ = (Xd + a0)/(Ed + a0/λ0)``,
    the maximum-likelihood rate of the changes and watched time plus a Gamma
    prior of ``a0 = prior_visits/2`` changes at the default rate. Otherwise
    ``λ = ln(1 + X' tc / U') / tc`` with ``tc = X'/Rc'`` (module docstring);
    primed sums include the prior's pseudo-visits at the harmonic mean
    interval ``tr = n/R`` and Cho's half-visit ``tr/2`` in ``U'``.
    """
    n, lam0, n0 = stats.visits, model.default_rate_per_s, model.prior_visits
    lo, hi = model.rate_bounds
    if stats.dated:
        a0 = DATED_PRIOR_SHARE * n0
        rate = (stats.dated_changes + a0) / (stats.dated_exposure_s + a0 / lam0)
        return min(hi, max(lo, rate))
    t_rep = n / stats.inv_interval if n > 0 else 1.0 / lam0
    p0 = -math.expm1(-lam0 * t_rep)  # the prior's change probability, 1 - e^{-λ0 tr}
    changes = stats.changes + n0 * p0
    unchanged = stats.unchanged_s + n0 * (1.0 - p0) * t_rep + (0.5 * t_rep if n > 0 else 0.0)
    if changes <= 0:  # no prior and no change seen: the floor
        return lo
    t_changed = changes / (stats.inv_changed + n0 * p0 / t_rep)
    return min(hi, max(lo, math.log1p(changes * t_changed / unchanged) / t_changed))


def probing(stats: ChangeStats) -> bool:
    """Every visit so far saw a change and no date says when: the rate is only
    known from below."""
    return stats.visits > 0 and stats.unchanged_s == 0 and not stats.dated


def bias_reduced_rate(visits: int, changes: int, interval_s: float) -> float:
    """Cho & Garcia-Molina's estimator for ``visits`` at a regular interval."""
    return -math.log((visits - changes + 0.5) / (visits + 0.5)) / interval_s


def mle_rate(history: Iterable[tuple[float, bool]]) -> float:
    """Maximum-likelihood rate for irregular intervals (reference, not stored).

    Solves ``Σ_changed t/(e^{λt} - 1) = Σ_unchanged t`` by bisection on
    ``ln λ``; 0 when nothing changed, ``inf`` when every interval changed.
    """
    changed = [t for t, c in history if c]
    unchanged = sum(t for t, c in history if not c) if changed else 0.0
    if not changed:
        return 0.0
    if unchanged <= 0:
        return math.inf

    def excess(rate: float) -> float:  # decreasing in rate
        return sum(t / math.expm1(min(rate * t, 700.0)) for t in changed) - unchanged

    lo, hi = math.log(1e-6 / max(changed)), math.log(1e3 / min(changed))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(math.exp(mid)) > 0 else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def change_probability(rate: float, elapsed_s: float | None) -> float:
    """P(the page changed since the last visit) = 1 - e^{-λτ}; 1 if never fetched."""
    if elapsed_s is None:
        return 1.0
    return -math.expm1(-rate * max(elapsed_s, 0.0))


def revisit_value(rate: float, elapsed_s: float | None, importance: float = 1.0) -> float:
    """The Lagrangian index ``(w/λ)(1 - (1 + λτ) e^{-λτ})``, in importance x seconds.

    What refreshing now is worth against the fetch's price: it grows with
    ``τ`` towards ``w/λ``, the value of a never-fetched URL (``τ`` None).
    """
    if elapsed_s is None:
        return importance / rate
    x = rate * max(elapsed_s, 0.0)
    # 1 - (1+x)e^{-x} = -expm1(-x) - x e^{-x}; exact to ~1e-16/x relative.
    return importance / rate * max(0.0, -math.expm1(-x) - x * math.exp(-x))


def priority(
    rate: float,
    elapsed_s: float | None,
    importance: float,
    model: ChangeRateModel,
    probe: bool = False,
) -> float:
    """Rank of a candidate in generate, by ``model.priority`` (higher first).

    ``probe`` (``probing(stats)``): under "lagrangian" the page is valued as
    if its age were unknown, ``w/λ``, so it is revisited after
    ``min_interval_s`` until it is seen unchanged or its estimate (rising with
    every short changed interval) prices it out.
    """
    if model.priority == "change_prob":
        return importance * change_probability(rate, elapsed_s)
    return revisit_value(rate, None if probe else elapsed_s, importance)


def revisit_interval_s(rate: float, model: ChangeRateModel, probe: bool = False) -> float:
    """Seconds after a visit at which the URL is a candidate again."""
    if probe:
        return model.min_interval_s
    wait = -math.log1p(-model.due_change_prob) / rate
    return min(model.max_interval_s, max(model.min_interval_s, wait))


def overdue(elapsed_s: float | None, model: ChangeRateModel) -> bool:
    """Left ``max_interval_s`` or longer: ranked before every other candidate."""
    return elapsed_s is not None and elapsed_s >= model.max_interval_s


@dataclass(frozen=True)
class AdaptiveSchedule:
    """Nutch's ``AdaptiveFetchSchedule`` with its ``nutch-default.xml`` values.

    ``db.fetch.schedule.adaptive.{inc_rate, dec_rate, min_interval,
    max_interval, sync_delta, sync_delta_rate}``. With ``sync_delta`` the
    interval is at least the time since the last modification and the next
    fetch is pulled back by ``sync_delta_rate`` of it. Nutch's
    ``db.fetch.interval.max`` (90 days) also forces a refetch of anything
    scheduled further out; pass ``max_interval_s = 90 days`` to model that.
    """

    inc_rate: float = 0.4
    dec_rate: float = 0.2
    min_interval_s: float = 60.0
    max_interval_s: float = 365 * DAY_S
    sync_delta: bool = True
    sync_delta_rate: float = 0.3

    def next_fetch(
        self, interval_s: float, changed: bool | None, fetched_at_s: float, modified_at_s: float
    ) -> tuple[float, float, float]:
        """(new interval, next fetch time, modified time) after a fetch.

        ``changed`` None is Nutch's STATUS_UNKNOWN (interval kept);
        ``modified_at_s`` <= 0 means unknown, taken as the fetch time.
        """
        if modified_at_s <= 0 or changed:
            modified_at_s = fetched_at_s
        if changed is True:
            interval_s *= 1.0 - self.dec_rate
        elif changed is False:
            interval_s *= 1.0 + self.inc_rate
        ref_s = fetched_at_s
        if self.sync_delta:
            delta = fetched_at_s - modified_at_s
            interval_s = max(interval_s, delta)
            ref_s = fetched_at_s - delta * self.sync_delta_rate
        interval_s = min(self.max_interval_s, max(self.min_interval_s, interval_s))
        return interval_s, ref_s + interval_s, modified_at_s
