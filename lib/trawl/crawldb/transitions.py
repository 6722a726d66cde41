"""What one fetch does to its crawldb row: the per-record half of updatedb.

``apply_fetch`` takes the URL's crawldb row and this segment's fetch row and
returns the new crawldb row: status by ``trawl.crawldb.status.decide`` (the one
transition table), validators, content hash and simhash, counters, the change
record and the next due time from the schedule policy (``schedule.policy``).
It is a no-op when the row already carries this segment (``last_segment``),
which is what makes re-running updatedb for a segment leave crawldb unchanged.

A soft 404 (``trawl.dedup.soft404``: a 2xx whose body is the host's not-found
page) is handled as a 404 is: a request that was answered (``fetches``,
``http_status``), its body never stored as the URL's copy, and GONE after
``gone_after`` of them (with the removal that implies for a URL with content).

Time here is the cycle's logical time ``at`` (``--at``), never the wall
clock: ``last_fetch_at``, ``content_seen_at`` and ``next_fetch_at`` are all
on the crawl's clock, so weeks of recrawling can be simulated in minutes.

Change detection: a visit that compared content is a 200 with a body (its
sha256 against the stored one) or a 304 (unchanged). Each such visit after
the first is one observation for the change-rate estimate
(``trawl.crawldb.changerate.observe``), timed from the last such visit -- a 5xx or a
404 in between does not shorten the interval. The Last-Modified of each
content visit dates the change it saw (``trawl.crawldb.changerate.lastmod_age``), the
first visit included; a server whose dates contradict the content
(``lastmod_contradicts``) is not asked again for that URL.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from trawl.config import ScheduleConfig
from trawl.crawldb.changerate import (
    AdaptiveSchedule,
    ChangeRateModel,
    ChangeStats,
    estimate_rate,
    first_visit,
    lastmod_age,
    lastmod_contradicts,
    observe,
    probing,
    revisit_interval_s,
)
from trawl.crawldb.status import HAS_CONTENT, CrawlStatus, FetchOutcome, decide
from trawl.net.dates import parse_http_date

Row = dict[str, Any]

# crawldb column -> ChangeStats field
STATS_COLUMNS = {
    "change_visits": "visits",
    "change_changed": "changes",
    "change_unchanged_s": "unchanged_s",
    "change_inv_interval": "inv_interval",
    "change_inv_changed": "inv_changed",
    "change_dated": "dated_changes",
    "change_dated_s": "dated_exposure_s",
}


def change_model(schedule: ScheduleConfig) -> ChangeRateModel:
    """The change-rate model the ``[schedule]`` keys describe."""
    return ChangeRateModel(
        default_rate_per_s=1.0 / schedule.prior_change_interval_s,
        prior_visits=schedule.prior_visits,
        memory_s=schedule.change_memory_s,
        min_interval_s=schedule.min_interval_s,
        max_interval_s=schedule.max_interval_s,
        due_change_prob=schedule.due_change_prob,
        priority="change_prob" if schedule.policy == "change_prob" else "lagrangian",
    )


def adaptive_schedule(schedule: ScheduleConfig) -> AdaptiveSchedule:
    """Nutch's AdaptiveFetchSchedule with our interval bounds."""
    return AdaptiveSchedule(
        inc_rate=schedule.adaptive_inc_rate,
        dec_rate=schedule.adaptive_dec_rate,
        min_interval_s=schedule.min_interval_s,
        max_interval_s=schedule.max_interval_s,
        sync_delta=schedule.adaptive_sync_delta,
    )


def stats_of(row: Row) -> ChangeStats:
    return ChangeStats(
        **{field: float(row.get(col) or 0.0) for col, field in STATS_COLUMNS.items()}
    )


