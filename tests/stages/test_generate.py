"""generate's caps and policy on a synthetic crawldb (Spark, no web).

Each host below exercises one rule of ``select_fetchlist``: the per-host
window cap, the budget of an address its hosts share, a Crawl-delay above
the cap (one URL), the per-domain cap, and the operator's policy by host and
by registered domain (block, minimum delay, page cap, pause, a cleared rule).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.crawldb.budgets import path_pattern
from trawl.runner import JobContext
from trawl.stages.common import StageContext
from trawl.stages.generate import select_fetchlist
from trawl.store.schemas import CRAWLDB_SCHEMA, HOSTDB_SCHEMA, POLICY_SCHEMA
from trawl.url.keys import registered_domain, url_fingerprint

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

# hostdb's memory of a host: robots.txt and the soft-404 probe, fresh unless
# a host's extras say otherwise
SEEN = {"robots_fetched_at": AT - timedelta(hours=1), "soft404_probed_at": AT - timedelta(hours=1)}
NEVER_SEEN = dict.fromkeys(SEEN)

# host -> (IP, URLs in crawldb, hostdb extras)
HOSTS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "a-shared.com": ("10.0.0.1", 10, {}),
    "b-shared.org": ("10.0.0.1", 10, {}),  # same address as a: one budget
    "alone.com": ("10.0.0.2", 10, {"delay_s": 25.0}),  # window 100 / 25 + 1 = 5
    "slow.org": ("10.0.0.3", 10, {"crawl_delay_s": 100.0}),  # over the 30 s cap: 1
    "c1.multi.net": ("10.0.0.4", 10, {}),  # the domain multi.net is capped at 7 ...
    "c2.multi.net": ("10.0.0.5", 10, {}),  # ... over both its hosts
    "x.blocked.info": ("10.0.0.6", 10, {}),  # domain blocked by policy
    "slowed.info": ("10.0.0.7", 10, {}),  # policy min delay 50: 100 / 50 + 1 = 3
    "capped.info": ("10.0.0.8", 10, {}),  # policy page cap 2
    "paused.info": ("10.0.0.9", 10, {}),  # paused until tomorrow
    "was-paused.info": ("10.0.0.10", 10, {}),  # pause over: back to normal
    "cleared.info": ("10.0.0.11", 10, {}),  # blocked, then cleared
    "failing.info": ("10.0.0.12", 10, {"backoff_until": AT + timedelta(hours=3)}),
    # 20 hosts x 6 on one address: more than its 100 s / 1 s + 1 = 101 slots
    **{f"h{i}.crowd{i}.com": ("10.0.0.30", 10, {}) for i in range(20)},
    # robots.txt and the soft-404 probe come first, each under the gap:
    # 100 / 25 + 1 - 2 = 3 for a host without them, 4 with robots.txt fresh
    "new.com": ("10.0.0.13", 10, {"delay_s": 25.0, **NEVER_SEEN}),
    "stale.com": ("10.0.0.14", 10, {"delay_s": 25.0, "soft404_probed_at": AT - timedelta(days=31)}),
    # ... and on a shared address: 101 - 20 x 2 = 61 slots
    **{f"n{i}.new{i}.com": ("10.0.0.31", 10, NEVER_SEEN) for i in range(20)},
}


def _crawldb_rows() -> list[dict[str, Any]]:
    rows = []
    for host, (_, count, _) in HOSTS.items():
        for i in range(count):
            url = f"http://{host}/p{i}"
            row: dict[str, Any] = dict.fromkeys(CRAWLDB_SCHEMA.fieldNames())
            row.update(url=url, url_fp=url_fingerprint(url), host=host, host_bucket=0,
                       domain=registered_domain(host), status="unfetched", depth=0,
                       score=1.0 - i / 100)  # fmt: skip
            rows.append(row)
    return rows


def _hostdb_rows() -> list[dict[str, Any]]:
    rows = []
    for host, (ip, _, extra) in HOSTS.items():
        row: dict[str, Any] = dict.fromkeys(HOSTDB_SCHEMA.fieldNames())
        row.update(host=host, host_bucket=0, domain=registered_domain(host), ip=ip)
        row.update({**SEEN, **extra})
        rows.append(row)
    return rows


def _policy(scope: str, target: str, at: datetime, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(POLICY_SCHEMA.fieldNames())
    row.update(scope=scope, target=target, action="set", set_by="test", set_at=at, reason="t")
    row.update(fields)
    return row


POLICY = [
    _policy("domain", "blocked.info", AT, blocked=True),
    _policy("host", "slowed.info", AT, min_delay_s=50.0),
    _policy("host", "capped.info", AT, max_pages_per_cycle=2),
    _policy("host", "paused.info", AT, paused_until=AT + timedelta(days=1)),
    _policy("host", "was-paused.info", AT, paused_until=AT - timedelta(hours=1)),
    _policy("domain", "cleared.info", AT - timedelta(hours=2), blocked=True),
    _policy("domain", "cleared.info", AT - timedelta(hours=1), action="clear"),
]


@pytest.fixture(scope="module")
def chosen(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Counter[str]:
    hosts_file: Path = tmp_path_factory.mktemp("generate") / "hosts"
    hosts_file.write_text("".join(f"{ip} {h}\n" for h, (ip, _, _) in HOSTS.items()))
    cfg = load_config(
        None,
        [
            f"dns.hosts_file={hosts_file}",
            "politeness.min_delay_s=1.0",
            "robots.max_crawl_delay_s=30",
            "generate.fetch_window_s=100",
            "generate.max_per_host=6",
            "generate.max_per_domain=7",
        ],
        environ={},
    )
    ctx = StageContext(cfg, "seg1", AT)
    fetchlist = select_fetchlist(
        spark.createDataFrame(_crawldb_rows(), CRAWLDB_SCHEMA),
        spark.createDataFrame(_hostdb_rows(), HOSTDB_SCHEMA),
        spark.createDataFrame(POLICY, POLICY_SCHEMA),
        ctx,
    )
    rows = fetchlist.select("host", "domain", "ip").collect()
    assert all(r["domain"] == registered_domain(r["host"]) for r in rows)
    return Counter(r["host"] for r in rows)


def test_hosts_sharing_an_address_keep_their_own_caps(chosen: Counter[str]) -> None:
    # mode both: each host its own gap; the address adds one request per min delay
    assert chosen["a-shared.com"] == chosen["b-shared.org"] == 6


def test_an_address_is_capped_at_what_its_clock_allows(chosen: Counter[str]) -> None:
    crowd = [n for h, n in chosen.items() if ".crowd" in h]
    assert sum(crowd) == 101
    assert max(crowd) == 6


def test_a_host_gets_what_its_gap_allows_in_the_window(chosen: Counter[str]) -> None:
    assert chosen["alone.com"] == 5


def test_robots_txt_and_the_probe_take_their_slots_in_the_window(chosen: Counter[str]) -> None:
    assert (chosen["new.com"], chosen["stale.com"]) == (3, 4)
    new = [n for h, n in chosen.items() if ".new" in h]
    assert sum(new) == 61 and max(new) == 4  # ranked by score: 3 each, one 4th


def test_a_crawl_delay_above_the_cap_gets_one_url(chosen: Counter[str]) -> None:
    assert chosen["slow.org"] == 1


def test_a_registered_domain_is_capped_over_its_hosts(chosen: Counter[str]) -> None:
    assert chosen["c1.multi.net"] + chosen["c2.multi.net"] == 7


def test_policy_by_domain_and_host(chosen: Counter[str]) -> None:
    assert chosen["x.blocked.info"] == 0
    assert chosen["slowed.info"] == 3
    assert chosen["capped.info"] == 2
    assert chosen["paused.info"] == 0
    # each .info host is a registered domain of its own: the host cap, 6
    assert chosen["was-paused.info"] == 6
    assert chosen["cleared.info"] == 6


def test_a_host_in_back_off_is_not_generated(chosen: Counter[str]) -> None:
    assert chosen["failing.info"] == 0


# --- the recrawl priority: Spark's column equals trawl.crawldb.changerate's formula ---------------
@pytest.mark.parametrize("policy", ["lagrangian", "change_prob"])
def test_recrawl_priority_matches_the_change_rate_model(spark: Any, policy: str) -> None:
    from trawl.crawldb.changerate import ChangeStats, priority, probing
    from trawl.crawldb.transitions import change_model
    from trawl.stages.ranking import recrawl_priority

    cfg = load_config(None, [f"schedule.policy={policy}"], environ={})
    model = change_model(cfg.schedule)
    day = 86400.0
    # (score, change_rate, days since the last read or None, visits, unchanged_s, lastmod after?,
    #  dated changes, dated exposure)
    cases = [
        (1.0, None, None, None, None, False, None, None),  # never read: the prior's rate
        (1.0, 1 / day, 1.0, 3.0, 2 * day, False, 0.0, 0.0),
        (0.5, 1 / (30 * day), 10.0, 5.0, 40 * day, False, 2.0, 60 * day),
        (2.0, 1 / (3600.0), 2.0, 4.0, 0.0, False, None, None),  # probing: every visit changed
        (2.0, 1 / (3600.0), 2.0, 4.0, 0.0, False, 4.5, 3 * 3600.0),  # ... but dated: no probe
        (2.0, 1 / (3600.0), 2.0, 4.0, 0.0, False, 0.0, -1.0),  # ... dates distrusted: a probe
        (1.0, 1 / (90 * day), 5.0, 2.0, 9 * day, True, None, None),  # a sitemap says it changed
    ]
    rows = []
    for score, rate, days, n, unchanged, lastmod_after, xd, ed in cases:
        seen = None if days is None else AT - timedelta(days=days)
        lastmod = seen + timedelta(hours=1) if seen and lastmod_after else None
        rows.append((score, rate, seen, n, unchanged, lastmod, xd, ed))
    df = spark.createDataFrame(
        rows,
        "score double, change_rate double, content_seen_at timestamp, change_visits double, "
        "change_unchanged_s double, sitemap_lastmod timestamp, change_dated double, "
        "change_dated_s double",
    )
    ctx = StageContext(cfg, "seg1", AT)
    got = [r[0] for r in df.select(recrawl_priority(ctx)).collect()]
    for case, value in zip(cases, got, strict=True):
        score, rate, days, n, unchanged, lastmod_after, xd, ed = case
        lam = rate or model.default_rate_per_s
        elapsed = None if days is None or lastmod_after else days * day
        stats = ChangeStats(visits=n or 0.0, unchanged_s=unchanged or 0.0,
                            dated_changes=xd or 0.0, dated_exposure_s=ed or 0.0)  # fmt: skip
        want = priority(lam, elapsed, score, model, probe=probing(stats))
        assert value == pytest.approx(want, rel=1e-9), (score, rate, days)


# --- domain budgets (STAR) and deferral (BEAST) -------------------------------------------------
BUDGET_HOSTS = {
    # a link farm: many hosts under one domain that nothing else links to
    **{f"w{i}.farm.test": 4 for i in range(10)},
    "www.popular.test": 40,  # linked from three other domains
    "www.quiet.test": 5,  # nothing links to it, but it has few pages
}


def _budget_crawldb(
    deferrals: int | None, named: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """``named``: host -> how its first page came (seed, sitemap, redirect);
    the host's other pages are its outlinks."""
    rows = []
    for i, (host, count) in enumerate(BUDGET_HOSTS.items()):
        for j in range(count):
            url = f"http://{host}/p{j}"
            row: dict[str, Any] = dict.fromkeys(CRAWLDB_SCHEMA.fieldNames())
            row.update(url=url, url_fp=url_fingerprint(url), host=host, host_bucket=i % 4,
                       domain=registered_domain(host), status="unfetched", depth=0,
                       score=1.0 - j / 100, deferrals=deferrals,
                       pattern=path_pattern(url))  # fmt: skip
            if named and host in named:
                row.update(source=named[host] if j == 0 else "outlink", depth=min(j, 1))
            rows.append(row)
    return rows


