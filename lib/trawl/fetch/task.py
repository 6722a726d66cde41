"""One fetch task: a group of hosts fetched politely until done or out of time.

Runs on an executor (called from the fetch stage's ``mapPartitions``), with no
Spark in sight: it takes the task's fetchlist rows, resolves each host once
(refusing private addresses unless allowed: the SSRF guard), decides robots
rules from hostdb's cached copy or fetches robots.txt first, and lets
``fetch.threads_per_task`` workers take (host, URL) pairs from the politeness
scheduler. Every URL of the fetchlist comes out as exactly one ``page`` row:
fetched, denied, deferred, blocked, or ``not_reached`` when the segment's
time limit came first (released for the next cycle, never lost). A host whose
next allowed visit falls after the time limit is not waited for: once no
host can be visited before it, the task ends (``HostScheduler.acquire``).

Decisions taken on the way (the rules: ``trawl.fetch.rules``), each recorded in
the row (``robots_decision`` or ``error``) and counted by the fetch job:

- robots.txt unreachable (5xx, 429, network error): the last usable copy from
  hostdb is used if there is one (RFC 9309 2.4 allows it past 24 h in that
  case); without one the host is completely disallowed (2.3.1.4) and its URLs
  deferred after ``ROBOTS_ATTEMPTS`` tries with back-off -- or sooner, once
  the back-off (doubling, and carried over in hostdb) puts the next try past
  the time limit or more than ``robots.max_crawl_delay_s`` away --, until the
  outage passes ``robots.unreachable_fallback_s`` (30 days), after which the
  host counts as having no robots.txt;
- a Crawl-delay above ``robots.max_crawl_delay_s``: one request this segment,
  the host's other URLs deferred, its next visit not before the full delay;
- ``politeness.max_failures`` failures in a row: the host's other URLs
  deferred (hostdb then pauses it for ``politeness.failure_pause_s``);
- an operator's policy (``trawl policy``), re-read every
  ``fetch.policy_refresh_s``: a blocked or paused host's remaining URLs are
  deferred mid-segment, a minimum delay applies from the next request;
- redirects: followed up to ``fetch.follow_redirects`` hops when the target
  passes the URL filters and its host is fetched by this task (so under that
  host's politeness), otherwise recorded for a later cycle; no URL is fetched
  twice in one task (and a host belongs to one task only);
- links (``fetch.follow_depth``): a fetched page's links to URLs crawldb does
  not know, on the task's hosts, are fetched in the same segment, up to
  ``follow_depth`` steps from a generated page and within each host's room
  from generate (``follow_quota``); the rules are in ``trawl.fetch.follow``.
  Their rows name the page (``linked_from``); updatedb adds them to crawldb
  as fetched. A link the task can settle without a request is settled
  there (denied by robots.txt, or deferred with its stopped host). A link
  to a host crawldb has never seen starts that host in the task when the
  task owns its address (``fetch.follow_new_hosts``, ``trawl.fetch.claims``);
- soft 404s (``trawl.dedup.soft404``, ``traps.soft404_probe``): a host with no
  probe in hostdb, or one older than ``traps.soft404_reprobe_s``, is asked
  once for a path that cannot exist, after robots.txt and before its first
  page, as one more request under its politeness (a ``probe`` row; none when
  robots.txt disallows the path or the Crawl-delay is over the cap, and that
  is recorded); the host's 2xx pages, and its redirects when the probe was
  redirected, are then compared with the answer (this one, or hostdb's when
  it failed or was not needed). generate leaves room for robots.txt and the
  probe in the host's fetch window;
- page requisites (``requisites.capture``): what a fetched page (and a
  stylesheet it uses) needs to render, on the task's hosts, is fetched right
  after it, ahead of the host's other work, under the same robots.txt rules
  and politeness, within ``requisites.max_per_host`` (``requisite`` rows,
  ``linked_from`` the page); what crawldb holds waits until due, what is on
  another task's host waits for updatedb.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from trawl.config import Config
from trawl.crawldb.admission import url_filter
from trawl.crawldb.status import FetchOutcome
from trawl.dedup.soft404 import ProbeAnswer, from_hints, from_probe, probe_url
from trawl.fetch.capture import task_archive
from trawl.fetch.claims import NewHosts, NewHostScope
from trawl.fetch.follow import Found, LinkFollowing
from trawl.fetch.politeness import HostScheduler
from trawl.fetch.progress import Reporter, TaskProgress
from trawl.fetch.row import CRAWLDB_KINDS, Row, base_row, item_kind
from trawl.fetch.rules import (
    HostVerdict,
    PolicySource,
    allowed_decision,
    cached_rules,
    denied_decision,
    gap_rule,
    monotonic_at,
    probe_due,
    rules_when_unreachable,
)
from trawl.fetch.visit import Fetcher, Visit, origin_of, user_agent
from trawl.net.resolver import AddressRefused
from trawl.net.robots import DEFERRED_UNREACHABLE, RobotsRules
from trawl.url.keys import registered_domain
from trawl.warc.archive import Opener
from trawl.warc.writer import ArchiveFailed

log = logging.getLogger(__name__)

ROBOTS_ATTEMPTS = 3  # robots.txt fetches per host and task while it is unreachable
# Rows a task hands out at once while it fetches, and the longest a made row waits.
STREAM_BATCH = 256
STREAM_WAIT_S = 1.0


class FetchTask(LinkFollowing):
    """State of one running task; ``stream`` yields the fetch rows. What a fetched
    page leads to within the task is ``LinkFollowing``'s part."""

    def __init__(
        self,
        cfg: Config,
        fetcher: Fetcher,
        deadline: float,
        policy: PolicySource | None = None,
        segment: str = "",
        new_hosts: NewHosts | None = None,
        progress: TaskProgress | None = None,
    ) -> None:
        self.cfg = cfg
        self.progress = progress  # counts for the live progress line (trawl.fetch.progress)
        self.fetcher = fetcher
        fetcher.not_after = deadline  # no request outlasts the segment's time limit
        self.rule = gap_rule(cfg)
        self.scheduler: HostScheduler[Mapping[str, Any]] = HostScheduler(
            self.rule, deadline, time.monotonic, mode=cfg.politeness.mode
        )
        self.policy = policy
        self.policy_view: HostVerdict | None = None  # the policy as last read
        self.segment = segment  # names the soft-404 probe's path
        self.url_filter = url_filter(cfg)
        self.rules: dict[str, RobotsRules] = {}  # origin -> rules in force
        self.robots_tries: dict[str, int] = defaultdict(int)  # origin -> failed fetches
        self.ips: dict[str, str] = {}
        self.domains: dict[str, str] = {}
        self.first_item: dict[str, Mapping[str, Any]] = {}  # host -> hostdb hints
        self.seen: set[str] = set()  # URLs of this task: none is fetched twice
        self.stopped: dict[str, str] = {}  # host -> why its work was taken out
        self.not_found: dict[str, ProbeAnswer] = {}  # host -> soft-404 probe answer in force
        self.probe_owed: set[str] = set()  # hosts to probe before their first page
        # fetch.follow_depth: links each host may still have followed, and
        # crawldb's URLs of it (fingerprints), from generate
        self.follow_room: dict[str, int] = {}
        self.known: dict[str, set[int]] = {}
        # requisites.capture: requisites each host may still have fetched, and
        # crawldb's requisites of it (fingerprints), from generate
        self.requisite_room: dict[str, int] = {}
        self.requisites_known: dict[str, set[int]] = {}
        # fetch.follow_new_hosts: the hosts crawldb does not know this task may start
        self.new_hosts = new_hosts
        self.rows: list[Row] = []  # made and not yet handed out (``stream``)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._batch = threading.Event()  # STREAM_BATCH rows are waiting
        # a WARC write failed (a full disk, a store refusing): the workers
        # stop and the task fails, so its re-run writes its files again
        self.failure: ArchiveFailed | None = None

    def emit(self, row: Row) -> None:
        if self.progress is not None:
            self.progress.count(row)
        with self._lock:
            self.rows.append(row)
            if len(self.rows) >= STREAM_BATCH:
                self._batch.set()

    def _take(self) -> list[Row]:
        with self._lock:
            rows, self.rows = self.rows, []
            self._batch.clear()
        return rows

    def unfetched_row(self, item: Mapping[str, Any], outcome: FetchOutcome, **fields: Any) -> Row:
        """The row of a URL decided without a response (skipped, denied, ...)."""
        row = base_row(
            item, item_kind(item), str(item["url"]), self.ips.get(item["host"]), datetime.now(UTC)
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
            self.seen.update(str(item["url"]) for item in host_items)
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
            self.first_item[host] = first
            self.domains[host] = str(first.get("domain") or registered_domain(host))
            rules = cached_rules(first, self.cfg, now)
            if rules is not None:
                self.rules[origin_of(str(first["url"]))] = rules
            self.plan_probe(host, first, now)
            self.plan_follow(host, host_items)
            self.plan_requisites(host, host_items)
            self.scheduler.add_host(
                host,
                ip,
                host_items,
                not_before=monotonic_at(first.get("next_allowed_at"), now),
                gap_s=first.get("delay_s"),
                crawl_delay_s=rules.crawl_delay() if rules else None,
            )

    def worker(self) -> None:
        try:
            self._work()
        finally:
            self._batch.set()  # wakes ``stream`` to see the worker gone

    def _work(self) -> None:
        while self.failure is None and (job := self.scheduler.acquire()) is not None:
            host, item = job
            try:
                visit = self.visit(host, item)
            except ArchiveFailed as exc:  # the task's WARC files cannot be kept
                self.failure = exc
                self.scheduler.close()  # the other workers stop too
                break
            except Exception as exc:  # a bad page must not kill the task
                log.exception("internal error fetching %s", item.get("url"))
                self.skip(item, FetchOutcome.RETRY, f"internal: {type(exc).__name__}: {exc}")
                self.scheduler.release(host, 0.0, failed=True)
                continue
            found = Found()
            try:
                if not visit.no_request:
                    found = self.found_work(item, visit.row)
            except Exception:  # the page stays fetched; its links wait for updatedb
                log.exception("internal error following the links of %s", item.get("url"))
            gap = self.scheduler.release(
                host, visit.response_s, visit.failed, visit.retry_after_s, visit.no_request,
                found.more, found.first,
            )  # fmt: skip
            visit.row["delay_s"] = gap
            if not visit.no_request:
                self.after_request(host, item, visit)
            self.emit(visit.row)

    def visit(self, host: str, item: Mapping[str, Any]) -> Visit:
        why = self.stopped.get(host)
        if why is not None:
            # queued by another worker's release just as the host was stopped
            row = self.unfetched_row(item, FetchOutcome.DEFERRED, error=why)
            return Visit(row, 0.0, failed=False, no_request=True)
        origin = origin_of(str(item["url"]))
        ip = self.ips[host]
        rules = self.rules.get(origin)
        if rules is None or (rules.unreachable and self.robots_tries[origin] < ROBOTS_ATTEMPTS):
            return self.visit_robots(host, item, origin, ip)
        if rules.unreachable:
            # RFC 9309 2.3.1.4: unreachable robots.txt means complete disallow;
            # the URLs are not gone, they wait for the host to answer again.
            # (Mostly stopped right after the last try, by after_request; this
            # is an item another worker took from the host just before that.)
            self.stop(host, FetchOutcome.DEFERRED, DEFERRED_UNREACHABLE, robots=True)
            return self._no_request(item, FetchOutcome.DEFERRED, DEFERRED_UNREACHABLE)
        if not rules.allowed(str(item["url"])):
            return self._no_request(item, FetchOutcome.ROBOTS_DENIED, denied_decision(rules))
        if host in self.probe_owed:  # before the host's first page request
            self.probe_owed.discard(host)
            probe = self.visit_probe(host, item, origin, ip, rules)
            if probe is not None:
                return probe
        return self.fetcher.visit_page(item, ip, allowed_decision(rules), self.not_found.get(host))

    def plan_probe(self, host: str, hints: Mapping[str, Any], now: datetime) -> None:
        """The soft-404 answer in force for ``host`` (hostdb's, if any) and
        whether it is to be probed again (``probe_due``)."""
        if not self.cfg.traps.soft404_probe:
            return  # soft-404 detection is off: no probe, no comparison
        known = from_hints(hints)
        if known is not None:
            self.not_found[host] = known
        if probe_due(known, self.cfg, now):
            self.probe_owed.add(host)

    def visit_probe(
        self, host: str, item: Mapping[str, Any], origin: str, ip: str, rules: RobotsRules
    ) -> Visit | None:
        """Probe ``origin`` for its not-found page; ``item`` goes back to the
        head of the queue, to be fetched after the gap the probe owes. None,
        with a row saying why, when the probe may not be sent this segment."""
        url = probe_url(origin, self.segment)
        if not rules.allowed(url):
            # RFC 9309 2.2.2: a disallowed path is not requested, probe or not.
            self.emit(
                self._probe_skipped(item, url, ip, FetchOutcome.ROBOTS_DENIED, "robots_denied")
            )
            return None
        if self.rule.over_cap(rules.crawl_delay()):
            # Over-cap Crawl-delay: the page is this segment's only request.
            self.emit(
                self._probe_skipped(item, url, ip, FetchOutcome.DEFERRED, "crawl_delay_over_cap")
            )
            return None
        visit = self.fetcher.visit_probe(item, ip, url)
        answer = from_probe(visit.row)
        if answer is not None:  # a failed probe teaches nothing: hostdb's stays
            self.not_found[host] = answer
        self.scheduler.push_front(host, item)
        return visit

    def _probe_skipped(
        self, item: Mapping[str, Any], url: str, ip: str, outcome: FetchOutcome, why: str
    ) -> Row:
        """The row of a probe not sent: no request, so no answer to learn from."""
        row = base_row(item, "probe", url, ip, datetime.now(UTC))
        row.update(outcome=outcome.value, error=f"probe: {why}")
        return row

    def visit_robots(self, host: str, item: Mapping[str, Any], origin: str, ip: str) -> Visit:
        """Fetch robots.txt for ``origin``; the item goes back to the head of
        the host's queue, to be decided under the rules now in force."""
        visit = self.fetcher.visit_robots(item, ip)
        assert visit.rules is not None
        rules = visit.rules
        if rules.unreachable:
            self.robots_tries[origin] += 1
            rules = rules_when_unreachable(item, rules, self.cfg, datetime.now(UTC))
            visit.row["robots_decision"] = rules.reason
        self.rules[origin] = rules
        self.scheduler.set_crawl_delay(host, rules.crawl_delay())
        self.scheduler.push_front(host, item)
        return visit

    def after_request(self, host: str, item: Mapping[str, Any], visit: Visit) -> None:
        """Decisions that follow a request (and its release, so the host's
        next gap is known): over-cap Crawl-delay, a failing host, robots.txt
        unreachable with no try left to wait for."""
        origin = origin_of(str(item["url"]))
        rules = self.rules.get(origin)
        delay = rules.crawl_delay() if rules else None
        if self.rule.over_cap(delay) and visit.row.get("kind") in CRAWLDB_KINDS:
            assert delay is not None
            # Never faster than asked: hostdb carries the full delay to the next visit.
            visit.row["delay_s"] = max(float(visit.row["delay_s"]), delay)
            self.stop(host, FetchOutcome.DEFERRED, "crawl_delay_over_cap")
        elif self.scheduler.failures(host) >= self.cfg.politeness.max_failures:
            self.stop(host, FetchOutcome.DEFERRED, "host_failing")
        elif rules is not None and rules.unreachable and not self.robots_retry_due(host, origin):
            # RFC 9309 2.3.1.4: complete disallow; the URLs wait for the host
            # to answer again, in a later segment.
            self.stop(host, FetchOutcome.DEFERRED, DEFERRED_UNREACHABLE, robots=True)

    def robots_retry_due(self, host: str, origin: str) -> bool:
        """Is robots.txt, unreachable just now, tried again in this task?
        Only while a try is left (``ROBOTS_ATTEMPTS``) and the host's back-off
        lets it start before the deadline and within
        ``robots.max_crawl_delay_s`` (the longest a host is waited for between
        two requests in a segment). Otherwise the host is stopped at once:
        waiting out a doubling gap (carried over in hostdb) for a try would
        hold the task, and the segment, open to its time limit."""
        if self.robots_tries[origin] >= ROBOTS_ATTEMPTS:
            return False
        return self.scheduler.wait_s(host) <= self.rule.max_crawl_delay_s

    def stop(self, host: str, outcome: FetchOutcome, why: str, robots: bool = False) -> None:
        """Take a host's remaining URLs out of this task, each with a row."""
        with self._lock:
            self.stopped.setdefault(host, why)
        for item in self.scheduler.stop_host(host):
            if robots:
                self.emit(self.unfetched_row(item, outcome, robots_decision=why))
            else:
                self.skip(item, outcome, why)

    def check_policy(self) -> None:
        """Apply the operator's policy to every host of the task (see ``stream``)."""
        if self.policy is None:
            return
        view = self.policy_view = self.policy()
        now = datetime.now(UTC)
        for host in self.scheduler.hosts():
            if host in self.stopped:
                continue
            verdict = view(host, self.domains.get(host, ""), now)
            if verdict is None:
                self.scheduler.set_min_delay(host, None)
                continue
            why, min_delay = verdict
            if why:
                self.stop(host, FetchOutcome.DEFERRED, f"policy: {why}")
            else:
                self.scheduler.set_min_delay(host, min_delay)

    def watch_policy(self) -> None:
        while not self._done.wait(self.cfg.fetch.policy_refresh_s):
            try:
                self.check_policy()
            except Exception as exc:  # keep fetching under the last good view
                print(f"[trawl] policy re-read failed: {exc}", file=sys.stderr, flush=True)

    def _no_request(self, item: Mapping[str, Any], outcome: FetchOutcome, why: str) -> Visit:
        """A decision without a request: no politeness gap is owed for it."""
        row = self.unfetched_row(item, outcome, robots_decision=why)
        return Visit(row, 0.0, failed=False, no_request=True)

    def stream(self) -> Iterator[Row]:
        """Fetch, yielding the rows as they are made, in batches: the fetch
        stage converts and writes them while the task still fetches (its
        tail, bound by politeness, leaves the CPU idle)."""
        self.check_policy()  # a rule set since generate applies before the first request
        threads = [
            threading.Thread(target=self.worker, name=f"fetch-{i}", daemon=True)
            for i in range(max(1, self.cfg.fetch.threads_per_task))
        ]
        watcher = threading.Thread(target=self.watch_policy, name="fetch-policy", daemon=True)
        watcher.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                self._batch.wait(STREAM_WAIT_S)
                yield from self._take()
            thread.join()
        self._done.set()
        watcher.join()
        if self.failure is not None:
            raise self.failure
        for _, item in self.scheduler.drain():
            self.skip(item, FetchOutcome.NOT_REACHED, "time_limit")
        yield from self._take()


def run_fetch_task(
    items: Iterable[Mapping[str, Any]],
    cfg: Config,
    segment: str,
    task: int,
    warc: str | Opener | None,
    time_limit_s: float,
    policy: PolicySource | None = None,
    scope: NewHostScope | None = None,
    report: Reporter | None = None,
    index: Opener | None = None,
) -> Iterator[Row]:
    """Fetch one task's fetchlist rows; yields one row per attempt, as made
    (``FetchTask.stream``).

    ``warc``: where its WARC files go, a local folder or an opener of named
    files (``trawl.store.files.FetchPlaces.open_warc``; None: none written).
    ``policy()`` gives the operator's policy as it is now (read again every
    ``fetch.policy_refresh_s``); see ``policy_source``. ``scope``: what the
    task needs to start hosts crawldb does not know (``trawl.fetch.claims``;
    None: it starts none). ``report``: where the task's progress snapshots
    go every ``fetch.progress_interval_s`` and at its end (None: none kept).
    ``index``: where each WARC file's CDXJ index goes as it is closed
    (``FetchPlaces.open_index``; None: none), for the segment's index.
    """
    writer = None
    if warc:
        writer = task_archive(cfg.warc, warc, segment, task, user_agent(cfg), index)
    fetcher = Fetcher.from_config(cfg, writer)
    finished = False
    finish_progress = None
    try:
        new_hosts = None
        if scope is not None and cfg.fetch.starts_new_hosts:
            new_hosts = NewHosts(scope, task, cfg)
        deadline = time.monotonic() + time_limit_s
        items = list(items)
        progress = TaskProgress(task, len(items), deadline) if report is not None else None
        job = FetchTask(cfg, fetcher, deadline, policy, segment, new_hosts, progress)
        job.add_hosts(items)
        if progress is not None and report is not None:
            every = cfg.fetch.progress_interval_s
            finish_progress = progress.reporting(report, every, job.scheduler.active)
        yield from job.stream()
        finished = True
    finally:
        if finish_progress is not None:
            finish_progress()
        fetcher.client.close()
        if writer is not None:
            # a task that failed leaves no WARC file: its retry writes them
            # again under the same names (an upload not completed is no object)
            if finished:
                writer.close()
            else:
                writer.abort()
