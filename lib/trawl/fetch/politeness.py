"""The politeness clock of one fetch task: Mercator's host heap, written here.

Each fetch task owns a group of hosts (generate keeps hosts that share an
address in one group), so all politeness state is local to one executor and
needs no coordination. Rules:

- one request in flight per host, and per IP address: hosts that resolve to
  the same address share one clock (Nutch counts per host only);
- after a response, the host waits ``gap = max(min_delay, Crawl-delay,
  delay_factor x response time)``, at most ``max_delay`` unless the
  Crawl-delay asks for more (Mercator, Najork & Heydon: ten times the last
  response time, so a slow server is visited less often). A Crawl-delay is
  never shortened; one above ``max_crawl_delay_s`` makes the host
  ``over_cap``: the fetch task gives it one request and defers the rest;
- after a transient failure (429, 5xx, timeout) the gap doubles, or follows
  ``Retry-After`` (RFC 9110 10.2.3 / RFC 6585 4) when the server gives one,
  up to ``max_backoff_s``; each success after that halves the extra wait, so
  a host that struggled comes back step by step (Heritrix's adaptive delay);
- ``max_failures`` failed requests in a row pause the host: its remaining
  work is taken out (``stop_host``) and deferred;
- ``mode`` says whose clock counts. "byHost": each host its own, hosts on one
  address do not wait for each other. "byIP": the address is the unit, as
  Nutch's queue by IP: one request in flight and each request's whole gap
  (Crawl-delay, back-off, response time) before the next to any of its
  hosts. "both" (default): every host keeps its own full gap, and its
  address allows one request in flight and ``min_delay`` between any two, so
  a host's Crawl-delay or back-off holds up only that host;
- an operator's minimum delay for a host (``set_min_delay``) is a floor, and
  ``stop_host`` takes a blocked host's work out while others run on;
- the task's deadline (the segment's time limit) ends the waiting: a host
  whose next allowed time is at or past it cannot be visited in this task,
  so it is not waited for. Once no queued host can start before the deadline
  and nothing is in flight, ``acquire`` returns None at once and ``drain``
  gives the rest back (the task releases it as not reached), instead of
  every worker sleeping until the deadline for nothing.

Why our own scheduler rather than a library: the rule set is small, but it has
to combine a per-host heap, a per-IP lock and a task deadline under one lock
for many worker threads; no maintained Python library does that, and the
whole thing stays under two hundred lines with an injected clock for tests.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

MODES = ("byHost", "byIP", "both")


@dataclass(frozen=True)
class GapRule:
    """How long a host waits after a fetch. Built from ``politeness.*`` config."""

    min_delay_s: float = 1.0
    delay_factor: float = 10.0
    max_delay_s: float = 60.0
    max_crawl_delay_s: float = 30.0
    max_backoff_s: float = 3600.0  # a struggling host is visited at most hourly

    def after_success(self, response_s: float, crawl_delay_s: float | None) -> float:
        # The Crawl-delay is never shortened: a host asking for more than
        # max_crawl_delay_s gets one request per segment instead (over_cap).
        crawl_delay = crawl_delay_s or 0.0
        gap = max(self.min_delay_s, crawl_delay, self.delay_factor * max(response_s, 0.0))
        # The robots Crawl-delay is a floor the max_delay cap never lowers.
        return max(min(gap, self.max_delay_s), crawl_delay, self.min_delay_s)

    def after_failure(
        self, previous_gap_s: float, retry_after_s: float | None, crawl_delay_s: float | None = None
    ) -> float:
        if retry_after_s is not None and retry_after_s >= 0:
            gap = min(max(retry_after_s, self.min_delay_s), self.max_backoff_s)
        else:
            gap = min(max(previous_gap_s, self.min_delay_s) * 2.0, self.max_backoff_s)
        # A short Retry-After never undercuts the host's Crawl-delay.
        return max(gap, crawl_delay_s or 0.0)

    def over_cap(self, crawl_delay_s: float | None) -> bool:
        """A Crawl-delay longer than the cap: the host gets one request per
        segment and its next visit waits the full delay (never faster)."""
        return crawl_delay_s is not None and crawl_delay_s > self.max_crawl_delay_s


@dataclass
class _Host(Generic[T]):
    name: str
    ip: str
    work: deque[T]
    gap_s: float
    next_allowed: float
    crawl_delay_s: float | None = None
    busy: bool = False
    penalty_s: float = 0.0  # extra wait left from failures, halved by each success
    min_delay_s: float = 0.0  # an operator's floor (policy)
    failures: int = 0  # failed requests in a row


@dataclass
class _Ip:
    next_allowed: float = 0.0
    busy: bool = False
    waiting: list[str] = field(default_factory=list)


class HostScheduler(Generic[T]):
    """Hands out (host, work item) pairs to worker threads, politely.

    ``acquire`` blocks until some host may be visited and returns it with its
    next item, or returns None once no work is left that could start before
    the deadline (none queued and none in flight to bring more) or the
    deadline passed.
    Every acquire must be followed by ``release`` with the outcome timing.
    """

    def __init__(
        self,
        rule: GapRule,
        deadline: float,
        clock: Callable[[], float],
        sleep: Callable[[threading.Condition, float], None] | None = None,
        mode: str = "both",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"politeness mode must be one of {MODES}, got {mode!r}")
        self.rule = rule
        self.mode = mode
        self.deadline = deadline
        self._clock = clock
        self._wait = sleep or (lambda cond, seconds: cond.wait(seconds))
        self._cond = threading.Condition()
        self._hosts: dict[str, _Host[T]] = {}
        self._ips: dict[str, _Ip] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._in_flight = 0
        self._closed = False

    def close(self) -> None:
        """Hand out no more work: every ``acquire``, waiting or to come,
        returns None (the task failed; ``drain`` gives what is left)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def add_host(
        self,
        name: str,
        ip: str,
        items: Iterable[T],
        not_before: float = 0.0,
        gap_s: float | None = None,
        crawl_delay_s: float | None = None,
    ) -> None:
        """Add a host and its work. ``gap_s`` is the gap in force from the last
        cycle (hostdb): more than a success would give counts as back-off
        still to be worked off step by step."""
        with self._cond:
            if self.mode == "byHost":
                ip = f"host:{name}"  # no clock shared with other hosts
            host = _Host(
                name,
                ip,
                deque(items),
                gap_s or self.rule.min_delay_s,
                max(not_before, self._clock()),
                crawl_delay_s,
                penalty_s=gap_s or 0.0,
            )
            self._hosts[name] = host
            self._ips.setdefault(ip, _Ip())
            if host.work:
                self._push(host)
            self._cond.notify_all()

    def push_front(self, name: str, item: T) -> None:
        """Put an item back at the head of a host's queue (e.g. after robots)."""
        with self._cond:
            self._hosts[name].work.appendleft(item)

    def _extend(self, name: str, items: list[T], front: bool = False) -> None:
        """Append work to a known host (``front``: ahead of its other work, in
        order; lock held). A host with work is in the heap, waits for its
        address or is busy; one without is none of these, so it is queued
        here."""
        host = self._hosts[name]
        queued = host.busy or bool(host.work)
        if front:
            host.work.extendleft(reversed(items))
        else:
            host.work.extend(items)
        if items and not queued:
            self._push(host)
            self._cond.notify_all()

    def set_crawl_delay(self, name: str, crawl_delay_s: float | None) -> None:
        with self._cond:
            self._hosts[name].crawl_delay_s = crawl_delay_s

    def set_min_delay(self, name: str, min_delay_s: float | None) -> None:
        """An operator's minimum gap for the host (None: none); applies from
        the host's next release."""
        with self._cond:
            self._hosts[name].min_delay_s = min_delay_s or 0.0

    def stop_host(self, name: str) -> list[T]:
        """Take the host's remaining work out (blocked, paused, failing or over
        its Crawl-delay cap); a request in flight finishes. Returns the items."""
        with self._cond:
            host = self._hosts[name]
            items = list(host.work)
            host.work.clear()
            self._heap = [entry for entry in self._heap if entry[2] != name]
            heapq.heapify(self._heap)
            for ip in self._ips.values():
                if name in ip.waiting:
                    ip.waiting.remove(name)
            self._cond.notify_all()
            return items

    def failures(self, name: str) -> int:
        """Failed requests to the host in a row."""
        with self._cond:
            return self._hosts[name].failures

    def hosts(self) -> list[str]:
        with self._cond:
            return list(self._hosts)

    def active(self) -> int:
        """Hosts with work queued or a request in flight."""
        with self._cond:
            return sum(1 for h in self._hosts.values() if h.work or h.busy)

    def acquire(self) -> tuple[str, T] | None:
        with self._cond:
            while True:
                now = self._clock()
                if now >= self.deadline or self._closed:
                    return None
                if not self._heap or self._heap[0][0] >= self.deadline:
                    # Nothing queued can start before the deadline (the heap's
                    # first time is the earliest): the task is done, unless a
                    # visit in flight may still bring work that can.
                    if self._in_flight == 0:
                        return None
                    self._wait(self._cond, min(1.0, self.deadline - now))
                    continue
                ready_at, seq, name = self._heap[0]
                host = self._hosts[name]
                ip = self._ips[host.ip]
                if ip.busy:
                    heapq.heappop(self._heap)
                    ip.waiting.append(name)
                    continue
                start = max(ready_at, ip.next_allowed)
                if start > now:
                    if start > ready_at:
                        # The shared IP clock is later: requeue at that time, keeping
                        # the host's place in line so hosts of one IP take turns.
                        heapq.heapreplace(self._heap, (start, seq, name))
                    self._wait(self._cond, min(start - now, self.deadline - now))
                    continue
                heapq.heappop(self._heap)
                host.busy = ip.busy = True
                self._in_flight += 1
                return name, host.work.popleft()

    def release(
        self,
        name: str,
        response_s: float,
        failed: bool = False,
        retry_after_s: float | None = None,
        no_request: bool = False,
        more: Mapping[str, list[T]] | None = None,
        first: Mapping[str, list[T]] | None = None,
    ) -> float:
        """Finish a visit; returns the gap now in force for the host.

        ``no_request`` marks a decision made without contacting the host (a
        robots denial): the host's and address's clocks are left as they were.
        ``more``: work the visit found (a redirect target, followed links),
        host -> items, queued in the same step, so no worker sees the task
        out of work in between and stops; ``first``: such work queued ahead
        of the host's other work (a page's requisites, fetched close to it).
        """
        with self._cond:
            for other, items in (more or {}).items():
                self._extend(other, items)
            for other, items in (first or {}).items():
                self._extend(other, items, front=True)
            host = self._hosts[name]
            ip = self._ips[host.ip]
            if no_request:
                self._finish(host, ip)
                return host.gap_s
            if failed:
                host.failures += 1
                host.gap_s = self.rule.after_failure(
                    max(host.gap_s, host.penalty_s), retry_after_s, host.crawl_delay_s
                )
                host.penalty_s = host.gap_s
            else:
                host.failures = 0
                gap = self.rule.after_success(response_s, host.crawl_delay_s)
                host.penalty_s = host.penalty_s / 2 if host.penalty_s / 2 > gap else 0.0
                host.gap_s = max(gap, host.penalty_s)
            host.gap_s = max(host.gap_s, host.min_delay_s)
            now = self._clock()
            host.next_allowed = now + host.gap_s
            # byIP: the address waits out each request's whole gap (Nutch's queue
            # by IP); both: one request in flight and the minimum delay -- a
            # host's own Crawl-delay, back-off or slowness holds only that host.
            ip_gap = host.gap_s if self.mode == "byIP" else self.rule.min_delay_s
            ip.next_allowed = max(ip.next_allowed, now + ip_gap)
            self._finish(host, ip)
            return host.gap_s

    def _finish(self, host: _Host[T], ip: _Ip) -> None:
        host.busy = ip.busy = False
        self._in_flight -= 1
        for waiting in ip.waiting:
            self._push(self._hosts[waiting])
        ip.waiting.clear()
        if host.work:
            self._push(host)
        self._cond.notify_all()

    def drain(self) -> list[tuple[str, T]]:
        """Everything not handed out (call after the workers stopped)."""
        with self._cond:
            left = [(h.name, item) for h in self._hosts.values() for item in h.work]
            for host in self._hosts.values():
                host.work.clear()
            self._heap.clear()
            return left

    def wait_s(self, name: str) -> float:
        """Seconds until the host's next request may start, by its own clock
        and its address's; infinite when that is at or past the deadline,
        so the request cannot be made in this task."""
        with self._cond:
            host = self._hosts[name]
            start = max(host.next_allowed, self._ips[host.ip].next_allowed)
            if start >= self.deadline:
                return math.inf
            return max(start - self._clock(), 0.0)

    def gap_of(self, name: str) -> float:
        with self._cond:
            return self._hosts[name].gap_s

    def _push(self, host: _Host[T]) -> None:
        heapq.heappush(self._heap, (host.next_allowed, next(self._seq), host.name))