# The fetch-row fields ``apply_fetch`` reads: updatedb sends only these to
# Python (a fetch row also carries its outlinks, headers and robots.txt).
FETCH_FIELDS = (
    "outcome", "ip", "http_status", "content_sha256", "stored_capture", "simhash", "etag",
    "last_modified", "redirect_to",
)  # fmt: skip


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
    decision = decide(
        CrawlStatus(old["status"]),
        outcome,
        old.get("retries") or 0,
        schedule.max_retries,
        old.get("gone_count") or 0,
        schedule.gone_after,
    )
    new["status"] = decision.status.value
    new["retries"] = decision.retries
    new["gone_count"] = decision.gone_count
    if decision.removed:
        new["removed_at"] = at
    elif decision.status in HAS_CONTENT:
        new["removed_at"] = None  # back again
    if outcome is FetchOutcome.NOT_REACHED:
        return new  # released: due again at once, nothing else learnt
    new["last_segment"] = segment
    if fetch.get("ip"):
        new["ip"] = fetch["ip"]
    if outcome in (FetchOutcome.DEFERRED, FetchOutcome.BLOCKED, FetchOutcome.ROBOTS_DENIED):
        wait = _interval(decision.reschedule, schedule, decision.status)
        new["next_fetch_at"] = at + timedelta(seconds=wait)
        return new
    new["fetches"] = (old.get("fetches") or 0) + 1
    new["last_fetch_at"] = at
    new["http_status"] = fetch.get("http_status")
    interval = _interval(decision.reschedule, schedule, decision.status)
    if outcome is FetchOutcome.SUCCESS:
        changed = _record_content(new, old, fetch)
        interval = _observe(new, old, changed, at, schedule)
    elif outcome is FetchOutcome.NOTMODIFIED:
        # RFC 9110 15.4.5: the stored copy is still current; fresher validators
        # may come with the 304.
        new["etag"] = fetch.get("etag") or old.get("etag")
        new["last_modified"] = fetch.get("last_modified") or old.get("last_modified")
        interval = _observe(new, old, False, at, schedule)
    elif outcome in (FetchOutcome.REDIR_PERM, FetchOutcome.REDIR_TEMP):
        new["redirect_to"] = fetch.get("redirect_to")
    new["next_fetch_at"] = at + timedelta(seconds=interval)
    return new


def _record_content(new: Row, old: Row, fetch: Row) -> bool | None:
    """Store the new copy's hash, simhash and validators; did the content
    change? (None: there was no copy to compare with.) A 304 does not come
    here: the stored copy, and so its hash and simhash, stay."""
    digest = fetch.get("content_sha256")
    before = old.get("content_sha256")
    changed = None if not before or not digest else digest != before
    if changed:
        new["changes"] = (old.get("changes") or 0) + 1
    new["content_sha256"] = digest
    new["stored_capture"] = fetch.get("stored_capture")  # None: not archived
    new["simhash"] = fetch.get("simhash")  # None: too little text for one
    new["etag"] = fetch.get("etag")
    new["last_modified"] = fetch.get("last_modified")
    new["redirect_to"] = None
    return changed


def _observe(
    new: Row, old: Row, changed: bool | None, at: datetime, schedule: ScheduleConfig
) -> float:
    """Fold a content visit into the change record; returns the seconds until
    the URL is due again under ``schedule.policy``."""
    seen = old.get("content_seen_at")
    stats = stats_of(old)
    lastmod = _epoch_s(new.get("last_modified"))
    age = lastmod_age(at.timestamp(), lastmod)
    if seen is None:
        stats = first_visit(age)
    elif changed is not None:
        previous = _epoch_s(old.get("last_modified"))
        distrust = lastmod_contradicts(at.timestamp(), lastmod, previous, changed)
        elapsed = (at - seen).total_seconds()
        stats = observe(stats, elapsed, changed, schedule.change_memory_s, age, distrust)
    new.update({col: getattr(stats, field) for col, field in STATS_COLUMNS.items()})
    model = change_model(schedule)
    rate = estimate_rate(stats, model)
    new["change_rate"] = rate
    new["content_seen_at"] = at
    new["changed"] = changed
    if changed or old.get("modified_at") is None:
        new["modified_at"] = at
    if schedule.policy == "uniform":
        return schedule.fetch_interval_s
    if schedule.policy == "adaptive":
        previous = old.get("fetch_interval_s") or schedule.fetch_interval_s
        modified = new["modified_at"]
        interval, next_at, _ = adaptive_schedule(schedule).next_fetch(
            previous, changed, at.timestamp(), modified.timestamp()
        )
        new["fetch_interval_s"] = interval
        return max(0.0, next_at - at.timestamp())
    return revisit_interval_s(rate, model, probing(stats))


def _epoch_s(http_date: str | None) -> float | None:
    when = parse_http_date(http_date)
    return None if when is None else when.timestamp()


def _interval(kind: str, schedule: ScheduleConfig, status: CrawlStatus) -> float:
    """Seconds until the URL is due again, by the transition's schedule kind
    (a GONE URL waits the gone interval whatever the outcome)."""
    if kind == "gone" or status is CrawlStatus.GONE:
        return schedule.gone_interval_s
    if kind == "retry":
        return schedule.retry_interval_s
    if kind == "now":
        return 0.0
    if kind == "redirect":  # a permanent redirect: the target took over
        return schedule.max_interval_s
    return schedule.fetch_interval_s
