"""How the test web's pages change over logical time: rates, change instants, hints.

The test web is served *as of* a logical time (``TestWeb.set_time``), the
clock the crawler's cycles run on (``--at``), so weeks of recrawling are
simulated in minutes. Every 200 page has a change rate (changes per day)
drawn from ``ChangeRates``: a share of pages never changes, the rest are
log-uniform between two bounds, since real pages' change intervals span
orders of magnitude (Cho & Garcia-Molina, "Estimating frequency of change",
2003; Fetterly et al., "A large-scale study of the evolution of web pages",
2003).

A page's changes are a Poisson process of its rate starting at ``EPOCH``:
exponential gaps drawn from a ``random.Random`` seeded with a string naming
(seed, host, path). A str seed is hashed with SHA-512, so the stream is the
same in every process whatever PYTHONHASHSEED, and independent of every other
page and of the order of questions. Gaps are rounded to whole seconds, at
least one: HTTP-dates (RFC 9110 5.6.7) and sitemap lastmods carry whole
seconds, and with one change per second at most, a Last-Modified always
moves when the content does, so If-Modified-Since is never fooled.

The instants are drawn lazily, as far as the latest time asked about, and
kept per page (``ChangeHistory``), so "which version at t" is a bisect. Rates
and instants come from streams labelled apart from the generator's main one
(``CHANGES_LABEL``), so they left every existing web's hosts, pages and links
as they were.
"""

from __future__ import annotations

import math
import random
import threading
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

#: Logical time zero: every page exists, at version 0, from this instant on.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CHANGES_LABEL = "trawl.testweb.changes.1"
DAY_S = 86_400
#: sitemaps.org changefreq hints by the longest mean interval (days) they cover.
CHANGEFREQ_BY_INTERVAL = (
    (2 / 24, "hourly"),
    (2.0, "daily"),
    (14.0, "weekly"),
    (60.0, "monthly"),
)


@dataclass(frozen=True)
class ChangeRates:
    """The distribution of a page's change rate, in changes per day.

    ``static`` is the share of pages that never change; the others draw a
    rate log-uniformly between ``slowest`` and ``fastest`` (default: once in
    180 days to once an hour).
    """

    static: float = 0.10
    slowest: float = 1 / 180
    fastest: float = 24.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.static <= 1.0 and 0.0 < self.slowest <= self.fastest):
            raise ValueError("need 0 <= static <= 1 and 0 < slowest <= fastest")


#: The default distribution (a module-level instance, so it can be a default argument).
DEFAULT_RATES = ChangeRates()


def draw_rate(seed: int, host: str, path: str, rates: ChangeRates) -> float:
    """The change rate (per day) of ``path`` on ``host``; 0.0 for a page that never changes.

    Both values are drawn whatever the outcome, so changing ``static`` only
    turns pages static or not and leaves the others' rates as they were.
    """
    rng = random.Random(f"{CHANGES_LABEL}/rate/{seed}/{host}{path}")
    roll, position = rng.random(), rng.random()
    if roll < rates.static:
        return 0.0
    low, high = math.log(rates.slowest), math.log(rates.fastest)
    return math.exp(low + position * (high - low))


def changefreq(rate: float) -> str:
    """The sitemaps.org ``changefreq`` hint for a rate (per day): its mean interval's bucket."""
    if rate <= 0.0:
        return "never"
    interval = 1.0 / rate
    return next((name for limit, name in CHANGEFREQ_BY_INTERVAL if interval <= limit), "yearly")


def epoch_seconds(at: datetime) -> float:
    """Seconds from ``EPOCH`` to the aware datetime ``at`` (negative before it)."""
    if at.tzinfo is None:
        raise ValueError("logical times must be timezone-aware (UTC)")
    return (at - EPOCH).total_seconds()


def from_epoch_seconds(seconds: int) -> datetime:
    """The aware UTC datetime ``seconds`` after ``EPOCH``."""
    return EPOCH + timedelta(seconds=seconds)


@dataclass
class _Process:
    """One page's change instants drawn so far (whole seconds after EPOCH, increasing)."""

    rng: random.Random
    per_second: float
    instants: list[int] = field(default_factory=list)

    def extend_past(self, t_s: float) -> None:
        """Draw until one instant lies after ``t_s``, so the count up to it is final."""
        while not self.instants or self.instants[-1] <= t_s:
            last = self.instants[-1] if self.instants else 0
            self.instants.append(last + max(1, round(self.rng.expovariate(self.per_second))))


class ChangeHistory:
    """Every page's change instants, drawn lazily and shared by the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pages: dict[tuple[int, str, str], _Process] = {}

    def changes_until(self, seed: int, host: str, path: str, rate: float, t_s: float) -> list[int]:
        """Instants (seconds after EPOCH) of the changes in (EPOCH, EPOCH + t_s], in order."""
        if rate <= 0.0 or t_s < 1:
            return []
        with self._lock:
            instants = self._drawn_past(seed, host, path, rate, t_s)
            return instants[: bisect_right(instants, t_s)]

    def version(self, seed: int, host: str, path: str, rate: float, t_s: float) -> tuple[int, int]:
        """(number of changes up to ``t_s``, instant of the last of them, or 0 for none)."""
        if rate <= 0.0 or t_s < 1:
            return 0, 0
        with self._lock:
            instants = self._drawn_past(seed, host, path, rate, t_s)
            count = bisect_right(instants, t_s)
            return count, instants[count - 1] if count else 0

    def _drawn_past(self, seed: int, host: str, path: str, rate: float, t_s: float) -> list[int]:
        """The page's instants, drawn past ``t_s`` (call with the lock held)."""
        key = (seed, host, path)
        process = self._pages.get(key)
        if process is None:
            rng = random.Random(f"{CHANGES_LABEL}/times/{seed}/{host}{path}")
            process = self._pages[key] = _Process(rng, rate / DAY_S)
        process.extend_past(t_s)
        return process.instants
