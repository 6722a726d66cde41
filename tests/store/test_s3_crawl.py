"""A crawl with its root on an S3 server (moto's, on loopback), end to end.

``trawl cycle --crawl s3a://bucket/crawl`` runs as a user runs it, with
nothing but the standard AWS environment set, against the test web; the
same crawl on a local root is the reference. Then: the tables match, every
WARC object is a complete file that passes ``warcio check`` and the
``warc_ref`` of every fetch row points at its record, a second run is
refused while one holds the crawl, and no secret reached an output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import S3_SECRET
from tests.warc.test_writer import warcio_check
from trawl.config import Config, load_config
from trawl.runner import JobContext, run_cycles, run_inject, segment_id
from trawl.store.files import CrawlRoot, warc_files, warc_record, warc_rel
from trawl.store.lease import CrawlLease
from trawl.store.session import apply_storage
from trawl.store.tables import list_segments, read_segment_table, read_table
from trawl.testweb import TestWeb, WebModel, politeness_audit
from trawl.warc.reader import check_file
from trawl.warc.writer import WarcRef

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MIN_DELAY = 0.1


@dataclass
class Crawls:
    spark: Any
    cfg: Config
    local: str
    s3: str
    web: TestWeb
    run: subprocess.CompletedProcess[str]
    env: dict[str, str]


def settings(web: TestWeb) -> list[str]:
    return [
        f"dns.hosts_file={web.hosts_file}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        f"politeness.min_delay_s={MIN_DELAY}",
        "fetch.time_limit_s=60",
        "generate.max_per_host=6",
        "crawl.host_buckets=4",
        "spark.master=local[2]",
        "spark.shuffle_partitions=2",
    ]


@pytest.fixture(scope="module")
def crawls(
    spark: Any, s3_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Crawls]:
    import boto3

    out = tmp_path_factory.mktemp("s3crawl")
    boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1").create_bucket(
        Bucket="crawls"
    )
    model = WebModel.generate(11, hosts=5, ips=2, pages_per_host=(3, 6))
    with TestWeb(model, out / "web", n_seeds=5) as web:
        sets = settings(web)
        env = {**os.environ, "AWS_ENDPOINT_URL": s3_server, "AWS_REGION": "us-east-1"}
        s3_root = "s3a://crawls/news"
        command = [sys.executable, "-m", "trawl.cli", "cycle", "--crawl", s3_root,
                   "--seeds", str(web.seeds_file), "--cycles", "2", "--at", AT.isoformat(),
                   "--json", *[a for s in sets for a in ("--set", s)]]  # fmt: skip
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        cfg = load_config(None, [*sets, f"storage.endpoint={s3_server}"], environ={})
        local = str(out / "local")
        first = JobContext(spark, cfg, local, segment_id(AT), AT)
        run_inject(first, [str(web.seeds_file)])
        run_cycles(first, 2, timedelta(hours=1))
        apply_storage(spark, cfg)
        yield Crawls(spark, cfg, local, s3_root, web, run, env)


def rows(crawls: Crawls, root: str, table: str, *columns: str) -> set[tuple[Any, ...]]:
    frame = read_table(crawls.spark, root, table).select(*columns)
    return {tuple(r) for r in frame.collect()}


def test_the_s3_crawl_matches_the_local_one_table_by_table(crawls: Crawls) -> None:
    for table, columns in [
        ("crawldb", ("url", "status", "depth", "generated_segment")),
        ("hostdb", ("host", "domain", "robots_status", "crawl_delay_s")),
        ("content", ("content_sha256",)),
        ("events", ("event", "segment", "url", "status")),
    ]:
        on_s3 = rows(crawls, crawls.s3, table, *columns)
        assert on_s3 == rows(crawls, crawls.local, table, *columns), table
        assert on_s3, table
    assert list_segments(crawls.spark, crawls.s3) == list_segments(crawls.spark, crawls.local)


def test_every_warc_object_is_complete_and_every_ref_exact(crawls: Crawls, tmp_path: Path) -> None:
    root = CrawlRoot.of(crawls.s3, crawls.cfg.storage)
    segments = list_segments(crawls.spark, crawls.s3)
    checked = 0
    for segment in segments:
        names = warc_files(root, segment)
        assert names
        paths = [root.download(warc_rel(segment, n), tmp_path / n) for n in names]
        assert all(check_file(p) == [] for p in paths)
        warcio_check(*paths)
        fetch = read_segment_table(crawls.spark, crawls.s3, segment, "fetch")
        for r in fetch.filter("kind = 'page' AND warc_file IS NOT NULL").collect():
            record, _ = warc_record(
                root, WarcRef(r["warc_file"], r["warc_offset"], r["warc_length"])
            )
            assert record.target_uri == r["url"]
            checked += 1
    assert checked > 10


def test_politeness_held_for_both_crawls(crawls: Crawls) -> None:
    audit = politeness_audit(crawls.web.access_log, MIN_DELAY)
    assert audit.hosts_with_overlap == 0
    assert audit.gaps_below_min == 0


def test_a_second_run_on_the_s3_root_is_refused_naming_the_holder(crawls: Crawls) -> None:
    root = CrawlRoot.of(crawls.s3, crawls.cfg.storage)
    with CrawlLease(root, "cycle --segment held-by-test", ttl_s=60):
        run = subprocess.run(
            [sys.executable, "-m", "trawl.cli", "generate", "--crawl", crawls.s3],
            env=crawls.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert run.returncode == 75, run.stderr[-2000:]
    assert "held-by-test" in run.stderr


def test_no_secret_reaches_an_output_a_table_or_a_warc_file(crawls: Crawls, tmp_path: Path) -> None:
    assert S3_SECRET not in crawls.run.stdout + crawls.run.stderr
    for line in crawls.run.stdout.splitlines():
        assert S3_SECRET not in json.dumps(json.loads(line))
    for table in ("counters", "hostdb", "events", "crawldb"):
        text = "\n".join(str(r) for r in read_table(crawls.spark, crawls.s3, table).collect())
        assert S3_SECRET not in text, table
    root = CrawlRoot.of(crawls.s3, crawls.cfg.storage)
    for segment in list_segments(crawls.spark, crawls.s3):
        for name in warc_files(root, segment):
            data = root.download(warc_rel(segment, name), tmp_path / name).read_bytes()
            assert S3_SECRET.encode() not in data


def test_the_export_from_s3_replays_in_pywb(crawls: Crawls, tmp_path: Path) -> None:
    """Exported to the bucket and to a local folder: the same captures; the
    local copy served by pywb gives back each page's archived payload."""
    from tests.warc.pywb import get, pywb_serving
    from tests.warc.test_pywb_replay import archived
    from trawl.runner import run_export
    from trawl.stages.export import Selection

    ctx = JobContext(crawls.spark, crawls.cfg, crawls.s3, segment_id(AT), AT)
    chosen = Selection(statuses=("200",))
    local = run_export(ctx, chosen, str(tmp_path / "out"), "x")
    remote = run_export(ctx, chosen, "s3a://crawls/exports/x", "x")
    assert local["captures"] == remote["captures"] > 5 and local["missing"] == 0
    store = CrawlRoot.of("s3a://crawls/exports/x", crawls.cfg.storage)
    assert sorted(store.names("", ".warc.gz")) == sorted(
        p.name for p in (tmp_path / "out").glob("*.warc.gz")
    )
    uploaded = (store.read_bytes("x.cdxj") or b"").decode().splitlines()
    written = (tmp_path / "out" / "x.cdxj").read_text().splitlines()
    # two exports: the same captures (key and time); each its own warcinfo, so offsets differ
    assert [line.split(" ")[:2] for line in uploaded] == [line.split(" ")[:2] for line in written]
    warcs = sorted((tmp_path / "out").glob("*.warc.gz"))
    captures = archived(warcs)
    with pywb_serving(tmp_path / "pywb", {"coll": warcs}) as replay:
        for url, capture in list(captures.items())[:5]:
            status, _, body = get(replay.port, f"/coll/{capture.timestamp}id_/{url}")
            assert (status, body) == (capture.status, capture.payload), url


