"""updatedb's trap defences (trawl.stages.traps) on tiny frames (Spark, no
web): new URLs per path pattern, then per host, ranked by score; URLs an
earlier run of the same updatedb added hold their places; URLs fetched in the
segment are not capped; the domain pairs of followed links; session-id
parameters learned per host."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from trawl.config import load_config
from trawl.crawldb.budgets import path_pattern
from trawl.stages.common import StageContext, release
from trawl.stages.traps import KEY, bad_patterns, cap_new_urls, domain_pairs, sibling_evidence
from trawl.stages.updatedb import LINK_SCHEMA
from trawl.url.keys import url_fingerprint

AT = datetime(2026, 12, 1, tzinfo=UTC)


def _links(urls: list[tuple[str, float]]) -> list[dict[str, Any]]:
    rows = []
    for url, score in urls:
        row: dict[str, Any] = dict.fromkeys(LINK_SCHEMA.fieldNames())
        host = url.split("/")[2]
        row.update(url=url, url_fp=url_fingerprint(url), host=host, host_bucket=0,
                   score=score, source="outlink", pattern=path_pattern(url))  # fmt: skip
        rows.append(row)
    return rows


def _run(spark: Any, new: list[tuple[str, float]], earlier: list[tuple[str, float]] = (),
         fetched: list[str] = (), bad: list[str] | None = None,
         known: list[tuple[str, str]] | None = None, settings: tuple[str, ...] = (),
         ) -> tuple[set[str], dict[str, str]]:  # fmt: skip
    """``known``: crawldb's (url, discovered_segment) rows; this segment is "seg2"."""
    caps = ["traps.max_new_per_pattern=3", "traps.max_new_per_host=5", *settings]
    ctx = StageContext(load_config(None, caps, environ={}), "seg2", AT)
    fetched_rows = [(0, url_fingerprint(u), u) for u in fetched]
    kept, over = cap_new_urls(
        spark.createDataFrame(_links(new), LINK_SCHEMA),
        spark.createDataFrame(_links(list(earlier)), LINK_SCHEMA),
        spark.createDataFrame(fetched_rows, "host_bucket int, url_fp long, url string"),
        ctx,
        None if bad is None else spark.createDataFrame([(p,) for p in bad], "pattern string"),
        None
        if known is None
        else spark.createDataFrame(
            [(u, u.split("/")[2], seg) for u, seg in known],
            "url string, host string, discovered_segment string",
        ),
    )
    assert set(kept.columns) >= set(KEY)
    return (
        {r["url"] for r in kept.collect()},
        {r["url"]: r["rejected"] for r in over.collect()},
    )


def test_a_calendar_adds_the_pattern_cap_per_segment(spark: Any) -> None:
    months = [(f"http://cal.test/cal/{2026 + i}/01/", 1.0 - i / 100) for i in range(10)]
    others = [("http://cal.test/about", 0.1), ("http://cal.test/contact", 0.1)]
    kept, over = _run(spark, months + others)
    # the three best-scored months, and the pages of other patterns
    assert kept == {u for u, _ in months[:3]} | {u for u, _ in others}
    assert over == {u: "cap/new_per_pattern" for u, _ in months[3:]}


def test_the_host_cap_counts_what_the_pattern_caps_left(spark: Any) -> None:
    urls = [(f"http://h.test/{name}{i}/", 0.5 + i / 10) for name in "abc" for i in range(2)]
    urls += [("http://other.test/x", 1.0)]
    kept, over = _run(spark, urls)
    h_kept = {u for u in kept if "//h.test/" in u}
    assert len(h_kept) == 5 and "http://other.test/x" in kept
    assert list(over.values()) == ["cap/new_per_host"]
    (cut,) = over
    assert cut.endswith("0/")  # one of the lowest-scored


def test_a_rerun_admits_the_same_urls(spark: Any) -> None:
    months = [(f"http://cal.test/cal/{2026 + i}/01/", 1.0 - i / 100) for i in range(10)]
    first, _ = _run(spark, months)
    # the re-run: the first three are in crawldb now, added by this segment
    again, over = _run(spark, [m for m in months if m[0] not in first],
                       earlier=[m for m in months if m[0] in first])  # fmt: skip
    assert again == set()
    assert set(over) == {u for u, _ in months} - first


