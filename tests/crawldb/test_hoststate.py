"""Tests for trawl.crawldb.hoststate.merge_host: a host's hostdb row after one segment."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trawl.crawldb.hoststate import PAUSE, merge_host

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
T0 = AT - timedelta(minutes=10)
SEG = "seg2"
BASE = {"host_bucket": 3, "domain": "example.com"}
HOST = "www.example.com"


def visit(outcome: str, second: float = 0.0, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "outcome": outcome,
        "fetched_at": T0 + timedelta(seconds=second),
        "delay_s": 1.0,
        "elapsed_s": 0.1,
        "ip": "10.0.0.1",
    }
    row.update(changes)
    return row


def robots_row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "url": "http://www.example.com/robots.txt",
        "robots_decision": "parsed",
        "http_status": 200,
        "robots_body": "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n",
        "fetched_at": T0,
        "crawl_delay_s": 2.0,
    }
    row.update(changes)
    return row


def merge(old: dict[str, Any] | None, visits: list[dict[str, Any]], robots: Any = None,
          segment: str = SEG) -> dict[str, Any]:  # fmt: skip
    return merge_host(old, HOST, visits, robots, AT, segment, BASE)


def test_first_sight_of_a_host() -> None:
    new = merge(None, [visit("success"), visit("gone", 1)])
    assert new["host"] == HOST
    assert (new["host_bucket"], new["domain"]) == (3, "example.com")
    assert new["fetches"] == 2
    assert new["status_counts"] == {"success": 1, "gone": 1}
    assert new["last_segment"] == SEG
    assert new["consecutive_failures"] == 0
    assert new["ip"] == "10.0.0.1"


def test_same_segment_twice_returns_the_same_row() -> None:
    once = merge(None, [visit("success"), visit("retry", 1)], robots_row())
    snapshot = copy.deepcopy(once)
    twice = merge(once, [visit("success"), visit("retry", 1)], robots_row())
    assert twice is once
    assert twice == snapshot


def test_old_row_is_not_mutated() -> None:
    old = merge(None, [visit("success")], segment="seg1")
    snapshot = copy.deepcopy(old)
    merge(old, [visit("retry"), visit("robots_denied", 1)], robots_row())
    assert old == snapshot


def test_robots_fields_copied_from_the_robots_row() -> None:
    new = merge(None, [visit("success")], robots_row())
    assert new["robots_url"] == "http://www.example.com/robots.txt"
    assert new["robots_status"] == "parsed"
    assert new["robots_http_status"] == 200
    assert new["robots_body"].startswith("User-agent: *")
    assert new["robots_fetched_at"] == T0
    assert new["crawl_delay_s"] == 2.0


OUTAGES = ["status_5xx", "status_429", "unreachable", "stale_copy_status_5xx",
           "unreachable_long_unreachable"]  # fmt: skip


@pytest.mark.parametrize("decision", OUTAGES)
def test_an_outage_keeps_the_last_usable_copy_and_marks_its_start(decision: str) -> None:
    old = merge(None, [visit("success")], robots_row(), segment="seg1")
    failed = robots_row(
        robots_decision=decision, http_status=503, robots_body=None,
        fetched_at=AT, crawl_delay_s=None,
    )  # fmt: skip
    new = merge(old, [visit("deferred")], failed, segment="seg2")
    for key in ("robots_status", "robots_body", "robots_fetched_at", "crawl_delay_s"):
        assert new[key] == old[key]
    assert new["robots_http_status"] == 503
    assert new["robots_unreachable_since"] == AT
    later = AT + timedelta(days=2)
    again = merge(new, [], {**failed, "fetched_at": later}, segment="seg3")
    assert again["robots_unreachable_since"] == AT  # the outage's first failure
    answered = merge(again, [], {**robots_row(), "fetched_at": later}, segment="seg4")
    assert answered["robots_unreachable_since"] is None
    assert answered["robots_fetched_at"] == later


def test_an_outage_without_a_copy_records_the_failure() -> None:
    failed = robots_row(robots_decision="unreachable", http_status=None, robots_body=None)
    new = merge(None, [], failed)
    assert new["robots_status"] == "unreachable"
    assert new.get("robots_body") is None
    assert new["robots_unreachable_since"] == failed["fetched_at"]


def test_robots_fetches_count_as_failures_but_not_as_page_outcomes() -> None:
    visits = [{**visit("retry"), "kind": "robots"}, {**visit("deferred"), "kind": "page"}]
    new = merge(None, visits, None)
    assert new["consecutive_failures"] == 1
    assert new["status_counts"] == {"deferred": 1}
    assert new["fetches"] == 0


def test_robots_fields_replaced_by_a_newer_fetch_and_kept_without_one() -> None:
    old = merge(None, [visit("success")], robots_row(), segment="seg1")
    newer = robots_row(robots_body="User-agent: *\nDisallow: /x\n", fetched_at=AT)
    new = merge(old, [visit("success")], newer)
    assert new["robots_body"] == "User-agent: *\nDisallow: /x\n"
    assert new["robots_fetched_at"] == AT
    kept = merge(old, [visit("success")], None)
    for key in ("robots_url", "robots_status", "robots_body", "robots_fetched_at", "crawl_delay_s"):
        assert kept[key] == old[key]


@pytest.mark.parametrize(
    ("old_failures", "outcomes", "expected"),
    [
        (0, ["retry", "retry"], 2),
        (3, ["retry"], 4),
        (3, ["retry", "success"], 0),  # any answered request resets
        (3, ["success", "retry"], 1),
        (2, ["gone"], 0),  # a 404 is an answer, not a failure
        (2, ["notmodified", "redir_perm"], 0),
        (4, ["robots_denied", "deferred", "not_reached", "blocked"], 4),  # no request
        (4, [], 4),
        (None, ["retry"], 1),
    ],
)
def test_consecutive_failures(old_failures: int | None, outcomes: list[str], expected: int) -> None:
    old = merge(None, [], segment="seg1")
    old["consecutive_failures"] = old_failures
    new = merge(old, [visit(o, i) for i, o in enumerate(outcomes)])
    assert new["consecutive_failures"] == expected


@pytest.mark.parametrize(
    ("old_failures", "retries", "paused"),
    [(0, 10, True), (9, 1, True), (5, 5, True), (0, 9, False), (12, 1, True)],
)
def test_ten_failures_pause_the_host_for_a_day(
    old_failures: int, retries: int, paused: bool
) -> None:
    old = merge(None, [], segment="seg1")
    old["consecutive_failures"] = old_failures
    new = merge(old, [visit("retry", i) for i in range(retries)])
    assert new["consecutive_failures"] == old_failures + retries
    assert new.get("backoff_until") == (AT + timedelta(days=1) if paused else None)


def test_backoff_kept_while_failing_and_cleared_by_an_answer() -> None:
    old = merge(None, [visit("retry", i) for i in range(10)], segment="seg1")
    assert old["backoff_until"] == AT + PAUSE
    still = merge(old, [visit("robots_denied")], segment="seg2")  # no request: no news
    assert still["backoff_until"] == AT + PAUSE
    answered = merge(old, [visit("retry"), visit("success", 1)], segment="seg3")
    assert answered["consecutive_failures"] == 0
    assert answered["backoff_until"] is None


@pytest.mark.parametrize("field", ["robots_decision", "error"])
def test_urls_deferred_for_an_unreachable_robots_txt_hold_the_host(field: str) -> None:
    robots = robots_row(robots_decision="status_5xx", http_status=503, robots_body=None)
    visits = [
        visit("retry", 0, kind="robots", robots_decision="status_5xx"),
        visit("deferred", 1, **{field: "robots_unreachable"}),
    ]
    new = merge_host(None, HOST, visits, robots, AT, SEG, BASE, robots_hold=timedelta(hours=6))
    assert new["backoff_until"] == AT + timedelta(hours=6)
    assert merge(None, visits, robots)["backoff_until"] == AT + timedelta(days=1)  # the default


def test_other_deferrals_and_a_robots_outage_without_one_hold_nothing() -> None:
    over_cap = visit("deferred", 1, robots_decision="crawl_delay_over_cap")
    assert merge(None, [visit("success", 0), over_cap]).get("backoff_until") is None
    # robots.txt failed once, then answered: the pages were fetched
    retried = [visit("retry", 0, kind="robots"), visit("success", 2, kind="robots")]
    assert merge(None, [*retried, visit("success", 3)]).get("backoff_until") is None


def test_a_longer_pause_outlasts_the_robots_hold() -> None:
    old = merge(None, [], segment="seg1")
    old["backoff_until"] = AT + timedelta(days=3)
    deferred = visit("deferred", 1, robots_decision="robots_unreachable")
    assert merge(old, [visit("retry", 0), deferred])["backoff_until"] == AT + timedelta(days=3)


def test_delay_and_next_allowed_from_the_last_requested_visit() -> None:
    visits = [
        visit("success", 0, delay_s=1.0),
        visit("retry", 5, delay_s=8.0),
        visit("robots_denied", 9, delay_s=1.0),  # no request: does not set the clock
        visit("not_reached", 20, delay_s=None),
    ]
    new = merge(None, visits)
    assert new["delay_s"] == 8.0
    assert new["next_allowed_at"] == T0 + timedelta(seconds=5 + 8)


def test_delay_kept_when_no_visit_requested() -> None:
    old = merge(None, [visit("success", 0, delay_s=3.0)], segment="seg1")
    new = merge(old, [visit("deferred", 50, delay_s=9.0)])
    assert new["delay_s"] == 3.0
    assert new["next_allowed_at"] == T0 + timedelta(seconds=3)


def test_no_request_outcomes_are_counted_but_are_not_fetches() -> None:
    outcomes = ["success", "robots_denied", "not_reached", "deferred", "blocked", "gone"]
    new = merge(None, [visit(o, i) for i, o in enumerate(outcomes)])
    assert new["fetches"] == 2
    assert new["status_counts"] == {o: 1 for o in outcomes}


def test_status_counts_and_fetches_accumulate_over_segments() -> None:
    row = merge(None, [visit("success"), visit("success", 1), visit("retry", 2)], segment="s1")
    row = merge(row, [visit("success"), visit("gone", 1), visit("robots_denied", 2)], segment="s2")
    assert row["status_counts"] == {"success": 3, "retry": 1, "gone": 1, "robots_denied": 1}
    assert row["fetches"] == 5
    assert row["last_segment"] == "s2"


def test_response_time_average_blends_old_and_new() -> None:
    first = merge(None, [visit("success", elapsed_s=0.2), visit("success", 1, elapsed_s=0.4)],
                  segment="s1")  # fmt: skip
    assert first["resp_time_avg_s"] == pytest.approx(0.3)
    second = merge(first, [visit("success", elapsed_s=0.1)], segment="s2")
    assert second["resp_time_avg_s"] == pytest.approx(0.5 * 0.3 + 0.5 * 0.1)
    third = merge(second, [visit("robots_denied", elapsed_s=9.0)], segment="s3")
    assert third["resp_time_avg_s"] == pytest.approx(second["resp_time_avg_s"])


def test_ip_is_the_last_seen() -> None:
    new = merge(None, [visit("success", ip="10.0.0.1"), visit("success", 1, ip="10.0.0.2"),
                       visit("blocked", 2, ip=None)])  # fmt: skip
    assert new["ip"] == "10.0.0.2"


# --- the soft-404 probe (trawl.dedup.soft404) -----------------------------------------------------
SOFT404 = ("soft404_status", "soft404_sha256", "soft404_simhash", "soft404_probed_at")


def probe_row(outcome: str = "success", **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": "probe",
        "url": "http://www.example.com/0123456789abcdef01234567-trawl-probe",
        "outcome": outcome,
        "http_status": {"success": 200, "gone": 404, "redir_temp": 302, "retry": 503}.get(outcome),
        "content_sha256": "nf" if outcome == "success" else None,
        "simhash": -77 if outcome == "success" else None,
        "fetched_at": T0,
        "delay_s": 1.0,
        "elapsed_s": 0.1,
        "ip": "10.0.0.1",
    }
    row.update(changes)
    return row


def merge_probe(old: dict[str, Any] | None, probe: Any, segment: str = SEG) -> dict[str, Any]:
    visits = [probe] if probe else []
    return merge_host(old, HOST, visits, None, AT, segment, BASE, probe=probe)


def test_an_answered_probe_is_remembered() -> None:
    new = merge_probe(None, probe_row())
    assert [new[k] for k in SOFT404] == [200, "nf", -77, T0]
    # a real 404: the host says what it means, no not-found page to keep
    later = T0 + timedelta(days=40)
    hard = merge_probe(new, probe_row("gone", fetched_at=later), segment="seg3")
    assert [hard[k] for k in SOFT404] == [404, None, None, later]
    redirect = merge_probe(None, probe_row("redir_temp"))
    assert [redirect[k] for k in SOFT404] == [302, None, None, T0]


@pytest.mark.parametrize(
    "failed",
    [
        probe_row("retry"),  # 5xx: transient
        probe_row("retry", http_status=None, error="timeout: read"),  # no answer
        probe_row("robots_denied", http_status=None, error="probe: robots_denied"),  # not sent
        probe_row("deferred", http_status=None, error="probe: crawl_delay_over_cap"),
        None,  # no probe this segment
    ],
)
def test_a_probe_that_taught_nothing_keeps_the_last_answer(failed: Any) -> None:
    old = merge_probe(None, probe_row(), segment="seg1")
    new = merge_probe(old, failed, segment="seg2")
    assert [new[k] for k in SOFT404] == [200, "nf", -77, T0]
    assert [merge_probe(None, failed).get(k) for k in SOFT404] == [None] * 4


def test_a_probe_counts_for_politeness_but_is_no_page_fetch() -> None:
    visits = [probe_row("retry"), {**visit("success", 2), "kind": "page"}]
    new = merge_host(None, HOST, visits, None, AT, SEG, BASE, probe=visits[0])
    assert new["fetches"] == 1
    assert new["status_counts"] == {"success": 1}
    assert new["resp_time_avg_s"] == pytest.approx(0.1)
    failing = merge_host(None, HOST, [probe_row("retry")], None, AT, SEG, BASE)
    assert (failing["consecutive_failures"], failing["fetches"]) == (1, 0)


def test_sibling_counts_of_a_telling_segment_replace_the_last_ones() -> None:
    farm = {"sibling_pages": 5, "sibling_hosts": 48, "sibling_links": 50}
    first = merge_host(None, HOST, [visit("success")], None, AT, "seg1", BASE, siblings=farm)
    assert {k: first[k] for k in farm} == farm and first["sibling_segment"] == "seg1"
    # four pages with links tell nothing: the counts stay
    one = {"sibling_pages": 4, "sibling_hosts": 0, "sibling_links": 0}
    kept = merge_host(first, HOST, [visit("success")], None, AT, "seg2", BASE, siblings=one)
    assert {k: kept[k] for k in farm} == farm and kept["sibling_segment"] == "seg1"
    # five or more do, whatever they link (nothing: the verdict is cleared)
    quiet = {"sibling_pages": 12, "sibling_hosts": 0, "sibling_links": 0}
    now = merge_host(kept, HOST, [visit("success")], None, AT, "seg3", BASE, siblings=quiet)
    assert {k: now[k] for k in farm} == quiet and now["sibling_segment"] == "seg3"
