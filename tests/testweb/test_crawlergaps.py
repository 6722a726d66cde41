"""Tests for trawl.testweb.crawlergaps: short gaps of the access log against the
crawler's own timings.

Logs and timings are written by hand: each gap below is computed from the
rows in the test, so every finding can be checked by subtraction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trawl.testweb.audit import ShortGap, short_gaps
from trawl.testweb.crawlergaps import (
    RequestTiming,
    crawler_gap_check,
    read_timings,
    request_timing,
    unmatched_requests,
    write_timings,
)

IP = "127.0.1.1"


def gap(path: str, start: float, gap_s: float, previous: tuple[str, float] | None) -> ShortGap:
    """A short gap on a.test against a required 1 s, after ``previous`` (path, web start)."""
    prev_path, prev_start = previous if previous else (None, None)
    return ShortGap("a.test", IP, path, start, gap_s, 1.0, "min_delay", prev_path, prev_start)


def timing(path: str, start: float, end: float | None, host: str = "a.test") -> RequestTiming:
    return RequestTiming(host, path, start, end)


# The crawler read /1 from 10.000 to 10.200; the web stamped it 10.001-10.226
# (its end 26 ms late), and /2 at 11.2003: 0.9743 s by the web's stamps.
WEB_GAP = gap("/2", 11.2003, 11.2003 - 10.226, ("/1", 10.001))


def test_a_late_end_stamp_is_stamp_lag_when_the_crawler_waited_the_full_gap() -> None:
    timings = [timing("/1", 10.0, 10.2), timing("/2", 11.205, 11.4)]
    (check,) = crawler_gap_check([WEB_GAP], timings)
    assert check.finding == "stamp_lag" and not check.confirmed
    assert check.crawler_gap_s == pytest.approx(1.005)
    assert check.web_gap_s == pytest.approx(0.9743) and check.required_s == 1.0


@pytest.mark.parametrize(
    ("next_start", "crawler_gap_s"),
    [(11.1, 0.9), (11.199, 0.999)],  # no tolerance: 1 ms short is short
)
def test_a_gap_short_by_the_crawlers_own_clock_is_confirmed(
    next_start: float, crawler_gap_s: float
) -> None:
    short = gap("/2", next_start + 0.0003, 0.87, ("/1", 10.001))
    timings = [timing("/1", 10.0, 10.2), timing("/2", next_start, next_start + 0.2)]
    (check,) = crawler_gap_check([short], timings)
    assert check.finding == "short" and check.confirmed
    assert check.crawler_gap_s == pytest.approx(crawler_gap_s)


@pytest.mark.parametrize(
    "timings",
    [
        [timing("/1", 10.0, 10.2)],  # the request that came too soon is not there
        [timing("/2", 11.205, 11.4)],  # nor the one it followed
        [timing("/1", 10.0, 10.2), timing("/2", 11.205, 11.4, host="b.test")],  # another host
        [timing("/1", 10.0, 10.2), timing("/3", 11.205, 11.4)],  # another path
        [timing("/1", 10.0, 10.2), timing("/2", 11.21, 11.4)],  # started after the web's start
        [timing("/1", 10.0, None), timing("/2", 11.205, 11.4)],  # the previous end unknown
    ],
)
def test_an_unmatched_request_counts_as_confirmed(timings: list[RequestTiming]) -> None:
    (check,) = crawler_gap_check([WEB_GAP], timings)
    assert check.finding == "unmatched" and check.confirmed and check.crawler_gap_s is None


def test_a_short_gap_without_its_previous_request_is_unmatched() -> None:
    timings = [timing("/1", 10.0, 10.2), timing("/2", 11.205, 11.4)]
    (check,) = crawler_gap_check([gap("/2", 11.2003, 0.9743, None)], timings)
    assert check.finding == "unmatched"


def test_the_crawlers_gap_runs_from_the_latest_end_before_the_request() -> None:
    # /0 started first but ended last (after the /1 the web's gap counts from):
    # the crawler's gap is from /0's end, 0.95 s
    timings = [timing("/0", 9.9, 10.25), timing("/1", 10.0, 10.2), timing("/2", 11.2, 11.4)]
    (check,) = crawler_gap_check([gap("/2", 11.2003, 0.97, ("/1", 10.001))], timings)
    assert check.finding == "short" and check.crawler_gap_s == pytest.approx(0.95)


def test_a_refetched_path_matches_the_request_in_flight_at_the_webs_start() -> None:
    timings = [
        timing("/1", 10.0, 10.2),
        timing("/2", 11.205, 11.4),
        timing("/1", 12.5, 12.6),  # the same path again, later
        timing("/2", 13.55, 13.7),  # 0.95 s after it
    ]
    checks = crawler_gap_check([WEB_GAP, gap("/2", 13.5503, 0.93, ("/1", 12.5002))], timings)
    assert [c.finding for c in checks] == ["stamp_lag", "short"]
    assert [c.crawler_gap_s for c in checks] == [pytest.approx(1.005), pytest.approx(0.95)]


def row(path: str, start: float, end: float) -> dict[str, Any]:
    return {"host": "a.test", "ip": IP, "path": path, "start": start, "end": end, "status": 200}


def test_from_access_log_to_findings(tmp_path: Path) -> None:
    """The audit's short gaps carry what the check needs to find both requests."""
    log = tmp_path / "access.jsonl"
    rows = [row("/1", 10.001, 10.226), row("/2", 11.2003, 11.39), row("/3", 12.35, 12.4)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    timings = [timing("/1", 10.0, 10.2), timing("/2", 11.205, 11.4), timing("/3", 12.34, 12.41)]
    checks = crawler_gap_check(short_gaps(log, 1.0), timings)
    # /2: 0.974 s logged, 1.005 s by the crawler; /3: 0.96 logged, 0.94 by the crawler
    assert [(c.path, c.finding) for c in checks] == [("/3", "short"), ("/2", "stamp_lag")]
    assert unmatched_requests(rows, timings) == 0
    assert unmatched_requests([*rows, row("/4", 13.0, 13.1)], timings) == 1


def test_request_timing_keeps_the_request_target_and_round_trips(tmp_path: Path) -> None:
    got = request_timing("http://A.test:8080/x/1.html?q=1&r", 5.0, 0.25)
    assert got == RequestTiming("a.test", "/x/1.html?q=1&r", 5.0, 5.25)
    assert request_timing("http://a.test", 5.0, None) == RequestTiming("a.test", "/", 5.0, None)
    assert request_timing("mailto:x@a.test", 5.0, 0.1) is None
    path = tmp_path / "timings.jsonl"
    write_timings(path, [got, timing("/", 6.0, None)])
    assert read_timings(path) == [got, timing("/", 6.0, None)]