def test_urls_fetched_in_the_segment_are_not_capped(spark: Any) -> None:
    months = [(f"http://cal.test/cal/{2026 + i}/01/", 1.0 - i / 100) for i in range(5)]
    target = months[4][0]  # a redirect target the fetcher followed
    kept, over = _run(spark, months, fetched=[target])
    assert target in kept and target not in over
    assert len(kept) == 4


FACETS = "http://shop.test/search"


def test_a_query_in_another_order_is_the_url_crawldb_knows(spark: Any) -> None:
    known = [(f"{FACETS}?color=red&size=xl", "seg1")]
    new = [(f"{FACETS}?size=xl&color=red", 0.9),  # crawldb's, reordered
           (f"{FACETS}?brand=acme&fit=slim", 0.8), (f"{FACETS}?fit=slim&brand=acme", 0.7),
           ("http://shop.test/item?b=2&a=1", 0.5),
           ("http://other.test/search?size=xl&color=red", 0.4)]  # fmt: skip
    kept, over = _run(spark, new, known=known, settings=("traps.max_new_per_pattern=10",))
    assert over == {
        f"{FACETS}?size=xl&color=red": "trap/query_order",
        f"{FACETS}?fit=slim&brand=acme": "trap/query_order",  # the better-scored order stays
    }
    assert kept == {f"{FACETS}?brand=acme&fit=slim", "http://shop.test/item?b=2&a=1",
                    "http://other.test/search?size=xl&color=red"}  # fmt: skip


def test_a_path_gets_a_bounded_number_of_parameter_sets(spark: Any) -> None:
    filters = ["color=red", "size=xl", "brand=acme", "fit=slim"]
    known = [(f"{FACETS}?{f}", "seg1") for f in filters]  # four sets known
    pairs = [f"{a}&{b}" for i, a in enumerate(filters) for b in filters[i + 1 :]]
    new = [(f"{FACETS}?{p}", 0.5) for p in pairs]  # six new sets of two names
    new += [(f"{FACETS}?color=blue", 0.5),  # a known set of names, another value
            ("http://shop.test/list?page=2", 0.5),
            ("http://shop.test/list?page=3", 0.5)]  # fmt: skip
    kept, over = _run(spark, new, known=known,
                      settings=("traps.max_new_per_pattern=20", "traps.max_new_per_host=20",
                                "traps.max_query_sets=7"))  # fmt: skip
    # three sets fit beside the four known, taken in name order; values vary freely
    assert over == {
        f"{FACETS}?{q}": "trap/facets"
        for q in ("color=red&fit=slim", "color=red&size=xl", "size=xl&fit=slim")
    }
    assert f"{FACETS}?color=blue" in kept and "http://shop.test/list?page=3" in kept
    assert len([u for u in kept if u.startswith(FACETS)]) == 4


def test_the_query_rules_count_only_what_crawldb_had_before_the_segment(spark: Any) -> None:
    # a re-run: crawldb holds what the first run added (seg2), and the pool
    # holds those URLs as earlier -- they must not count twice
    sets = [f"{FACETS}?f{i}=1" for i in range(5)]
    first, _ = _run(spark, [(u, 0.5) for u in sets], settings=("traps.max_query_sets=3",),
                    known=[])  # fmt: skip
    again, over = _run(
        spark,
        [(u, 0.5) for u in sets if u not in first],
        earlier=[(u, 0.5) for u in first],
        known=[(u, "seg2") for u in first],
        settings=("traps.max_query_sets=3",),
    )
    assert len(first) == 3 and again == set() and set(over) == set(sets) - first


