"""Tests for trawl.testweb.audit on crafted access logs.

Every log here is written by hand, so each expected count, gap and
efficiency below is computed from the rows in the test: no server, no clock.
"""

from __future__ import annotations

import json
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from trawl.testweb import WebModel, politeness_audit
from trawl.testweb.audit import ShortGap, retry_after_s, short_gaps
from trawl.testweb.records import HostInfo, RobotsGroup

IP1, IP2 = "127.0.1.1", "127.0.1.2"


def row(
    host: str,
    start: float,
    end: float,
    *,
    ip: str = IP1,
    status: int = 200,
    retry_after: str | None = None,
    path: str = "/",
) -> dict[str, Any]:
    return {
        "host": host,
        "ip": ip,
        "path": path,
        "start": start,
        "end": end,
        "status": status,
        "retry_after": retry_after,
    }


def write_log(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def delay_model(**delays: float | None) -> WebModel:
    """A model of hosts on IP1 whose robots.txt serves the given Crawl-delays."""
    groups = (RobotsGroup("badbot", ("/",)), RobotsGroup("*", ()))
    hosts = tuple(
        HostInfo(name, IP1, "open", 200, groups, delay, 0.0, (), 1.0)
        for name, delay in delays.items()
    )
    return WebModel(0, "trawl", hosts)


# -- concurrency and the minimum gap -------------------------------------------------


def test_politeness_audit_detects_overlap_and_short_gap(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "bad.jsonl",
        [
            row("a.test", 0.0, 1.0),
            row("a.test", 0.5, 1.2),  # overlaps the first request
            row("a.test", 1.3, 1.4),  # only 0.1 s after the latest end
            row("b.test", 0.6, 0.8),
        ],
    )
    report = politeness_audit(log, 0.5)
    assert report.requests == 4 and report.hosts == 2 and report.ips == 1
    assert report.max_in_flight_per_host == 2 and report.hosts_with_overlap == 1
    assert report.max_in_flight_per_ip == 3 and report.ips_with_overlap == 1
    assert report.ip_gaps_below_min == 3  # b.test's too: it shares the address
    assert report.min_gap_s == pytest.approx(-0.5)
    assert report.gaps_below_min == 2
    assert report.gaps_below_required == 2
    assert report.short_gaps_by_reason == {"min_delay": 2}
    assert report.as_dict()["gaps_below_min"] == 2


def test_politeness_audit_is_clean_on_a_polite_log(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "good.jsonl",
        [
            row("a.test", 0.0, 0.3),
            row("a.test", 1.298, 1.5),
            row("b.test", 0.3, 0.4, ip=IP2),
            row("b.test", 1.4, 1.5, ip=IP2),
        ],
    )
    report = politeness_audit(log, 1.0)
    assert report.max_in_flight_per_host == 1 and report.hosts_with_overlap == 0
    assert report.max_in_flight_per_ip == 1 and report.ips_with_overlap == 0
    assert report.ip_gaps_below_min == 0
    assert report.gaps_below_min == 0 and report.min_gap_s == pytest.approx(0.998)
    assert report.gaps_below_required == 0 and report.worst_short_gaps == ()
    assert report.crawl_delay_violations == 0


def test_two_hosts_in_flight_on_one_ip_is_an_ip_overlap(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "ip.jsonl",
        [
            row("a.test", 0.0, 1.0),
            row("b.test", 0.5, 0.8),  # another host, same address, while a.test is busy
            row("c.test", 0.0, 1.0, ip=IP2),
            row("d.test", 1.0, 1.1, ip=IP2),  # touching is not overlapping
        ],
    )
    report = politeness_audit(log, 0.5)
    assert report.hosts_with_overlap == 0
    assert report.ips_with_overlap == 1 and report.max_in_flight_per_ip == 2
    assert report.ip_gaps_below_min == 2  # each host alone kept its distance
    assert report.gaps_below_min == 0


# -- Retry-After -------------------------------------------------------------------


def test_retry_after_seconds_is_required_after_a_429(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "ra.jsonl",
        [
            row("a.test", 0.0, 0.1, status=429, retry_after="3"),
            row("a.test", 2.1, 2.2),  # 2.0 s after the 429 that asked for 3
            row("a.test", 3.2, 3.3),  # 1.0 s after a 200: only the minimum applies
            row("b.test", 0.0, 0.1, status=429),  # no Retry-After: the minimum
            row("b.test", 0.7, 0.8, retry_after="9"),  # on a 200 the header means nothing
            row("b.test", 1.4, 1.5),
        ],
    )
    report = politeness_audit(log, 0.5)
    assert report.gaps_below_min == 0
    assert report.gaps_below_required == 1
    assert report.short_gaps_by_reason == {"retry_after": 1}
    assert report.worst_short_gaps == (
        # after the 429 that started at 0.0
        ShortGap("a.test", IP1, "/", 2.1, pytest.approx(2.0), 3.0, "retry_after", "/", 0.0),  # type: ignore[arg-type]
    )


def test_retry_after_http_date_counts_from_the_response_end(tmp_path: Path) -> None:
    t = 1_000_000.0
    date = formatdate(t + 5, usegmt=True)
    log = write_log(
        tmp_path / "date.jsonl",
        [
            row("a.test", t + 2.0, t + 2.4, status=503, retry_after=date),  # asks for 2.6 s
            row("a.test", t + 4.9, t + 5.0),  # 2.5 s: too soon
            row("b.test", t + 2.0, t + 2.4, status=503, retry_after=date, ip=IP2),
            row("b.test", t + 5.0, t + 5.1, ip=IP2),  # on the date: fine
            row("c.test", t + 6.0, t + 6.1, status=503, retry_after=date),  # date already past
            row("c.test", t + 6.7, t + 6.8),
        ],
    )
    report = politeness_audit(log, 0.5)
    assert report.gaps_below_required == 1
    (short,) = report.worst_short_gaps
    assert (short.host, short.reason) == ("a.test", "retry_after")
    assert short.gap_s == pytest.approx(2.5) and short.required_s == pytest.approx(2.6)


@pytest.mark.parametrize(
    ("status", "value", "want"),
    [
        (429, "7", 7.0),
        (503, " 2 ", 2.0),
        (503, formatdate(1_000_010, usegmt=True), 8.0),
        (503, formatdate(1_000_000, usegmt=True), 0.0),
        (503, "soon", None),
        (503, None, None),
        (500, "5", None),
        (200, "5", None),
    ],
)
def test_retry_after_parsing(status: int, value: str | None, want: float | None) -> None:
    rec = row("a.test", 1_000_001.0, 1_000_002.0, status=status, retry_after=value)
    assert retry_after_s(rec) == (pytest.approx(want) if want is not None else None)


# -- Crawl-delay --------------------------------------------------------------------


def test_crawl_delay_is_required_even_past_the_crawlers_cap(tmp_path: Path) -> None:
    model = delay_model(**{"a.test": 45.0, "b.test": 2.0})
    log = write_log(
        tmp_path / "cd.jsonl",
        [
            row("a.test", 0.0, 0.1),
            row("a.test", 30.1, 30.2),  # 30 s: the usual cap, but the host asked for 45
            row("a.test", 75.2, 75.3),
            row("b.test", 0.0, 0.1),
            row("b.test", 2.1, 2.2),
        ],
    )
    report = politeness_audit(log, 0.5, model=model)
    assert report.crawl_delay_violations == 1
    assert report.short_gaps_by_reason == {"crawl_delay": 1}
    assert report.worst_short_gaps[0].required_s == 45.0
    assert politeness_audit(log, 0.5).gaps_below_required == 0  # no model, no Crawl-delay
    # the badbot group has no Crawl-delay line
    assert politeness_audit(log, 0.5, model=model, agent="badbot").crawl_delay_violations == 0


def test_the_largest_requirement_wins_and_names_the_reason(tmp_path: Path) -> None:
    model = delay_model(**{"a.test": 2.0})
    log = write_log(
        tmp_path / "max.jsonl",
        [
            row("a.test", 0.0, 0.1, status=429, retry_after="4"),
            row("a.test", 3.0, 3.1),  # Retry-After 4 beats Crawl-delay 2
            row("a.test", 4.5, 4.6),  # Crawl-delay 2 beats the 1 s minimum
            row("a.test", 6.6, 6.7),
        ],
    )
    report = politeness_audit(log, 1.0, model=model, examples=1)
    assert report.gaps_below_required == 2
    assert report.short_gaps_by_reason == {"retry_after": 1, "crawl_delay": 1}
    # the worst shortfall first (1.1 s short of 4 beats 0.6 s short of 2), one example
    assert [(s.start, s.reason) for s in report.worst_short_gaps] == [(3.0, "retry_after")]
    # short_gaps lists them all, worst first, each with the request it follows
    every = short_gaps(log, 1.0, model=model)
    assert [(s.start, s.reason, s.previous_start) for s in every] == [
        (3.0, "retry_after", 0.0),
        (4.5, "crawl_delay", 3.0),
    ]
    assert short_gaps(log, 1.0) == [every[0]]  # without the model no Crawl-delay


# -- efficiency -------------------------------------------------------------------


def test_efficiency_is_one_when_every_gap_is_exactly_required(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "e1.jsonl",
        [row("a.test", 0.0, 0.1), row("a.test", 1.1, 1.2), row("a.test", 2.2, 2.3)],
    )
    report = politeness_audit(log, 1.0)
    assert report.efficiency == pytest.approx(1.0)
    (clock,) = report.least_efficient
    assert (clock.key, clock.requests) == (IP1, 3)
    assert clock.span_s == pytest.approx(2.3) and clock.needed_s == pytest.approx(2.3)
    assert clock.allowed == pytest.approx(3.0)


def test_efficiency_counts_slack_but_not_a_clock_that_ran_out_of_work(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "e2.jsonl",
        [
            # IP1: two polite requests, then nothing left to do (its span ends at 1.2)
            row("a.test", 0.0, 0.1),
            row("a.test", 1.1, 1.2),
            # IP2: waits 2 s where 1 s was required: span 4.3, needed 0.3 + 2 x 1.0
            row("b.test", 0.0, 0.1, ip=IP2),
            row("b.test", 2.1, 2.2, ip=IP2),
            row("b.test", 4.2, 4.3, ip=IP2),
        ],
    )
    report = politeness_audit(log, 1.0)
    by_ip = {c.key: c for c in report.least_efficient}
    assert by_ip[IP1].efficiency == pytest.approx(1.0) and by_ip[IP1].allowed == pytest.approx(2)
    assert by_ip[IP2].efficiency == pytest.approx(2.3 / 4.3)
    assert by_ip[IP2].allowed == pytest.approx(3 * 4.3 / 2.3)
    # 5 requests made; 2 + 5.6087 allowed
    assert report.efficiency == pytest.approx(5 / (2 + 3 * 4.3 / 2.3))
    assert report.least_efficient[0].key == IP2


def test_efficiency_charges_an_address_idling_while_one_host_waits(tmp_path: Path) -> None:
    model = delay_model(**{"a.test": 5.0, "b.test": None})
    log = write_log(
        tmp_path / "e3.jsonl",
        [
            row("a.test", 0.0, 0.1),  # a.test asks for 5 s between its requests ...
            row("b.test", 5.1, 5.2),  # ... but b.test was free after 1 s
            row("a.test", 6.2, 6.3),
            row("b.test", 7.3, 7.4),
            # another address: a 429 asking for 3 s, waited exactly
            row("c.test", 0.0, 0.1, ip=IP2, status=429, retry_after="3"),
            row("c.test", 3.1, 3.2, ip=IP2),
        ],
    )
    report = politeness_audit(log, 1.0, model=model)
    assert report.gaps_below_required == 0 and report.ip_gaps_below_min == 0
    by_ip = {c.key: c for c in report.least_efficient}
    # replay of IP1: a 0-0.1, b 1.1-1.2, a 5.1-5.2 (its Crawl-delay), b 6.2-6.3
    assert by_ip[IP1].needed_s == pytest.approx(6.3) and by_ip[IP1].span_s == pytest.approx(7.4)
    assert by_ip[IP1].efficiency == pytest.approx(6.3 / 7.4)
    # replay of IP2: c 0-0.1, then 3 s for the Retry-After: c 3.1-3.2, as it happened
    assert by_ip[IP2].efficiency == pytest.approx(1.0)
    assert report.efficiency == pytest.approx(6 / (4 * 7.4 / 6.3 + 2))


def test_efficiency_per_host_clock_in_by_host_mode(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "e4.jsonl",
        [
            row("a.test", 0.0, 0.1),
            row("b.test", 0.2, 0.3),
            row("a.test", 1.1, 1.2),
            row("b.test", 1.3, 1.4),
        ],
    )
    # one clock per address: 0.4 busy + 3 x 1.0 needed in 1.4 s -- faster than allowed
    assert politeness_audit(log, 1.0).efficiency == pytest.approx(3.4 / 1.4)
    # one clock per host: each used exactly its 1 s gap
    assert politeness_audit(log, 1.0, mode="byHost").efficiency == pytest.approx(1.0)


def test_efficiency_windows_leave_out_the_time_between_fetch_jobs(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "e5.jsonl",
        [
            row("a.test", 0.0, 0.1),
            row("a.test", 1.1, 1.2),
            row("a.test", 100.0, 100.1),
            row("a.test", 101.1, 101.2),
            row("a.test", 500.0, 500.1),  # in no window: left out
        ],
    )
    whole = politeness_audit(log, 1.0)
    assert whole.efficiency == pytest.approx((0.5 + 4 * 1.0) / 500.1)
    windows = [(0.0, 10.0), (99.0, 110.0)]
    split = politeness_audit(log, 1.0, windows=windows)
    assert split.efficiency == pytest.approx(1.0)
    assert sum(c.requests for c in split.least_efficient) == 4


def test_efficiency_with_the_crawlers_delay_factor(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e6.jsonl", [row("a.test", 0.0, 0.2), row("a.test", 2.2, 2.4)])
    rested = write_log(tmp_path / "e7.jsonl", [row("a.test", 0.0, 0.2), row("b.test", 2.2, 2.3)])
    # the required gap alone is 0.5: needed 0.4 + 0.5 in a span of 2.4
    assert politeness_audit(log, 0.5).efficiency == pytest.approx(0.9 / 2.4)
    # 10 x 0.2 s response time: the crawler's rule asked for 2 s
    assert politeness_audit(log, 0.5, delay_factor=10).efficiency == pytest.approx(1.0)
    capped = politeness_audit(log, 0.5, delay_factor=10, max_delay_s=1.0)
    assert capped.efficiency == pytest.approx(1.4 / 2.4)
    assert capped.gaps_below_required == 0  # the Mercator term is never a promise
    # a slow response rests the whole address: b.test waiting 2 s is no waste
    assert politeness_audit(rested, 0.5, delay_factor=10).efficiency == pytest.approx(1.0)
    assert politeness_audit(rested, 0.5).efficiency == pytest.approx((0.2 + 0.5 + 0.1) / 2.3)


def test_empty_log_has_no_efficiency_and_the_report_is_json(tmp_path: Path) -> None:
    empty = politeness_audit(write_log(tmp_path / "none.jsonl", []), 1.0)
    assert empty.requests == 0 and empty.efficiency is None and empty.min_gap_s is None
    report = politeness_audit(
        write_log(tmp_path / "one.jsonl", [row("a.test", 0.0, 0.0), row("a.test", 0.1, 0.2)]), 1.0
    )
    data = json.loads(json.dumps(report.as_dict()))
    assert data["worst_short_gaps"][0]["reason"] == "min_delay"
    assert {"gaps_below_min", "crawl_delay_violations", "efficiency"} <= set(data)
