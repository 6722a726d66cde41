"""Recrawling on a logical clock, end to end (Spark + Delta + the test web).

A small web whose pages change at known rates and whose hosts publish
sitemaps is crawled in three cycles one simulated day apart, the test web
serving the web as of each cycle's time. Checked: robots.txt Sitemap lines
lead to the sitemaps and a page linked from nowhere is found through them;
a revisit sends the stored validators, a 304 stores nothing but the visit and
counts as an unchanged visit; a changed page is seen to change; crawldb's
times are the logical ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trawl.config import load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.store.tables import read_segment_table, read_table
from trawl.testweb import TestWeb, WebModel
from trawl.testweb.audit import read_log
from trawl.testweb.model import make_url

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

T0 = datetime(2026, 3, 1, tzinfo=UTC)  # ten weeks after the test web's epoch
DAY = timedelta(days=1)


@dataclass
class Crawl:
    spark: Any
    root: str
    model: WebModel
    web: TestWeb
    segments: list[str]
    log: list[dict[str, Any]]


@pytest.fixture(scope="module")
def crawl(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    out = tmp_path_factory.mktemp("freshness")
    # seed 2: six hosts, all with sitemaps, three pages linked from nowhere
    model = WebModel.generate(2, hosts=6, ips=2, pages_per_host=(3, 8), sitemaps=1.0)
    assert model.sitemap_only_pages()
    with TestWeb(model, out / "web", at=T0) as web:
        seeds = out / "seeds.txt"
        seeds.write_text("".join(make_url(h.name, "/", web.port) + "\n" for h in model.hosts))
        cfg = load_config(
            None,
            [
                f"dns.hosts_file={web.hosts_file}",
                'fetch.allow_networks=["127.0.0.0/8"]',
                "politeness.min_delay_s=0.02",
                "politeness.delay_factor=1.0",
                "fetch.time_limit_s=60",
                # every page due again a day later: the revisits are what is tested
                "schedule.due_change_prob=0",
                "crawl.host_buckets=2",
            ],
            environ={},
        )
        root = str(out / "crawl")
        segments = []
        for i in range(3):
            at = T0 + i * DAY
            ctx = JobContext(spark, cfg, root, segment_id(at), at)
            if i == 0:
                run_inject(ctx, [str(seeds)])
            web.set_time(at)
            run_generate(ctx)
            run_fetch(ctx)
            run_updatedb(ctx)
            segments.append(ctx.segment)
        yield Crawl(spark, root, model, web, segments, read_log(web.access_log))


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_sitemaps_come_from_robots_txt_and_find_pages_linked_from_nowhere(crawl: Crawl) -> None:
    crawldb = read_table(crawl.spark, crawl.root, "crawldb")
    sitemaps = crawldb.filter("is_sitemap").collect()
    assert sitemaps
    assert {r["source"] for r in sitemaps} == {"sitemap"}
    assert {r["status"] for r in sitemaps} <= {"fetched", "notmodified"}  # read, then revisited
    fetched = {(r["host"], _path(r["url"])) for r in crawldb.filter("status = 'fetched'").collect()}
    assert crawl.model.sitemap_only_pages() <= fetched
    # entries carry their <lastmod>
    assert crawldb.filter("sitemap_lastmod IS NOT NULL AND NOT is_sitemap").count() > 0


def test_no_fetch_failed_inside_trawl(crawl: Crawl) -> None:
    counters = read_table(crawl.spark, crawl.root, "counters")
    internal = counters.filter("name LIKE 'fetch/why/%/internal'").collect()
    assert not internal, [(r["segment"], r["value"]) for r in internal]


def test_a_revisit_is_conditional_and_a_304_stores_only_the_visit(crawl: Crawl) -> None:
    not_modified = [r for r in crawl.log if r["status"] == 304]
    assert not_modified, "some page was unchanged a day later"
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[1], "fetch")
    rows = {_path(r["url"]): r for r in fetch.filter("outcome = 'notmodified'").collect()}
    assert rows
    crawldb = {r["url"]: r for r in read_table(crawl.spark, crawl.root, "crawldb").collect()}
    first = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    stored = {r["url"]: r["content_sha256"] for r in first.filter("outcome = 'success'").collect()}
    for row in rows.values():
        assert row["http_status"] == 304
        assert row["content_sha256"] is None and row["bytes"] == 0  # nothing stored
        assert row["changed"] is False
        if row["url"] in stored:  # the copy from the first visit is kept
            assert crawldb[row["url"]]["content_sha256"] == stored[row["url"]]


def test_homepages_changed_or_not_as_the_web_says(crawl: Crawl) -> None:
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[1], "fetch")
    seen = 0
    for row in fetch.filter("kind = 'page' AND url LIKE '%/'").collect():
        host = row["host"]
        if crawl.model.host(host) is None or row["outcome"] not in ("success", "notmodified"):
            continue
        changed = crawl.model.version_at(host, "/", T0 + DAY) != crawl.model.version_at(
            host, "/", T0
        )
        assert row["changed"] is changed, host
        assert row["outcome"] == ("success" if changed else "notmodified"), host
        seen += 1
    assert seen >= 3


def test_the_change_record_is_on_the_logical_clock(crawl: Crawl) -> None:
    crawldb = read_table(crawl.spark, crawl.root, "crawldb")
    homes = crawldb.filter("url LIKE '%/' AND NOT is_sitemap AND content_seen_at IS NOT NULL")
    rows = homes.collect()
    assert rows
    for row in rows:
        seen = row["content_seen_at"].replace(tzinfo=UTC)
        assert seen in (T0, T0 + DAY, T0 + 2 * DAY)
        assert row["last_fetch_at"] == row["content_seen_at"]
        assert row["next_fetch_at"] >= row["content_seen_at"] + DAY  # schedule.min_interval_s
        assert row["change_rate"] > 0
    visited_twice = [r for r in rows if (r["change_visits"] or 0) >= 1]
    assert visited_twice, "homepages were compared with an earlier copy"
