"""Tests for trawl.fetch.politeness: the gap rules and the host/IP scheduler.

Most scheduler tests run on a fake clock: the injected ``sleep`` advances it
instead of waiting. ``Sim`` goes one step further and plays several workers
in one thread (a discrete-event simulation): while the scheduler "sleeps",
the earliest in-flight visit finishes and is released, exactly as another
worker thread would do. One test at the end uses real threads and real time.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from trawl.fetch.politeness import GapRule, HostScheduler

# --------------------------------------------------------------------------- GapRule

RULE = GapRule(min_delay_s=1.0, delay_factor=10.0, max_delay_s=60.0, max_crawl_delay_s=30.0)
LOW_CAP = GapRule(min_delay_s=1.0, delay_factor=10.0, max_delay_s=10.0, max_crawl_delay_s=30.0)


@pytest.mark.parametrize(
    ("rule", "response_s", "crawl_delay_s", "expected"),
    [
        (RULE, 0.01, None, 1.0),  # min delay floor
        (RULE, 0.0, None, 1.0),
        (RULE, -1.0, None, 1.0),  # a negative time is treated as zero
        (RULE, 0.5, None, 5.0),  # delay_factor x response time
        (RULE, 2.5, None, 25.0),
        (RULE, 10.0, None, 60.0),  # max_delay cap
        (RULE, 0.01, 0.0, 1.0),
        (RULE, 0.01, 0.5, 1.0),  # Crawl-delay below min: min wins
        (RULE, 0.01, 5.0, 5.0),  # Crawl-delay above min
        (RULE, 1.0, 5.0, 10.0),  # response rule above Crawl-delay
        (RULE, 0.01, 100.0, 100.0),  # never shortened (over the cap: one request a segment)
        (LOW_CAP, 5.0, None, 10.0),  # max_delay caps the response rule ...
        (LOW_CAP, 0.01, 20.0, 20.0),  # ... but never lowers the Crawl-delay
        (LOW_CAP, 5.0, 20.0, 20.0),
        (LOW_CAP, 5.0, 40.0, 40.0),  # whatever max_crawl_delay_s says
        (GapRule(2.0, 10.0, 1.0, 30.0), 5.0, None, 2.0),  # min above max: min wins
    ],
)
def test_after_success(
    rule: GapRule, response_s: float, crawl_delay_s: float | None, expected: float
) -> None:
    assert rule.after_success(response_s, crawl_delay_s) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("previous", "retry_after", "expected"),
    [
        (1.0, None, 2.0),  # doubling
        (2.0, None, 4.0),
        (5.0, None, 10.0),
        (0.1, None, 2.0),  # min delay first, then doubled
        (2000.0, None, 3600.0),  # one hour cap
        (3600.0, None, 3600.0),
        (1.0, 120.0, 120.0),  # Retry-After replaces the doubling
        (100.0, 5.0, 5.0),  # ... also downwards
        (1.0, 0.0, 1.0),  # ... but not below the min delay
        (1.0, 0.5, 1.0),
        (1.0, 7200.0, 3600.0),  # ... and capped at one hour
        (1.0, -5.0, 2.0),  # a negative Retry-After is ignored
    ],
)
def test_after_failure(previous: float, retry_after: float | None, expected: float) -> None:
    assert RULE.after_failure(previous, retry_after) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("retry_after", "crawl_delay", "expected"),
    [(1.0, 2.0, 2.0), (5.0, 2.0, 5.0), (None, 3.0, 3.0), (1.0, 500.0, 500.0)],
)
def test_after_failure_never_undercuts_the_crawl_delay(
    retry_after: float | None, crawl_delay: float, expected: float
) -> None:
    assert RULE.after_failure(1.0, retry_after, crawl_delay) == pytest.approx(expected)


def test_failures_double_up_to_the_hour_cap() -> None:
    gap, seen = 1.0, []
    for _ in range(14):
        gap = RULE.after_failure(gap, None)
        seen.append(gap)
    assert seen[:11] == [2.0 ** (i + 1) for i in range(11)]
    assert seen[11:] == [RULE.max_backoff_s] * 3
    assert RULE.max_backoff_s == 3600.0


# --------------------------------------------------------------------------- fake clock


class FakeClock:
    """Time that only moves when the scheduler sleeps (or a test says so)."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, cond: threading.Condition, seconds: float) -> None:
        assert seconds > 0, "the scheduler must never ask for a non-positive wait"
        self.sleeps.append(seconds)
        self.t += seconds


