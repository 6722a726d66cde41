"""Tests for trawl.crawldb.status: the crawldb transition matrix, after Nutch's TestCrawlDbStates.

The expected table is written out here by hand (not derived from
``TRANSITIONS``), so a change to the rules has to change this file too.
"""

from __future__ import annotations

import pytest

from trawl.crawldb.status import (
    HAS_CONTENT,
    CrawlStatus,
    FetchOutcome,
    decide,
    outcome_for_http,
)

S = CrawlStatus
O = FetchOutcome  # noqa: E741 - short column names keep the matrix readable

# Column order of the matrix below.
COLUMNS = (
    O.SUCCESS,
    O.NOTMODIFIED,
    O.REDIR_PERM,
    O.REDIR_TEMP,
    O.GONE,
    O.SOFT404,
    O.RETRY,
    O.ROBOTS_DENIED,
    O.BLOCKED,
    O.NOT_REACHED,
    O.DEFERRED,
)

# Every row starts from retries=1, max_retries=3, gone_count=0, gone_after=2:
# RETRY counts up to 2 and keeps the old status, NOT_REACHED and DEFERRED keep
# status and retries, GONE (a 404) is a first strike for a URL with content
# (fetched, notmodified, duplicate: status kept) and final for the others,
# and so is SOFT404 (a 200 with the host's not-found page: a 404 in disguise);
# everything else sets its own status and resets retries to 0. "R" marks a
# removal: a URL whose content the crawl held went GONE.
R = True
_ = False
# fmt: off
MATRIX: dict[CrawlStatus, tuple[tuple[CrawlStatus, int, bool], ...]] = {
    # success, notmodified, redir_perm, redir_temp /
    # gone, soft404, retry /
    # robots_denied, blocked, not_reached, deferred
    S.UNFETCHED: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.UNFETCHED, 2, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.UNFETCHED, 1, _), (S.UNFETCHED, 1, _),
    ),
    S.FETCHED: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.FETCHED, 0, _), (S.FETCHED, 0, _), (S.FETCHED, 2, _),
        (S.GONE, 0, R), (S.GONE, 0, R), (S.FETCHED, 1, _), (S.FETCHED, 1, _),
    ),
    S.NOTMODIFIED: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.NOTMODIFIED, 0, _), (S.NOTMODIFIED, 0, _), (S.NOTMODIFIED, 2, _),
        (S.GONE, 0, R), (S.GONE, 0, R), (S.NOTMODIFIED, 1, _), (S.NOTMODIFIED, 1, _),
    ),
    S.GONE: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.GONE, 2, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.GONE, 1, _), (S.GONE, 1, _),
    ),
    S.REDIR_TEMP: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.REDIR_TEMP, 2, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.REDIR_TEMP, 1, _), (S.REDIR_TEMP, 1, _),
    ),
    S.REDIR_PERM: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.REDIR_PERM, 2, _),
        (S.GONE, 0, _), (S.GONE, 0, _), (S.REDIR_PERM, 1, _), (S.REDIR_PERM, 1, _),
    ),
    S.DUPLICATE: (
        (S.FETCHED, 0, _), (S.NOTMODIFIED, 0, _), (S.REDIR_PERM, 0, _), (S.REDIR_TEMP, 0, _),
        (S.DUPLICATE, 0, _), (S.DUPLICATE, 0, _), (S.DUPLICATE, 2, _),
        (S.GONE, 0, R), (S.GONE, 0, R), (S.DUPLICATE, 1, _), (S.DUPLICATE, 1, _),
    ),
}
# fmt: on

CASES = [
    pytest.param(old, outcome, expected, id=f"{old.value}+{outcome.value}")
    for old, row in MATRIX.items()
    for outcome, expected in zip(COLUMNS, row, strict=True)
]


def test_matrix_covers_every_status_and_outcome() -> None:
    assert set(MATRIX) == set(CrawlStatus)
    assert set(COLUMNS) == set(FetchOutcome)
    assert len(COLUMNS) == len(FetchOutcome)


