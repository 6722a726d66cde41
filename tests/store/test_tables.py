"""Delta tables of the crawl directory: a table from an older trawl is upgraded in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trawl.store.schemas import CRAWLDB_SCHEMA, FETCH_SCHEMA, FETCHLIST_SCHEMA
from trawl.store.tables import (
    _ENSURED,
    SEGMENT_COMPLETE,
    compact,
    ensure_table,
    read_segment_table,
    read_table,
    segment_exists,
    segment_path,
    use_deletion_vectors,
    write_segment_table,
)


def test_an_older_crawldb_gains_the_new_columns_and_keeps_its_rows(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "crawl")
    old_columns = CRAWLDB_SCHEMA.fieldNames()[:10]  # a crawldb from before the change record
    old = spark.createDataFrame(
        [("http://a.example/", 1, "a.example", 0, "a.example", None, "fetched", "seed", None, 0)],
        ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in CRAWLDB_SCHEMA.fields[:10]),
    )
    old.write.format("delta").partitionBy("host_bucket").save(f"{root}/crawldb")
    _ENSURED.discard(f"{root}/crawldb")

    ensure_table(spark, root, "crawldb")

    table = read_table(spark, root, "crawldb")
    assert table.columns == CRAWLDB_SCHEMA.fieldNames()
    (row,) = table.collect()
    assert [row[c] for c in old_columns[:3]] == ["http://a.example/", 1, "a.example"]
    assert row["change_rate"] is None and row["is_sitemap"] is None


def _properties(spark: Any, path: str) -> dict[str, str]:
    return dict(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["properties"])


def test_deletion_vectors_from_a_size_on_and_a_merge_rewrites_no_rows(
    spark: Any, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    root = str(tmp_path / "crawl")
    path = f"{root}/crawldb"
    rows = [
        (f"http://a.example/{i}", i, "a.example", 0, "a.example", "unfetched") for i in range(200)
    ]
    old = spark.createDataFrame(
        rows, "url string, url_fp long, host string, host_bucket int, domain string, status string"
    )
    old.coalesce(1).write.format("delta").partitionBy("host_bucket").save(path)
    _ENSURED.discard(path)

    # below the threshold (or with it negative) the table stays as it is
    assert not use_deletion_vectors(spark, root, "crawldb", 10 * 2**20)
    assert not use_deletion_vectors(spark, root, "crawldb", -1)
    assert "delta.enableDeletionVectors" not in _properties(spark, path)
    assert use_deletion_vectors(spark, root, "crawldb", 1000)
    assert _properties(spark, path)["delta.enableDeletionVectors"] == "true"
    assert use_deletion_vectors(spark, root, "crawldb", -1)  # once on, on

    # One row of a 200-row file changes: the MERGE marks it deleted in a
    # deletion vector and writes it anew, copying none of the other 199.
    source = spark.createDataFrame([(0, 7, "http://a.example/7")], "b int, fp long, u string")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.host_bucket = s.b AND t.url_fp = s.fp AND t.url = s.u")
        .whenMatchedUpdate(set={"status": F.lit("fetched")})
        .execute()
    )
    metrics = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
    assert metrics["operation"] == "MERGE"
    m = metrics["operationMetrics"]
    assert m["numTargetRowsUpdated"] == "1"
    assert m["numTargetRowsCopied"] == "0"
    assert int(m["numTargetDeletionVectorsAdded"]) >= 1
    table = read_table(spark, root, "crawldb")
    assert table.count() == 200
    assert table.filter("status = 'fetched'").select("url").collect()[0][0] == "http://a.example/7"
    # the path without a JVM (DESIGN: deltalake for quick looks): its own
    # engine applies them (its pyarrow-dataset readers refuse such tables)
    import pyarrow as pa
    from deltalake import DeltaTable as RustTable

    quick = pa.table(RustTable(path).scan(columns=["url", "status"]).read_all()).to_pylist()
    assert len(quick) == 200
    assert [r["url"] for r in quick if r["status"] == "fetched"] == ["http://a.example/7"]

    # compaction folds the bucket's two files (and the vector) into one
    done = compact(spark, root, "crawldb")
    assert (done["files_removed"], done["files_added"]) == (2, 1)
    assert done["deletion_vectors_removed"] >= 1
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert detail["numFiles"] == 1
    assert read_table(spark, root, "crawldb").filter("status = 'fetched'").count() == 1
    assert read_table(spark, root, "crawldb").count() == 200


def test_zero_turns_deletion_vectors_on_from_the_start(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    for name in ("crawldb", "hostdb"):
        assert use_deletion_vectors(spark, root, name, 0)
        props = _properties(spark, ensure_table(spark, root, name))
        assert props["delta.enableDeletionVectors"] == "true", name


def test_replacing_nothing_with_nothing_commits_nothing(spark: Any, tmp_path: Path) -> None:
    """A job with no rows to record makes no commit, unless a previous run
    left rows that the replace must take away (a re-run never keeps stale
    rows)."""
    from delta.tables import DeltaTable

    from trawl.store.schemas import REJECTED_SCHEMA
    from trawl.store.tables import replace_rows

    root = str(tmp_path / "crawl")
    path = ensure_table(spark, root, "rejected")

    def version() -> int:
        return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])

    where = "segment = 's1' AND stage = 'updatedb'"
    empty = spark.createDataFrame([], REJECTED_SCHEMA)
    before = version()
    replace_rows(empty, root, "rejected", where, rows=0)
    assert version() == before

    values = {f.name: None for f in REJECTED_SCHEMA.fields}
    values.update(segment="s1", stage="updatedb", url="http://a.example/x", reason="trap")
    one = spark.createDataFrame([tuple(values.values())], REJECTED_SCHEMA)
    replace_rows(one, root, "rejected", where, rows=1)
    assert read_table(spark, root, "rejected").count() == 1
    replace_rows(empty, root, "rejected", where, rows=0)  # the re-run found none
    assert version() == before + 2
    assert read_table(spark, root, "rejected").count() == 0


def test_segment_tables_are_parquet_complete_only_with_their_marker(
    spark: Any, tmp_path: Path
) -> None:
    """A segment table is plain Parquet made visible by a marker written
    last: files without it (a run that died mid-write) are no table, and the
    re-run replaces them whole."""
    root = str(tmp_path / "crawl")
    seg = "20261130T000000Z"
    path = Path(segment_path(root, seg, "fetchlist"))
    assert not segment_exists(spark, root, seg, "fetchlist")

    def rows(*urls: str) -> Any:
        values = [{**dict.fromkeys(FETCHLIST_SCHEMA.fieldNames()), "url": u, "host": "a.example"}
                  for u in urls]  # fmt: skip
        return spark.createDataFrame([tuple(v.values()) for v in values], FETCHLIST_SCHEMA)

    # a run that died after its files, before its marker
    rows("http://a.example/stale").write.parquet(str(path))
    assert not segment_exists(spark, root, seg, "fetchlist")

    write_segment_table(rows("http://a.example/1", "http://a.example/2"), root, seg, "fetchlist")
    assert segment_exists(spark, root, seg, "fetchlist")
    assert (path / SEGMENT_COMPLETE).is_file() and not (path / "_delta_log").exists()
    table = read_segment_table(spark, root, seg, "fetchlist")
    assert table.schema == FETCHLIST_SCHEMA
    assert sorted(r["url"] for r in table.collect()) == ["http://a.example/1", "http://a.example/2"]

    write_segment_table(rows("http://a.example/3"), root, seg, "fetchlist")  # a re-run
    assert [r["url"] for r in read_segment_table(spark, root, seg, "fetchlist").collect()] == [
        "http://a.example/3"
    ]


def test_a_segment_an_older_trawl_wrote_as_delta_reads_and_is_replaced(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "crawl")
    seg = "20261130T000000Z"
    path = segment_path(root, seg, "fetch")
    old = spark.createDataFrame([("http://a.example/", "page")], "url string, kind string")
    old.write.format("delta").save(path)  # an older segment: Delta, fewer columns
    assert segment_exists(spark, root, seg, "fetch")
    (row,) = read_segment_table(spark, root, seg, "fetch").collect()
    assert row["url"] == "http://a.example/" and row["content_sha256"] is None

    fresh = read_segment_table(spark, root, seg, "fetch").select(*FETCH_SCHEMA.fieldNames())
    write_segment_table(fresh.localCheckpoint(), root, seg, "fetch")
    assert not Path(path, "_delta_log").exists()
    assert [r["url"] for r in read_segment_table(spark, root, seg, "fetch").collect()] == [
        "http://a.example/"
    ]