def scheduler(
    clock: FakeClock, rule: GapRule = RULE, deadline: float = 1000.0
) -> HostScheduler[str]:
    return HostScheduler(rule, deadline, clock, clock.sleep)


def test_one_host_is_visited_at_its_gaps() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["1", "2", "3"])
    starts = []
    for response_s, want_gap in [(0.05, 1.0), (0.3, 3.0), (0.0, 1.0)]:
        job = s.acquire()
        assert job is not None
        starts.append((clock.t, job))
        clock.t += response_s
        assert s.release("a", response_s) == pytest.approx(want_gap)
        assert s.gap_of("a") == pytest.approx(want_gap)
    # 0 -> fetch 0.05 -> gap 1.0 -> 1.05 -> fetch 0.3 -> gap 3.0 -> 4.35
    assert [job for _, job in starts] == [("a", "1"), ("a", "2"), ("a", "3")]
    assert [t for t, _ in starts] == pytest.approx([0.0, 1.05, 4.35])
    assert s.acquire() is None  # no work left, nothing in flight
    assert clock.t == pytest.approx(4.35)  # returned at once, no waiting for nothing
    assert clock.sleeps == pytest.approx([1.0, 3.0])


def test_busy_host_is_not_handed_out_twice() -> None:
    clock = FakeClock()
    s = scheduler(clock, deadline=50.0)
    s.add_host("a", "10.0.0.1", ["1", "2"])
    assert s.acquire() == ("a", "1")
    # Not released: the host's second item must wait; with nobody to release it
    # the scheduler waits until the deadline and gives up.
    assert s.acquire() is None
    assert clock.t == pytest.approx(50.0)
    assert s.drain() == [("a", "2")]


def test_hosts_on_one_ip_are_never_handed_out_together() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["a1"])
    s.add_host("b", "10.0.0.1", ["b1"])  # same address as a
    s.add_host("c", "10.0.0.2", ["c1"])
    assert s.acquire() == ("a", "a1")
    assert s.acquire() == ("c", "c1")  # b is skipped: its address is busy
    assert clock.t == 0.0
    clock.t = 0.2
    gap = s.release("a", 0.2)  # 10 x 0.2 = 2.0 s for a; the address owes 1.0 s
    assert gap == pytest.approx(2.0)
    assert s.acquire() == ("b", "b1")
    assert clock.t == pytest.approx(0.2 + 1.0)  # b waited for the address's minimum delay
    clock.t += 0.01
    s.release("b", 0.01)
    clock.t += 0.01
    s.release("c", 0.01)
    assert s.acquire() is None


def test_ip_clock_is_the_latest_of_its_hosts_in_mode_by_ip() -> None:
    clock = FakeClock()
    s = HostScheduler(RULE, 1000.0, clock, clock.sleep, mode="byIP")
    s.add_host("slow", "10.0.0.1", ["s1"])
    s.add_host("fast", "10.0.0.1", ["f1", "f2"])
    assert s.acquire() == ("slow", "s1")
    clock.t = 3.0
    s.release("slow", 3.0)  # gap 30 s: the address is closed until 33.0
    assert s.acquire() == ("fast", "f1")
    assert clock.t == pytest.approx(33.0)
    clock.t += 0.01
    s.release("fast", 0.01)  # its own gap is 1.0, the address's clock is max(33, 34.01)
    assert s.acquire() == ("fast", "f2")
    assert clock.t == pytest.approx(34.01)


def test_no_request_release_leaves_the_clocks_unchanged() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["denied", "next"])
    s.add_host("b", "10.0.0.1", ["b1"])
    assert s.acquire() == ("a", "denied")
    clock.t = 0.5
    assert s.release("a", 0.0, no_request=True) == pytest.approx(RULE.min_delay_s)
    # Neither the host nor its address owes a gap: both are available at once.
    assert s.acquire() == ("b", "b1")
    assert clock.t == 0.5
    clock.t = 0.6
    s.release("b", 0.0)  # a real request: the address now waits 1.0
    assert s.acquire() == ("a", "next")
    assert clock.t == pytest.approx(1.6)
    assert clock.sleeps == pytest.approx([1.0])