def test_a_wacz_export_reads_the_bucket_and_is_uploaded_to_it(
    crawls: Crawls, tmp_path: Path
) -> None:
    """WARC files read from the S3 root, the package written to a bucket:
    whole, valid, and with the pages and index of the same export to a
    local file (the bytes differ: each WARC file has its own warcinfo)."""
    import zipfile

    from tests.warc.test_wacz import assert_valid
    from trawl.runner import run_wacz_export
    from trawl.stages.export import Selection

    ctx = JobContext(crawls.spark, crawls.cfg, crawls.s3, segment_id(AT), AT)
    chosen = Selection(statuses=("200",))
    local = run_wacz_export(ctx, chosen, str(tmp_path / "local.wacz"))
    remote = run_wacz_export(ctx, chosen, "s3a://crawls/exports/news.wacz")
    assert remote["wacz"] == "s3a://crawls/exports/news.wacz"
    assert local["captures"] == remote["captures"] > 5 and remote["pages"] == local["pages"] > 0
    store = CrawlRoot.of("s3a://crawls/exports", crawls.cfg.storage)
    assert store.names("") == ["news.wacz"]  # no part left behind
    uploaded = store.download("news.wacz", tmp_path / "news.wacz")
    assert uploaded.stat().st_size == remote["bytes"]
    assert_valid(uploaded)
    with zipfile.ZipFile(uploaded) as up, zipfile.ZipFile(tmp_path / "local.wacz") as down:
        assert up.read("pages/pages.jsonl") == down.read("pages/pages.jsonl")
        keys = [[line.split(b" ")[:2] for line in z.read("indexes/index.cdx").splitlines()]
                for z in (up, down)]  # fmt: skip
        assert keys[0] == keys[1]


