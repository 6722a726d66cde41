"""Crawl statuses and the one table of state transitions.

Nutch keeps a URL's life in ``CrawlDatum`` byte codes: ``db_*`` statuses in the
crawldb and ``fetch_*`` outcomes from the fetcher, and its ``CrawlDbReducer``
turns a (db status, fetch outcome) pair into the next db status. trawl keeps
the same two vocabularies, named, and puts every transition in one
table-driven place (``TRANSITIONS``) so updatedb, tests and the docs read the
same rules (Nutch's ``TestCrawlDbStates`` matrix is the model for the tests).

Statuses are stored as their lowercase names so analysts can write
``WHERE status = 'fetched'`` in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CrawlStatus(StrEnum):
    """Status of a URL in the crawldb (Nutch ``STATUS_DB_*``)."""

    UNFETCHED = "unfetched"  # known, never fetched successfully yet
    FETCHED = "fetched"  # fetched, content stored
    NOTMODIFIED = "notmodified"  # last visit answered 304
    GONE = "gone"  # 404/410 or refused (robots, address); not fetched again soon
    REDIR_TEMP = "redir_temp"  # 302/303/307
    REDIR_PERM = "redir_perm"  # 301/308: the target takes over
    DUPLICATE = "duplicate"  # content duplicate of another URL (dedup)


class FetchOutcome(StrEnum):
    """What one fetch attempt produced (Nutch ``STATUS_FETCH_*`` plus reasons)."""

    SUCCESS = "success"  # 2xx with a body
    NOTMODIFIED = "notmodified"  # 304 to a conditional GET
    REDIR_PERM = "redir_perm"  # 301, 308
    REDIR_TEMP = "redir_temp"  # 302, 303, 307
    GONE = "gone"  # 404, 410 and other permanent 4xx
    SOFT404 = "soft404"  # 2xx with the host's not-found page (trawl.dedup.soft404)
    RETRY = "retry"  # 5xx, 429, timeouts, network errors: try again later
    ROBOTS_DENIED = "robots_denied"  # robots.txt disallows it for our agent
    BLOCKED = "blocked"  # address refused (SSRF guard) or unresolvable host
    NOT_REACHED = "not_reached"  # segment time limit hit first: released, not lost
    DEFERRED = "deferred"  # host not fetchable now (robots.txt unreachable): later


@dataclass(frozen=True)
class Transition:
    """The crawldb consequence of one fetch outcome."""

    status: CrawlStatus | None  # new status; None keeps the old one
    count_retry: bool = False  # bump ``retries`` (reset on any other outcome)
    reschedule: str = "interval"  # "interval", "retry", "gone", "now", "redirect"
    confirm: bool = False  # a URL with content needs ``gone_after`` of these in a row


_KEEP = None

# (fetch outcome) -> transition. The previous db status matters only for the
# outcomes that keep it (RETRY keeps a fetched page fetched: a server error is
# no reason to forget good content, RFC 9110 15.6 errors are transient) and
# for GONE, which a URL with content must answer ``gone_after`` times in a
# row before it is removed (a deploy gone wrong is not a deleted page); a
# URL never fetched is gone at the first 404. A soft 404 is a 404 the server
# did not admit to, so it is GONE the same way: confirmed ``gone_after`` times
# for a URL with content, and it counts towards the same run of answers.
# Newly disallowed by robots.txt is removed at once (the site owner asked).
TRANSITIONS: dict[FetchOutcome, Transition] = {
    FetchOutcome.SUCCESS: Transition(CrawlStatus.FETCHED),
    FetchOutcome.NOTMODIFIED: Transition(CrawlStatus.NOTMODIFIED),
    FetchOutcome.REDIR_PERM: Transition(CrawlStatus.REDIR_PERM, reschedule="redirect"),
    FetchOutcome.REDIR_TEMP: Transition(CrawlStatus.REDIR_TEMP),
    FetchOutcome.GONE: Transition(CrawlStatus.GONE, reschedule="gone", confirm=True),
    FetchOutcome.SOFT404: Transition(CrawlStatus.GONE, reschedule="gone", confirm=True),
    FetchOutcome.RETRY: Transition(_KEEP, count_retry=True, reschedule="retry"),
    FetchOutcome.ROBOTS_DENIED: Transition(CrawlStatus.GONE, reschedule="gone"),
    FetchOutcome.BLOCKED: Transition(CrawlStatus.GONE, reschedule="gone"),
    FetchOutcome.NOT_REACHED: Transition(_KEEP, reschedule="now"),
    FetchOutcome.DEFERRED: Transition(_KEEP, reschedule="retry"),
}

# Statuses of a URL whose content the crawl holds: leaving them for GONE is a
# removal (an event for consumers, ``removed_at`` in crawldb).
HAS_CONTENT = frozenset({CrawlStatus.FETCHED, CrawlStatus.NOTMODIFIED, CrawlStatus.DUPLICATE})


@dataclass(frozen=True)
class Decision:
    """What one fetch outcome does to a URL's status and counters."""

    status: CrawlStatus
    retries: int  # transient failures in a row
    gone_count: int  # 404/410 (and soft 404) answers in a row
    reschedule: str  # see ``Transition.reschedule``
    removed: bool = False  # a URL with content just became GONE


def decide(
    old: CrawlStatus,
    outcome: FetchOutcome,
    retries: int,
    max_retries: int,
    gone_count: int = 0,
    gone_after: int = 1,
) -> Decision:
    """The new status and counters after ``outcome`` for a URL that was ``old``.

    A URL that keeps failing transiently is given up as GONE after
    ``max_retries`` attempts (Nutch ``db.fetch.retry.max``); a URL with
    content is GONE after ``gone_after`` 404/410 (or soft 404) answers in a row.
    """
    rule = TRANSITIONS[outcome]
    if rule.count_retry:
        retries += 1
        if retries > max_retries:
            return Decision(CrawlStatus.GONE, retries, gone_count, "gone", old in HAS_CONTENT)
        return Decision(old, retries, gone_count, rule.reschedule)
    if rule.status is None:  # released or deferred: nothing learnt about the URL
        return Decision(old, retries, gone_count, rule.reschedule)
    if rule.confirm:
        gone_count += 1
        if old in HAS_CONTENT and gone_count < gone_after:
            return Decision(old, 0, gone_count, "retry")  # ask again before removing
        return Decision(rule.status, 0, gone_count, rule.reschedule, old in HAS_CONTENT)
    removed = rule.status is CrawlStatus.GONE and old in HAS_CONTENT
    return Decision(rule.status, 0, 0, rule.reschedule, removed)


def outcome_for_http(status: int) -> FetchOutcome:
    """Map an HTTP status code to a fetch outcome (RFC 9110 section 15)."""
    if 200 <= status < 300:
        return FetchOutcome.SUCCESS
    if status == 304:
        return FetchOutcome.NOTMODIFIED
    if status in (301, 308):
        return FetchOutcome.REDIR_PERM
    if status in (302, 303, 307):
        return FetchOutcome.REDIR_TEMP
    if status == 429 or status >= 500 or status in (408,):
        # RFC 6585 4 (429) and RFC 9110 15.6 (5xx): transient, back off and retry.
        return FetchOutcome.RETRY
    return FetchOutcome.GONE