def test_no_request_keeps_a_failure_gap() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["1", "2", "3"])
    s.acquire()
    s.release("a", 0.0, failed=True)  # 1.0 doubled
    s.acquire()
    assert clock.t == pytest.approx(2.0)
    assert s.release("a", 0.0, no_request=True) == pytest.approx(2.0)
    assert s.gap_of("a") == pytest.approx(2.0)
    assert s.acquire() == ("a", "3")
    assert clock.t == pytest.approx(2.0)


def test_failures_double_the_gap_and_successes_bring_it_back_step_by_step() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", [str(i) for i in range(12)])
    gaps, failures = [], []
    for failed, retry_after in [(True, None), (True, None), (True, 30.0), (True, None)] + [
        (False, None)
    ] * 7:
        assert s.acquire() is not None
        gaps.append(s.release("a", 0.01, failed=failed, retry_after_s=retry_after))
        failures.append(s.failures("a"))
    # Each success halves the extra wait until the ordinary gap (1.0) is back.
    assert gaps == pytest.approx([2.0, 4.0, 30.0, 60.0, 30.0, 15.0, 7.5, 3.75, 1.875, 1.0, 1.0])
    assert failures == [1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0]


def test_a_gap_carried_from_the_last_cycle_is_worked_off_step_by_step() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["1", "2", "3"], gap_s=8.0)
    got = []
    for _ in range(3):
        s.acquire()
        got.append(s.release("a", 0.01))
    assert got == pytest.approx([4.0, 2.0, 1.0])


def test_stop_host_takes_its_work_out_and_leaves_others_running() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["a1", "a2", "a3"])
    s.add_host("b", "10.0.0.1", ["b1"])
    assert s.acquire() == ("a", "a1")
    assert s.stop_host("a") == ["a2", "a3"]  # a1 is in flight and finishes
    s.release("a", 0.01)
    assert s.acquire() == ("b", "b1")
    s.release("b", 0.01)
    assert s.acquire() is None
    assert s.drain() == []
    assert s.stop_host("b") == []


def test_operator_min_delay_is_a_floor() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["1", "2", "3"])
    s.acquire()
    s.set_min_delay("a", 12.0)
    assert s.release("a", 0.01) == pytest.approx(12.0)
    s.acquire()
    assert clock.t == pytest.approx(12.0)
    s.set_min_delay("a", None)
    assert s.release("a", 0.01) == pytest.approx(1.0)


def test_mode_by_host_lets_hosts_of_one_address_run_together() -> None:
    clock = FakeClock()
    s = HostScheduler(RULE, 100.0, clock, clock.sleep, mode="byHost")
    s.add_host("a", "10.0.0.1", ["a1"])
    s.add_host("b", "10.0.0.1", ["b1"])
    assert s.acquire() == ("a", "a1")
    assert s.acquire() == ("b", "b1")  # same address, no shared clock


def test_mode_by_ip_shares_the_address_clock_and_hosts_take_turns() -> None:
    clock = FakeClock()
    s = HostScheduler(RULE, 100.0, clock, clock.sleep, mode="byIP")
    s.add_host("a", "10.0.0.1", ["a1", "a2"])
    s.add_host("b", "10.0.0.1", ["b1"])
    assert s.acquire() == ("a", "a1")
    clock.t = 0.01
    s.release("a", 0.01)
    assert s.acquire() == ("b", "b1")  # a's turn is over: b is next in line
    assert clock.t == pytest.approx(1.01)  # after the address's gap
    clock.t += 0.01
    s.release("b", 0.01)
    assert s.acquire() == ("a", "a2")
    assert clock.t == pytest.approx(2.02)


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="politeness mode"):
        HostScheduler(RULE, 1.0, FakeClock(), mode="perHost")


def test_over_cap() -> None:
    assert RULE.over_cap(31.0) and not RULE.over_cap(30.0) and not RULE.over_cap(None)


def test_initial_gap_not_before_and_crawl_delay_from_add_host() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["1", "2"], not_before=10.0, gap_s=4.0, crawl_delay_s=7.0)
    assert s.gap_of("a") == 4.0
    assert s.acquire() == ("a", "1")
    assert clock.t == pytest.approx(10.0)
    assert s.release("a", 0.01) == pytest.approx(7.0)  # Crawl-delay above min delay
    s.acquire()
    assert clock.t == pytest.approx(17.0)