def _budget_run(
    spark: Any, tmp_path: Path, deferrals: int | None, named: dict[str, str] | None = None,
    settings: tuple[str, ...] = (), extra: list[dict[str, Any]] = (),
    budgets: dict[str, int] | None = None, starved: list[Any] | None = None,
    host_fields: dict[str, dict[str, Any]] | None = None,
) -> tuple[Counter[str], list[Any]]:  # fmt: skip
    """``budgets``: domain policies' page caps; ``starved`` gets
    ``starved_seed_domains``' rows; ``host_fields``: hostdb values by host."""
    from trawl.stages.generate import choose, over_budget, starved_seed_domains
    from trawl.stages.ranking import rank_due
    from trawl.store.frames import materialize, release
    from trawl.store.schemas import DOMAINLINKS_SCHEMA

    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"10.1.0.{i} {h}\n" for i, h in enumerate(BUDGET_HOSTS)))
    cfg = load_config(
        None,
        ["budget.min_pages=6", "budget.max_pages=25", "budget.pages_per_linking_domain=10",
         "budget.defer_s=3600", "budget.defer_max_s=36000", "generate.max_per_host=50",
         "politeness.min_delay_s=0.1", f"dns.hosts_file={hosts}", *settings],
        environ={},
    )  # fmt: skip
    links = [(a, "popular.test", "s0", "s0") for a in ("a.test", "b.test", "c.test")]
    links += [("farm.test", "popular.test", "s0", "s0"), ("popular.test", "farm.test", "s0", "s0")]
    hostdb = [
        {**dict.fromkeys(HOSTDB_SCHEMA.fieldNames()), "host": h, "ip": f"10.1.0.{i}",
         **(host_fields or {}).get(h, {})}
        for i, h in enumerate(BUDGET_HOSTS)
    ]  # fmt: skip
    policy = [
        {**dict.fromkeys(POLICY_SCHEMA.fieldNames()), "scope": "domain", "target": d,
         "action": "budget", "max_pages_per_cycle": n, "set_at": AT - timedelta(hours=1)}
        for d, n in (budgets or {}).items()
    ]  # fmt: skip
    ctx = StageContext(cfg, "seg1", AT)
    crawldb = spark.createDataFrame(_budget_crawldb(deferrals, named) + list(extra), CRAWLDB_SCHEMA)
    # kept, as generate keeps it: choose, over_budget and starved_seed_domains
    # each read it, and the ranking's plan is tens of window and join steps
    ranked = materialize(
        rank_due(
            crawldb,
            spark.createDataFrame(hostdb, HOSTDB_SCHEMA),
            spark.createDataFrame(policy, POLICY_SCHEMA),
            ctx,
            spark.createDataFrame(links, DOMAINLINKS_SCHEMA),
        )
    )
    try:
        chosen = Counter(r["host"] for r in choose(ranked, ctx).select("host").collect())
        if starved is not None:
            starved.extend(starved_seed_domains(ranked, crawldb).collect())
        return chosen, over_budget(ranked, ctx).collect()
    finally:
        release(ranked)


