"""Two cycles against one crawl at once: the second is refused with a clear
message while the first runs, the crawl is not corrupted, and the crawl is
free again once the first ends (real processes, as two DAG runs would be)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trawl.lease import LEASE_FILE
from trawl.tables import read_table
from trawl.testweb import TestWeb, WebModel

TRAWL = str(Path(sys.executable).with_name("trawl"))


def test_concurrent_cycles_one_refused_nothing_corrupted(spark: Any, tmp_path: Path) -> None:
    model = WebModel.generate(8, hosts=4, ips=2, pages_per_host=(3, 6))
    root = tmp_path / "crawl"
    with TestWeb(model, tmp_path / "web", n_seeds=4) as web:
        common = [
            "--crawl", str(root),
            "--set", f"dns.hosts_file={web.hosts_file}",
            "--set", 'fetch.allow_networks=["127.0.0.0/8"]',
            "--set", "politeness.min_delay_s=0.05",
            "--set", "spark.master=local[1]",
            "--set", "spark.shuffle_partitions=2",
        ]  # fmt: skip
        env = {**os.environ, "PYSPARK_SUBMIT_ARGS": "pyspark-shell"}
        first = subprocess.Popen(
            [TRAWL, "cycle", "--cycles", "1", "--seeds", str(web.seeds_file),
             "--at", "2026-06-01T00:00:00Z", *common],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not (root / LEASE_FILE).exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        started = time.monotonic()
        second = subprocess.run(
            [TRAWL, "cycle", "--at", "2026-06-01T00:00:00Z", *common],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        refused_in = time.monotonic() - started
        assert first.poll() is None, "the first cycle should still be running"
        _, err = first.communicate(timeout=1800)
        assert first.returncode == 0, err.decode()[-3000:]
    assert second.returncode == 75, second.stderr
    assert "is in use" in second.stderr and f"pid {first.pid} running 'cycle" in second.stderr
    assert refused_in < 30  # refused before it started Spark
    assert not (root / LEASE_FILE).exists()  # released at the end
    # the crawl is whole: the first run's segment, every URL in it once
    crawldb = read_table(spark, str(root), "crawldb")
    assert crawldb.count() == crawldb.select("url").distinct().count() > 0
    segments = {r[0] for r in crawldb.select("last_segment").distinct().collect() if r[0]}
    assert len(segments) == 1
    fetched = crawldb.filter("last_segment IS NOT NULL").count()
    assert fetched > 0