def test_given_gap_is_the_base_of_the_failure_doubling() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["1"], gap_s=4.0)
    s.acquire()
    assert s.release("a", 0.0, failed=True) == pytest.approx(8.0)


def test_set_crawl_delay_applies_from_the_next_release() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["robots", "page1", "page2"])
    assert s.acquire() == ("a", "robots")
    s.set_crawl_delay("a", 5.0)
    assert s.release("a", 0.01) == pytest.approx(5.0)
    assert s.acquire() == ("a", "page1")
    assert clock.t == pytest.approx(5.0)
    s.set_crawl_delay("a", 500.0)  # never shortened (the fetch task defers such a host)
    assert s.release("a", 0.01) == pytest.approx(500.0)
    s.set_crawl_delay("a", None)
    assert s.acquire() == ("a", "page2")
    assert clock.t == pytest.approx(505.0)
    assert s.release("a", 0.01) == pytest.approx(1.0)


def test_push_front_puts_the_item_back_first() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["p1", "p2"])
    assert s.acquire() == ("a", "p1")
    s.push_front("a", "p1")  # e.g. robots.txt was fetched first
    s.release("a", 0.01)
    assert s.acquire() == ("a", "p1")
    assert clock.t == pytest.approx(1.0)  # the robots request still owed its gap
    s.release("a", 0.01)
    assert s.acquire() == ("a", "p2")


def test_push_front_on_the_last_item() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("a", "10.0.0.1", ["only"])
    assert s.acquire() == ("a", "only")
    s.push_front("a", "only")
    s.release("a", 0.0)
    assert s.acquire() == ("a", "only")
    s.release("a", 0.0)
    assert s.acquire() is None


def test_deadline_stops_acquire_and_drain_returns_the_rest() -> None:
    clock = FakeClock()
    s = scheduler(clock, deadline=2.5)
    s.add_host("a", "10.0.0.1", ["1", "2", "3", "4", "5"])
    s.add_host("b", "10.0.0.2", ["x"], not_before=100.0)
    got = []
    while (job := s.acquire()) is not None:
        got.append((clock.t, job))
        s.release(job[0], 0.0)
    assert got == [(0.0, ("a", "1")), (1.0, ("a", "2")), (2.0, ("a", "3"))]
    # a's next visit (3.0) and b's (100.0) fall after the deadline: not waited for
    assert clock.t == pytest.approx(2.0)
    assert clock.sleeps == pytest.approx([1.0, 1.0])
    assert sorted(s.drain()) == [("a", "4"), ("a", "5"), ("b", "x")]
    assert s.drain() == []
    assert s.acquire() is None


def test_acquire_after_deadline_returns_none_at_once() -> None:
    clock = FakeClock(t=10.0)
    s = scheduler(clock, deadline=5.0)
    s.add_host("a", "10.0.0.1", ["1"])
    assert s.acquire() is None
    assert clock.sleeps == []
    assert s.drain() == [("a", "1")]


def test_a_host_due_after_the_deadline_is_not_waited_for() -> None:
    # hostdb's next allowed visit (or a back-off) past the deadline: the host
    # cannot be visited in this task, so acquire ends at once instead of
    # sleeping to the deadline; drain gives its work back.
    clock = FakeClock()
    s = scheduler(clock, deadline=50.0)
    s.add_host("late", "10.0.0.1", ["l1", "l2"], not_before=50.0)
    assert s.acquire() is None
    assert clock.sleeps == []
    assert s.drain() == [("late", "l1"), ("late", "l2")]


def test_wait_s_is_the_time_to_the_next_request_or_infinite_past_the_deadline() -> None:
    clock = FakeClock()
    s = scheduler(clock, deadline=50.0)
    s.add_host("a", "10.0.0.1", ["1", "2", "3"])
    s.add_host("b", "10.0.0.1", ["b1"])
    assert s.wait_s("a") == 0.0
    assert s.acquire() == ("a", "1")
    clock.t = 0.5
    s.release("a", 0.05)  # gap 1.0: next at 1.5, and the address's at 1.5
    assert s.wait_s("a") == pytest.approx(1.0)
    assert s.wait_s("b") == pytest.approx(1.0)  # b's own clock allows it: its address's counts
    assert s.acquire() == ("b", "b1")
    assert clock.t == pytest.approx(1.5)
    s.release("b", 0.0)  # the address: next at 2.5
    assert s.wait_s("a") == pytest.approx(1.0)
    assert s.acquire() == ("a", "2")
    s.release("a", 0.0, failed=True, retry_after_s=47.5)  # next at 50.0: the deadline
    assert s.wait_s("a") == math.inf
    assert s.wait_s("b") == pytest.approx(1.0)


