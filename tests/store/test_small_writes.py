"""The small-table path: a write whose table and rows are small is committed
by delta-rs from the driver, with the rows Spark's MERGE or write would
leave; anything else, or anything delta-rs refuses, goes through Spark."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.stages.common import StageContext
from trawl.stages.events import merge_events
from trawl.store import tables
from trawl.store.schemas import CRAWLDB_SCHEMA, EVENTS_SCHEMA
from trawl.store.tables import Merge, append_rows, ensure_table, merge, read_table

pytestmark = pytest.mark.crawl  # Spark

AT = datetime(2026, 11, 30, tzinfo=UTC)
KEY_ON = "t.host_bucket = s.host_bucket AND t.url_fp = s.url_fp AND t.url = s.url"


def _engine(table: Path) -> str:
    """The engine that made the table's newest commit."""
    newest = sorted((table / "_delta_log").glob("*.json"))[-1]
    for line in newest.read_text().splitlines():
        info = json.loads(line).get("commitInfo")
        if info:
            return str(info.get("engineInfo", ""))
    return ""


def _versions(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


def _crawldb(spark: Any, root: str, rows: list[dict[str, Any]]) -> None:
    full = [tuple(r.get(f) for f in CRAWLDB_SCHEMA.fieldNames()) for r in rows]
    ensure_table(spark, root, "crawldb")
    append_rows(spark.createDataFrame(full, CRAWLDB_SCHEMA), root, "crawldb")


def _row(url: str, fp: int, **values: Any) -> dict[str, Any]:
    return {"url": url, "url_fp": fp, "host": "a.test", "host_bucket": 0, **values}


def _changes(spark: Any) -> Any:
    """updatedb-like source rows: an update, a hint (the newer lastmod
    wins), an insert, and an insert whose clause does not hold."""
    rows = [
        ("http://a.test/1", 1, "fetched", None, "update"),
        ("http://a.test/2", 2, None, datetime(2026, 11, 1, tzinfo=UTC), "hint"),
        ("http://a.test/3", 3, None, datetime(2026, 10, 1, tzinfo=UTC), "hint"),
        ("http://a.test/4", 4, "unfetched", None, "insert"),
        ("http://a.test/5", 5, "unfetched", None, "skip"),
    ]
    return spark.createDataFrame(
        [(u, fp, "a.test", 0, st, lm, op) for u, fp, st, lm, op in rows],
        "url string, url_fp long, host string, host_bucket int, status string, "
        "sitemap_lastmod timestamp, _op string",
    )


def _plan(source: Any) -> Merge:
    newest = (
        "CASE WHEN t.sitemap_lastmod IS NULL OR s.sitemap_lastmod > t.sitemap_lastmod "
        "THEN s.sitemap_lastmod ELSE t.sitemap_lastmod END"
    )
    cols = {c: f"s.{c}" for c in ("url", "url_fp", "host", "host_bucket", "status")}
    return Merge(
        "crawldb",
        source,
        f"t.host_bucket IN (0) AND {KEY_ON}",
        updates=(("s._op = 'update'", cols), ("s._op = 'hint'", {"sitemap_lastmod": newest})),
        inserts=(("s._op = 'insert'", cols),),
    )


def _state(spark: Any, root: str) -> list[tuple[Any, ...]]:
    rows = read_table(spark, root, "crawldb").select("url", "status", "sitemap_lastmod")
    return sorted(tuple(r) for r in rows.collect())


def _seeded(spark: Any, root: str) -> None:
    _crawldb(spark, root, [
        _row("http://a.test/1", 1, status="unfetched"),
        _row("http://a.test/2", 2, status="fetched",
             sitemap_lastmod=datetime(2026, 10, 15, tzinfo=UTC)),
        _row("http://a.test/3", 3, status="fetched",
             sitemap_lastmod=datetime(2026, 10, 15, tzinfo=UTC)),
    ])  # fmt: skip


def test_a_small_merge_is_committed_by_delta_rs_as_spark_would_commit_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, big = str(tmp_path / "small"), str(tmp_path / "big")
    for root in (small, big):
        _seeded(spark, root)

    merge(spark, small, _plan(_changes(spark)))
    assert _engine(tmp_path / "small" / "crawldb").startswith("delta-rs")

    monkeypatch.setattr(tables, "SMALL_TABLE_BYTES", 0)  # every table is big
    merge(spark, big, _plan(_changes(spark)))
    assert _engine(tmp_path / "big" / "crawldb").startswith("Apache-Spark")

    assert _state(spark, small) == _state(spark, big)
    got = {url: (status, lastmod) for url, status, lastmod in _state(spark, small)}
    assert got["http://a.test/1"][0] == "fetched"
    assert got["http://a.test/2"][1] == datetime(2026, 11, 1)  # the newer hint
    assert got["http://a.test/3"][1] == datetime(2026, 10, 15)  # the older one not
    assert "http://a.test/4" in got and "http://a.test/5" not in got
    # plain Arrow strings in every file, as Spark writes them: a lake reader
    # (pyarrow, DuckDB) meets one type per column
    import pyarrow.parquet as pq

    for part in (tmp_path / "small" / "crawldb").rglob("*.parquet"):
        assert not [f.name for f in pq.read_schema(part) if "view" in str(f.type)], part


def test_more_rows_than_the_small_path_takes_go_through_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "crawl")
    _seeded(spark, root)
    monkeypatch.setattr(tables, "SMALL_ROWS", 4)  # the source has 5
    merge(spark, root, _plan(_changes(spark)))
    assert _engine(tmp_path / "crawl" / "crawldb").startswith("Apache-Spark")
    assert len(_state(spark, root)) == 4
    # a table of more rows than that, with a write of one row: Spark's too
    one = _plan(_changes(spark).filter("_op = 'update'"))
    monkeypatch.setattr(tables, "SMALL_ROWS", 4)  # crawldb holds 4
    merge(spark, root, one)
    assert _engine(tmp_path / "crawl" / "crawldb").startswith("delta-rs")
    monkeypatch.setattr(tables, "SMALL_ROWS", 3)
    merge(spark, root, one)
    assert _engine(tmp_path / "crawl" / "crawldb").startswith("Apache-Spark")


