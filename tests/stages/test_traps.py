"""Crawler traps end to end: a small web with the test web's trap hosts
(``trawl.testweb.traps``), three daily cycles on Spark + Delta.

What an operator relies on: each trap host's pages fetched per segment stay
within the per-host cap, and its new URLs within the per-host and
per-pattern caps; the link farm's domain within its budget; session ids
stripped; echoing and faceted URLs refused by shape and query; soft 404s
found by the probe; ordinary hosts crawled as if the traps were not there; every URL kept
out has a reason in SQL and in ``trawl stats``; and a URL deferred by its
domain's budget comes back once the domain earns more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from pyspark.sql import functions as F

from tests.stages.daily import DailyCrawl, across_segments, run_days
from trawl.config import load_config
from trawl.crawldb.budgets import FARM_MIN_PAGES, farm_like, path_pattern
from trawl.runner import (
    run_generate,
    run_inject,
    run_stats,
)
from trawl.store.tables import read_segment_table, read_table, table_path
from trawl.store.views import register_views
from trawl.testweb import TestWeb, WebModel
from trawl.testweb.traps import FARM_DOMAIN, SESSION_PARAMS, TRAP_HOSTS, is_trap, real_paths

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

CYCLES = 3
PER_HOST = 8  # generate.max_per_host: pages fetched per host and segment
NEW_PER_HOST = 30
NEW_PER_PATTERN = 5
MIN_PAGES = 12  # budget.min_pages: a domain nothing else links to


@dataclass
class Crawl(DailyCrawl):
    model: WebModel
    seeds: list[str]
    segments: list[str]

    def fetched_pages(self) -> Any:
        fetch = across_segments(self.spark, self.root, self.segments, "fetch")
        return fetch.filter("kind = 'page'")


@pytest.fixture(scope="module")
def crawl(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    out = tmp_path_factory.mktemp("traps")
    model = WebModel.generate(7, hosts=6, ips=2, pages_per_host=(3, 8), sitemaps=0.0)
    with TestWeb(model, out / "web", n_seeds=6, traps=True) as web:
        cfg = load_config(
            None,
            [
                f"dns.hosts_file={web.hosts_file}",
                'fetch.allow_networks=["127.0.0.0/8"]',
                "politeness.min_delay_s=0.05",
                "fetch.time_limit_s=90",
                f"generate.max_per_host={PER_HOST}",
                f"traps.max_new_per_host={NEW_PER_HOST}",
                f"traps.max_new_per_pattern={NEW_PER_PATTERN}",
                f"budget.min_pages={MIN_PAGES}",
                "budget.pages_per_linking_domain=10",
                "crawl.host_buckets=4",
            ],
            environ={},
        )
        seeds = web.seeds_file.read_text().split()
        state = Crawl(spark, cfg, str(out / "crawl"), model, seeds, [])
        run_inject(state.ctx(0), [str(web.seeds_file)])
        state.segments += run_days(state.ctx, CYCLES)
        yield state


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def test_trap_hosts_fetch_at_most_the_host_cap_per_segment(crawl: Crawl) -> None:
    per = Counter(
        (r["host"], r["segment"])
        for r in crawl.fetched_pages().filter("outcome <> 'not_reached'").collect()
        if is_trap(r["host"])
    )
    assert per and max(per.values()) <= PER_HOST
    # the traps are crawled, not fenced off: each in two segments or more
    for name in (TRAP_HOSTS["calendar"], TRAP_HOSTS["facets"], TRAP_HOSTS["echo"]):
        assert sum(per[(name, s)] > 0 for s in crawl.segments) >= 2, name


def test_new_urls_stay_within_the_caps_each_segment(crawl: Crawl) -> None:
    rows = crawl.table("crawldb").filter("source = 'outlink'").collect()
    by_host = Counter((r["host"], r["discovered_segment"]) for r in rows)
    by_pattern = Counter((path_pattern(r["url"]), r["discovered_segment"]) for r in rows)
    assert max(by_host.values()) <= NEW_PER_HOST
    assert max(by_pattern.values()) <= NEW_PER_PATTERN
    # and faceted search hit the pattern cap: it had more filter sets to add
    rejected = crawl.table("rejected").filter(F.col("host") == TRAP_HOSTS["facets"])
    assert rejected.filter("reason = 'cap/new_per_pattern'").count() > 0


def test_the_link_farm_stays_within_its_domain_budget(crawl: Crawl) -> None:
    fetched = crawl.fetched_pages().filter(F.col("host").endswith("." + FARM_DOMAIN)).collect()
    # the farm's entrance is seeded: a budget group of its own (within the
    # host cap) until its pages show it links out like a farm; the hosts it
    # leads to share the domain's
    entrance = TRAP_HOSTS["linkfarm"]
    per_segment = Counter(r["segment"] for r in fetched if r["host"] != entrance)
    # nothing outside the farm links to it: the minimum budget, every segment
    assert per_segment and max(per_segment.values()) <= MIN_PAGES
    deferred = crawl.table("crawldb").filter(F.col("domain") == FARM_DOMAIN)
    reasons = Counter(
        (r["host"] == entrance, r["deferred_reason"])
        for r in deferred.filter("deferred_reason IS NOT NULL").collect()
    )
    assert reasons[(False, "budget/domain")] > 0
    # the entrance, once judged a farm, only when its domain's budget left it out
    assert set(reasons) <= {(False, "budget/domain"), (True, "budget/farm")}


def test_a_seeded_farm_entrance_loses_its_trust(crawl: Crawl) -> None:
    entrance = TRAP_HOSTS["linkfarm"]
    assert entrance in {_host(u) for u in crawl.seeds}
    (host,) = crawl.table("hostdb").filter(F.col("host") == entrance).collect()
    assert host["sibling_segment"] is not None
    assert farm_like(host["sibling_hosts"], host["sibling_links"], host["sibling_pages"], 20)
    # judged by the first segment with FARM_MIN_PAGES of its pages with links;
    # from the next one on it counts in the domain's budget
    fetched = crawl.fetched_pages().filter(F.col("host").endswith("." + FARM_DOMAIN)).collect()
    telling = Counter(
        r["segment"]
        for r in fetched
        if r["host"] == entrance and r["outcome"] == "success" and r["outlinks"]
    )
    first = min(seg for seg, n in telling.items() if n >= FARM_MIN_PAGES)
    later = crawl.segments[crawl.segments.index(first) + 1 :]
    assert later, "judged in the last segment: nothing to check"
    per_segment = Counter(r["segment"] for r in fetched if r["segment"] in later)
    assert max(per_segment.values()) <= MIN_PAGES


def test_session_ids_are_stripped_and_shapes_refused(crawl: Crawl) -> None:
    urls = [r["url"] for r in crawl.table("crawldb").select("url").collect()]
    sessions = [u for u in urls if _host(u) == TRAP_HOSTS["sessions"]]
    assert sessions and not [u for u in sessions if SESSION_PARAMS["sessions"] in u]
    assert {urlsplit(u).path for u in sessions} <= real_paths("sessions")
    echo = [urlsplit(u).path for u in urls if _host(u) == TRAP_HOSTS["echo"]]
    assert echo and max(Counter(p.split("/")).most_common(1)[0][1] for p in echo) <= 4
    facets = [u for u in urls if _host(u) == TRAP_HOSTS["facets"]]
    assert facets and max(urlsplit(u).query.count("&") + 1 for u in facets) <= 8
    # one spelling per set of filters, and a bounded number of sets
    sets = Counter(frozenset(urlsplit(u).query.split("&")) for u in facets if "?" in u)
    assert max(sets.values()) == 1
    names = {frozenset(p.split("=")[0] for p in s) for s in sets}
    assert len(names) <= crawl.cfg.traps.max_query_sets
    rejected = crawl.table("rejected").filter(F.col("host") == TRAP_HOSTS["facets"])
    reasons = {r["reason"] for r in rejected.select("reason").distinct().collect()}
    assert {"trap/query_order", "trap/facets"} <= reasons


def test_soft_404s_are_found_by_the_probe(crawl: Crawl) -> None:
    fetch = crawl.fetched_pages().filter(F.col("host") == TRAP_HOSTS["soft404"]).collect()
    real = real_paths("soft404")
    outcomes = {urlsplit(r["url"]).path: r["outcome"] for r in fetch}
    dead = {p for p in outcomes if p not in real}
    assert dead, "the soft-404 host's dead links were fetched"
    assert {outcomes[p] for p in dead} == {"soft404"}
    assert {outcomes[p] for p in outcomes if p in real} <= {"success", "notmodified"}
    hosts = crawl.table("hostdb").filter(F.col("host") == TRAP_HOSTS["soft404"]).first()
    assert hosts is not None and hosts["soft404_status"] == 200


def test_ordinary_hosts_are_crawled_completely(crawl: Crawl) -> None:
    model_seeds = [u for u in crawl.seeds if not is_trap(_host(u))]
    reach = crawl.model.reachable(model_seeds, max_hops=CYCLES - 1)
    want = {(h, p) for h, p in reach if not is_trap(h)}
    got = {
        (r["host"], urlsplit(r["url"]).path)
        for r in crawl.fetched_pages().filter("outcome <> 'not_reached'").collect()
        if not is_trap(r["host"])
    }
    assert want and want <= got


def test_every_url_kept_out_has_a_reason_in_sql_and_stats(crawl: Crawl) -> None:
    register_views(crawl.spark, crawl.root)
    rows = crawl.spark.sql(
        "SELECT reason, count(*) AS n FROM rejected WHERE url IS NULL OR reason IS NULL "
        "GROUP BY reason"
    ).collect()
    assert rows == []
    stats = run_stats(crawl.ctx(0))
    reasons = {r["reason"]: r["urls"] for r in stats["rejected"]}
    assert reasons.get("cap/new_per_pattern", 0) > 0
    assert all(r.startswith(("normalize/", "filter/", "cap/", "trap/")) for r in reasons), reasons
    assert sum(r["rejected"] or 0 for r in stats["segments"]) == sum(reasons.values())
    assert "budget/domain" in {r["reason"] for r in stats["deferred"]}
    assert {r["reason"] for r in stats["deferred"]} <= {"budget/domain", "budget/farm"}
    # the farm per domain: one host named (its seeded entrance), the rest on
    # the minimum STAR budget, deferred for it; the entrance too, once judged
    # a farm, if the budget left its URLs out (budget/farm)
    farm = next(r for r in stats["domains"] if r["domain"] == FARM_DOMAIN)
    assert farm["named_hosts"] == 1 and farm["hosts"] > 1
    assert (farm["linking_domains"], farm["star_budget"]) == (0, MIN_PAGES)
    assert farm["deferred"] > 0 and farm["deferred_why"][0] == "budget/domain"
    assert set(farm["deferred_why"]) <= {"budget/domain", "budget/farm"}


def test_deferred_urls_return_when_the_domain_earns_budget(crawl: Crawl) -> None:
    spark = crawl.spark
    deferred = {
        r["url"]
        for r in crawl.table("crawldb")
        .filter(F.col("domain") == FARM_DOMAIN)
        .filter("deferred_reason IS NOT NULL")
        .collect()
    }
    assert deferred
    # forty other domains start linking to the farm: its budget grows
    links = [(f"fan{i}.test", FARM_DOMAIN, "x", "x") for i in range(40)]
    spark.createDataFrame(links, read_table(spark, crawl.root, "domainlinks").schema).write.format(
        "delta"
    ).mode("append").save(table_path(crawl.root, "domainlinks"))
    later = crawl.ctx(CYCLES + 30)  # past every deferral's wait
    run_generate(later)
    listed = {
        r["url"]
        for r in read_segment_table(spark, crawl.root, later.segment, "fetchlist").collect()
    }
    back = deferred & listed
    assert back, "no deferred URL came back"
    rows = crawl.table("crawldb").filter(F.col("url").isin(list(back))).collect()
    assert {r["deferrals"] for r in rows} == {0}
    assert {r["generated_segment"] for r in rows} == {later.segment}
    assert {r["deferred_reason"] for r in rows} == {None}