def test_host_without_items_is_never_handed_out() -> None:
    clock = FakeClock()
    s = scheduler(clock)
    s.add_host("empty", "10.0.0.1", [])
    s.add_host("a", "10.0.0.1", ["1"])
    assert s.acquire() == ("a", "1")
    s.release("a", 0.0)
    assert s.acquire() is None
    assert s.drain() == []


# --------------------------------------------------------------------------- simulation


@dataclass
class Visit:
    host: str
    ip: str
    item: str
    start: float
    end: float
    gap: float = 0.0  # the gap release() returned


@dataclass
class Sim:
    """``workers`` concurrent workers played in one thread on a fake clock."""

    rule: GapRule
    workers: int
    response: dict[str, float]  # host -> response time
    failing: set[str] = field(default_factory=set)
    deadline: float = 10_000.0
    t: float = 0.0
    in_flight: list[Visit] = field(default_factory=list)
    done: list[Visit] = field(default_factory=list)

    mode: str = "both"

    def __post_init__(self) -> None:
        self.sched: HostScheduler[str] = HostScheduler(
            self.rule, self.deadline, lambda: self.t, self.sleep, mode=self.mode
        )
        self.ip_of: dict[str, str] = {}

    def add(self, host: str, ip: str, items: list[str]) -> None:
        self.ip_of[host] = ip
        self.sched.add_host(host, ip, items)

    def finish_next(self) -> None:
        visit = min(self.in_flight, key=lambda v: v.end)
        self.in_flight.remove(visit)
        self.t = max(self.t, visit.end)
        visit.gap = self.sched.release(
            visit.host, visit.end - visit.start, failed=visit.host in self.failing
        )
        self.done.append(visit)

    def sleep(self, cond: threading.Condition, seconds: float) -> None:
        # What a real cond.wait(seconds) sees: another worker releasing (and
        # notifying) before the timeout, or the timeout.
        assert seconds > 0
        wake = self.t + seconds
        if self.in_flight and min(v.end for v in self.in_flight) <= wake:
            self.finish_next()
        else:
            self.t = wake

    def run(self) -> list[Visit]:
        while True:
            if len(self.in_flight) < self.workers:
                job = self.sched.acquire()
                if job is None:
                    break
                host, item = job
                resp = self.response[host]
                self.in_flight.append(Visit(host, self.ip_of[host], item, self.t, self.t + resp))
            else:
                self.finish_next()
        while self.in_flight:
            self.finish_next()
        return self.done


def check_polite(visits: list[Visit], key: str, ip_gap: float | None = None) -> None:
    """No overlap per ``key`` (host or ip) and every start after the clock in force:
    a host owes each visit's gap; an address owes ``ip_gap`` (mode both: the
    minimum delay) or, if None, the visit's gap (mode byIP)."""
    by: dict[str, list[Visit]] = defaultdict(list)
    for v in visits:
        by[getattr(v, key)].append(v)
    for name, vs in by.items():
        vs.sort(key=lambda v: v.start)
        for prev, nxt in itertools.pairwise(vs):
            assert nxt.start >= prev.end, f"{key} {name}: overlap {prev} / {nxt}"
        for i, nxt in enumerate(vs):
            gap = (lambda p: p.gap) if key == "host" or ip_gap is None else (lambda p: ip_gap)
            owed = max((p.end + gap(p) for p in vs[:i]), default=0.0)
            assert nxt.start >= owed - 1e-9, f"{key} {name}: {nxt} started before {owed}"


