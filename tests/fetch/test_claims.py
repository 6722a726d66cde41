"""Tests for trawl.fetch.claims: fetch tasks starting hosts crawldb has never seen.

The rules are unit-tested; then two fetch tasks crawl the test web on
loopback at the same time, each from the homepages of the hosts at one
address, and the access log shows every started host served by one task
only, the one that owns its address, politely and within its room.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fetch.test_task import AGENT, MIN_GAP, config, home_items, page_rows, read_log
from trawl.config import load_config
from trawl.fetch.claims import (
    NewHosts,
    NewHostScope,
    address_owner,
    domain_room,
    host_room,
)
from trawl.fetch.rules import HostVerdict
from trawl.fetch.task import run_fetch_task
from trawl.store.files import Claims, CrawlRoot
from trawl.testweb import TestWeb, WebModel, politeness_audit, robots_audit
from trawl.testweb.audit import short_gaps
from trawl.testweb.crawlergaps import crawler_gap_check, request_timing
from trawl.url.keys import host_of, registered_domain
from trawl.url.normalize import normalize

SEED = 34  # the module web of test_fetchtask: 12 hosts on 3 addresses


def scope_of(hosts: set[str], owners: Mapping[str, int], tasks: int = 2) -> NewHostScope:
    domains = frozenset(registered_domain(h) for h in hosts)
    return NewHostScope(frozenset(hosts), domains, dict(owners), tasks)


# -- the rules ---------------------------------------------------------------


def test_an_address_is_served_by_the_fetch_lists_task_or_by_its_hash() -> None:
    owners = {"10.0.0.1": 3}
    assert address_owner("10.0.0.1", owners, 2) == 1  # a task number past tasks wraps
    picks = {a: address_owner(a, owners, 4) for a in (f"192.0.2.{i}" for i in range(64))}
    assert set(picks.values()) == {0, 1, 2, 3}  # spread over the tasks
    # the same in every process: crc32, not the salted hash()
    assert address_owner("192.0.2.7", {}, 4) == address_owner("192.0.2.7", {}, 4) == 2


def test_an_address_is_claimed_by_one_task_of_many_asking_at_once(tmp_path: Path) -> None:
    claims = Claims(CrawlRoot.of(str(tmp_path)), "seg1")
    won: dict[int, bool] = {}
    start = threading.Barrier(8)

    def ask(task: int) -> None:
        start.wait()
        won[task] = claims.claim("2001:db8::1", task)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [n for n, ok in won.items() if ok]
    assert len(winners) == 1
    # a re-run of the winner keeps it; the others still do not have it
    assert claims.claim("2001:db8::1", winners[0])
    assert not claims.claim("2001:db8::1", (winners[0] + 1) % 8)
    # a scope with a claims folder decides by claim, the fetch list's addresses by it
    scope = NewHostScope(frozenset(), frozenset(), {"192.0.2.1": 1}, 2, claims)
    first, second = (
        NewHosts(scope, 0, load_config(None, [], environ={})),
        NewHosts(scope, 1, load_config(None, [], environ={})),
    )
    assert [first.owns("192.0.2.1"), second.owns("192.0.2.1")] == [False, True]
    assert [first.owns("192.0.2.9"), second.owns("192.0.2.9")] == [True, False]


def test_room_is_what_generate_would_give_a_host_and_domain_it_never_saw() -> None:
    cfg = load_config(None, [], environ={})
    # window 600 s at 1 s: 601, less robots.txt and the probe, within max_per_host 200
    assert host_room(cfg) == 200
    slow = load_config(None, ["politeness.min_delay_s=30", "traps.soft404_probe=false"], environ={})
    assert host_room(slow) == 600 // 30 + 1 - 1
    few = load_config(None, ["traps.max_new_per_host=7"], environ={})
    assert host_room(few) == 7
    # budget.min_pages 20 over 3 tasks, rounded up; without budgets max_per_domain
    assert domain_room(cfg, 3) == 7 and domain_room(cfg, 1) == 20
    off = load_config(None, ["budget.enabled=false", "generate.max_per_domain=9"], environ={})
    assert domain_room(off, 2) == 5


def test_known_hosts_and_domains_are_never_started_and_a_domain_runs_out() -> None:
    cfg = load_config(None, ["budget.min_pages=3"], environ={})
    new = NewHosts(scope_of({"a.example", "b.example.org"}, {}, tasks=1), 0, cfg)
    assert new.precheck("a.example", "a.example") == "known_host"
    assert new.precheck("www.example.org", "example.org") == "known_domain"
    assert new.precheck("new.example", "new.example") is None
    new.start("new.example", "new.example")
    new.start("two.new.example", "new.example")
    assert [new.take("new.example"), new.take("two.new.example")] == [True, True]
    assert new.take("new.example") and not new.take("two.new.example")  # 3 for the domain
    assert new.precheck("three.new.example", "new.example") == "domain_room"
    assert new.take("a.example")  # not started here: counted by generate's caps
    new.declined["x.example"] = "other_task"
    assert new.precheck("x.example", "x.example") == "other_task"


# -- two tasks on the test web -------------------------------------------------


def blocking(host: str) -> HostVerdict:
    def verdict(name: str, domain: str, now: datetime) -> tuple[str, float | None] | None:
        return ("blocked (test)", None) if name == host else None

    return verdict


def linked_by_neighbours(model: WebModel, hosts: list[str]) -> str:
    """Of ``hosts``, the one most linked to from the others' homepages."""
    links = {
        h: sum(
            host_of(url) == h and not nofollow
            for other in hosts
            if other != h and model.host(other).robots_status == 200
            for url, nofollow in model.page_links(other, "/", 80)
        )
        for h in hosts
    }
    return max(sorted(links), key=lambda h: links[h])


