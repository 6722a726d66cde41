"""What one fetch does to its crawldb row: the per-record half of updatedb.

``apply_fetch`` takes the URL's crawldb row and this segment's fetch row and
returns the new crawldb row: status by ``trawl.status.next_status`` (the one
transition table), validators and content hash, counters, the change flag,
and the next due time from the schedule. It is a no-op when the row already
carries this segment (``last_segment``), which is what makes re-running
updatedb for a segment leave crawldb unchanged.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from trawl.config import ScheduleConfig
from trawl.status import TRANSITIONS, CrawlStatus, FetchOutcome, next_status

Row = dict[str, Any]


def apply_fetch(old: Row, fetch: Row, at: datetime, segment: str, schedule: ScheduleConfig) -> Row:
    """New crawldb row for ``old`` after ``fetch`` (both dicts of their schemas)."""
    if old.get("last_segment") == segment:
        return old  # already applied: idempotent re-run
    outcome = FetchOutcome(fetch["outcome"])
    if outcome is FetchOutcome.NOT_REACHED and old.get("generated_segment") != segment:
        return old  # released before, and maybe generated again since: leave it
    new = dict(old)
    new["generated_segment"] = None
    new["generated_at"] = None
    status, retries = next_status(
        CrawlStatus(old["status"]), outcome, old.get("retries") or 0, schedule.max_retries
    )
    new["status"] = status.value
    new["retries"] = retries
    if outcome is FetchOutcome.NOT_REACHED:
        return new  # released: due again at once, nothing else learnt
    new["last_segment"] = segment
    if fetch.get("ip"):
        new["ip"] = fetch["ip"]
    if outcome in (FetchOutcome.DEFERRED, FetchOutcome.BLOCKED, FetchOutcome.ROBOTS_DENIED):
        new["next_fetch_at"] = at + timedelta(seconds=_interval(outcome, status, schedule))
        return new
    new["fetches"] = (old.get("fetches") or 0) + 1
    new["last_fetch_at"] = fetch.get("fetched_at") or at
    new["http_status"] = fetch.get("http_status")
    if outcome is FetchOutcome.SUCCESS:
        _record_content(new, old, fetch)
    if outcome in (FetchOutcome.REDIR_PERM, FetchOutcome.REDIR_TEMP):
        new["redirect_to"] = fetch.get("redirect_to")
    new["next_fetch_at"] = at + timedelta(seconds=_interval(outcome, status, schedule))
    return new


def _record_content(new: Row, old: Row, fetch: Row) -> None:
    digest = fetch.get("content_sha256")
    if old.get("content_sha256") and digest and digest != old["content_sha256"]:
        new["changes"] = (old.get("changes") or 0) + 1
    new["content_sha256"] = digest
    new["etag"] = fetch.get("etag")
    new["last_modified"] = fetch.get("last_modified")
    new["redirect_to"] = None


def _interval(outcome: FetchOutcome, status: CrawlStatus, schedule: ScheduleConfig) -> float:
    """Seconds until the URL is due again, by the transition's schedule kind."""
    if status is CrawlStatus.GONE:
        return schedule.gone_interval_s
    kind = TRANSITIONS[outcome].reschedule
    if kind == "retry":
        return schedule.retry_interval_s
    if kind == "now":
        return 0.0
    return schedule.fetch_interval_s