def test_a_cycle_killed_mid_fetch_is_rerun_losing_and_doubling_nothing(crawls: Crawls) -> None:
    """SIGKILL to the whole process tree (driver, JVM, Python workers) while
    its fetch tasks upload WARC files, then the same command again: the
    second run takes over the dead run's lease, fetches the segment's list
    once more and completes; every listed WARC object is whole, each URL has
    one fetch row and one response record, and every warc_ref is exact."""
    import signal
    import time

    from trawl.warc.reader import iter_records

    root_uri = "s3a://crawls/killed"
    at = AT + timedelta(days=1)
    command = [sys.executable, "-m", "trawl.cli", "cycle", "--crawl", root_uri,
               "--seeds", str(crawls.web.seeds_file), "--cycles", "1", "--at", at.isoformat(),
               *[a for s in settings(crawls.web) for a in ("--set", s)],
               "--set", "politeness.min_delay_s=1.0"]  # fmt: skip
    log = crawls.web.access_log
    before = len(log.read_text().splitlines())
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    with subprocess.Popen(command, env=crawls.env, start_new_session=True, **quiet) as first:
        deadline = time.monotonic() + 600
        while len(log.read_text().splitlines()) < before + 8:  # the fetch is under way
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    again = subprocess.run(command, env=crawls.env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    root = CrawlRoot.of(root_uri, crawls.cfg.storage)
    segment = segment_id(at)
    fetch = read_segment_table(crawls.spark, root_uri, segment, "fetch")
    listed = read_segment_table(crawls.spark, root_uri, segment, "fetchlist")
    pages = fetch.filter("kind = 'page'")
    assert pages.count() == pages.select("url").distinct().count() >= listed.count()
    responses: list[str] = []
    for name in warc_files(root, segment):
        path = root.download(warc_rel(segment, name), Path(crawls.local) / "_killed" / name)
        assert check_file(path) == [], name
        responses += [r.target_uri or "" for r in iter_records(path) if r.rec_type == "response"]
    assert len(responses) == len(set(responses)) > 0
    for r in pages.filter("warc_file IS NOT NULL").collect():
        record, _ = warc_record(root, WarcRef(r["warc_file"], r["warc_offset"], r["warc_length"]))
        assert record.target_uri == r["url"]


def test_sql_and_stats_read_the_s3_root_without_a_jvm(crawls: Crawls) -> None:
    """The default engine (DuckDB over delta-rs and pyarrow's S3 reader) on
    the bucket, as a user runs it: the same answers as on the local root."""
    from trawl.sql import lake_batches

    query = (
        "SELECT segment, kind, outcome, count(*) AS n FROM fetch GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )

    def answer(root: str) -> list[dict[str, Any]]:
        run = subprocess.run(
            [sys.executable, "-m", "trawl.cli", "sql", "--crawl", root, "--json", query],
            env=crawls.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        return [json.loads(line) for line in run.stdout.splitlines()]

    on_s3 = answer(crawls.s3)
    assert on_s3 and on_s3 == answer(crawls.local)
    with lake_batches(CrawlRoot.of(crawls.s3, crawls.cfg.storage), "SELECT count(*) AS n "
                      "FROM crawldb") as (_, batches):  # fmt: skip
        (row,) = [r for b in batches for r in b.to_pylist()]
    assert row["n"] == read_table(crawls.spark, crawls.local, "crawldb").count()
    stats = subprocess.run(
        [sys.executable, "-m", "trawl.cli", "stats", "--crawl", crawls.s3, "--json"],
        env=crawls.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert stats.returncode == 0, stats.stderr[-2000:]
    assert json.loads(stats.stdout)["totals"][0]["urls"] == row["n"]
