"""The whole cycle on Spark + Delta against the test web (one shared crawl).

A module-scoped crawl: ``trawl cycle`` (the command, in this process)
injects the test web's seeds and runs two cycles; then the tests check what
the command printed and what an operator relies on: politeness and robots
from the test web's own access log, idempotent inject / generate / updatedb,
host groups kept in one task, WARC records where the fetch table says they
are.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual
from warcio.archiveiterator import ArchiveIterator

from trawl.config import Config, load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.store.files import CrawlRoot
from trawl.store.tables import read_segment_table, read_table, segment_path
from trawl.testweb import TestWeb, WebModel, politeness_audit, robots_audit

# Spark crawls of the test web, with Spark's own settings throughout (the
# crawl as a big one, ``spark.small_jobs = false``, and every stage a test
# runs after it), so that the settings small jobs change are tested too
pytestmark = [pytest.mark.crawl, pytest.mark.spark_defaults]

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MIN_DELAY = 0.1


@dataclass
class Crawl:
    spark: Any
    cfg: Config
    root: str
    web: TestWeb
    model: WebModel
    segments: list[str]
    results: list[dict[str, Any]]

    def ctx(self, i: int) -> JobContext:
        at = AT + timedelta(hours=i)
        return JobContext(self.spark, self.cfg, self.root, segment_id(at), at)


@pytest.fixture(scope="module")
def crawl(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    from trawl.cli import main

    out = tmp_path_factory.mktemp("cycle")
    model = WebModel.generate(3, hosts=16, ips=4, pages_per_host=(3, 10))
    with TestWeb(model, out / "web", n_seeds=16) as web:
        sets = [
            f"dns.hosts_file={web.hosts_file}",
            'fetch.allow_networks=["127.0.0.0/8"]',
            f"politeness.min_delay_s={MIN_DELAY}",
            "politeness.delay_factor=2.0",
            "fetch.time_limit_s=60",
            "generate.max_per_host=6",
            "crawl.host_buckets=4",
            # Every other crawl of the suite is small enough to run as a small
            # job (trawl.runner.common.small_job); this one keeps the settings
            # a big crawl's jobs run with, so both are covered.
            "spark.small_jobs=false",
        ]
        state = Crawl(spark, load_config(None, sets), str(out / "crawl"), web, model, [], [])
        argv = [
            "cycle", "--crawl", state.root, "--cycles", "2", "--json", "--at", AT.isoformat(),
            "--seeds", str(web.seeds_file), "--time-limit", "60",
            *[a for s in sets for a in ("--set", s)],
        ]  # fmt: skip
        with redirect_stdout(io.StringIO()) as printed:
            assert main(argv) == 0
        state.results += [json.loads(line) for line in printed.getvalue().splitlines()]
        state.segments += [row["segment"] for row in state.results[1:]]
        yield state


def test_the_crawl_fetches_pages_and_discovers_new_urls(crawl: Crawl) -> None:
    fetched = read_table(crawl.spark, crawl.root, "crawldb").filter("status = 'fetched'").count()
    assert fetched >= 16
    assert crawl.results[1]["new_urls"] > 0  # updatedb of cycle 1 found outlinks


def test_the_cycle_command_printed_its_inject_and_each_cycle(crawl: Crawl) -> None:
    inject, cycles = crawl.results[0], crawl.results[1:]
    assert inject["accepted"] == 16  # the seeds
    # one hour apart (--step's default), starting at --at
    assert [c["segment"] for c in cycles] == ["20261130T120000Z", "20261130T130000Z"]
    assert [c["cycle"] for c in cycles] == [1, 2]
    assert all(c["fetched_ok"] > 0 for c in cycles)
    fetched = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    assert (
        cycles[0]["fetched_ok"] == fetched.filter("outcome = 'success' AND kind = 'page'").count()
    )


def test_politeness_from_the_access_log(crawl: Crawl) -> None:
    audit = politeness_audit(crawl.web.access_log, MIN_DELAY)
    assert audit.requests > 30
    assert audit.hosts_with_overlap == 0
    assert audit.max_in_flight_per_ip == 1
    assert audit.gaps_below_min == 0


def test_no_request_for_a_robots_disallowed_url(crawl: Crawl) -> None:
    assert robots_audit(crawl.web.access_log, crawl.model, crawl.cfg.http.agent_name) == []
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[1], "fetch")
    assert (
        fetch.filter("outcome = 'robots_denied'").count()
        + fetch.filter("outcome = 'deferred'").count()
        > 0
    )


def test_inject_twice_adds_nothing(crawl: Crawl) -> None:
    again = run_inject(crawl.ctx(0), [str(crawl.web.seeds_file)])
    assert again["accepted"] == 0
    assert again["duplicates"] == crawl.results[0]["accepted"]


def test_updatedb_twice_leaves_crawldb_and_hostdb_unchanged(crawl: Crawl) -> None:
    before = read_table(crawl.spark, crawl.root, "crawldb").collect()
    hosts_before = read_table(crawl.spark, crawl.root, "hostdb").collect()
    run_updatedb(crawl.ctx(1))
    assertDataFrameEqual(read_table(crawl.spark, crawl.root, "crawldb").collect(), before)
    assertDataFrameEqual(read_table(crawl.spark, crawl.root, "hostdb").collect(), hosts_before)


def test_generate_and_fetch_again_keep_a_merged_segment(crawl: Crawl) -> None:
    """What Airflow does when a finished run is cleared: the segment's stages
    run again. generate must not pick what is due now (updatedb added
    outlinks since), nor fetch replace the records crawldb points into."""
    segment = crawl.segments[0]

    def state() -> tuple[Any, ...]:
        tables = [
            read_segment_table(crawl.spark, crawl.root, segment, n) for n in ("fetchlist", "fetch")
        ]
        paths = [Path(segment_path(crawl.root, segment, n)) for n in ("fetchlist", "fetch")]
        # every file of both tables, with its modification time: a rewrite
        # replaces them all (the marker included)
        versions = [sorted((f.name, f.stat().st_mtime_ns) for f in p.iterdir()) for p in paths]
        return (
            *[t.collect() for t in tables],
            versions,
            read_table(crawl.spark, crawl.root, "crawldb").collect(),
        )

    fetchlist, fetch, versions, crawldb = state()
    generated = run_generate(crawl.ctx(0))
    assert generated["urls"] == len(fetchlist)
    run_fetch(crawl.ctx(0))
    again = state()
    assertDataFrameEqual(again[0], fetchlist)
    assertDataFrameEqual(again[1], fetch)
    assert again[2] == versions  # neither table was written again
    assertDataFrameEqual(again[3], crawldb)


@pytest.mark.parametrize("cycle", [0, 1])
def test_generate_caps_hosts_and_keeps_shared_ips_in_one_task(crawl: Crawl, cycle: int) -> None:
    fetchlist = read_segment_table(crawl.spark, crawl.root, crawl.segments[cycle], "fetchlist")
    rows = fetchlist.collect()
    per_host: dict[str, int] = {}
    tasks_per_ip: dict[str, set[int]] = {}
    for row in rows:
        per_host[row["host"]] = per_host.get(row["host"], 0) + 1
        tasks_per_ip.setdefault(row["ip"] or row["host"], set()).add(row["task"])
    assert rows and max(per_host.values()) <= 6  # generate.max_per_host
    assert all(len(tasks) == 1 for tasks in tasks_per_ip.values())
    # Addresses come from hostdb, or are resolved by generate for hosts new to it.
    assert all(row["ip"] for row in rows)


def test_fetched_urls_are_released_and_rescheduled(crawl: Crawl) -> None:
    crawldb = read_table(crawl.spark, crawl.root, "crawldb")
    assert crawldb.filter(f"generated_segment = '{crawl.segments[0]}'").count() == 0
    row = crawldb.filter("status = 'fetched'").first()
    assert row is not None
    # the cycle's logical time, and not due again before schedule.min_interval_s
    assert row["last_fetch_at"].replace(tzinfo=UTC) in (AT, AT + timedelta(hours=1))
    assert row["content_seen_at"] == row["last_fetch_at"]
    assert row["next_fetch_at"] >= row["last_fetch_at"] + timedelta(days=1)
    assert row["change_rate"] > 0
    assert row["content_sha256"] and row["fetches"] >= 1


def test_warc_records_are_where_the_fetch_table_says(crawl: Crawl) -> None:
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    row = fetch.filter("outcome = 'success' AND kind = 'page'").first()
    assert row is not None
    path = Path(segment_path(crawl.root, crawl.segments[0], "warc")) / row["warc_file"]
    with path.open("rb") as fh:
        fh.seek(row["warc_offset"])
        record = next(iter(ArchiveIterator(fh)))
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]


def test_hostdb_keeps_robots_and_delay_state(crawl: Crawl) -> None:
    hosts = {r["host"]: r for r in read_table(crawl.spark, crawl.root, "hostdb").collect()}
    assert len(hosts) >= 16
    for info in crawl.model.hosts:
        row = hosts.get(info.name)
        if row is None:
            continue
        assert row["delay_s"] is None or row["delay_s"] >= MIN_DELAY
        if info.robots_status >= 500:
            assert row["robots_status"] == "status_5xx"
    assert any(r["robots_status"] == "parsed" for r in hosts.values())


def test_counters_are_written_per_segment(crawl: Crawl) -> None:
    counters = read_table(crawl.spark, crawl.root, "counters")
    names = {r["name"] for r in counters.filter(f"segment = '{crawl.segments[0]}'").collect()}
    assert {"generate/urls", "fetch/page/success", "updatedb/new_urls"} <= names
    lines = Path(crawl.web.access_log).read_text().splitlines()
    assert all(json.loads(line)["user_agent"].startswith("trawl/") for line in lines)


def test_sql_over_all_segments_prints_json_rows(
    crawl: Crawl, capsys: pytest.CaptureFixture[str]
) -> None:
    from trawl.cli import main

    query = "SELECT segment, count(*) AS n FROM fetch WHERE kind = 'page' GROUP BY 1 ORDER BY 1"
    assert main(["sql", "--crawl", crawl.root, "--json", query]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["segment"] for r in rows] == crawl.segments
    assert all(r["n"] > 0 for r in rows)


def test_sql_error_is_reported_not_raised(crawl: Crawl, capsys: pytest.CaptureFixture[str]) -> None:
    from trawl.cli import main

    assert main(["sql", "--crawl", crawl.root, "SELECT nope FROM crawldb"]) == 2
    assert "trawl sql:" in capsys.readouterr().err


def test_stats_counts_urls_by_status(crawl: Crawl) -> None:
    from trawl.runner import run_stats

    stats = run_stats(crawl.ctx(0))
    total = stats["totals"][0]["urls"]
    assert total == read_table(crawl.spark, crawl.root, "crawldb").count()
    assert sum(r["urls"] for r in stats["by_status"]) == total
    assert [r["segment"] for r in stats["segments"] if r["fetched"]] == crawl.segments
    assert all(not r["internal_errors"] for r in stats["segments"])  # counted, and none
    # per domain: every host here is seeded, each its own budget group
    domains = stats["domains"]
    assert domains and sum(r["urls"] for r in domains) <= total
    assert all(r["named_hosts"] == r["hosts"] >= 1 for r in domains)
    assert all(r["star_budget"] >= crawl.cfg.budget.min_pages for r in domains)
    assert all(r["deferred"] == 0 and r["deferred_why"] == [] for r in domains)


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as both engines can be compared: times in UTC (Spark hands
    naive local ones, DuckDB aware ones), whole numbers as ints."""

    def cell(value: Any) -> Any:
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, list):
            return [cell(v) for v in value]
        if isinstance(value, dict):
            return {k: cell(v) for k, v in value.items()}
        return value

    return [{k: cell(v) for k, v in row.items()} for row in rows]


