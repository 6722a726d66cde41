"""Tests for trawl.crawldb.transitions.apply_fetch: one crawldb row after one fetch row."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trawl.config import ScheduleConfig
from trawl.crawldb.status import FetchOutcome
from trawl.crawldb.transitions import FETCH_FIELDS, apply_fetch
from trawl.net.dates import http_date

# "uniform" keeps the next due time simple (fetch_interval_s); the change-rate
# policies are tested below.
SCHEDULE = ScheduleConfig(
    policy="uniform", fetch_interval_s=1000.0, retry_interval_s=100.0, gone_interval_s=5000.0,
    max_retries=3, min_interval_s=500.0, max_interval_s=9000.0, gone_after=1,
)  # fmt: skip
AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
FETCHED_AT = AT - timedelta(minutes=30)
SEG = "20240501120000"
DUE = AT - timedelta(days=1)  # the old row was due


def crawl_row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "url": "http://example.com/a",
        "url_fp": 123,
        "host": "example.com",
        "status": "unfetched",
        "retries": 0,
        "fetches": 0,
        "changes": 0,
        "next_fetch_at": DUE,
        "last_fetch_at": None,
        "last_segment": None,
        "generated_segment": SEG,
        "generated_at": AT - timedelta(hours=1),
        "http_status": None,
        "content_sha256": None,
        "etag": None,
        "last_modified": None,
        "redirect_to": None,
        "ip": None,
    }
    row.update(changes)
    return row


def fetch_row(outcome: str, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "url": "http://example.com/a",
        "outcome": outcome,
        "fetched_at": FETCHED_AT,
        "ip": "10.0.0.7",
        "http_status": {
            "success": 200,
            "notmodified": 304,
            "redir_perm": 301,
            "redir_temp": 302,
            "gone": 404,
            "soft404": 200,
            "retry": 503,
        }.get(outcome),
    }
    if outcome == "success":
        row.update(content_sha256="h1", etag='"v1"', last_modified="Wed, 01 May 2024 10:00:00 GMT")
    if outcome == "soft404":  # a 200 whose body is the host's not-found page
        row.update(content_sha256="nf", simhash=77, etag='"nf"', soft404=True,
                   error="soft404: distance 0 (same sha256 as the probe)")  # fmt: skip
    if outcome in ("redir_perm", "redir_temp"):
        row["redirect_to"] = "http://example.com/b"
    row.update(changes)
    return row


ALL = [o.value for o in FetchOutcome]


@pytest.mark.parametrize("outcome", ALL)
def test_applying_the_same_segment_twice_changes_nothing(outcome: str) -> None:
    fetch = fetch_row(outcome)
    once = apply_fetch(crawl_row(), fetch, AT, SEG, SCHEDULE)
    snapshot = copy.deepcopy(once)
    twice = apply_fetch(once, fetch, AT + timedelta(hours=5), SEG, SCHEDULE)
    assert twice == snapshot
    if outcome != "not_reached":  # a released URL carries no last_segment
        assert twice is once


@pytest.mark.parametrize("outcome", ALL)
def test_old_row_is_not_mutated(outcome: str) -> None:
    old = crawl_row(status="fetched", content_sha256="h0", retries=1)
    snapshot = copy.deepcopy(old)
    apply_fetch(old, fetch_row(outcome), AT, SEG, SCHEDULE)
    assert old == snapshot


# outcome -> (status, retries, fetches, next_fetch_at, last_segment set)
EXPECTED: dict[str, tuple[str, int, int, datetime, bool]] = {
    "success": ("fetched", 0, 1, AT + timedelta(seconds=1000), True),
    "notmodified": ("notmodified", 0, 1, AT + timedelta(seconds=1000), True),
    "redir_perm": ("redir_perm", 0, 1, AT + timedelta(seconds=9000), True),  # max interval
    "redir_temp": ("redir_temp", 0, 1, AT + timedelta(seconds=1000), True),
    "gone": ("gone", 0, 1, AT + timedelta(seconds=5000), True),
    "soft404": ("gone", 0, 1, AT + timedelta(seconds=5000), True),  # as a 404
    "retry": ("unfetched", 1, 1, AT + timedelta(seconds=100), True),
    "robots_denied": ("gone", 0, 0, AT + timedelta(seconds=5000), True),
    "blocked": ("gone", 0, 0, AT + timedelta(seconds=5000), True),
    "deferred": ("unfetched", 0, 0, AT + timedelta(seconds=100), True),
    "not_reached": ("unfetched", 0, 0, DUE, False),  # stays due
}


def test_expected_table_covers_every_outcome() -> None:
    assert set(EXPECTED) == set(ALL)


@pytest.mark.parametrize("outcome", ALL)
def test_status_counters_and_next_fetch_by_outcome(outcome: str) -> None:
    new = apply_fetch(crawl_row(), fetch_row(outcome), AT, SEG, SCHEDULE)
    status, retries, fetches, next_fetch_at, segment_set = EXPECTED[outcome]
    assert new["status"] == status
    assert new["retries"] == retries
    assert new["fetches"] == fetches
    assert new["next_fetch_at"] == next_fetch_at
    assert new["last_segment"] == (SEG if segment_set else None)
    # every outcome releases the generate lock of this segment
    assert new["generated_segment"] is None
    assert new["generated_at"] is None


@pytest.mark.parametrize(
    ("outcome", "http_status", "last_fetch_at"),
    [
        ("success", 200, AT),  # the cycle's logical time, not the wall clock
        ("notmodified", 304, AT),
        ("gone", 404, AT),
        ("soft404", 200, AT),  # answered: the 200 it answered is recorded
        ("retry", 503, AT),
        ("robots_denied", None, None),  # no request: nothing about the response
        ("blocked", None, None),
        ("deferred", None, None),
    ],
)
def test_last_fetch_and_http_status_only_for_requests(
    outcome: str, http_status: int | None, last_fetch_at: datetime | None
) -> None:
    new = apply_fetch(crawl_row(), fetch_row(outcome), AT, SEG, SCHEDULE)
    assert new["http_status"] == http_status
    assert new["last_fetch_at"] == last_fetch_at


def test_last_fetch_at_is_logical_time_whatever_the_wall_clock() -> None:
    new = apply_fetch(crawl_row(), fetch_row("success", fetched_at=None), AT, SEG, SCHEDULE)
    assert new["last_fetch_at"] == AT


def test_fetches_accumulate() -> None:
    row = crawl_row(fetches=4)
    for i, outcome in enumerate(["success", "notmodified", "retry", "robots_denied"]):
        row = apply_fetch(row, fetch_row(outcome), AT, f"seg{i}", SCHEDULE)
    assert row["fetches"] == 4 + 3


@pytest.mark.parametrize(
    ("old_hash", "old_changes", "new_hash", "changes", "stored"),
    [
        (None, 0, "h1", 0, "h1"),  # first content is not a change
        ("h1", 0, "h1", 0, "h1"),  # same content
        ("h1", 0, "h2", 1, "h2"),  # changed
        ("h1", 2, "h2", 3, "h2"),
        ("h1", None, "h2", 1, "h2"),
        ("h1", 5, None, 5, None),  # no digest: no change counted
    ],
)
def test_changes_count_content_hash_changes(
    old_hash: str | None, old_changes: int | None, new_hash: str | None, changes: int, stored: str
) -> None:
    old = crawl_row(status="fetched", content_sha256=old_hash, changes=old_changes)
    new = apply_fetch(old, fetch_row("success", content_sha256=new_hash), AT, SEG, SCHEDULE)
    assert (new["changes"] or 0) == changes
    assert new["content_sha256"] == stored


@pytest.mark.parametrize("outcome", ["notmodified", "gone", "soft404", "retry", "redir_perm"])
def test_changes_and_hash_untouched_without_content(outcome: str) -> None:
    old = crawl_row(status="fetched", content_sha256="h1", changes=2, etag='"v0"')
    new = apply_fetch(old, fetch_row(outcome), AT, SEG, SCHEDULE)
    assert (new["content_sha256"], new["changes"], new["etag"]) == ("h1", 2, '"v0"')


def test_retries_count_up_then_gone() -> None:
    row = crawl_row(status="fetched", content_sha256="h1")
    seen = []
    for i in range(4):
        row = apply_fetch(row, fetch_row("retry"), AT, f"seg{i}", SCHEDULE)
        seen.append((row["status"], row["retries"], row["next_fetch_at"] - AT))
    assert seen == [
        ("fetched", 1, timedelta(seconds=100)),  # a server error keeps the good content
        ("fetched", 2, timedelta(seconds=100)),
        ("fetched", 3, timedelta(seconds=100)),
        ("gone", 4, timedelta(seconds=5000)),  # max_retries=3 exceeded
    ]
    assert row["content_sha256"] == "h1"
    row = apply_fetch(row, fetch_row("success"), AT, "seg9", SCHEDULE)
    assert (row["status"], row["retries"]) == ("fetched", 0)


def test_deferred_keeps_retries_and_status() -> None:
    new = apply_fetch(crawl_row(status="fetched", retries=2), fetch_row("deferred"), AT, SEG,
                      SCHEDULE)  # fmt: skip
    assert (new["status"], new["retries"]) == ("fetched", 2)
    assert new["next_fetch_at"] == AT + timedelta(seconds=100)


def test_deferred_on_a_gone_url_waits_the_gone_interval() -> None:
    new = apply_fetch(crawl_row(status="gone"), fetch_row("deferred"), AT, SEG, SCHEDULE)
    assert new["status"] == "gone"
    assert new["next_fetch_at"] == AT + timedelta(seconds=5000)


def test_not_reached_releases_the_lock_of_this_segment_only() -> None:
    old = crawl_row(status="fetched", retries=1, fetches=3, last_segment="older")
    new = apply_fetch(old, fetch_row("not_reached", ip=None), AT, SEG, SCHEDULE)
    assert new is not old
    assert new["generated_segment"] is None
    assert new["generated_at"] is None
    # nothing learnt about the URL: still due, counters and segment untouched
    unchanged = ("status", "retries", "fetches", "next_fetch_at", "last_segment", "last_fetch_at")
    assert {k: new[k] for k in unchanged} == {k: old[k] for k in unchanged}
    assert new["next_fetch_at"] <= AT


@pytest.mark.parametrize("generated", ["20240502000000", None])
def test_not_reached_leaves_a_row_generated_by_another_segment(generated: str | None) -> None:
    old = crawl_row(generated_segment=generated, generated_at=AT if generated else None)
    new = apply_fetch(old, fetch_row("not_reached"), AT, SEG, SCHEDULE)
    assert new is old
    assert new["generated_segment"] == generated


def test_success_records_validators_and_clears_redirect() -> None:
    old = crawl_row(status="redir_temp", redirect_to="http://example.com/old")
    new = apply_fetch(old, fetch_row("success"), AT, SEG, SCHEDULE)
    assert new["etag"] == '"v1"'
    assert new["last_modified"] == "Wed, 01 May 2024 10:00:00 GMT"
    assert new["content_sha256"] == "h1"
    assert new["redirect_to"] is None
    assert new["ip"] == "10.0.0.7"


def test_success_without_validators_clears_the_old_ones() -> None:
    old = crawl_row(status="fetched", etag='"v0"', last_modified="x")
    new = apply_fetch(old, fetch_row("success", etag=None, last_modified=None), AT, SEG, SCHEDULE)
    assert (new["etag"], new["last_modified"]) == (None, None)


@pytest.mark.parametrize(("outcome", "http_status"), [("redir_perm", 301), ("redir_temp", 302)])
def test_redirects_record_the_target(outcome: str, http_status: int) -> None:
    new = apply_fetch(crawl_row(status="fetched"), fetch_row(outcome), AT, SEG, SCHEDULE)
    assert new["status"] == outcome
    assert new["redirect_to"] == "http://example.com/b"
    assert new["http_status"] == http_status
    # a permanent redirect: the target took over, the source waits the longest
    wait = 9000 if outcome == "redir_perm" else 1000
    assert new["next_fetch_at"] == AT + timedelta(seconds=wait)


def test_ip_only_replaced_when_the_fetch_has_one() -> None:
    old = crawl_row(ip="10.0.0.1")
    assert apply_fetch(old, fetch_row("gone", ip=None), AT, SEG, SCHEDULE)["ip"] == "10.0.0.1"
    assert apply_fetch(old, fetch_row("gone"), AT, SEG, SCHEDULE)["ip"] == "10.0.0.7"


def test_missing_counters_count_from_zero() -> None:
    old = crawl_row(retries=None, fetches=None, changes=None, content_sha256="h0")
    new = apply_fetch(old, fetch_row("success"), AT, SEG, SCHEDULE)
    assert (new["retries"], new["fetches"], new["changes"]) == (0, 1, 1)


def test_unknown_outcome_is_rejected() -> None:
    with pytest.raises(ValueError):
        apply_fetch(crawl_row(), fetch_row("exploded"), AT, SEG, SCHEDULE)


Row = dict[str, Any]


# --- the change record and the schedule policies --------------------------------------------------
DAY = timedelta(days=1)
MODEL = ScheduleConfig(policy="lagrangian")  # defaults: 1 day .. 90 days


def visits(
    outcomes: list[tuple[str, str | None]], schedule: ScheduleConfig
) -> list[dict[str, Any]]:
    """Apply (outcome, content hash) daily; the rows after each visit."""
    row, out = crawl_row(), []
    for i, (outcome, digest) in enumerate(outcomes):
        fetch = fetch_row(outcome, content_sha256=digest) if digest else fetch_row(outcome)
        row = apply_fetch(row, fetch, AT + i * DAY, f"seg{i}", schedule)
        out.append(row)
    return out


def test_content_visits_build_the_change_record() -> None:
    rows = visits([("success", "a"), ("success", "a"), ("success", "b"), ("notmodified", None)],
                  MODEL)  # fmt: skip
    first, unchanged, changed, not_modified = rows
    assert first["changed"] is None and first["change_visits"] == 0.0  # nothing to compare
    assert first["content_seen_at"] == AT and first["modified_at"] == AT
    assert (unchanged["changed"], unchanged["change_visits"], unchanged["change_changed"]) == (
        False, 1.0, 0.0)  # fmt: skip
    assert unchanged["change_unchanged_s"] == pytest.approx(86400.0)
    assert (changed["changed"], changed["change_changed"]) == (True, pytest.approx(1.0))
    assert changed["modified_at"] == AT + 2 * DAY
    # a 304 is an unchanged visit: no body, the copy stays
    assert not_modified["changed"] is False
    assert not_modified["content_sha256"] == "b"
    fade = math.exp(-1 / 180)  # a day against schedule.change_memory_s (180 days)
    assert not_modified["change_visits"] == pytest.approx(fade * fade + fade + 1)
    assert not_modified["change_unchanged_s"] > changed["change_unchanged_s"]
    assert changed["change_rate"] > unchanged["change_rate"]  # a change raises the estimate
    for row in rows:  # due again no earlier than the minimum interval
        assert row["next_fetch_at"] >= row["last_fetch_at"] + DAY


def dated_visits(
    versions: list[tuple[str, str, datetime | None]], schedule: ScheduleConfig = MODEL
) -> list[dict[str, Any]]:
    """Apply (outcome, content hash, Last-Modified or None) daily; the rows after each visit."""
    row, out = crawl_row(), []
    for i, (outcome, digest, modified) in enumerate(versions):
        date = None if modified is None else http_date(modified)
        fetch = fetch_row(outcome, content_sha256=digest, last_modified=date)
        row = apply_fetch(row, fetch, AT + i * DAY, f"seg{i}", schedule)
        out.append(row)
    return out


def test_last_modified_dates_the_changes() -> None:
    hour = timedelta(hours=1)
    old_version = AT - 30 * DAY
    rows = dated_visits([
        ("success", "a", old_version),  # 30 days old at the first visit
        ("success", "a", old_version),  # unchanged: a day watched
        ("success", "b", AT + 2 * DAY - 3 * hour),  # changed 3 hours before the visit
        ("notmodified", "b", AT + 2 * DAY - 3 * hour),  # a 304: another day watched
    ])  # fmt: skip
    first, unchanged, changed, not_modified = rows
    assert (first["change_dated"], first["change_dated_s"]) == (0.5, 30 * 86400.0)
    fade = math.exp(-1 / 180)  # a day against schedule.change_memory_s (180 days)
    assert unchanged["change_dated_s"] == pytest.approx(fade * 30 * 86400.0 + 86400.0)
    assert changed["change_dated"] == pytest.approx(fade * fade * 0.5 + 1.0)
    assert changed["change_dated_s"] == pytest.approx(
        fade * unchanged["change_dated_s"] + 3 * 3600.0
    )
    assert not_modified["change_dated_s"] == pytest.approx(
        fade * changed["change_dated_s"] + 86400.0
    )
    # the estimate is the dated one: changes over watched time, with a weak prior
    xd, ed = not_modified["change_dated"], not_modified["change_dated_s"]
    a0, lam0 = 0.1, 1 / MODEL.prior_change_interval_s
    assert not_modified["change_rate"] == pytest.approx((xd + a0) / (ed + a0 / lam0))


def test_an_hourly_page_is_known_fast_from_its_first_visits() -> None:
    minutes = timedelta(minutes=20)
    fast = dated_visits([("success", str(i), AT + i * DAY - minutes) for i in range(3)])
    per_day = [row["change_rate"] * 86400 for row in fast]
    assert per_day[0] > 0.8  # one dated change: the weak prior holds it under a day
    assert per_day[2] > 2.5 > per_day[1] > per_day[0]
    (slow,) = dated_visits([("success", "a", AT - 200 * DAY)])
    assert slow["change_rate"] * 86400 < 0.01
    # without dates three changed daily visits say little more than "daily"
    undated = dated_visits([("success", str(i), None) for i in range(3)])
    assert undated[2]["change_rate"] * 86400 < 1.5


def test_last_modified_that_contradicts_the_content_is_not_used_again() -> None:
    stamped = [("success", "a", AT + i * DAY) for i in range(4)]  # a fresh date on every response
    rows = dated_visits(stamped)
    assert rows[0]["change_dated"] == 0.5  # nothing to contradict yet
    assert all(r["change_dated_s"] == -1.0 and r["change_dated"] == 0.0 for r in rows[1:])
    undated = dated_visits([("success", "a", None)] * 4)  # the visit-only estimate takes over
    assert rows[-1]["change_rate"] == pytest.approx(undated[-1]["change_rate"])
    # a date that stays put while the content changes is as bad
    frozen = dated_visits([("success", str(i), AT - 30 * DAY) for i in range(3)])
    assert frozen[-1]["change_dated_s"] == -1.0
    # and one from the future
    future = dated_visits([("success", "a", AT - DAY), ("success", "b", AT + 5 * DAY)])
    assert future[-1]["change_dated_s"] == -1.0


def test_failures_between_content_visits_do_not_shorten_the_interval() -> None:
    rows = visits([("success", "a"), ("retry", None), ("gone", None), ("success", "a")],
                  replace(MODEL, gone_after=2))  # fmt: skip
    last = rows[-1]
    assert last["content_seen_at"] == AT + 3 * DAY
    assert last["change_visits"] == 1.0
    assert last["change_unchanged_s"] == pytest.approx(3 * 86400.0)  # from the first visit


def test_a_page_changing_at_every_visit_is_watched_at_the_minimum_interval() -> None:
    rows = visits([("success", str(i)) for i in range(4)], MODEL)
    assert all(r["next_fetch_at"] == r["last_fetch_at"] + DAY for r in rows[1:])


def test_uniform_policy_waits_the_fetch_interval() -> None:
    uniform = replace(MODEL, policy="uniform", fetch_interval_s=5 * 86400.0)
    rows = visits([("success", "a"), ("success", "b")], uniform)
    assert [r["next_fetch_at"] - r["last_fetch_at"] for r in rows] == [5 * DAY, 5 * DAY]


def test_adaptive_policy_is_nutchs() -> None:
    adaptive = replace(MODEL, policy="adaptive", fetch_interval_s=10 * 86400.0,
                       adaptive_sync_delta=False)  # fmt: skip
    rows = visits([("success", "a"), ("success", "a"), ("success", "b")], adaptive)
    # first fetch: no comparison (interval kept), then x1.4 unchanged, x0.8 changed
    assert [r["fetch_interval_s"] / 86400 for r in rows] == pytest.approx([10.0, 14.0, 11.2])
    assert [(r["next_fetch_at"] - r["last_fetch_at"]) / DAY for r in rows] == pytest.approx(
        [10.0, 14.0, 11.2]
    )


# --- gone twice, and removals -----------------------------------------------------------------
def test_a_page_with_content_is_gone_after_gone_after_404s_in_a_row() -> None:
    schedule = replace(SCHEDULE, gone_after=2)
    row = apply_fetch(crawl_row(), fetch_row("success"), AT, "s0", schedule)
    first = apply_fetch(row, fetch_row("gone"), AT + DAY, "s1", schedule)
    assert (first["status"], first["gone_count"], first.get("removed_at")) == ("fetched", 1, None)
    assert first["next_fetch_at"] == AT + DAY + timedelta(seconds=100)  # asked again soon
    second = apply_fetch(first, fetch_row("gone"), AT + 2 * DAY, "s2", schedule)
    assert (second["status"], second["gone_count"]) == ("gone", 2)
    assert second["removed_at"] == AT + 2 * DAY
    back = apply_fetch(second, fetch_row("success"), AT + 3 * DAY, "s3", schedule)
    assert (back["status"], back["gone_count"], back["removed_at"]) == ("fetched", 0, None)


def test_a_404_between_answers_starts_the_count_again() -> None:
    schedule = replace(SCHEDULE, gone_after=2)
    row = apply_fetch(crawl_row(), fetch_row("success"), AT, "s0", schedule)
    for i, outcome in enumerate(["gone", "success", "gone"], start=1):
        row = apply_fetch(row, fetch_row(outcome), AT + i * DAY, f"s{i}", schedule)
    assert (row["status"], row["gone_count"]) == ("fetched", 1)


def test_a_soft404_is_confirmed_and_removes_like_a_404() -> None:
    # Its body is the host's error page, not the URL's copy: never stored.
    schedule = replace(SCHEDULE, gone_after=2)
    row = apply_fetch(crawl_row(), fetch_row("success"), AT, "s0", schedule)
    first = apply_fetch(row, fetch_row("soft404"), AT + DAY, "s1", schedule)
    assert (first["status"], first["gone_count"], first.get("removed_at")) == ("fetched", 1, None)
    assert first["next_fetch_at"] == AT + DAY + timedelta(seconds=100)  # asked again soon
    assert (first["content_sha256"], first.get("simhash"), first["etag"]) == ("h1", None, '"v1"')
    second = apply_fetch(first, fetch_row("soft404"), AT + 2 * DAY, "s2", schedule)
    assert (second["status"], second["gone_count"]) == ("gone", 2)
    assert second["removed_at"] == AT + 2 * DAY
    assert second["next_fetch_at"] == AT + 2 * DAY + timedelta(seconds=5000)  # gone interval
    assert second["content_sha256"] == "h1"


@pytest.mark.parametrize("outcomes", [["gone", "soft404"], ["soft404", "gone"]])
def test_soft404s_and_404s_count_in_one_run(outcomes: list[str]) -> None:
    schedule = replace(SCHEDULE, gone_after=2)
    row = apply_fetch(crawl_row(), fetch_row("success"), AT, "s0", schedule)
    for i, outcome in enumerate(outcomes, start=1):
        row = apply_fetch(row, fetch_row(outcome), AT + i * DAY, f"s{i}", schedule)
    assert (row["status"], row["gone_count"], row["removed_at"]) == ("gone", 2, AT + 2 * DAY)
    back = apply_fetch(row, fetch_row("success"), AT + 3 * DAY, "s3", schedule)
    assert (back["status"], back["gone_count"], back["removed_at"]) == ("fetched", 0, None)


def test_a_never_fetched_soft404_is_gone_at_once_without_a_removal() -> None:
    new = apply_fetch(crawl_row(), fetch_row("soft404"), AT, SEG, replace(SCHEDULE, gone_after=2))
    assert (new["status"], new["gone_count"], new.get("removed_at")) == ("gone", 1, None)
    assert new["content_sha256"] is None


def test_a_never_fetched_url_is_gone_at_the_first_404() -> None:
    new = apply_fetch(crawl_row(), fetch_row("gone"), AT, SEG, replace(SCHEDULE, gone_after=2))
    assert new["status"] == "gone"
    assert new.get("removed_at") is None  # nothing was held: no removal


def test_newly_disallowed_by_robots_is_removed_at_once() -> None:
    row = apply_fetch(crawl_row(), fetch_row("success"), AT, "s0", SCHEDULE)
    new = apply_fetch(row, fetch_row("robots_denied"), AT + DAY, "s1", SCHEDULE)
    assert (new["status"], new["removed_at"]) == ("gone", AT + DAY)


def test_the_stored_capture_follows_the_copy() -> None:
    capture = {"record_id": "<urn:uuid:1>", "uri": "http://example.com/a",
               "date": "2024-05-01T11:30:00Z", "digest": "sha1:AAAA"}  # fmt: skip
    stored = apply_fetch(crawl_row(), fetch_row("success", stored_capture=capture), AT, SEG,
                         SCHEDULE)  # fmt: skip
    assert stored["stored_capture"] == capture
    later = AT + timedelta(days=1)
    confirmed = apply_fetch(stored, fetch_row("notmodified"), later, "seg2", SCHEDULE)
    assert confirmed["stored_capture"] == capture  # a 304: the same record still holds it
    unarchived = apply_fetch(confirmed, fetch_row("success", content_sha256="h2"), later,
                             "seg3", SCHEDULE)  # fmt: skip
    assert unarchived["stored_capture"] is None  # a new copy no WARC record holds


class OnlyFields(dict[str, Any]):
    """A fetch row that fails on any field outside ``FETCH_FIELDS``."""

    def _check(self, key: str) -> None:
        if key not in FETCH_FIELDS:
            raise AssertionError(f"apply_fetch read {key!r}, which FETCH_FIELDS lacks")

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)


@pytest.mark.parametrize("outcome", ALL)
def test_apply_fetch_reads_only_the_fields_updatedb_sends(outcome: str) -> None:
    # updatedb ships FETCH_FIELDS of each fetch row to Python, no more
    full = fetch_row(outcome)
    sent = OnlyFields({k: v for k, v in full.items() if k in FETCH_FIELDS})
    for old in (crawl_row(), crawl_row(status="fetched", content_sha256="h0", fetches=2)):
        assert apply_fetch(old, sent, AT, SEG, SCHEDULE) == apply_fetch(
            old, full, AT, SEG, SCHEDULE
        )
