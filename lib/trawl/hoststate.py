"""A host's row in hostdb after a segment: robots state, delay and back-off.

The fetch task already decided each gap; here the segment's visits to one
host are folded into the row that carries that state to the next cycle:
the robots.txt copy (cached for at most ``robots.cache_ttl_s``, RFC 9309
2.4), the gap in force after the last visit, response-time average, counts by
outcome, and consecutive failures (ten in a row pause the host for a day,
as Heritrix's and Google's crawlers back off from a failing site).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from trawl.status import FetchOutcome

Row = dict[str, Any]

FAILURES_BEFORE_PAUSE = 10
PAUSE = timedelta(days=1)
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
) -> Row:
    """New hostdb row from the old one (or None), this segment's page visits
    (dicts with fetched_at, outcome, delay_s, elapsed_s, ip, in time order) and
    its latest robots.txt fetch row (or None). ``base`` gives host_bucket and
    domain for a host seen the first time."""
    if old is not None and old.get("last_segment") == segment:
        return old  # already applied: idempotent re-run
    new: Row = dict(old) if old else {"host": host, **base, "fetches": 0, "status_counts": {}}
    new["last_segment"] = segment
    if robots is not None:
        new.update(
            robots_url=robots["url"],
            robots_status=robots.get("robots_decision"),
            robots_http_status=robots.get("http_status"),
            robots_body=robots.get("robots_body"),
            robots_fetched_at=robots.get("fetched_at"),
            crawl_delay_s=robots.get("crawl_delay_s"),
        )
    requested = [v for v in visits if v.get("outcome") not in _NO_REQUEST]
    counts = dict(new.get("status_counts") or {})
    for visit in visits:
        counts[visit["outcome"]] = counts.get(visit["outcome"], 0) + 1
    new["status_counts"] = counts
    new["fetches"] = (new.get("fetches") or 0) + len(requested)
    _timing(new, requested)
    _failures(new, requested, at)
    ips = [v["ip"] for v in visits if v.get("ip")]
    if ips:
        new["ip"] = ips[-1]
    return new


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


def _failures(new: Row, requested: Sequence[Row], at: datetime) -> None:
    failures = new.get("consecutive_failures") or 0
    for visit in requested:
        failures = failures + 1 if visit["outcome"] in _FAILED else 0
    new["consecutive_failures"] = failures
    if failures >= FAILURES_BEFORE_PAUSE:
        new["backoff_until"] = at + PAUSE
    elif requested and failures == 0:
        new["backoff_until"] = None