LAYOUTS = {
    # name: (hosts -> (ip, items, response_s), workers, failing hosts)
    "one-ip-three-hosts": ({"a": ("ip1", 4, 0.1), "b": ("ip1", 3, 0.05), "c": ("ip1", 2, 0.3)},
                           3, set()),
    "three-ips": ({"a": ("ip1", 5, 0.1), "b": ("ip1", 2, 0.2), "c": ("ip2", 4, 0.05),
                   "d": ("ip2", 1, 0.5), "e": ("ip3", 6, 0.01), "f": ("ip3", 3, 0.15)}, 4, set()),
    "more-workers-than-hosts": ({"a": ("ip1", 3, 0.2), "b": ("ip2", 3, 0.2)}, 8, set()),
    "failing-host": ({"a": ("ip1", 4, 0.1), "b": ("ip1", 4, 0.1), "c": ("ip2", 3, 0.1)},
                     2, {"b"}),
    "one-worker": ({"a": ("ip1", 3, 0.1), "b": ("ip2", 3, 0.1), "c": ("ip3", 3, 0.1)}, 1, set()),
}  # fmt: skip


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_simulated_workers_are_polite_and_visit_everything(layout: str) -> None:
    hosts, workers, failing = LAYOUTS[layout]
    sim = Sim(RULE, workers, {h: resp for h, (_, _, resp) in hosts.items()}, failing)
    for host, (ip, n, _) in hosts.items():
        sim.add(host, ip, [f"{host}{i}" for i in range(n)])
    visits = sim.run()
    # every item exactly once, each host's items in their order
    assert sorted(v.item for v in visits) == sorted(
        f"{h}{i}" for h, (_, n, _) in hosts.items() for i in range(n)
    )
    for host, (_, n, _) in hosts.items():
        assert [v.item for v in sorted(visits, key=lambda v: v.start) if v.host == host] == [
            f"{host}{i}" for i in range(n)
        ]
    check_polite(visits, "host")
    check_polite(visits, "ip", RULE.min_delay_s)
    assert sim.sched.drain() == []
    # distinct addresses do run in parallel when there are workers for them
    ips = {ip for ip, _, _ in hosts.values()}
    if workers > 1 and len(ips) > 1:
        assert any(
            a.ip != b.ip and a.start < b.end and b.start < a.end
            for a in visits
            for b in visits
            if a is not b
        )


@pytest.mark.parametrize(
    ("mode", "starts"),
    [
        # byIP: one visit at a time, each 0.2 s plus the 2.0 s gap it earned
        # (10 x 0.2) before the next to the address: no idle time beyond that.
        ("byIP", [0.0, 2.2, 4.4, 6.6]),
        # both: each host waits its own 2.0 s, the address only the 1.0 s
        # minimum: a0 0, b0 0.2+1.0, a1 max(0.2+2.0, 1.4+1.0), b1 max(1.4+2.0, 2.6+1.0)
        ("both", [0.0, 1.2, 2.4, 3.6]),
    ],
)
def test_simulated_gaps_are_exact_on_a_fake_clock(mode: str, starts: list[float]) -> None:
    sim = Sim(RULE, 2, {"a": 0.2, "b": 0.2}, mode=mode)
    sim.add("a", "ip1", ["a0", "a1"])
    sim.add("b", "ip1", ["b0", "b1"])
    visits = sim.run()
    assert sorted(v.start for v in visits) == pytest.approx(starts)
    assert [v.gap for v in visits] == pytest.approx([2.0] * 4)


def test_hosts_sharing_an_ip_take_turns() -> None:
    sim = Sim(RULE, 2, {"a": 0.1, "b": 0.1}, deadline=4.0)
    sim.add("a", "ip1", [f"a{i}" for i in range(6)])
    sim.add("b", "ip1", [f"b{i}" for i in range(3)])
    visits = sorted(sim.run(), key=lambda v: v.start)
    # Four slots fit before the deadline (0, 1.1, 2.2, 3.3): both hosts get some.
    assert len(visits) == 4
    assert {v.host for v in visits} == {"a", "b"}


