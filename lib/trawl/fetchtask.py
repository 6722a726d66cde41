"""One fetch task: a group of hosts fetched politely until done or out of time.

Runs on an executor (called from the fetch stage's ``mapPartitions``), with no
Spark in sight: it takes the task's fetchlist rows, resolves each host once
(refusing private addresses unless allowed: the SSRF guard), decides robots
rules from hostdb's cached copy or fetches robots.txt first, and lets
``fetch.threads_per_task`` workers take (host, URL) pairs from the politeness
scheduler. Every URL of the fetchlist comes out as exactly one ``page`` row:
fetched, denied, deferred, blocked, or ``not_reached`` when the segment's
time limit came first (released for the next cycle, never lost).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trawl import __version__
from trawl.config import Config
from trawl.fetcher import Fetcher, Row, Visit, origin_of
from trawl.politeness import GapRule, HostScheduler
from trawl.resolver import AddressRefused
from trawl.robots import UNREACHABLE_REASONS, RobotsRules
from trawl.status import FetchOutcome
from trawl.warc import WarcWriter, warc_filename


def gap_rule(cfg: Config) -> GapRule:
    p = cfg.politeness
    return GapRule(p.min_delay_s, p.delay_factor, p.max_delay_s, cfg.robots.max_crawl_delay_s)


def cached_rules(item: Mapping[str, Any], cfg: Config, now: datetime) -> RobotsRules | None:
    """Rules from hostdb's copy if it is for this origin and younger than the
    cache limit (RFC 9309 2.4: no longer than 24 hours). Failures are never
    cached: an unreachable robots.txt is asked again."""
    fetched_at = item.get("robots_fetched_at")
    status = item.get("robots_status")
    if not fetched_at or not item.get("robots_url") or not status:
        return None
    if status in UNREACHABLE_REASONS:
        return None
    if origin_of(str(item["robots_url"])) != origin_of(str(item["url"])):
        return None
    if now - _utc(fetched_at) > timedelta(seconds=cfg.robots.cache_ttl_s):
        return None
    if status == "parsed":
        body = item.get("robots_body") or ""
        return RobotsRules.parse(body, cfg.http.agent_name, max_bytes=cfg.robots.max_bytes)
    return RobotsRules.allow_all(str(status))


def _monotonic_at(when: datetime | None, now: datetime) -> float:
    """The scheduler's clock reading for a wall-clock time from hostdb (the
    host's next allowed visit, carried over from the last cycle)."""
    if when is None:
        return 0.0
    return time.monotonic() + (_utc(when) - now).total_seconds()