def test_an_expression_the_small_path_refuses_is_merged_by_spark_instead(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "crawl")
    _seeded(spark, root)
    before = _versions(tmp_path / "crawl" / "crawldb")
    plan = Merge(
        "crawldb",
        _changes(spark),
        KEY_ON,
        # Spark's SQL has xxhash64; DuckDB's does not: the small path fails
        # before its commit, and Spark makes the one commit
        updates=(("s._op = 'update'", {"score": "CAST(xxhash64(s.url) % 2 AS DOUBLE)"}),),
    )
    merge(spark, root, plan)
    assert _versions(tmp_path / "crawl" / "crawldb") == before + 1
    assert _engine(tmp_path / "crawl" / "crawldb").startswith("Apache-Spark")
    scored = read_table(spark, root, "crawldb").filter("url = 'http://a.test/1'")
    assert scored.first()["score"] in (0.0, 1.0, -1.0)


def test_a_table_with_deletion_vectors_stays_with_spark(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    _seeded(spark, root)
    assert tables.use_deletion_vectors(spark, root, "crawldb", 0)
    merge(spark, root, _plan(_changes(spark)))
    assert _engine(tmp_path / "crawl" / "crawldb").startswith("Apache-Spark")


def test_events_merged_by_delta_rs_feed_spark_s_change_readers_once(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "crawl")
    ensure_table(spark, root, "events")
    values = dict.fromkeys(EVENTS_SCHEMA.fieldNames())
    values.update(event="crawl.fetched", segment="S1", event_date=AT.date())
    rows = [tuple({**values, "url": f"http://a.test/{i}"}.values()) for i in range(3)]
    events = spark.createDataFrame(rows, EVENTS_SCHEMA)
    ctx = StageContext(load_config(None, [], environ={}), "S1", AT)

    merge(spark, root, merge_events(events, ctx))
    merge(spark, root, merge_events(events, ctx))  # a re-run adds nothing
    assert _engine(tmp_path / "crawl" / "events").startswith("delta-rs")
    assert read_table(spark, root, "events").count() == 3
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(f"{root}/events")
    )
    assert sorted(tuple(r) for r in feed.groupBy("_change_type").count().collect()) == [
        ("insert", 3)
    ]