def test_domain_pairs_are_distinct_registered_domains(spark: Any) -> None:
    link = "struct<url:string,nofollow:boolean>"
    rows = [
        ("a.example.test", "success", [("http://b.example.test/", False),  # same domain
                                        ("http://other.test/x", False),
                                        ("http://OTHER.test/y", False),
                                        ("http://spam.test/", True)]),  # nofollow
        ("w1.farm.test", "success", [("http://w2.farm.test/", False),
                                      ("http://example.test/", False)]),
        ("x.test", "gone", [("http://y.test/", False)]),
    ]  # fmt: skip
    fetch = spark.createDataFrame(rows, f"host string, outcome string, outlinks array<{link}>")
    pairs = {(r["from_domain"], r["to_domain"]) for r in domain_pairs(fetch).collect()}
    assert pairs == {("example.test", "other.test"), ("farm.test", "example.test")}


def test_sibling_evidence_counts_unnamed_siblings_but_menus(spark: Any) -> None:
    link = "struct<url:string,nofollow:boolean>"

    def page(host: str, n: int, targets: list[str], kind: str = "page") -> tuple[Any, ...]:
        links = [(f"http://{t}/p", False) for t in targets] + [(f"http://{host}/x", False)]
        return (kind, f"http://{host}/{n}", host, "success", links)

    rows = [
        # w0: six pages, each linking three farm hosts of its own, and the
        # named w9 and the menu's m1 on every page; one nofollow and one
        # other-domain link besides
        *[page("w0.farm.test", n, [f"w{10 + 3 * n + k}.farm.test" for k in range(3)]
               + ["w9.farm.test", "m1.farm.test"]) for n in range(6)],
        ("page", "http://w0.farm.test/6", "w0.farm.test", "success",
         [("http://w50.farm.test/", True), ("http://a.example.test/", False)]),
        page("w0.farm.test", 7, ["w60.farm.test"], kind="robots"),  # not a page
        # a.example.test: two pages linking only across domains
        page("a.example.test", 0, ["b.other.test"]),
        page("a.example.test", 1, ["b.other.test"]),
    ]  # fmt: skip
    fetch = spark.createDataFrame(
        rows, f"kind string, url string, host string, outcome string, outlinks array<{link}>"
    )
    crawldb = spark.createDataFrame(
        [("http://w9.farm.test/", "w9.farm.test", "farm.test", "seed", 0, 0)],
        "url string, host string, domain string, source string, depth int, host_bucket int",
    )
    ctx = StageContext(load_config(None, ["crawl.host_buckets=1"], environ={}), "seg2", AT)
    held: list[Any] = []
    evidence = sibling_evidence(fetch, crawldb, ctx, held)
    got = {r["host"]: r.asDict() for r in evidence.collect()}
    # the (host, sibling) pairs are kept for the caller to release
    [kept] = held
    assert kept._jdf.queryExecution().analyzed().getClass().getSimpleName() == "LogicalRDD"
    assert got["w0.farm.test"] == {"host": "w0.farm.test", "sibling_pages": 7,
                                   "sibling_hosts": 18, "sibling_links": 18}  # fmt: skip
    assert got["a.example.test"]["sibling_hosts"] == 0
    assert got["a.example.test"]["sibling_pages"] == 2
    # nothing links a sibling: no crawldb read, zeros
    alone = fetch.filter("host = 'a.example.test'")
    (row,) = sibling_evidence(alone, crawldb, ctx, held).collect()
    assert (row["sibling_pages"], row["sibling_hosts"], row["sibling_links"]) == (2, 0, 0)
    release(*held)


def test_a_host_parameter_that_only_changes_ids_is_learned(spark: Any) -> None:
    from trawl.stages.traps import learn_session_params

    cols = "host string, url string, outcome string, status string, simhash long, "
    cols += "content_sha256 string"
    now = [
        ("v.test", "http://v.test/p/1?vt=b2", "success", None, 7, "x1"),
        ("v.test", "http://v.test/p/2?vt=b2", "success", None, 8, "x2"),
        # ?page= selects content: /list under two values, two contents
        ("v.test", "http://v.test/list?page=2&vt=c3", "success", None, 5, "y"),
        ("v.test", "http://v.test/list?page=3&vt=c3", "success", None, 6, "z"),
        ("w.test", "http://w.test/a?id=1", "success", None, 1, "a"),
    ]
    before = [
        ("v.test", "http://v.test/p/1?vt=a1", None, "fetched", 7, "x0"),  # same text, other body
        ("v.test", "http://v.test/list?page=2&vt=a1", None, "fetched", 5, "y"),
        ("w.test", "http://w.test/a?id=2", None, "fetched", 2, "b"),  # id: other content
        ("x.test", "http://x.test/a?s=1", None, "fetched", 1, "a"),  # no page of x.test now
    ]
    learned = learn_session_params(
        spark.createDataFrame(now, cols), spark.createDataFrame(before, cols)
    )
    assert {(r["host"], r["param"]) for r in learned.collect()} == {("v.test", "vt")}