# Queries both engines take as written: the same table names, fetch over every segment.
SAME_QUERIES = [
    "SELECT status, count(*) AS n FROM crawldb GROUP BY status ORDER BY status",
    "SELECT segment, kind, outcome, count(*) AS n FROM fetch GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    "SELECT f.url, c.status FROM fetch f JOIN crawldb c ON f.url = c.url "
    "WHERE f.kind = 'page' ORDER BY f.url, c.status",
    "SELECT host, robots_status, fetches FROM hostdb ORDER BY host",
    "SELECT segment, job, name, value FROM counters ORDER BY segment, job, name",
    "SELECT url, fetched_at, outlinks FROM fetch WHERE kind = 'page' ORDER BY url, segment",
    "SELECT count(*) AS n FROM fetchlist",
]


def test_duckdb_and_spark_answer_the_same_queries_alike(crawl: Crawl) -> None:
    from trawl.runner.query import sql_batches
    from trawl.sql import lake_batches

    root = CrawlRoot.of(crawl.root)
    for query in SAME_QUERIES:
        with lake_batches(root, query) as (_, batches):
            on_duckdb = [row for b in batches for row in b.to_pylist()]
        _, spark_batches = sql_batches(crawl.ctx(0), query)
        on_spark = [row for b in spark_batches for row in b.to_pylist()]
        assert on_duckdb, query
        assert _plain(on_duckdb) == _plain(on_spark), query


