"""Link following within a fetch task: what a fetched page leads to that the
same task fetches in the segment (its redirect target, ``fetch.follow_redirects``;
its links, ``fetch.follow_depth``; what it needs to render,
``requisites.capture``), and what it settles without a request.

A part of ``trawl.fetch.task.FetchTask`` kept in a module of its own (the task
module holds the scheduling, robots.txt and probe rules): ``LinkFollowing`` is
the base class that holds these methods, and names the task state they read.
Followed URLs become items of their host, queued with the release of the
host that found them (``HostScheduler.release``), so they are fetched under
that host's politeness; a host belongs to one task only, and no URL is
fetched twice in a task (``seen``). A page's requisites go ahead of their
host's other work, so that a page and what it needs are captured close
together; those crawldb holds (``requisites_known``) wait until they are due,
and those of another task's host wait for updatedb (and a later segment).
A link to a host crawldb has never seen may start that host in the task
(``start_host``; the rules are in ``trawl.fetch.claims``).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trawl.config import Config
from trawl.crawldb.admission import admit
from trawl.crawldb.budgets import counter_step
from trawl.crawldb.status import FetchOutcome
from trawl.fetch.claims import NewHosts, host_room
from trawl.fetch.politeness import HostScheduler
from trawl.fetch.row import Row, item_kind
from trawl.fetch.rules import HostVerdict, denied_decision
from trawl.fetch.visit import Fetcher, origin_of
from trawl.net.resolver import AddressRefused
from trawl.net.robots import RobotsRules
from trawl.url.filter import UrlFilter
from trawl.url.keys import registered_domain


@dataclass
class Found:
    """Work a visit found for the task, host -> items: ``more`` queued after
    the host's other work (a redirect target, links), ``first`` ahead of it
    (requisites)."""

    more: defaultdict[str, list[Mapping[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    first: defaultdict[str, list[Mapping[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )


class LinkFollowing:
    """The link-following methods of a fetch task, over its state."""

    cfg: Config
    url_filter: UrlFilter
    rules: dict[str, RobotsRules]  # origin -> rules in force
    first_item: dict[str, Mapping[str, Any]]  # host -> hostdb hints
    seen: set[str]  # URLs of this task
    stopped: dict[str, str]  # host -> why its work was taken out
    follow_room: dict[str, int]  # host -> links it may still have followed
    known: dict[str, set[int]]  # host -> crawldb's URL fingerprints of it
    requisite_room: dict[str, int]  # host -> requisites it may still have fetched
    requisites_known: dict[str, set[int]]  # host -> crawldb's requisites of it
    new_hosts: NewHosts | None  # fetch.follow_new_hosts: hosts the task may start
    ips: dict[str, str]
    domains: dict[str, str]
    fetcher: Fetcher
    scheduler: HostScheduler[Mapping[str, Any]]
    policy_view: HostVerdict | None  # the operator's policy as last read (``check_policy``)
    _lock: threading.Lock

    def emit(self, row: Row) -> None:
        raise NotImplementedError  # the task's

    def plan_probe(self, host: str, hints: Mapping[str, Any], now: datetime) -> None:
        raise NotImplementedError  # the task's

    def unfetched_row(self, item: Mapping[str, Any], outcome: FetchOutcome, **fields: Any) -> Row:
        raise NotImplementedError  # the task's

    def plan_follow(self, host: str, items: list[Mapping[str, Any]]) -> None:
        """The host's room for followed links (``fetch.follow_depth``) and
        the URLs crawldb knows of it, from generate's columns."""
        room = max((int(item.get("follow_quota") or 0) for item in items), default=0)
        if self.cfg.fetch.follow_depth <= 0 or room <= 0:
            return
        self.follow_room[host] = room
        self.known[host] = {int(fp) for item in items for fp in item.get("follow_known") or ()}

    def plan_requisites(self, host: str, items: list[Mapping[str, Any]]) -> None:
        """The host's room for page requisites (``requisites.max_per_host``)
        and crawldb's requisites of it, from generate's column (on one of
        its rows; null on all: too many to ship, and the task leaves the
        host's requisites to updatedb)."""
        if not self.cfg.requisites.capture:
            return
        first = next((item for item in items if item.get("requisites_known") is not None), None)
        if first is None:
            return
        self.requisite_room[host] = self.cfg.requisites.max_per_host
        self.requisites_known[host] = {int(fp) for fp in first["requisites_known"]}
        self.fetcher.archive.know(first.get("requisites_stored") or [])

    def found_work(self, item: Mapping[str, Any], row: Row) -> Found:
        """URLs a fetched page leads to that this task fetches in the same
        segment, host -> items: its redirect target (``fetch.follow_redirects``)
        and its links (``fetch.follow_depth``); and, to be fetched first,
        what it or a stylesheet needs to render (``requisites.capture``).
        Decided before the host is released, and queued with the release
        (``HostScheduler.release``)."""
        found = Found()
        kind = row.get("kind")
        if kind not in ("page", "requisite"):
            return found
        target = row.get("redirect_to")
        success = row.get("outcome") == FetchOutcome.SUCCESS.value
        if target:
            followed = self.follow(item, str(target))
            if followed is not None:
                found.more[followed["host"]].append(followed)
        elif success and kind == "page" and row.get("outlinks"):
            for link in self.follow_links(item, row["outlinks"]):
                found.more[link["host"]].append(link)
        if success and row.get("requisites") and self.cfg.requisites.capture:
            for needed in self.follow_requisites(item, row["requisites"]):
                found.first[needed["host"]].append(needed)
        return found

    def _new_here(self, record: Mapping[str, Any], linked: bool, requisite: bool = False) -> bool:
        """(Under the lock.) The URL is on one of the task's hosts and not
        taken yet; a followed link's (or requisite's) host also has following
        planned (``plan_follow``, ``plan_requisites``: without it whether
        crawldb knows the URL cannot be told) and crawldb does not know the
        URL (as a requisite, for a requisite: a page it holds is fetched
        here as one)."""
        host = record["host"]
        if host not in self.first_item or record["url"] in self.seen:
            return False
        if not linked:
            return True
        known = (self.requisites_known if requisite else self.known).get(host)
        return known is not None and record["url_fp"] not in known

    def _stopped_for(self, record: Mapping[str, Any], requisite: bool = False) -> str | None:
        """Why the link's host was stopped in this task (robots.txt
        unreachable, over-cap Crawl-delay, failing, blocked by policy), when
        it was and the link is new here (taken for the task then); None
        otherwise."""
        with self._lock:
            why = self.stopped.get(record["host"])
            if why is None or not self._new_here(record, linked=True, requisite=requisite):
                return None
            self.seen.add(record["url"])
            return why

    def _claim(
        self, record: Mapping[str, Any], linked: bool, room: bool = True, requisite: bool = False
    ) -> bool:
        """Take ``record``'s URL for this task, once: it is new here
        (``_new_here``), its host still fetched and, for a followed link or
        a requisite to be requested (``room``), with room left (a requisite's
        is its own, ``requisites.max_per_host``)."""
        host = record["host"]
        with self._lock:
            if host in self.stopped or not self._new_here(record, linked, requisite):
                return False
            if requisite and room:
                if self.requisite_room.get(host, 0) <= 0:
                    return False
                self.requisite_room[host] -= 1
            elif linked and room:
                if self.follow_room.get(host, 0) <= 0:
                    return False
                if self.new_hosts is not None and not self.new_hosts.take(host):
                    return False  # a started host's domain has no room left
                self.follow_room[host] -= 1
            self.seen.add(record["url"])
            return True

    def _queued_item(
        self, item: Mapping[str, Any], record: Mapping[str, Any], **fields: Any
    ) -> Row:
        """A URL this task found, as a fetch-list item of its host."""
        queued = dict(self.first_item[record["host"]])
        queued.update(
            url=record["url"],
            url_fp=record["url_fp"],
            host=record["host"],
            host_bucket=record["host_bucket"],
            prev_status=None,
            etag=None,
            last_modified=None,
            content_sha256=None,
            stored_capture=None,
            follow_step=item.get("follow_step"),
            redirect_hops=None,
            redirect_from=None,
            linked_from=None,
            requisite=False,
            requisite_step=0,
        )
        queued.update(fields)
        return queued

    def follow(self, item: Mapping[str, Any], target: str) -> Row | None:
        """A redirect target, as an item of its host, if it is followed here."""
        hops = int(item.get("redirect_hops") or 0)
        if hops >= self.cfg.fetch.follow_redirects or target in self.seen:
            return None
        record, _ = admit(
            target,
            self.cfg,
            self.url_filter,
            source="redirect",
            depth=int(item.get("depth") or 0),
            score=0.0,
            at=datetime.now(UTC),
            segment=None,
        )
        if record is not None:
            self.start_host(record)
        if record is None or not self._claim(record, linked=False):
            return None  # another task's host, or filtered: updatedb records it
        return self._queued_item(
            item,
            record,
            depth=item.get("depth"),
            counter_run=item.get("counter_run"),  # a redirect is no step
            score=item.get("score"),  # the target takes over
            is_sitemap=item.get("is_sitemap"),
            redirect_hops=hops + 1,
            redirect_from=item["url"],
            requisite=item_kind(item) == "requisite",  # a moved image is still one
            requisite_step=item.get("requisite_step"),
        )

    def follow_links(self, item: Mapping[str, Any], outlinks: list[Mapping[str, Any]]) -> list[Row]:
        """The page's links fetched in this segment (``fetch.follow_depth``),
        as items of their hosts: within ``follow_depth`` steps of a generated
        page, no nofollow, no query string (updatedb strips learned session
        ids and caps path patterns: such links wait for it), counter runs
        within ``traps.max_counter_run``, admitted by the URL filters, new to
        crawldb and this task, and within their host's room. Each step takes
        the depth, counter run and share of score updatedb gives the link.
        Some are settled without a request instead (``_settled``)."""
        step = int(item.get("follow_step") or 0)
        if step >= self.cfg.fetch.follow_depth:
            return []
        source = str(item["url"])
        depth = int(item.get("depth") or 0) + 1
        max_run = self.cfg.traps.max_counter_run or None
        share = 1.0 / len(outlinks)
        now = datetime.now(UTC)
        out: list[Row] = []
        for link in outlinks:
            url = str(link.get("url") or "")
            if link.get("nofollow") or not url or "?" in url or url in self.seen:
                continue
            run = int(item.get("counter_run") or 0) + 1 if counter_step(source, url) else 0
            if max_run is not None and run > max_run:
                continue
            record, _ = admit(
                url, self.cfg, self.url_filter, source="outlink", depth=depth, score=share,
                at=now, segment=None,
            )  # fmt: skip
            if record is None or "?" in record["url"]:
                continue
            self.start_host(record)
            fields = {
                "depth": depth, "counter_run": run, "score": share,
                "is_sitemap": bool(link.get("sitemap")), "follow_step": step + 1,
                "linked_from": source,
            }  # fmt: skip
            queued = self._settled(item, record, fields)
            if queued is not None:
                out.append(queued)
        return out

    def follow_requisites(self, item: Mapping[str, Any], urls: list[str]) -> list[Row]:
        """What a page, or a stylesheet within ``requisites.max_css_depth``
        steps of one, needs to render, as items of their hosts: admitted
        (whatever their extension), on the task's hosts with requisites
        planned, new to crawldb's requisites and to this task, within their
        host's requisite room; the row names the page (``linked_from``).
        Some are settled without a request instead (``_settled``): denied by
        the task's robots.txt copy, deferred with a stopped host."""
        # a page's requisites are one step from it; a requisite generate
        # listed (a stylesheet crawldb holds) counts as one step from its page
        step = int(item.get("requisite_step") or (1 if item.get("requisite") else 0))
        if step > self.cfg.requisites.max_css_depth:
            return []
        page = str(item.get("linked_from") or item["url"])
        now = datetime.now(UTC)
        depth = int(item.get("depth") or 0)
        out: list[Row] = []
        for url in urls:
            if url in self.seen:
                continue
            record, _ = admit(
                url, self.cfg, self.url_filter, source="requisite", depth=depth, score=0.0,
                at=now, segment=None,
            )  # fmt: skip
            if record is None:
                continue  # updatedb records why
            self.start_host(record)
            fields = {
                "depth": depth, "counter_run": 0, "score": 0.0, "is_sitemap": False,
                "linked_from": page, "requisite": True, "requisite_step": step + 1,
            }  # fmt: skip
            queued = self._settled(item, record, fields, requisite=True)
            if queued is not None:
                out.append(queued)
        return out

    def _settled(
        self,
        item: Mapping[str, Any],
        record: Mapping[str, Any],
        fields: Mapping[str, Any],
        requisite: bool = False,
    ) -> Row | None:
        """The followed link as an item to queue, or None: not taken (another
        task's host, known to crawldb, no room left: updatedb records it), or
        settled here with no request, so that the next segment does not
        generate it only to reach the same verdict:

        - its host was stopped in this task: deferred with the host's queued
          URLs, for the same reason;
        - the task's robots.txt copy disallows it (RFC 9309 2.2.2: not
          requested): denied by the copy the next segment would use (hostdb
          keeps it ``robots.cache_ttl_s``), taking none of the host's room.

        A link of a host whose robots.txt the task has not read yet, or
        failed to read with tries left, is queued and decided when visited
        (or deferred with the host's other URLs if it is stopped)."""
        why = self._stopped_for(record, requisite)
        if why is not None:
            queued = self._queued_item(item, record, **fields)
            self.emit(self.unfetched_row(queued, FetchOutcome.DEFERRED, error=why))
            return None
        rules = self.rules.get(origin_of(record["url"]))
        # (unreachable: tries are left, or it would be stopped)
        denied = rules is not None and not rules.unreachable and not rules.allowed(record["url"])
        if not self._claim(record, linked=True, room=not denied, requisite=requisite):
            return None
        queued = self._queued_item(item, record, **fields)
        if not denied:
            return queued
        assert rules is not None
        row = self.unfetched_row(queued, FetchOutcome.ROBOTS_DENIED)
        row["robots_decision"] = denied_decision(rules)
        self.emit(row)
        return None

    def start_host(self, record: Mapping[str, Any]) -> None:
        """Start the linked URL's host in the task if it may be (before the
        link is decided like any other: ``_claim``).

        A host crawldb has never seen is started here when the task owns its
        address and policy lets it be fetched (``trawl.fetch.claims``): it is
        resolved (the SSRF guard refuses it like any host), added to the
        scheduler with no work (the link's release queues it), given the
        room of a host generate knew nothing of and, when due, its soft-404
        probe; robots.txt is fetched before its first page as for any host
        without hostdb's copy. Declined hosts are remembered with why."""
        host = str(record["host"])
        new = self.new_hosts
        if new is None or host in self.first_item:
            return
        domain = str(record.get("domain") or registered_domain(host))
        with self._lock:
            if host in self.first_item or new.precheck(host, domain) is not None:
                return
            new.declined[host] = "starting"  # another worker meeting it leaves it
        try:
            ip = self.fetcher.resolver.resolve(host)
        except AddressRefused as exc:
            return self._decline(host, f"address: {exc.reason}")
        if not new.owns(ip):
            return self._decline(host, "other_task")
        now = datetime.now(UTC)
        verdict = self.policy_view(host, domain, now) if self.policy_view else None
        if verdict is not None and verdict[0]:
            return self._decline(host, "policy")
        first: Row = {
            "url": record["url"], "url_fp": record["url_fp"], "host": host,
            "host_bucket": record["host_bucket"], "domain": domain, "ip": ip,
            "task": new.task,
        }  # fmt: skip
        self.plan_probe(host, first, now)
        self.scheduler.add_host(host, ip, [])
        if verdict is not None:
            self.scheduler.set_min_delay(host, verdict[1])
        with self._lock:
            self.ips[host] = ip
            self.domains[host] = domain
            self.known[host] = set()
            self.follow_room[host] = host_room(self.cfg)
            if self.cfg.requisites.capture:
                self.requisites_known[host] = set()
                self.requisite_room[host] = self.cfg.requisites.max_per_host
            new.start(host, domain)
            self.first_item[host] = first  # last: the host is the task's from here on

    def _decline(self, host: str, why: str) -> None:
        with self._lock:
            assert self.new_hosts is not None
            self.new_hosts.declined[host] = why
