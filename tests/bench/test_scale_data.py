"""bench_scale's synthetic crawl is one trawl reads: every column of the
tables it writes, keys as trawl computes them, a segment of the fetch
table's shape. The bench runs for an hour and outside the suite, so a
column a table gains would otherwise break it unseen until its next run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.crawldb.budgets import path_pattern
from trawl.store.schemas import CRAWLDB_SCHEMA, FETCH_SCHEMA, HOSTDB_SCHEMA
from trawl.url.keys import host_bucket, host_of, registered_domain, url_fingerprint

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_scale

pytestmark = pytest.mark.crawl  # Spark


def test_the_synthetic_crawl_has_every_column_and_trawls_keys(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_config(None, [], environ={})
    hosts = bench_scale.host_table(spark, cfg, 50)
    tables = {
        "crawldb": bench_scale.crawldb_frame(spark, hosts, 300, 50),
        "hostdb": bench_scale.hostdb_frame(hosts),
    }
    assert tables["crawldb"].columns == CRAWLDB_SCHEMA.fieldNames()
    assert tables["hostdb"].columns == HOSTDB_SCHEMA.fieldNames()
    rows = tables["crawldb"].select("url", "host", "url_fp", "host_bucket", "domain", "pattern")
    for r in rows.collect():
        assert r["host"] == host_of(r["url"])
        assert r["url_fp"] == url_fingerprint(r["url"])
        assert r["host_bucket"] == host_bucket(r["host"], cfg.crawl.host_buckets)
        assert r["domain"] == registered_domain(r["host"])
        assert r["pattern"] == path_pattern(r["url"])
    # the segment is made from the tables as the bench wrote them
    monkeypatch.setattr(bench_scale, "read_table", lambda _spark, _root, name: tables[name])
    fetch = bench_scale.fetch_frame(spark, "unused", 300, 40, 50, 5)
    assert fetch.columns == FETCH_SCHEMA.fieldNames()