def test_stats_are_the_same_on_both_engines_and_agree_with_sql(crawl: Crawl) -> None:
    from trawl.runner import run_sql, run_stats
    from trawl.sql import lake_stats

    ctx = crawl.ctx(0)
    on_spark = run_stats(ctx)
    on_duckdb = lake_stats(CrawlRoot.of(crawl.root), crawl.cfg, ctx.at)
    assert list(on_duckdb) == list(on_spark)
    for title, rows in on_duckdb.items():
        assert _plain(rows) == _plain(on_spark[title]), title
    # the numbers are what SQL over the tables says
    (totals,) = run_sql(ctx, "SELECT count(*) AS urls, count(DISTINCT host) AS hosts FROM crawldb")
    assert {k: on_duckdb["totals"][0][k] for k in ("urls", "hosts")} == totals
    fetched = run_sql(
        ctx, "SELECT segment, count(*) AS n FROM fetch WHERE kind = 'page' AND outcome = "
        "'success' GROUP BY segment ORDER BY segment",
    )  # fmt: skip
    assert [(r["segment"], r["fetched"]) for r in on_duckdb["segments"]] == [
        (r["segment"], r["n"]) for r in fetched
    ]


def test_sql_streams_csv_and_parquet_to_a_file_with_a_limit(crawl: Crawl, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from trawl.cli import main

    query = "SELECT url, status FROM crawldb ORDER BY url"
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.parquet"
        argv = ["sql", "--crawl", crawl.root, "--engine", engine, query, "--limit", "5"]
        assert main([*argv, "--format", "parquet", "--out", str(out)]) == 0
        assert pq.read_table(out).column_names == ["url", "status"]
        assert pq.read_table(out).num_rows == 5
        assert main([*argv, "--format", "csv", "--out", str(tmp_path / f"{engine}.csv")]) == 0
    assert (tmp_path / "duckdb.csv").read_text() == (tmp_path / "spark.csv").read_text()
    assert len((tmp_path / "duckdb.csv").read_text().splitlines()) == 6
    assert list(tmp_path.glob(".*.part")) == []


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_reading_commands_leave_a_typod_root_untouched(
    crawl: Crawl, tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from trawl.cli import main

    typo = tmp_path / "crawl-typo"
    at = ["--crawl", str(typo)]
    for argv in (["stats", *at, "--engine", engine], ["sql", *at, "--engine", engine, "SELECT 1"],
                 ["warc", "index", *at, "--out", str(tmp_path / "x.cdxj")],
                 ["export", "warc", *at, "--out", str(tmp_path / "out")]):  # fmt: skip
        assert main(argv) == 2, argv
        assert f"no crawl at {typo}" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == []


def test_catalog_names_the_tables_for_spark_sql(crawl: Crawl, tmp_path: Path) -> None:
    """``trawl catalog`` registers the crawl in an embedded metastore; pyspark's
    own ``spark-sql`` then queries it by name, and a second run adds nothing."""
    import os
    import subprocess
    import sys

    from trawl.store.session import spark_sql_command

    sets = ["--set", f"catalog.metastore_dir={tmp_path}", "--set", "catalog.database=news"]
    catalog = [sys.executable, "-m", "trawl.cli", "catalog", "--crawl", crawl.root, "--json", *sets]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    first = subprocess.run(catalog, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    done = json.loads(first.stdout)
    assert done["database"] == "news" and done["segments_added"] == 2 * len(crawl.segments)
    assert set(done["made"].split(",")) >= {"crawldb", "hostdb", "events", "fetch", "fetchlist"}
    assert "spark-sql" in first.stderr and "news.crawldb" in first.stderr
    cfg = load_config(None, [s for s in sets if s != "--set"], environ={})
    query = (
        "SELECT count(*) FROM news.crawldb; "
        "SELECT segment, count(*) FROM news.fetch WHERE kind = 'page' GROUP BY 1 ORDER BY 1"
    )
    run = subprocess.run([*spark_sql_command(cfg), "-e", query], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line.split("\t") for line in run.stdout.splitlines() if line.strip()]
    assert int(lines[0][0]) == read_table(crawl.spark, crawl.root, "crawldb").count()
    assert [row[0] for row in lines[1:]] == crawl.segments
    fetched = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    assert int(lines[1][1]) == fetched.filter("kind = 'page'").count()
    again = subprocess.run(catalog, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(again.stdout)
    assert (second["made"], second["segments_added"], second["segments_dropped"]) == ("", 0, 0)


def test_every_fetch_task_left_its_progress_and_the_sum_is_the_fetch(crawl: Crawl) -> None:
    from trawl.fetch.progress import summarize
    from trawl.store.files import FetchPlaces

    for segment in crawl.segments:
        snaps = FetchPlaces(CrawlRoot.of(crawl.root), segment).read_progress()
        assert snaps and all(s["done"] for s in snaps), segment
        summary = summarize(snaps, planned=0, elapsed_s=1.0, tasks=len(snaps))
        fetch = read_segment_table(crawl.spark, crawl.root, segment, "fetch")
        assert summary.pages == fetch.filter("kind = 'page'").count()
        assert summary.ok == fetch.filter("kind = 'page' AND outcome = 'success'").count()
        assert summary.planned >= summary.pages - summary.deferred


def test_inject_names_a_url_crawldb_knew_from_a_link(crawl: Crawl, tmp_path: Path) -> None:
    """A known URL injected again becomes a seed (its host is trusted with a
    budget of its own); injecting it once more changes nothing. (Last of the
    shared crawl's tests: it changes a crawldb row.)"""
    from pyspark.sql import functions as F

    crawldb = read_table(crawl.spark, crawl.root, "crawldb")
    linked = crawldb.filter((F.col("source") == "outlink") & (F.col("depth") > 0)).first()
    assert linked is not None
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(linked["url"] + "\n")
    first = run_inject(crawl.ctx(0), [str(seeds)])
    assert (first["accepted"], first["named"], first["duplicates"]) == (0, 1, 1)
    row = read_table(crawl.spark, crawl.root, "crawldb").filter(F.col("url") == linked["url"])
    assert [(r["source"], r["depth"], r["status"]) for r in row.collect()] == [
        ("seed", 0, linked["status"])
    ]
    again = run_inject(crawl.ctx(0), [str(seeds)])
    assert (again["accepted"], again["named"], again["duplicates"]) == (0, 0, 1)
