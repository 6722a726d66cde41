"""``trawl vacuum``: the retention follows the segments, a running segment is
never cut short, and VACUUM deletes only what no kept version needs."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.runner import JobContext
from trawl.runner.vacuum import retention, run_vacuum
from trawl.store.files import CrawlRoot
from trawl.store.schemas import CRAWLDB_SCHEMA
from trawl.store.tables import ensure_all, read_table, table_path, write_counters

pytestmark = pytest.mark.crawl  # a Spark session and Delta writes

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SEGMENTS = {"20261130T000000Z": 10.0, "20261130T050000Z": 5.0, "20261130T090000Z": 1.0}


def _crawl(spark: Any, tmp_path: Path, running: set[str]) -> JobContext:
    """A crawl whose segments were generated 10, 5 and 1 hours ago (by their
    fetch lists' markers), all through updatedb but ``running``, and whose
    crawldb was rewritten three times."""
    root = str(tmp_path / "crawl")
    ensure_all(spark, root)
    files = CrawlRoot.of(root)
    now = time.time()
    for segment, hours_ago in SEGMENTS.items():
        marker = tmp_path / "crawl" / "segments" / segment / "fetchlist" / "_TRAWL_COMPLETE"
        marker.parent.mkdir(parents=True)
        marker.write_text("{}\n")
        os.utime(marker, (now - hours_ago * 3600, now - hours_ago * 3600))
        if segment not in running:
            write_counters(files, segment, "updatedb", [("updatedb/new_urls", 1)])
    for n in range(3):
        rows = [{"url": f"http://h.test/{n}/{i}", "url_fp": i, "host": "h.test", "host_bucket": 0}
                for i in range(5)]  # fmt: skip
        frame = spark.createDataFrame(
            [tuple(r.get(f.name) for f in CRAWLDB_SCHEMA) for r in rows], CRAWLDB_SCHEMA
        )
        frame.write.format("delta").mode("overwrite").save(table_path(root, "crawldb"))
    return JobContext(spark, load_config(None, [], environ={}), root, "20261130T120000Z", AT)


def test_the_retention_follows_the_kept_and_the_running_segments(
    spark: Any, tmp_path: Path
) -> None:
    ctx = _crawl(spark, tmp_path, running={"20261130T050000Z"})
    kept = retention(ctx, 2, None)  # the last two: since 5 h ago, which is also running
    assert kept.hours == pytest.approx(6.0, abs=0.1)
    one = retention(ctx, 1, None)  # the last one is 1 h old, but an older one still runs
    assert one.hours == pytest.approx(6.0, abs=0.1)
    assert "20261130T050000Z is still running" in one.why
    assert retention(ctx, 5, None).hours is None  # fewer segments than to keep
    with pytest.raises(ValueError, match="20261130T050000Z, still running"):
        retention(ctx, 2, 2.0)
    assert retention(ctx, 2, 8.0).hours == 8.0


def test_vacuum_deletes_what_no_kept_version_needs(spark: Any, tmp_path: Path) -> None:
    ctx = _crawl(spark, tmp_path, running=set())
    assert retention(ctx, 1, None).hours == pytest.approx(2.0, abs=0.1)
    path = Path(table_path(ctx.root, "crawldb"))
    files_before = sorted(path.rglob("*.parquet"))
    dry = {r["table"]: r for r in run_vacuum(ctx, ["crawldb"], retain_hours=0.0, dry_run=True)}
    assert dry["crawldb"]["files"] > 0 and dry["crawldb"]["deleted"] == 0
    assert sorted(path.rglob("*.parquet")) == files_before
    done = {r["table"]: r for r in run_vacuum(ctx, retain_hours=0.0)}
    assert done["crawldb"]["deleted"] == dry["crawldb"]["files"]
    assert len(sorted(path.rglob("*.parquet"))) == len(files_before) - done["crawldb"]["files"]
    urls = {r["url"] for r in read_table(spark, ctx.root, "crawldb").collect()}
    assert urls == {f"http://h.test/2/{i}" for i in range(5)}  # the current version reads
    # within the default retention (the last 10 segments) nothing goes
    assert {r["files"] for r in run_vacuum(ctx)} == {0}
