"""A host's row in hostdb after a segment: robots state, delay and back-off.

The fetch task already decided each gap; here the segment's visits to one
host are folded into the row that carries that state to the next cycle:
the robots.txt copy (cached for at most ``robots.cache_ttl_s``, RFC 9309
2.4), the gap in force after the last visit, response-time average, counts by
outcome, and consecutive failures (``politeness.max_failures`` in a row,
robots.txt fetches included, pause the host for ``failure_pause_s``, as
Heritrix's and Google's crawlers back off from a failing site).

A host whose URLs the fetch task deferred because its robots.txt stayed
unreachable (complete disallow, RFC 9309 2.3.1.4) is held the same way for as
long as those URLs wait (``schedule.retry_interval_s``): a URL of it found
meanwhile, on another host's page, waits with them, rather than sending the
next segment to ask the failing robots.txt again only to defer it.

A robots.txt fetch that failed (5xx, 429, network error) does not replace the
stored copy: the last usable answer stays for the fetcher to fall back on
(RFC 9309 2.4), and ``robots_unreachable_since`` marks when the outage began,
so the 30-day rule can be applied; an answer ends the outage.

The segment's soft-404 probe (``trawl.dedup.soft404``), if it was answered, replaces
the host's remembered one (``soft404_*``: status, sha256 and echo-free simhash
of a 2xx, target of a redirect, ``trawl.dedup.soft404.from_probe``); a probe that
failed or was not sent teaches nothing, so the last answer stays and the next
segment asks again.
The segment's links to sibling hosts (``trawl.crawldb.budgets.farm_like``), counted
when ``FARM_MIN_PAGES`` or more of the host's pages had links, replace the
earlier counts: the last telling segment judges whether a named host links
out like a farm.
Probe rows, like robots.txt rows, count for the politeness state (timing,
failures) but are not page fetches.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from trawl.crawldb.budgets import FARM_MIN_PAGES
from trawl.crawldb.status import FetchOutcome
from trawl.dedup.soft404 import from_probe, hostdb_fields
from trawl.net.robots import DEFERRED_UNREACHABLE, UNREACHABLE_REASONS

Row = dict[str, Any]
SIBLING_FIELDS = ("sibling_pages", "sibling_hosts", "sibling_links")

FAILURES_BEFORE_PAUSE = 10  # politeness.max_failures
PAUSE = timedelta(days=1)  # politeness.failure_pause_s
ROBOTS_HOLD = timedelta(days=1)  # schedule.retry_interval_s
_OUTAGE_PREFIXES = ("stale_copy_", "unreachable_long_")  # fetchrules.rules_when_unreachable
_FAILED = {FetchOutcome.RETRY.value}
_NO_REQUEST = {
    FetchOutcome.ROBOTS_DENIED.value,
    FetchOutcome.NOT_REACHED.value,
    FetchOutcome.DEFERRED.value,
    FetchOutcome.BLOCKED.value,
}


def merge_host(
    old: Row | None,
    host: str,
    visits: Sequence[Row],
    robots: Row | None,
    at: datetime,
    segment: str,
    base: Row,
    max_failures: int = FAILURES_BEFORE_PAUSE,
    pause: timedelta = PAUSE,
    probe: Row | None = None,
    robots_hold: timedelta = ROBOTS_HOLD,
    siblings: Row | None = None,
) -> Row:
    """New hostdb row from the old one (or None), this segment's visits (dicts
    with kind, fetched_at, outcome, delay_s, elapsed_s, ip, robots_decision
    and error, in time order; robots.txt fetches are kind "robots", soft-404
    probes kind "probe"), its
    latest robots.txt fetch row and its soft-404 probe row (or None). ``base``
    gives host_bucket and domain for a host seen the first time.
    ``siblings``: the segment's link counts of ``trawl.crawldb.budgets.farm_like``
    (sibling_pages, sibling_hosts, sibling_links); they replace the host's
    earlier ones when ``FARM_MIN_PAGES`` or more of its pages had links."""
    if old is not None and old.get("last_segment") == segment:
        return old  # already applied: idempotent re-run
    new: Row = dict(old) if old else {"host": host, **base, "fetches": 0, "status_counts": {}}
    new["last_segment"] = segment
    if siblings is not None and (siblings.get("sibling_pages") or 0) >= FARM_MIN_PAGES:
        new.update({k: siblings.get(k) or 0 for k in SIBLING_FIELDS}, sibling_segment=segment)
    if robots is not None:
        _robots(new, robots)
    answer = from_probe(probe) if probe is not None else None
    if answer is not None:
        new.update(hostdb_fields(answer))
    requested = [v for v in visits if v.get("outcome") not in _NO_REQUEST]
    pages = [v for v in visits if v.get("kind", "page") == "page"]
    counts = dict(new.get("status_counts") or {})
    for visit in pages:
        counts[visit["outcome"]] = counts.get(visit["outcome"], 0) + 1
    new["status_counts"] = counts
    new["fetches"] = (new.get("fetches") or 0) + sum(v in requested for v in pages)
    _timing(new, requested)
    _failures(new, requested, at, max_failures, pause)
    if any(_deferred_for_robots(v) for v in visits):
        _hold(new, at + robots_hold)
    ips = [v["ip"] for v in visits if v.get("ip")]
    if ips:
        new["ip"] = ips[-1]
    return new


def is_outage(decision: str | None) -> bool:
    """Did this robots.txt fetch fail (whatever rules the fetcher fell back on)?"""
    return bool(decision) and (
        decision in UNREACHABLE_REASONS or str(decision).startswith(_OUTAGE_PREFIXES)
    )


def _robots(new: Row, robots: Row) -> None:
    new["robots_url"] = robots["url"]
    new["robots_http_status"] = robots.get("http_status")
    if is_outage(robots.get("robots_decision")):
        if new.get("robots_unreachable_since") is None:
            new["robots_unreachable_since"] = robots.get("fetched_at")
        if new.get("robots_status") is None:
            new["robots_status"] = robots.get("robots_decision")
        return
    new.update(
        robots_status=robots.get("robots_decision"),
        robots_body=robots.get("robots_body"),
        robots_fetched_at=robots.get("fetched_at"),
        robots_unreachable_since=None,
        crawl_delay_s=robots.get("crawl_delay_s"),
    )


def _deferred_for_robots(visit: Row) -> bool:
    """A URL the task deferred because the host's robots.txt stayed
    unreachable (the reason is in ``robots_decision`` when the task stopped
    the host, in ``error`` for one queued after that)."""
    return visit.get("outcome") == FetchOutcome.DEFERRED.value and DEFERRED_UNREACHABLE in (
        visit.get("robots_decision"),
        visit.get("error"),
    )


def _hold(new: Row, until: datetime) -> None:
    """No URL of the host is generated before ``until`` (a longer hold stays)."""
    current = new.get("backoff_until")
    if current is None or current < until:
        new["backoff_until"] = until


def _timing(new: Row, requested: Sequence[Row]) -> None:
    times = [v["elapsed_s"] for v in requested if v.get("elapsed_s") is not None]
    if times:
        avg = sum(times) / len(times)
        old = new.get("resp_time_avg_s")
        new["resp_time_avg_s"] = avg if old is None else 0.5 * old + 0.5 * avg
    delays = [v for v in requested if v.get("delay_s") is not None]
    if delays:
        last = delays[-1]
        new["delay_s"] = last["delay_s"]
        if last.get("fetched_at") is not None:
            new["next_allowed_at"] = last["fetched_at"] + timedelta(seconds=last["delay_s"])


def _failures(
    new: Row, requested: Sequence[Row], at: datetime, max_failures: int, pause: timedelta
) -> None:
    failures = new.get("consecutive_failures") or 0
    for visit in requested:
        failures = failures + 1 if visit["outcome"] in _FAILED else 0
    new["consecutive_failures"] = failures
    if failures >= max_failures:
        new["backoff_until"] = at + pause
    elif requested and failures == 0:
        new["backoff_until"] = None
