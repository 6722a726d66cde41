"""A crawl an older trawl wrote (issue 30): its crawldb lacks columns added
since, some of them between old ones; the next cycle's jobs add them (null
in old rows), keep every row, and run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trawl.devtools.kills import AT, segment_of, settings, small_web, table
from trawl.store.files import CrawlRoot
from trawl.testweb import TestWeb

pytestmark = pytest.mark.crawl  # Spark jobs on the test web

# columns later trawls added: the change record, the capture a revisit
# names, sitemaps, removal, budgets' deferrals, trap counters
ADDED_SINCE = (
    "stored_capture", "is_sitemap", "content_seen_at", "modified_at", "changed",
    "change_visits", "change_changed", "change_unchanged_s", "change_inv_interval",
    "change_inv_changed", "change_dated", "change_dated_s", "change_rate",
    "sitemap_lastmod", "gone_count", "removed_at", "deferrals", "deferred_reason",
    "deferred_at", "counter_run", "pattern",
)  # fmt: skip
# hostdb's: a named host's links to its sibling hosts (issue 27)
HOSTDB_ADDED_SINCE = ("sibling_pages", "sibling_hosts", "sibling_links", "sibling_segment")


def test_a_cycle_runs_on_a_crawldb_from_an_older_schema(spark: Any, tmp_path: Path) -> None:
    from trawl.config import load_config
    from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb
    from trawl.store import tables
    from trawl.store.schemas import CRAWLDB_SCHEMA, HOSTDB_SCHEMA

    with TestWeb(small_web(), tmp_path / "web", n_seeds=5) as web:
        root = str(tmp_path / "crawl")
        ctx = JobContext(spark, load_config(None, settings(web)), root, segment_of(AT), AT)
        run_inject(ctx, [str(web.seeds_file)])
        path = tables.table_path(root, "crawldb")
        old = spark.read.format("delta").load(path).drop(*ADDED_SINCE)
        old.localCheckpoint().write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true"
        ).partitionBy("host_bucket").save(path)
        hosts_path = tables.table_path(root, "hostdb")
        old_hosts = spark.createDataFrame([], HOSTDB_SCHEMA).drop(*HOSTDB_ADDED_SINCE)
        old_hosts.write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true"
        ).partitionBy("host_bucket").save(hosts_path)
        tables._ENSURED.clear()  # as a new process would find it
        crawl = CrawlRoot.of(root)
        seeds = {r[0] for r in table(crawl, "SELECT url FROM crawldb")}
        assert len(seeds) == 5
        assert not set(ADDED_SINCE) & set(spark.read.format("delta").load(path).columns)

        generated = run_generate(ctx)
        fetched = run_fetch(ctx)
        run_updatedb(ctx)

    assert generated["urls"] == 5
    assert fetched["fetch/page/success"] >= 1
    columns = spark.read.format("delta").load(path).columns
    assert set(columns) == set(CRAWLDB_SCHEMA.fieldNames())
    urls = {r[0] for r in table(crawl, "SELECT url FROM crawldb")}
    assert seeds < urls  # every old row kept, the seeds' links added
    rated = table(crawl, "SELECT count(*) FROM crawldb WHERE last_segment IS NOT NULL")
    assert rated[0][0] == 5
    hosts = spark.read.format("delta").load(hosts_path)
    assert set(hosts.columns) == set(HOSTDB_SCHEMA.fieldNames())
    assert hosts.count() >= 1  # the seeds' hosts, merged into the widened table