def _by_domain(hosts: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for host, n in hosts.items():
        out[registered_domain(host)] += n
    return out


def test_domain_budgets_follow_linking_domains_and_defer_the_rest(
    spark: Any, tmp_path: Path
) -> None:
    hosts, deferred = _budget_run(spark, tmp_path, None)
    chosen = _by_domain(hosts)
    # popular.test: 4 linking domains x 10 = 40, capped at max_pages 25
    assert chosen["popular.test"] == 25
    # the farm: one linking domain (popular.test) x 10 = 10 of its 40 pages
    assert chosen["farm.test"] == 10
    # quiet.test: no in-links, min_pages 6 > its 5 pages: all of them
    assert chosen["quiet.test"] == 5
    by_domain = Counter(registered_domain(r["url"].split("/")[2]) for r in deferred)
    assert by_domain == {"popular.test": 15, "farm.test": 30}
    # deferred, never dropped: due again after defer_s, counted
    day_after = {r["next_fetch_at"].replace(tzinfo=UTC) for r in deferred}
    assert day_after == {AT + timedelta(hours=1)}
    assert {r["deferrals"] for r in deferred} == {1}


def test_hosts_the_operator_named_are_not_held_to_their_domains_budget(
    spark: Any, tmp_path: Path
) -> None:
    # Three farm hosts were seeded (one by its sitemap URL); the farm's own
    # apex is where a seed redirected (same registered domain: trusted), and
    # www.quiet.test is a redirect target no seed of its domain led to.
    named = {"w0.farm.test": "seed", "w1.farm.test": "seed", "w2.farm.test": "sitemap",
             "www.quiet.test": "redirect"}  # fmt: skip
    hosts, deferred = _budget_run(spark, tmp_path, None, named)
    seeded = ("w0.farm.test", "w1.farm.test", "w2.farm.test")
    assert all(hosts[h] == 4 for h in seeded)  # every page: the seed floor is 1000
    # the other seven farm hosts share the farm's STAR budget (10 of 28)
    assert sum(n for h, n in hosts.items() if h.endswith("farm.test") and h not in seeded) == 10
    deferred_hosts = Counter(r["url"].split("/")[2] for r in deferred)
    assert not set(deferred_hosts) & set(seeded)
    assert sum(deferred_hosts[h] for h in deferred_hosts if h.endswith("farm.test")) == 18
    assert hosts["www.quiet.test"] == 5  # its own min_pages; a redirect alone names no host
    # a seed floor below a host's due URLs limits it, and defers nothing
    hosts, deferred = _budget_run(spark, tmp_path, None, named, ("budget.seed_host_pages=3",))
    assert all(hosts[h] == 3 for h in seeded)
    assert not {r["url"].split("/")[2] for r in deferred} & set(seeded)
    # trust_seed_domains: every host of a seed's registered domain is trusted
    hosts, deferred = _budget_run(spark, tmp_path, None, named, ("budget.trust_seed_domains=true",))
    assert _by_domain(hosts)["farm.test"] == 40
    assert not [r for r in deferred if r["url"].split("/")[2].endswith("farm.test")]


def test_farm_like_col_agrees_with_farm_like(spark: Any) -> None:
    from trawl.crawldb.budgets import farm_like
    from trawl.stages.ranking import farm_like_col

    grid = [(h, lk, p) for h in (0, 19, 20, 21, 60) for lk in (0, 20, 60, 79, 80, 84, 239, 240)
            for p in (0, 4, 5, 6, 20, 26, 27, 28)]  # fmt: skip
    grid.append((None, None, None))
    df = spark.createDataFrame(grid, "sibling_hosts int, sibling_links int, sibling_pages int")
    got = [r[0] for r in df.select(farm_like_col(20)).collect()]
    want = [farm_like(h or 0, lk or 0, p or 0, 20) for h, lk, p in grid]
    assert got == want


def test_a_named_host_that_links_out_like_a_farm_is_budgeted_with_its_domain(
    spark: Any, tmp_path: Path
) -> None:
    # w0 and w1 were seeded; w0's pages of its last telling segment linked
    # 48 unnamed farm hosts, ten from each of five pages: a farm's front page.
    # w1's pages link 30 by section, each from ten of its 20 pages: a site's.
    named = {"w0.farm.test": "seed", "w1.farm.test": "seed"}
    fields = {
        "w0.farm.test": {"sibling_pages": 5, "sibling_hosts": 48, "sibling_links": 50},
        "w1.farm.test": {"sibling_pages": 20, "sibling_hosts": 30, "sibling_links": 300},
    }
    hosts, deferred = _budget_run(spark, tmp_path, None, named, host_fields=fields)
    assert hosts["w1.farm.test"] == 4  # trusted: all its pages
    # w0 shares the farm's STAR budget (10) with the eight unnamed hosts
    assert sum(n for h, n in hosts.items() if h.endswith("farm.test") and h != "w1.farm.test") == 10
    reasons = Counter((r["url"].split("/")[2], r["deferred_reason"]) for r in deferred)
    assert {h for h, _ in reasons if h.endswith("farm.test")} - {"w1.farm.test"}
    assert all(why == "budget/farm" for (h, why) in reasons if h == "w0.farm.test")
    assert all(why == "budget/domain" for (h, why) in reasons if h != "w0.farm.test")
    # the test off, or the whole domain trusted by the operator: w0 is trusted
    for setting in ("budget.farm_min_hosts=0", "budget.trust_seed_domains=true"):
        hosts, deferred = _budget_run(spark, tmp_path, None, named, (setting,), host_fields=fields)
        assert hosts["w0.farm.test"] == 4, setting
        assert not [r for r in deferred if "//w0.farm.test/" in r["url"]], setting


def test_a_domain_policy_page_cap_is_the_domains_budget_up_or_down(
    spark: Any, tmp_path: Path
) -> None:
    # the farm earns 10 a segment, popular.test 25 (max_pages): the operator
    # raises the first and lowers the second; over a policy's cap nothing is
    # deferred (it waits for the next segment)
    hosts, deferred = _budget_run(
        spark, tmp_path, None, budgets={"farm.test": 30, "popular.test": 12}
    )
    assert _by_domain(hosts)["farm.test"] == 30
    assert _by_domain(hosts)["popular.test"] == 12
    assert not deferred


def test_stats_show_the_operators_budget_beside_stars(spark: Any) -> None:
    from trawl.stages.stats import domain_budgets
    from trawl.store.schemas import DOMAINLINKS_SCHEMA

    policy = {**dict.fromkeys(POLICY_SCHEMA.fieldNames()), "scope": "domain",
              "target": "farm.test", "action": "budget", "max_pages_per_cycle": 30,
              "set_at": AT - timedelta(hours=1)}  # fmt: skip
    links = [("popular.test", "farm.test", "s0", "s0")]
    rows = domain_budgets(
        spark.createDataFrame(_budget_crawldb(None), CRAWLDB_SCHEMA),
        spark.createDataFrame(links, DOMAINLINKS_SCHEMA),
        StageContext(load_config(None, ["budget.min_pages=6"], environ={}), "seg1", AT),
        spark.createDataFrame([policy], POLICY_SCHEMA),
    )
    by_domain = {r["domain"]: (r["star_budget"], r["policy_budget"]) for r in rows}
    assert by_domain["farm.test"] == (10, 30)  # one linking domain x 10; the operator's 30
    assert by_domain["quiet.test"] == (6, None)


def test_generate_names_seed_domains_whose_other_hosts_wait_on_the_budget(
    spark: Any, tmp_path: Path
) -> None:
    # w0 seeded: its 4 pages go; of the farm's 36 others, 10 fit the budget,
    # 26 of the domain's 40 due URLs are deferred: more than half
    starved: list[Any] = []
    _budget_run(spark, tmp_path, None, {"w0.farm.test": "seed"}, starved=starved)
    assert [(r["domain"], r["due"], r["deferred"], r["budget"]) for r in starved] == [
        ("farm.test", 40, 26, 10)
    ]
    # every host seeded, or the domain trusted: nothing to say
    starved.clear()
    _budget_run(spark, tmp_path, None, {"w0.farm.test": "seed"},
                ("budget.trust_seed_domains=true",), starved=starved)  # fmt: skip
    assert starved == []


def test_a_pattern_of_duplicates_gets_only_its_probes_even_on_a_seeded_host(
    spark: Any, tmp_path: Path
) -> None:
    # w0.farm.test was seeded; five pages of its one pattern (/p0) fetched
    # before all came back duplicates, so its four due pages get two probes
    visited = []
    for j in range(5):
        url = f"http://w0.farm.test/p{100 + j}"
        row: dict[str, Any] = dict.fromkeys(CRAWLDB_SCHEMA.fieldNames())
        row.update(url=url, url_fp=url_fingerprint(url), host="w0.farm.test", host_bucket=0,
                   domain="farm.test", status="duplicate", duplicate_of="http://w0.farm.test/",
                   depth=1, source="outlink", pattern=path_pattern(url),
                   last_fetch_at=AT - timedelta(hours=j + 1),
                   next_fetch_at=AT + timedelta(days=30))  # fmt: skip
        visited.append(row)
    named = {"w0.farm.test": "seed", "w1.farm.test": "seed"}
    hosts, deferred = _budget_run(spark, tmp_path, None, named, extra=visited)
    assert hosts["w0.farm.test"] == 2  # traps.pattern_probes
    assert hosts["w1.farm.test"] == 4  # a seeded host of good standing: all of them
    assert not [r for r in deferred if "//w0.farm.test/" in r["url"]]


def test_a_redirect_from_a_seed_names_its_target_within_the_domain(spark: Any) -> None:
    from trawl.stages.traps import trusted_hosts

    rows = [("http://example.org/", "example.org", "seed", 0),
            ("https://www.example.org/", "example.org", "redirect", 0),
            ("https://elsewhere.net/", "elsewhere.net", "redirect", 0),
            ("https://blog.example.org/", "example.org", "redirect", 2),
            ("https://m.example.org/a", "example.org", "outlink", 1)]  # fmt: skip
    crawldb = spark.createDataFrame(
        [(u, u.split("/")[2], d, s, depth) for u, d, s, depth in rows],
        "url string, host string, domain string, source string, depth int",
    )
    hosts, domains = trusted_hosts(crawldb)
    assert sorted(r["host"] for r in hosts.collect()) == ["example.org", "www.example.org"]
    assert [r["domain"] for r in domains.collect()] == ["example.org"]


def test_deferrals_in_a_row_wait_longer(spark: Any, tmp_path: Path) -> None:
    from trawl.crawldb.budgets import defer_interval_s

    _, deferred = _budget_run(spark, tmp_path, 3)
    wait = defer_interval_s(3, 3600.0, 36000.0)
    assert wait == 28800.0
    assert {r["next_fetch_at"].replace(tzinfo=UTC) for r in deferred} == {
        AT + timedelta(seconds=wait)
    }
    assert {r["deferrals"] for r in deferred} == {4}


def test_each_host_is_cut_to_its_cap_before_the_shuffle(spark: Any) -> None:
    # rank_due's literal bound lets Spark keep only each host's best
    # max_per_host rows (a WindowGroupLimit; a partial one too where the
    # host window has its own shuffle) before the address window shuffles
    # them: the due URLs of a large host do not all cross the network.
    from trawl.stages.ranking import rank_due

    cfg = load_config(None, ["generate.max_per_host=7"], environ={})
    ranked = rank_due(
        spark.createDataFrame(_crawldb_rows(), CRAWLDB_SCHEMA),
        spark.createDataFrame(_hostdb_rows(), HOSTDB_SCHEMA),
        spark.createDataFrame([], POLICY_SCHEMA),
        StageContext(cfg, "seg1", AT),
    )
    plan = ranked._jdf.queryExecution().executedPlan().toString()
    limits = [line for line in plan.splitlines() if "WindowGroupLimit [host" in line]
    assert any("row_number(), 7," in line for line in limits), plan


def test_nothing_due_gives_an_empty_fetch_list_and_one_due_url_is_chosen(
    spark: Any, tmp_path: Path
) -> None:
    """Nothing due, or only URLs of a host hostdb holds, gives an empty fetch
    list; a due URL of a host not held is chosen."""
    from trawl.runner import run_generate
    from trawl.store.tables import ensure_all, read_segment_table, read_table, table_path

    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"10.1.0.{i} {h}\n" for i, h in enumerate(BUDGET_HOSTS)))
    cfg = load_config(None, [f"dns.hosts_file={hosts}"], environ={})
    root = str(tmp_path / "crawl")
    ensure_all(spark, root)
    rows = _budget_crawldb(None)
    for row in rows:  # all fetched, due again tomorrow
        row.update(status="fetched", next_fetch_at=AT + timedelta(days=1))
    rows[0]["next_fetch_at"] = AT + timedelta(hours=2)
    # due already, but its host is held (a robots.txt outage) for five hours
    rows[-1]["next_fetch_at"] = AT - timedelta(hours=1)
    crawldb = table_path(root, "crawldb")
    spark.createDataFrame(rows, CRAWLDB_SCHEMA).write.format("delta").mode("append").save(crawldb)
    held: dict[str, Any] = dict.fromkeys(HOSTDB_SCHEMA.fieldNames())
    held.update(host=rows[-1]["host"], host_bucket=rows[-1]["host_bucket"],
                domain=rows[-1]["domain"], backoff_until=AT + timedelta(hours=5))  # fmt: skip
    spark.createDataFrame([held], HOSTDB_SCHEMA).write.format("delta").mode("append").save(
        table_path(root, "hostdb")
    )

    first = run_generate(JobContext(spark, cfg, root, "seg1", AT))
    assert first["urls"] == 0
    assert read_segment_table(spark, root, "seg1", "fetchlist").count() == 0
    counters = read_table(spark, root, "counters").filter("segment = 'seg1'").collect()
    assert {r["name"]: r["value"] for r in counters}["generate/urls"] == 0
    # three hours on, the one URL due then is chosen (and marked generated)
    later = run_generate(JobContext(spark, cfg, root, "seg2", AT + timedelta(hours=3)))
    assert later["urls"] == 1
    listed = read_segment_table(spark, root, "seg2", "fetchlist").collect()
    assert [r["url"] for r in listed] == [rows[0]["url"]]
    marked = read_table(spark, root, "crawldb").filter("generated_segment = 'seg2'").collect()
    assert [r["url"] for r in marked] == [rows[0]["url"]]