def test_simulated_workers_end_when_nothing_left_fits_before_the_deadline() -> None:
    # a fails every time: its gap doubles (2, 4, 8, 16) until its next visit
    # falls past the deadline, while b works through its list meanwhile. The
    # workers end with a's last visit, not at the deadline.
    sim = Sim(RULE, 2, {"a": 0.1, "b": 0.1}, failing={"a"}, deadline=20.0)
    sim.add("a", "ip1", [f"a{i}" for i in range(10)])
    sim.add("b", "ip2", [f"b{i}" for i in range(10)])
    visits = sim.run()
    # a at 0, 2.1, 6.2 and 14.3 (next: 30.4); b every 1.1 s up to 9.9
    assert [v.start for v in visits if v.host == "a"] == pytest.approx([0.0, 2.1, 6.2, 14.3])
    assert len([v for v in visits if v.host == "b"]) == 10
    assert sim.t == pytest.approx(14.4)  # a's last visit ended: no wait to 20.0
    assert sim.sched.drain() == [("a", f"a{i}") for i in range(4, 10)]


def test_simulated_deadline_leaves_work_for_drain() -> None:
    sim = Sim(RULE, 2, {"a": 0.1, "b": 0.1}, deadline=3.0)
    sim.add("a", "ip1", [f"a{i}" for i in range(10)])
    sim.add("b", "ip2", [f"b{i}" for i in range(10)])
    visits = sim.run()
    left = sim.sched.drain()
    assert all(v.start < 3.0 for v in visits)
    assert sorted([v.item for v in visits] + [item for _, item in left]) == sorted(
        [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
    )
    assert len(visits) == 6  # starts at 0, 1.1 and 2.2 on each address (gap 1.0)


# --------------------------------------------------------------------------- real threads


def test_threads_respect_host_and_ip_gaps() -> None:
    rule = GapRule(min_delay_s=0.01, delay_factor=1.0, max_delay_s=1.0, max_crawl_delay_s=1.0)
    s: HostScheduler[int] = HostScheduler(rule, time.monotonic() + 10.0, time.monotonic)
    hosts = {f"h{i}": f"ip{i % 3}" for i in range(6)}  # 6 hosts on 3 addresses
    for i, (host, ip) in enumerate(hosts.items()):
        s.add_host(host, ip, range(4), crawl_delay_s=0.01 * (i % 5 + 1))  # gaps 0.01-0.05 s
    visits: list[Visit] = []
    lock = threading.Lock()

    def worker() -> None:
        while (job := s.acquire()) is not None:
            host, item = job
            start = time.monotonic()
            time.sleep(0.002)
            end = time.monotonic()
            gap = s.release(host, end - start)
            with lock:
                visits.append(Visit(host, hosts[host], str(item), start, end, gap))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5.0)
    assert not any(t.is_alive() for t in threads)
    assert len(visits) == 24
    assert sorted((v.host, v.item) for v in visits) == sorted(
        (h, str(i)) for h in hosts for i in range(4)
    )
    for v in visits:  # the configured gap: the host's Crawl-delay
        i = int(v.host[1:])
        assert v.gap == pytest.approx(max(0.01 * (i % 5 + 1), v.end - v.start), abs=0.002)
    tolerance = 0.002
    for key in ("host", "ip"):
        by: dict[str, list[Visit]] = defaultdict(list)
        for v in visits:
            by[getattr(v, key)].append(v)
        for name, vs in by.items():
            vs.sort(key=lambda v: v.start)
            for i, nxt in enumerate(vs):
                if i:
                    assert nxt.start >= vs[i - 1].end, f"{key} {name} overlaps"
                # a host owes its gap; its address (mode both) the minimum delay
                gaps = [p.end + (p.gap if key == "host" else rule.min_delay_s) for p in vs[:i]]
                assert nxt.start >= max(gaps, default=0.0) - tolerance, f"{key} {name}: too soon"
    assert s.drain() == []


def test_close_wakes_a_waiting_acquire_and_hands_out_nothing_more() -> None:
    """A task that failed closes its scheduler: a worker waiting on a busy
    host returns at once instead of at the deadline (real time here)."""
    s: HostScheduler[str] = HostScheduler(RULE, time.monotonic() + 60, time.monotonic)
    s.add_host("a", "10.0.0.1", ["1", "2"])
    s.add_host("b", "10.0.0.2", ["x"])
    first = s.acquire()
    assert first is not None
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.extend([s.acquire(), s.acquire()]))
    waiter.start()  # takes the other host, then waits on the busy one
    s.close()
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert got[-1] is None and s.acquire() is None
    assert len(s.drain()) == 3 - 1 - sum(1 for g in got if g is not None)
