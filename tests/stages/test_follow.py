"""fetch.follow_depth on Spark: generate's room per host, and a cycle that
fetches a followed page once (on a generated host, or on a host crawldb
never saw that its task started), records it in crawldb as fetched and
never generates it again before it is due."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.fetch.claims import host_room
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.stages.common import StageContext
from trawl.stages.generate import FOLLOW_KNOWN_MAX, with_follow_quota
from trawl.store.tables import read_segment_table, read_table, segment_path
from trawl.testweb import TestWeb, WebModel, politeness_audit

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHOSEN = "host string, host_bucket int, group string, domain string, url_fp bigint, " \
    "host_cap int, group_cap int, domain_cap int, budget_group string, budget_cap int"  # fmt: skip


def test_each_host_gets_what_its_caps_leave(spark: Any) -> None:
    # host cap, the address group's room split over its hosts (remainder to
    # the first by name), the domain's room likewise; a host crawldb knows
    # too many URLs of gets none.
    chosen = [
        # a and b share an address with room 10 - 3 chosen = 7: 4 and 3
        ("a.one.com", 0, "ip1", "one.com", 1, 6, 10, 1000, "one.com", 100),
        ("a.one.com", 0, "ip1", "one.com", 2, 6, 10, 1000, "one.com", 100),
        ("b.two.com", 1, "ip1", "two.com", 3, 6, 10, 1000, "two.com", 100),
        # c's own cap: 6 - 1 = 5; d and e share the domain three.com, room 2: 1 and 1
        ("c.other.com", 2, "ip2", "other.com", 4, 6, 100, 1000, "other.com", 100),
        ("d.three.com", 3, "ip3", "three.com", 5, 50, 100, 1000, "three.com", 4),
        ("e.three.com", 3, "ip4", "three.com", 6, 50, 100, 1000, "three.com", 4),
        (
            "big.com",
            0,
            "ip5",
            "big.com",
            7,
            50,
            100,
            1000,
            "big.com",
            100,
        ),  # crawldb knows too many
        ("full.com", 1, "ip6", "full.com", 8, 1, 100, 1000, "full.com", 100),  # its cap is used up
        # seeded hosts of one domain: each its own budget group, under the
        # domain policy's cap of 5 (3 left: 2 and 1)
        ("s1.seeds.com", 0, "ip7", "seeds.com", 9, 50, 100, 5, "host:s1.seeds.com", 1000),
        ("s2.seeds.com", 1, "ip8", "seeds.com", 10, 50, 100, 5, "host:s2.seeds.com", 1000),
    ]
    known = [("a.one.com", 0, fp) for fp in (1, 2, 90)] + [("b.two.com", 1, 3)]
    known += [(h, b, fp) for h, b, fp in ((r[0], r[1], r[4]) for r in chosen[3:])]
    known += [("big.com", 0, 1000 + i) for i in range(FOLLOW_KNOWN_MAX)]
    cfg = load_config(None, ["fetch.follow_depth=3"], environ={})
    ctx = StageContext(cfg, "seg", AT)
    out = with_follow_quota(
        spark.createDataFrame(chosen, CHOSEN),
        spark.createDataFrame(known, "host string, host_bucket int, url_fp bigint"),
        ctx,
    ).collect()
    quota = {r["host"]: r["follow_quota"] for r in out}
    assert quota == {
        "a.one.com": 4, "b.two.com": 3, "c.other.com": 5, "d.three.com": 1,
        "e.three.com": 1, "big.com": None, "full.com": None, "s1.seeds.com": 2,
        "s2.seeds.com": 1,
    }  # fmt: skip
    rows_with_known = Counter(r["host"] for r in out if r["follow_known"] is not None)
    assert rows_with_known == Counter({h: 1 for h, q in quota.items() if q})
    a_known = next(r["follow_known"] for r in out if r["follow_known"] and r["host"] == "a.one.com")
    assert sorted(a_known) == [1, 2, 90]
    # off: the columns are there, null
    off = with_follow_quota(
        spark.createDataFrame(chosen, CHOSEN),
        spark.createDataFrame(known[:1], "host string, host_bucket int, url_fp bigint"),
        StageContext(load_config(None, [], environ={}), "seg", AT),
    ).collect()
    assert {(r["follow_quota"], r["follow_known"]) for r in off} == {(None, None)}


def test_a_cycle_records_followed_pages_and_started_hosts(spark: Any, tmp_path: Path) -> None:
    # Seeds on two of eight hosts, at two addresses (a task each). Links are
    # followed on the seeded hosts, and lead to the others, which the task
    # owning each one's address starts in the same segment: the seeds' task
    # for their addresses (the seeds' homepages link to hosts there: model
    # seed 19), the first task to claim it for the third.
    # updatedb records every followed page once in crawldb as fetched and the
    # started hosts in hostdb; the next generate lists none of what was done.
    model = WebModel.generate(19, hosts=8, ips=3, pages_per_host=(4, 8))
    with TestWeb(model, tmp_path / "web", n_seeds=2) as web:
        cfg = load_config(
            None,
            [
                f"dns.hosts_file={web.hosts_file}",
                'fetch.allow_networks=["127.0.0.0/8"]',
                "politeness.min_delay_s=0.05",
                "politeness.delay_factor=1.0",
                "fetch.time_limit_s=60",
                "fetch.follow_depth=10",
                "generate.max_per_host=5",
                "crawl.host_buckets=4",
            ],
            environ={},
        )
        root = str(tmp_path / "crawl")

        def ctx(i: int) -> JobContext:
            at = AT + timedelta(hours=i)
            return JobContext(spark, cfg, root, segment_id(at), at)

        run_inject(ctx(0), [str(web.seeds_file)])
        run_generate(ctx(0))
        fetched = run_fetch(ctx(0))
        run_updatedb(ctx(0))
        second = run_generate(ctx(1))
        log = web.access_log
    seg = ctx(0).segment
    fetchlist = read_segment_table(spark, root, seg, "fetchlist").collect()
    rows = [r.asDict() for r in read_segment_table(spark, root, seg, "fetch").collect()]
    pages = {r["url"]: r for r in rows if r["kind"] == "page"}
    followed = {u: r for u, r in pages.items() if r["linked_from"]}
    listed = {r["url"] for r in fetchlist}
    assert followed and not set(followed) & listed
    assert fetched["fetch/followed"] == len(followed)
    # the started hosts: each served by one task, the owner of its address,
    # robots.txt asked first (hostdb has no copy)
    seeded = {r["host"] for r in fetchlist}
    owners = {r["ip"]: r["task"] % cfg.fetch.tasks for r in fetchlist}
    ip_of = {h.name: h.ip for h in model.hosts}
    started: dict[str, set[int]] = {}
    for r in rows:
        if r["host"] not in seeded:
            started.setdefault(r["host"], set()).add(r["task"])
    assert len(seeded) == 2 and len(started) >= 2
    assert fetched["fetch/hosts_started"] == len(started)
    claims = Path(segment_path(root, seg, "claims"))

    def owner(address: str) -> int:  # the fetch list's, or the task that claimed it
        return owners[address] if address in owners else int((claims / address).read_text())

    for host, tasks in started.items():
        assert tasks == {owner(ip_of[host])}, host
    assert set(started) <= {r["host"] for r in rows if r["kind"] == "robots"}
    # each host's requests within the room generate gave it, or a started
    # host's (a link its robots.txt copy disallows is recorded as denied,
    # unrequested)
    room = {r["host"]: r["follow_quota"] for r in fetchlist} | dict.fromkeys(
        started, host_room(cfg)
    )
    requested = [r for r in followed.values() if r["outcome"] != "robots_denied"]
    for host, n in Counter(r["host"] for r in requested).items():
        assert n <= room[host]
    # crawldb: each followed URL once, its fetch applied, not locked, not due again
    crawldb = {r["url"]: r for r in read_table(spark, root, "crawldb").collect()}
    assert len(crawldb) == read_table(spark, root, "crawldb").select("url").distinct().count()
    for url, row in followed.items():
        known = crawldb[url]
        if row["outcome"] == "robots_denied":  # no request: denied now, not generated again
            assert not known["fetches"] and known["status"] == "gone"
            continue
        assert known["fetches"] == 1 and known["last_fetch_at"] is not None, (row["outcome"], known)
        assert known["generated_segment"] is None
        # the shortest link's: another task may have met a shorter one it did not follow
        assert known["depth"] <= row["depth"]
        if row["outcome"] == "success":
            assert known["status"] == "fetched"
    assert any(r["host"] in started and r["outcome"] == "success" for r in followed.values())
    assert set(started) <= {r["host"] for r in read_table(spark, root, "hostdb").collect()}
    generated_again = {
        r["url"] for r in read_segment_table(spark, root, ctx(1).segment, "fetchlist").collect()
    }
    assert second["urls"] == len(generated_again)
    done = {u for u, r in followed.items() if r["outcome"] in ("success", "robots_denied")}
    assert not generated_again & done
    audit = politeness_audit(log, 0.05, model=model)
    assert audit.hosts_with_overlap == 0 and audit.max_in_flight_per_ip <= 1
    assert audit.gaps_below_min == 0 and audit.ip_gaps_below_min == 0