def _utc(when: datetime) -> datetime:
    """Spark hands timestamps back naive (session time zone UTC): make them aware."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class FetchTask:
    """State of one running task; ``run`` yields the fetch rows."""

    def __init__(self, cfg: Config, fetcher: Fetcher, deadline: float) -> None:
        self.cfg = cfg
        self.fetcher = fetcher
        self.scheduler: HostScheduler[Mapping[str, Any]] = HostScheduler(
            gap_rule(cfg), deadline, time.monotonic
        )
        self.rules: dict[str, RobotsRules] = {}  # origin -> rules in force
        self.ips: dict[str, str] = {}
        self.rows: list[Row] = []
        self._lock = threading.Lock()

    def emit(self, row: Row) -> None:
        with self._lock:
            self.rows.append(row)

    def unfetched_row(self, item: Mapping[str, Any], outcome: FetchOutcome, **fields: Any) -> Row:
        """The row of a URL decided without a response (skipped, denied, ...)."""
        row = self.fetcher.base_row(
            item, "page", str(item["url"]), self.ips.get(item["host"]), datetime.now(UTC)
        )
        row.update(outcome=outcome.value, **fields)
        return row

    def skip(self, item: Mapping[str, Any], outcome: FetchOutcome, why: str) -> None:
        self.emit(self.unfetched_row(item, outcome, error=why))

    def add_hosts(self, items: Iterable[Mapping[str, Any]]) -> None:
        by_host: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for item in items:
            by_host[str(item["host"])].append(item)
        now = datetime.now(UTC)
        for host, host_items in by_host.items():
            try:
                ip = self.fetcher.resolver.resolve(host)
            except AddressRefused as exc:
                outcome = (
                    FetchOutcome.DEFERRED if exc.reason == "unresolvable" else FetchOutcome.BLOCKED
                )
                for item in host_items:
                    self.skip(item, outcome, f"address: {exc.reason}")
                continue
            self.ips[host] = ip
            first = host_items[0]
            rules = cached_rules(first, self.cfg, now)
            if rules is not None:
                self.rules[origin_of(str(first["url"]))] = rules
            self.scheduler.add_host(
                host,
                ip,
                host_items,
                not_before=_monotonic_at(first.get("next_allowed_at"), now),
                gap_s=first.get("delay_s"),
                crawl_delay_s=rules.crawl_delay() if rules else None,
            )

    def worker(self) -> None:
        while (job := self.scheduler.acquire()) is not None:
            host, item = job
            try:
                visit = self.visit(host, item)
            except Exception as exc:  # a bad page must not kill the task
                self.skip(item, FetchOutcome.RETRY, f"internal: {type(exc).__name__}: {exc}")
                self.scheduler.release(host, 0.0, failed=True)
                continue
            visit.row["delay_s"] = self.scheduler.release(
                host, visit.response_s, visit.failed, visit.retry_after_s, visit.no_request
            )
            self.emit(visit.row)

    def visit(self, host: str, item: Mapping[str, Any]) -> Visit:
        origin = origin_of(str(item["url"]))
        ip = self.ips[host]
        if origin not in self.rules:
            visit = self.fetcher.visit_robots(item, ip)
            assert visit.rules is not None
            self.rules[origin] = visit.rules
            self.scheduler.set_crawl_delay(host, visit.rules.crawl_delay())
            self.scheduler.push_front(host, item)
            return visit
        rules = self.rules[origin]
        if rules.unreachable:
            # RFC 9309 2.3.1.4: unreachable robots.txt means complete disallow;
            # the URL is not gone, it waits for the host to answer again.
            return self._no_request(item, FetchOutcome.DEFERRED, "robots_unreachable")
        if not rules.allowed(str(item["url"])):
            return self._no_request(item, FetchOutcome.ROBOTS_DENIED, "robots_denied")
        visit = self.fetcher.visit_page(item, ip)
        visit.row["robots_decision"] = "allowed"
        return visit

    def _no_request(self, item: Mapping[str, Any], outcome: FetchOutcome, why: str) -> Visit:
        """A decision without a request: no politeness gap is owed for it."""
        row = self.unfetched_row(item, outcome, robots_decision=why)
        return Visit(row, 0.0, failed=False, no_request=True)

    def run(self) -> list[Row]:
        threads = [
            threading.Thread(target=self.worker, name=f"fetch-{i}", daemon=True)
            for i in range(max(1, self.cfg.fetch.threads_per_task))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for _, item in self.scheduler.drain():
            self.skip(item, FetchOutcome.NOT_REACHED, "time_limit")
        return self.rows


def run_fetch_task(
    items: Iterable[Mapping[str, Any]],
    cfg: Config,
    segment: str,
    task: int,
    warc_dir: str | None,
    time_limit_s: float,
) -> Iterator[Row]:
    """Fetch one task's fetchlist rows; yields one row per attempt."""
    writer = None
    if warc_dir:
        Path(warc_dir).mkdir(parents=True, exist_ok=True)
        writer = WarcWriter(
            Path(warc_dir) / warc_filename("trawl", segment, task),
            software=f"trawl/{__version__}",
            extra_info={"segment": segment, "robots": "obey", "isPartOf": segment},
        )
    fetcher = Fetcher.from_config(cfg, writer)
    try:
        job = FetchTask(cfg, fetcher, time.monotonic() + time_limit_s)
        job.add_hosts(items)
        rows = job.run()
    finally:
        fetcher.client.close()
        if writer is not None:
            writer.close()
    yield from rows