@pytest.mark.spark_defaults  # a broadcast is Spark's default, off in small jobs
def test_a_mark_source_is_broadcast_within_an_eighth_of_the_driver_heap(spark: Any) -> None:
    from trawl.stages.common import broadcastable

    heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()
    assert broadcastable(spark, heap // 8 // 256, 256)
    assert not broadcastable(spark, heap // 8 // 256 + 1, 256)
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        assert not broadcastable(spark, 10, 256)
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


def test_urls_locked_by_a_deleted_segment_are_free_at_once(spark: Any) -> None:
    """A segment's folder deleted before updatedb freed its URLs: they are
    found and released, not left to the lock's week (Nutch's
    crawl.gen.delay). A lock of a segment still on disk holds."""
    from trawl.stages.generate import abandoned_locks
    from trawl.stages.ranking import due_urls

    rows = []
    for i, segment in enumerate(["20261101T000000Z"] * 3 + ["20261130T110000Z"] * 2 + [None]):
        url = f"http://locked.com/p{i}"
        row: dict[str, Any] = dict.fromkeys(CRAWLDB_SCHEMA.fieldNames())
        row.update(url=url, url_fp=url_fingerprint(url), host="locked.com", host_bucket=0,
                   domain="locked.com", status="unfetched", depth=0, generated_segment=segment,
                   generated_at=AT - timedelta(hours=1) if segment else None)  # fmt: skip
        rows.append(row)
    crawldb = spark.createDataFrame(rows, CRAWLDB_SCHEMA)
    ctx = StageContext(load_config(None, [], environ={}), "20261130T120000Z", AT)
    gone = abandoned_locks(crawldb, ["20261130T110000Z"], ctx)
    assert gone == {"20261101T000000Z": 3}
    assert due_urls(crawldb, ctx).count() == 1
    released = StageContext(ctx.cfg, ctx.segment, AT, released_segments=tuple(gone))
    assert due_urls(crawldb, released).count() == 4