@pytest.mark.parametrize("claims", [True, False], ids=["claims", "hash"])
def test_two_tasks_start_new_hosts_by_address_politely(tmp_path: Path, claims: bool) -> None:
    model = WebModel.generate(SEED, hosts=12, ips=3, pages_per_host=(5, 15))
    by_ip: dict[str, list[str]] = defaultdict(list)
    for h in model.hosts:
        by_ip[h.ip].append(h.name)
    ips = sorted(by_ip)
    # the fetch list: all but one host of the first address (task 0) and of
    # the second (task 1); the third address's hosts and the two left out
    # are new to crawldb. Left out is the host its neighbours link to most,
    # so that the task of its address meets links to it.
    listed = {n: set(by_ip[ips[n]]) - {linked_by_neighbours(model, by_ip[ips[n]])} for n in (0, 1)}
    fresh = {h.name for h in model.hosts} - listed[0] - listed[1]
    owners = {ips[0]: 0, ips[1]: 1}
    scope = scope_of(listed[0] | listed[1], owners)
    # one new host's domain is known (a host of it is in crawldb), one is blocked
    known_domain, blocked = sorted(by_ip[ips[2]])[:2]
    place = Claims(CrawlRoot.of(str(tmp_path)), "seg1") if claims else None
    scope = replace(scope, known_domains=scope.known_domains | {known_domain}, claims=place)
    out: dict[int, list[dict[str, Any]]] = {}
    with TestWeb(model, tmp_path / "web") as web:
        cfg = config(web, "fetch.follow_depth=20", "traps.soft404_probe=false")
        homes = home_items(model, web.port, quota=1000)

        def task(n: int) -> None:
            items = [{**i, "task": n} for i in homes if i["host"] in listed[n]]
            out[n] = list(run_fetch_task(
                items, cfg, "seg1", n, None, 120, lambda: blocking(blocked), scope
            ))  # fmt: skip

        threads = [threading.Thread(target=task, args=(n,)) for n in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        port = web.port
    rows = page_rows(out[0] + out[1])  # no URL came out twice, in either task
    served: dict[str, set[int]] = defaultdict(set)
    for n in (0, 1):
        for r in out[n]:
            served[r["host"]].add(n)
    started = {h for h in served if h in fresh}
    ip_of = {h.name: h.ip for h in model.hosts}

    def owner(address: str) -> int:
        if address in owners or place is None:
            return address_owner(address, owners, 2)
        return int((tmp_path / "segments" / "seg1" / "claims" / address).read_text())

    for host in started:  # one task each: the one that owns the address
        assert served[host] == {owner(ip_of[host])}, host
    # the web links to new hosts at the fetch list's addresses and at the third
    assert {ip_of[h] for h in started} == set(ips)
    assert known_domain not in served and blocked not in served
    for host in (known_domain, blocked):  # though a task met links to them
        assert any(
            host_of(link["url"]) == host
            for r in out[0] + out[1]
            if r["kind"] == "page" and r["outcome"] == "success"
            for link in r["outlinks"] or ()
        ), host
    room = host_room(cfg)
    for host in started:
        fetched = [r for r in rows.values() if r["host"] == host and r.get("http_status")]
        assert 0 < len(fetched) <= room or model.host(host).robots_status >= 500
        assert all(r["linked_from"] for r in rows.values() if r["host"] == host)
    # a started host with a 5xx robots.txt: its URLs deferred, none requested
    for host in started:
        if model.host(host).robots_status >= 500:
            got = [r for r in rows.values() if r["host"] == host]
            assert got and {r["outcome"] for r in got} == {"deferred"}
    # every request went to a page a perfect crawler reaches from the homepages
    seeds = sorted(i["url"] for i in homes if i["host"] in listed[0] | listed[1])
    reachable = {f"http://{h}:{port}{p}" for h, p in model.reachable(seeds, AGENT)}
    answered = {u for u, r in rows.items() if r.get("http_status") is not None}
    assert answered <= {normalize(u) for u in reachable}
    requested = {r["host"] for r in read_log(web.access_log)}
    assert known_domain not in requested and blocked not in requested
    audit = politeness_audit(web.access_log, MIN_GAP, model=model)
    assert audit.hosts_with_overlap == 0 and audit.max_in_flight_per_ip <= 1
    # Short gaps in the log, if any, are the web's late stamps under load
    # (two tasks and the web share this process): the crawler's own timings
    # show every gap, per host and per address, at least the minimum.
    timed = [r for r in out[0] + out[1] if r.get("elapsed_s") is not None]
    timings = [request_timing(r["url"], r["fetched_at"].timestamp(), r["elapsed_s"]) for r in timed]
    checks = crawler_gap_check(
        short_gaps(web.access_log, MIN_GAP, model=model), filter(None, timings)
    )
    assert not [c for c in checks if c.confirmed], checks
    assert min_gap_per_address(timed) >= MIN_GAP
    assert robots_audit(web.access_log, model, AGENT) == []


def min_gap_per_address(rows: list[dict[str, Any]]) -> float:
    """The shortest gap between two requests to one address, by the fetch
    rows' own timing (``fetched_at`` before the request, ``elapsed_s`` to the
    end of the response read)."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        start = r["fetched_at"].timestamp()
        spans[r["ip"]].append((start, start + r["elapsed_s"]))
    gaps = [
        b[0] - max(end for _, end in ordered[:i])
        for ordered in (sorted(v) for v in spans.values())
        for i, b in enumerate(ordered)
        if i
    ]
    return min(gaps)


def test_with_follow_new_hosts_off_only_the_fetch_lists_hosts_are_asked(tmp_path: Path) -> None:
    model = WebModel.generate(SEED, hosts=12, ips=3, pages_per_host=(5, 15))
    listed = {h.name for h in model.hosts[:6]}
    with TestWeb(model, tmp_path / "web") as web:
        cfg = config(web, "fetch.follow_depth=20", "fetch.follow_new_hosts=false")
        items = [i for i in home_items(model, web.port, quota=1000) if i["host"] in listed]
        scope = scope_of(listed, {})
        rows = list(run_fetch_task(items, cfg, "seg1", 0, None, 60, None, scope))
    assert {r["host"] for r in rows} <= listed
    assert {r["host"] for r in read_log(web.access_log)} <= listed
