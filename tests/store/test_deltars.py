"""The small-table path: counters and table state through delta-rs, read and
written interchangeably with Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from trawl.store import deltars
from trawl.store.files import CrawlRoot
from trawl.store.schemas import COUNTERS_SCHEMA
from trawl.store.tables import (
    _ENSURED,
    _WITH_VECTORS,
    counted,
    ensure_table,
    read_table,
    use_deletion_vectors,
    write_counters,
)


def test_the_arrow_schema_matches_what_spark_writes(spark: Any, tmp_path: Path) -> None:
    """delta-rs writes the column types Spark's Delta writer gave the table."""
    root = str(tmp_path / "crawl")
    ensure_table(spark, root, "counters")
    from deltalake import DeltaTable

    spark_made = pa.schema(DeltaTable(f"{root}/counters").schema().to_arrow())
    assert [(f.name, str(f.type)) for f in deltars.arrow_schema(COUNTERS_SCHEMA)] == [
        (f.name, str(f.type)) for f in spark_made
    ]


def test_counters_written_by_delta_rs_read_in_spark_and_a_rerun_replaces_them(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "crawl")
    files = CrawlRoot.of(root)
    ensure_table(spark, root, "counters")  # made by Spark, as a crawl's jobs do
    assert not counted(files, "20261130T000000Z", "fetch")

    write_counters(files, "20261130T000000Z", "fetch", [("fetch/a", 3), ("fetch/b", 4)])
    write_counters(files, "20261130T000000Z", "generate", [("generate/urls", 7)])
    write_counters(files, "20261130T000000Z", "fetch", [("fetch/a", 5)])  # a re-run

    rows = read_table(spark, root, "counters").orderBy("job", "name").collect()
    assert [(r["job"], r["name"], r["value"]) for r in rows] == [
        ("fetch", "fetch/a", 5),
        ("generate", "generate/urls", 7),
    ]
    assert counted(files, "20261130T000000Z", "fetch")
    assert not counted(files, "20261130T000000Z", "updatedb")
    assert not counted(files, "20261201T000000Z", "fetch")

    # a job that counted nothing still leaves its mark only if it wrote rows;
    # an empty re-run takes the old ones away (replace, not append)
    write_counters(files, "20261130T000000Z", "fetch", [])
    assert not counted(files, "20261130T000000Z", "fetch")
    assert read_table(spark, root, "counters").count() == 1


def test_counters_on_a_fresh_root_create_a_table_spark_then_accepts(
    spark: Any, tmp_path: Path
) -> None:
    """delta-rs may make the table first (a job that counts before any
    Spark write); Spark then opens it as its own."""
    root = str(tmp_path / "crawl")
    write_counters(CrawlRoot.of(root), "20261130T000000Z", "inject", [("inject/seeds", 2)])
    _ENSURED.discard(f"{root}/counters")
    ensure_table(spark, root, "counters")
    spark.createDataFrame([("s", "j", "n", 1)], COUNTERS_SCHEMA).write.format("delta").mode(
        "append"
    ).save(f"{root}/counters")
    assert sorted(r["value"] for r in read_table(spark, root, "counters").collect()) == [1, 2]
    assert counted(CrawlRoot.of(root), "20261130T000000Z", "inject")


def test_counters_after_spark_checkpointed_the_table(spark: Any, tmp_path: Path) -> None:
    """Spark checkpoints every tenth commit; delta-rs reads from the checkpoint."""
    root = str(tmp_path / "crawl")
    files = CrawlRoot.of(root)
    path = ensure_table(spark, root, "counters")
    for i in range(11):
        spark.createDataFrame([("s", "j", f"n{i}", i)], COUNTERS_SCHEMA).write.format("delta").mode(
            "append"
        ).save(path)
    assert any(p.name.endswith(".checkpoint.parquet") for p in Path(path, "_delta_log").iterdir())
    write_counters(files, "20261130T000000Z", "fetch", [("fetch/a", 1)])
    assert read_table(spark, root, "counters").count() == 12
    assert counted(files, "20261130T000000Z", "fetch")


def test_a_bad_segment_id_is_refused_before_any_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_counters(CrawlRoot.of(str(tmp_path)), "x' OR '1'='1", "fetch", [("a", 1)])


def test_table_state_matches_spark_and_drives_deletion_vectors(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    files = CrawlRoot.of(root)
    path = f"{root}/crawldb"
    assert deltars.table_state(files, "crawldb") is None
    rows = [(f"http://a.example/{i}", i, "a.example", 0) for i in range(300)]
    spark.createDataFrame(rows, "url string, url_fp long, host string, host_bucket int").coalesce(
        1
    ).write.format("delta").partitionBy("host_bucket").save(path)
    _ENSURED.discard(path)
    _WITH_VECTORS.discard(path)

    state = deltars.table_state(files, "crawldb")
    assert state is not None
    properties, size = state
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert size == detail["sizeInBytes"] > 0
    assert "delta.enableDeletionVectors" not in properties

    assert not use_deletion_vectors(spark, root, "crawldb", size + 1, files)
    assert use_deletion_vectors(spark, root, "crawldb", size, files)
    _WITH_VECTORS.discard(path)
    # on now (a table delta-rs may or may not open): still reads as on
    assert use_deletion_vectors(spark, root, "crawldb", 10 * 2**30, files)


def test_tables_created_through_delta_rs_are_what_spark_would_make(
    spark: Any, tmp_path: Path
) -> None:
    """A fresh root's tables, created without a Spark job: every column and
    type of the schema constants, the partition columns, and Change Data
    Feed on ``events``; Spark then writes to them (events' MERGE writes its
    change data)."""
    from trawl.store.tables import TABLES, ensure_all

    root = str(tmp_path / "crawl")
    ensure_all(spark, root, 64 * 2**20, CrawlRoot.of(root))
    for name, (schema, partitions) in TABLES.items():
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{root}/{name}`").collect()[0]
        assert read_table(spark, root, name).schema == schema, name
        assert list(detail["partitionColumns"]) == list(partitions), name
    events = spark.sql(f"DESCRIBE DETAIL delta.`{root}/events`").collect()[0]
    assert events["properties"]["delta.enableChangeDataFeed"] == "true"

    from delta.tables import DeltaTable

    row = spark.createDataFrame(
        [("crawl.fetched", "s1", "http://a.example/")], "event string, segment string, url string"
    )
    source = row.selectExpr("event", "segment", "current_date() AS event_date", "url")
    (
        DeltaTable.forPath(spark, f"{root}/events")
        .alias("t")
        .merge(source.alias("s"), "t.url = s.url AND t.segment = s.segment")
        .whenNotMatchedInsert(values={c: f"s.{c}" for c in source.columns})
        .execute()
    )
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(f"{root}/events")
    )
    assert [r["_change_type"] for r in changes.collect()] == ["insert"]
