"""Delta tables of the crawl directory: a table from an older trawl is upgraded in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trawl.schemas import CRAWLDB_SCHEMA
from trawl.tables import _ENSURED, ensure_table, read_table


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