def test_the_counter_column_agrees_with_counter_step(spark: Any) -> None:
    from pyspark.sql import functions as F

    from trawl.crawldb.budgets import counter_step
    from trawl.stages.traps import counter_run_col

    pairs = [
        ("http://cal.test/cal/2026/12/", "http://cal.test/cal/2027/01/"),
        ("http://h.test/list?page=3", "http://h.test/list?page=30"),
        ("https://h.test:8443/p/7", "https://h.test:8443/p/8"),
        ("http://h.test/list?page=3", "http://h.test/list?page=3"),
        ("http://cal.test/cal/2026/12/", "http://cal.test/cal/2026/12/01/"),
        ("http://shop.test/s?color=red", "http://shop.test/s?color=blue"),
        ("http://site-12.test/p/1", "http://site-13.test/p/2"),
        ("http://h.test:8080/p/1", "http://h.test:8081/p/2"),
        ("http://h.test/a/b", "http://h.test/a/c"),  # no digit in either
        ("http://h.test/p/1", "http://h.test/p/x"),  # none in the target
        ("http://h.test/p/x", "http://h.test/p/1"),  # none in the source
        ("http://1.2.3.4/p/1", "http://1.2.3.4/p/2"),  # the origin's digits only kept
    ]
    frame = spark.createDataFrame(pairs, "s string, t string")
    expected = {(s, t): 5 if counter_step(s, t) else 0 for s, t in pairs}
    got = frame.select(
        "s", "t", counter_run_col(F.col("s"), F.col("t"), F.lit(4)).alias("run")
    ).collect()
    assert {(r["s"], r["t"]): r["run"] for r in got} == expected


def test_counter_runs_grow_along_steps_and_stop_at_the_limit(spark: Any) -> None:
    from trawl.stages.updatedb import admitted_links, discovered_links
    from trawl.store.schemas import FETCH_SCHEMA

    def page(url: str, run: int | None, links: list[str], **extra: Any) -> dict[str, Any]:
        row: dict[str, Any] = dict.fromkeys(FETCH_SCHEMA.fieldNames())
        outlinks = [dict(url=u, anchor=None, nofollow=False, sitemap=None, lastmod=None)
                    for u in links]  # fmt: skip
        row.update(kind="page", url=url, host=url.split("/")[2], outcome="success", depth=3,
                   counter_run=run, outlinks=outlinks)  # fmt: skip
        row.update(extra)
        return row

    cal = "http://cal.test/cal"
    fetch = spark.createDataFrame(
        [
            # two steps in: the next month is the third, over the limit of 2
            page(
                f"{cal}/2027/02/", 2, [f"{cal}/2027/03/", f"{cal}/2027/02/08/", "http://cal.test/"]
            ),
            page(f"{cal}/2026/12/", None, [f"{cal}/2027/01/"]),  # a run starts
            # also linked from outside the sequence: its shortest run counts
            page(f"{cal}/2027/05/", 2, [f"{cal}/2027/06/"]),
            page("http://cal.test/news", 0, [f"{cal}/2027/06/"]),
            # a sitemap's entries start no run, whatever the sitemap's URL
            page(
                "http://cal.test/sitemap-7.xml",
                9,
                ["http://cal.test/sitemap-8.xml"],
                is_sitemap=True,
            ),
            # a redirect target is where its source was in the sequence
            page(f"{cal}/2027/09/", 2, [], outcome="redir_perm", redirect_to=f"{cal}/2027/10/"),
        ],
        FETCH_SCHEMA,
    )
    cfg = load_config(None, ["traps.max_counter_run=2"], environ={})
    ctx = StageContext(cfg, "seg2", AT)
    rows = {r["raw"]: r for r in admitted_links(discovered_links(fetch), ctx).collect()}
    runs = {u: (r["counter_run"], r["rejected"]) for u, r in rows.items()}
    assert runs == {
        f"{cal}/2027/03/": (None, "trap/counter"),
        f"{cal}/2027/02/08/": (0, None),
        "http://cal.test/": (0, None),
        f"{cal}/2027/01/": (1, None),
        f"{cal}/2027/06/": (0, None),
        "http://cal.test/sitemap-8.xml": (0, None),
        f"{cal}/2027/10/": (2, None),
    }
    off = load_config(None, ["traps.max_counter_run=0"], environ={})
    ctx = StageContext(off, "seg2", AT)
    rows = {r["raw"]: r for r in admitted_links(discovered_links(fetch), ctx).collect()}
    assert (
        rows[f"{cal}/2027/03/"]["rejected"] is None and rows[f"{cal}/2027/03/"]["counter_run"] == 3
    )