@pytest.mark.parametrize(("old", "outcome", "expected"), CASES)
def test_transition_matrix(
    old: CrawlStatus, outcome: FetchOutcome, expected: tuple[CrawlStatus, int, bool]
) -> None:
    d = decide(old, outcome, retries=1, max_retries=3, gone_count=0, gone_after=2)
    assert (d.status, d.retries, d.removed) == expected
    assert isinstance(d.status, CrawlStatus)
    assert d.gone_count == (1 if outcome in (O.GONE, O.SOFT404) else 0)


@pytest.mark.parametrize("gone", [O.GONE, O.SOFT404])
@pytest.mark.parametrize("old", sorted(HAS_CONTENT))
def test_the_second_404_in_a_row_removes_a_url_with_content(
    old: CrawlStatus, gone: FetchOutcome
) -> None:
    first = decide(old, gone, 0, 3, gone_count=0, gone_after=2)
    second = decide(first.status, gone, first.retries, 3, first.gone_count, gone_after=2)
    assert (first.status, first.removed, first.reschedule) == (old, False, "retry")
    assert (second.status, second.gone_count, second.removed) == (S.GONE, 2, True)
    assert second.reschedule == "gone"
    assert decide(old, gone, 0, 3, 0, gone_after=1).status is S.GONE  # Nutch's rule


def test_retries_exhausted_on_a_url_with_content_is_a_removal() -> None:
    d = decide(S.FETCHED, O.RETRY, 3, max_retries=3)
    assert (d.status, d.removed) == (S.GONE, True)
    assert decide(S.UNFETCHED, O.RETRY, 3, max_retries=3).removed is False


@pytest.mark.parametrize("old", [S.UNFETCHED, S.FETCHED, S.NOTMODIFIED])
def test_retries_count_up_to_max_then_gone(old: CrawlStatus) -> None:
    status, retries = old, 0
    seen = []
    for _ in range(5):
        d = decide(status, O.RETRY, retries, max_retries=3)
        status, retries = d.status, d.retries
        seen.append((status, retries))
    assert seen == [(old, 1), (old, 2), (old, 3), (S.GONE, 4), (S.GONE, 5)]


def test_max_retries_zero_gives_up_at_once() -> None:
    d = decide(S.FETCHED, O.RETRY, 0, max_retries=0)
    assert (d.status, d.retries) == (S.GONE, 1)


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (O.SUCCESS, (S.FETCHED, 0)),
        (O.GONE, (S.GONE, 0)),
        (O.NOTMODIFIED, (S.NOTMODIFIED, 0)),
        (O.NOT_REACHED, (S.FETCHED, 3)),  # released: nothing learnt, count kept
        (O.DEFERRED, (S.FETCHED, 3)),
    ],
)
def test_other_outcomes_reset_or_keep_retry_count(
    outcome: FetchOutcome, expected: tuple[CrawlStatus, int]
) -> None:
    d = decide(S.FETCHED, outcome, 3, max_retries=3)
    assert (d.status, d.retries) == expected


def test_not_reached_never_gives_up() -> None:
    status, retries = S.UNFETCHED, 3
    for _ in range(10):
        d = decide(status, O.NOT_REACHED, retries, max_retries=3)
        status, retries = d.status, d.retries
    assert (status, retries) == (S.UNFETCHED, 3)


def test_statuses_are_stored_as_lowercase_names() -> None:
    assert {s.value for s in CrawlStatus} == {s.name.lower() for s in CrawlStatus}
    assert S.FETCHED == "fetched"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (200, O.SUCCESS),
        (204, O.SUCCESS),
        (206, O.SUCCESS),
        (299, O.SUCCESS),
        (304, O.NOTMODIFIED),
        (301, O.REDIR_PERM),
        (308, O.REDIR_PERM),
        (302, O.REDIR_TEMP),
        (303, O.REDIR_TEMP),
        (307, O.REDIR_TEMP),
        (404, O.GONE),
        (410, O.GONE),
        (403, O.GONE),
        (401, O.GONE),
        (408, O.RETRY),
        (429, O.RETRY),
        (500, O.RETRY),
        (503, O.RETRY),
        (599, O.RETRY),
    ],
)
def test_outcome_for_http(code: int, expected: FetchOutcome) -> None:
    assert outcome_for_http(code) is expected