def test_a_merge_of_no_rows_commits_nothing(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    _seeded(spark, root)
    before = _versions(tmp_path / "crawl" / "crawldb")
    merge(spark, root, _plan(_changes(spark).limit(0)))
    assert _versions(tmp_path / "crawl" / "crawldb") == before


def test_small_tables_read_through_delta_rs_as_spark_reads_them(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    for name in tables.TABLES:  # empty, with structs and maps among the columns
        frame = read_table(spark, root, name)
        assert frame.schema == spark.read.format("delta").load(f"{root}/{name}").schema, name
        assert frame.count() == 0
    _seeded(spark, root)
    merge(spark, root, _plan(_changes(spark)))
    ours = read_table(spark, root, "crawldb")
    theirs = spark.read.format("delta").load(f"{root}/crawldb")
    assert ours.schema == theirs.schema
    assert sorted(map(tuple, ours.collect())) == sorted(map(tuple, theirs.collect()))


@pytest.mark.parametrize("small_rows", [100, 4], ids=["delta-rs", "spark"])
def test_counted_writes_count_the_rows_they_write_on_either_path(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_rows: int
) -> None:
    """``merge_counted``, ``append_rows`` and ``replace_rows`` with a tally
    report the rows they wrote, from the small path's Arrow table or from
    the source Spark keeps for its write; no rows, no commit."""
    from trawl.store.schemas import REJECTED_SCHEMA

    root = str(tmp_path / "crawl")
    _seeded(spark, root)
    monkeypatch.setattr(tables, "SMALL_ROWS", small_rows)  # 4: the 5 rows go through Spark
    engine = "delta-rs" if small_rows == 100 else "Apache-Spark"
    merged = tables.merge_counted(spark, root, _plan(_changes(spark)), tally="_op")
    assert merged == tables.Written(5, {"update": 1, "hint": 2, "insert": 1, "skip": 1})
    assert _engine(tmp_path / "crawl" / "crawldb").startswith(engine)
    assert len(_state(spark, root)) == 4
    before = _versions(tmp_path / "crawl" / "crawldb")
    none = tables.merge_counted(spark, root, _plan(_changes(spark).limit(0)))
    assert none == tables.Written(0, {}) and _versions(tmp_path / "crawl" / "crawldb") == before

    ensure_table(spark, root, "rejected")
    reasons = ["trap/counter", "cap/new_per_host", "cap/new_per_host", "filter/regex", "x"]
    rows = spark.createDataFrame(
        [("S1", "updatedb", f"http://a.test/{i}", "a.test", r, "outlink") for i, r in
         enumerate(reasons)],
        REJECTED_SCHEMA,
    )  # fmt: skip
    where = "segment = 'S1' AND stage = 'updatedb'"
    written = tables.replace_rows(rows, root, "rejected", where, tally="reason")
    assert written is not None and written.rows == 5
    assert written.tally == {"trap/counter": 1, "cap/new_per_host": 2, "filter/regex": 1, "x": 1}
    assert _engine(tmp_path / "crawl" / "rejected").startswith(engine)
    again = tables.replace_rows(rows.limit(2), root, "rejected", where, tally="reason")
    assert again is not None and again.rows == 2  # a re-run replaces
    assert read_table(spark, root, "rejected").count() == 2

    ensure_table(spark, root, "hostparams")
    params = spark.createDataFrame(
        [("a.test", f"p{i}", "S1") for i in range(5)], "host string, param string, segment string"
    )
    before = _versions(tmp_path / "crawl" / "hostparams")
    assert append_rows(params.limit(0), root, "hostparams") == 0
    assert _versions(tmp_path / "crawl" / "hostparams") == before
    assert append_rows(params, root, "hostparams") == 5
    assert _engine(tmp_path / "crawl" / "hostparams").startswith(engine)