def test_a_pattern_of_duplicates_adds_only_its_probes(spark: Any) -> None:
    months = [(f"http://cal.test/cal/{2026 + i}/01/", 1.0 - i / 100) for i in range(10)]
    others = [("http://cal.test/about", 0.1)]
    kept, over = _run(spark, months + others, bad=[path_pattern(months[0][0])])
    # traps.pattern_probes (2) of the bad pattern; other patterns keep their cap
    assert kept == {u for u, _ in months[:2]} | {"http://cal.test/about"}
    assert over == {u: "cap/pattern_reputation" for u, _ in months[2:]}


def _visited(pattern: str, statuses: list[str], start: int = 0,
             revisited: bool = False) -> list[tuple[Any, ...]]:  # fmt: skip
    """crawldb rows of ``pattern`` discovered and first visited in order (the
    last is the newest); ``revisited``: all visited again at the latest."""
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    return [
        (f"http://h.test/{pattern}/{start + i}", start + i, pattern, status,
         t0 + timedelta(hours=start + i),
         AT if revisited else t0 + timedelta(hours=start + i + 1),
         "x" if status == "duplicate" else None)
        for i, status in enumerate(statuses)
    ]  # fmt: skip


def test_bad_patterns_come_from_the_newest_visited_pages_of_each(spark: Any) -> None:
    cfg = load_config(None, [], environ={})  # window 20, at least 4 visits, half bad
    rows = (
        _visited("dups", ["fetched"] + ["duplicate"] * 5)  # 5 of 6 bad
        + _visited("gone", ["gone", "gone", "fetched", "fetched"])  # half: bad
        + _visited("fine", ["fetched"] * 5 + ["gone"])  # 1 of 6
        + _visited("few", ["duplicate"] * 3)  # too few visits to judge
        # regained: 15 duplicates long ago, then 15 distinct new pages; the
        # newest 20 hold 5 duplicates
        + _visited("mended", ["duplicate"] * 15 + ["fetched"] * 15)
        # a trap's first 15 good pages revisited today do not clear the 10
        # duplicates found after them: the newest 20 hold 10
        + _visited("revisits", ["fetched"] * 15, revisited=True)
        + _visited("revisits", ["duplicate"] * 10, start=15)
    )
    rows += [("http://h.test/old/1", 99, None, "duplicate", AT, AT, "x")]  # no pattern: none
    rows += [("http://h.test/dups/new", 98, "dups", "unfetched", AT, None, None)]  # not visited
    crawldb = spark.createDataFrame(
        rows,
        "url string, url_fp long, pattern string, status string, discovered_at timestamp, "
        "last_fetch_at timestamp, duplicate_of string",
    )
    got = {r["pattern"]: (r["visits"], r["bad"]) for r in bad_patterns(
        crawldb, StageContext(cfg, "seg", AT)).collect()}  # fmt: skip
    assert got == {"dups": (6, 5), "gone": (4, 2), "revisits": (20, 10)}
