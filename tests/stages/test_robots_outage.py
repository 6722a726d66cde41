"""A host whose robots.txt stays unreachable (5xx) through a segment is held
in hostdb for as long as its deferred URLs wait (``schedule.retry_interval_s``):
URLs of it that other hosts' pages link to wait with them, rather than send
the next segment to ask the failing robots.txt again only to defer them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.store.tables import read_segment_table, read_table
from trawl.testweb import TestWeb, WebModel

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DOWN = "site-0000.test"  # robots.txt answers 500 in this model; linked from the seeds


def test_urls_of_a_host_with_robots_txt_down_wait_with_its_deferred_ones(
    spark: Any, tmp_path: Path
) -> None:
    model = WebModel.generate(30, hosts=6, ips=2, pages_per_host=(3, 6))
    assert [h.robots_status for h in model.hosts if h.name == DOWN] == [500]
    with TestWeb(model, tmp_path / "web", n_seeds=6) as web:
        cfg = load_config(
            None,
            [
                f"dns.hosts_file={web.hosts_file}",
                'fetch.allow_networks=["127.0.0.0/8"]',
                "politeness.min_delay_s=0.05",
                "politeness.delay_factor=1.0",
                "fetch.time_limit_s=60",
                "crawl.host_buckets=4",
            ],
            environ={},
        )
        root = str(tmp_path / "crawl")

        def ctx(at: datetime) -> JobContext:
            return JobContext(spark, cfg, root, segment_id(at), at)

        run_inject(ctx(AT), [str(web.seeds_file)])
        # the seeds link to the host; the next segment finds robots.txt down
        for at in (AT, AT + timedelta(hours=1)):
            run_generate(ctx(at))
            run_fetch(ctx(at))
            run_updatedb(ctx(at))
        second = ctx(AT + timedelta(hours=1))
        fetch = read_segment_table(spark, root, second.segment, "fetch")
        assert fetch.filter(f"host = '{DOWN}' AND outcome = 'deferred'").count() >= 1

        hold = timedelta(seconds=cfg.schedule.retry_interval_s)
        hostdb = read_table(spark, root, "hostdb")
        host = hostdb.filter(f"host = '{DOWN}'").first()
        assert host is not None and host["robots_status"] == "status_5xx"
        assert host["backoff_until"].replace(tzinfo=UTC) == second.at + hold
        answered = hostdb.filter("robots_status != 'status_5xx'").collect()
        assert answered and all(r["backoff_until"] is None for r in answered)

        # Other hosts' pages in that segment linked to more of the host's
        # pages: crawldb alone has them due at once (what the next segment
        # used to ask robots.txt for again).
        soon = second.at + timedelta(hours=1)
        urls = read_table(spark, root, "crawldb").filter(f"host = '{DOWN}'").collect()
        due = [
            r for r in urls
            if r["next_fetch_at"] is None or r["next_fetch_at"].replace(tzinfo=UTC) <= soon
        ]  # fmt: skip
        assert due, "the model links to the host from pages fetched in the second segment"

        run_generate(ctx(soon))
        listed = read_segment_table(spark, root, segment_id(soon), "fetchlist")
        assert listed.filter(f"host = '{DOWN}'").count() == 0

        # the hold over, the host's URLs are generated again (robots.txt asked anew)
        later = second.at + hold + timedelta(hours=1)
        run_generate(ctx(later))
        again = read_segment_table(spark, root, segment_id(later), "fetchlist")
        assert again.filter(f"host = '{DOWN}'").count() == len(urls)
