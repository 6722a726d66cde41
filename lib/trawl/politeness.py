"""The politeness clock of one fetch task: Mercator's host heap, written here.

Each fetch task owns a group of hosts (generate keeps hosts that share an
address in one group), so all politeness state is local to one executor and
needs no coordination. Rules:

- one request in flight per host, and per IP address: hosts that resolve to
  the same address share one clock (Nutch counts per host only);
- after a response, the host waits ``gap = max(min_delay, Crawl-delay
  (capped), delay_factor x response time)``, at most ``max_delay`` (Mercator,
  Najork & Heydon: ten times the last response time, so a slow server is
  visited less often);
- after a transient failure (429, 5xx, timeout) the gap doubles, or follows
  ``Retry-After`` (RFC 9110 10.2.3 / RFC 6585 4) when the server gives one.

Why our own scheduler rather than a library: the rule set is small, but it has
to combine a per-host heap, a per-IP lock and a task deadline under one lock
for many worker threads; no maintained Python library does that, and the
whole thing stays under two hundred lines with an injected clock for tests.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

RETRY_GAP_CAP_S = 3600.0  # a struggling host is visited at most hourly


@dataclass(frozen=True)
class GapRule:
    """How long a host waits after a fetch. Built from ``politeness.*`` config."""

    min_delay_s: float = 1.0
    delay_factor: float = 10.0
    max_delay_s: float = 60.0
    max_crawl_delay_s: float = 30.0

    def after_success(self, response_s: float, crawl_delay_s: float | None) -> float:
        crawl_delay = min(crawl_delay_s or 0.0, self.max_crawl_delay_s)
        gap = max(self.min_delay_s, crawl_delay, self.delay_factor * max(response_s, 0.0))
        # The robots Crawl-delay (capped) is a floor the max_delay cap never lowers.
        return max(min(gap, self.max_delay_s), crawl_delay, self.min_delay_s)

    def after_failure(self, previous_gap_s: float, retry_after_s: float | None) -> float:
        if retry_after_s is not None and retry_after_s >= 0:
            return min(max(retry_after_s, self.min_delay_s), RETRY_GAP_CAP_S)
        return min(max(previous_gap_s, self.min_delay_s) * 2.0, RETRY_GAP_CAP_S)


@dataclass
class _Host(Generic[T]):
    name: str
    ip: str
    work: deque[T]
    gap_s: float
    next_allowed: float
    crawl_delay_s: float | None = None
    busy: bool = False


@dataclass
class _Ip:
    next_allowed: float = 0.0
    busy: bool = False
    waiting: list[str] = field(default_factory=list)


class HostScheduler(Generic[T]):
    """Hands out (host, work item) pairs to worker threads, politely.

    ``acquire`` blocks until some host may be visited and returns it with its
    next item, or returns None once no work is left or the deadline passed.
    Every acquire must be followed by ``release`` with the outcome timing.
    """

    def __init__(
        self,
        rule: GapRule,
        deadline: float,
        clock: Callable[[], float],
        sleep: Callable[[threading.Condition, float], None] | None = None,
    ) -> None:
        self.rule = rule
        self.deadline = deadline
        self._clock = clock
        self._wait = sleep or (lambda cond, seconds: cond.wait(seconds))
        self._cond = threading.Condition()
        self._hosts: dict[str, _Host[T]] = {}
        self._ips: dict[str, _Ip] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._in_flight = 0

    def add_host(
        self,
        name: str,
        ip: str,
        items: Iterable[T],
        not_before: float = 0.0,
        gap_s: float | None = None,
        crawl_delay_s: float | None = None,
    ) -> None:
        with self._cond:
            host = _Host(
                name,
                ip,
                deque(items),
                gap_s or self.rule.min_delay_s,
                max(not_before, self._clock()),
                crawl_delay_s,
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

    def set_crawl_delay(self, name: str, crawl_delay_s: float | None) -> None:
        with self._cond:
            self._hosts[name].crawl_delay_s = crawl_delay_s

    def acquire(self) -> tuple[str, T] | None:
        with self._cond:
            while True:
                now = self._clock()
                if now >= self.deadline or (not self._heap and self._in_flight == 0):
                    return None
                if not self._heap:
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
    ) -> float:
        """Finish a visit; returns the gap now in force for the host.

        ``no_request`` marks a decision made without contacting the host (a
        robots denial): the host's and address's clocks are left as they were.
        """
        with self._cond:
            host = self._hosts[name]
            ip = self._ips[host.ip]
            if no_request:
                self._finish(host, ip)
                return host.gap_s
            if failed:
                host.gap_s = self.rule.after_failure(host.gap_s, retry_after_s)
            else:
                host.gap_s = self.rule.after_success(response_s, host.crawl_delay_s)
            now = self._clock()
            host.next_allowed = now + host.gap_s
            ip.next_allowed = max(ip.next_allowed, now + host.gap_s)
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

    def gap_of(self, name: str) -> float:
        with self._cond:
            return self._hosts[name].gap_s

    def _push(self, host: _Host[T]) -> None:
        heapq.heappush(self._heap, (host.next_allowed, next(self._seq), host.name))
