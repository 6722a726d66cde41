"""The crawl's tables in the session catalog (a Hive metastore), by name.

``trawl catalog`` makes a database for the crawl (``catalog.database``, by
default the root's last folder name) and registers in it:

- every Delta table of ``TABLES`` that exists, as an external table of its
  own name at its path (``news.crawldb``);
- ``fetch`` and ``fetchlist``, which are plain Parquet per segment, as one
  external Parquet table each, partitioned by ``segment``: a partition per
  complete segment (its completion marker written), located at the
  segment's folder. A segment an older trawl wrote as Delta is left out
  (it reads through ``trawl sql``).

Registering is idempotent: a table already there at the same path is kept,
a segment already a partition is kept, new segments are added and a
partition whose folder is gone is dropped. A table of the same name at
another path (another crawl under the same database name) is an error
naming ``catalog.database``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from trawl.store.files import CrawlRoot
from trawl.store.tables import SEGMENT_COMPLETE, SEGMENT_TABLES, TABLES, segment_path, table_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = ["database_name", "register_crawl"]


def database_name(root: str, configured: str = "") -> str:
    """``configured``, else the root's last folder name as a SQL name."""
    if configured:
        return configured
    last = root.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9_]+", "_", last.lower()).strip("_") or "crawl"
    return name if not name[0].isdigit() else f"crawl_{name}"


def _columns(schema: StructType) -> str:
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema)


def _location(spark: SparkSession, table: str) -> str | None:
    """Where a registered table's data is (None: no such table)."""
    if not spark.catalog.tableExists(table):
        return None
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        if row["col_name"] == "Location":
            return str(row["data_type"])
    return None


def _same_place(a: str, b: str) -> bool:
    def plain(uri: str) -> str:
        return re.sub(r"^file:(//)?", "", uri).rstrip("/")

    return plain(a) == plain(b)


def _claim(spark: SparkSession, table: str, path: str, db: str) -> bool:
    """Whether ``table`` must be made (False: already there, at ``path``)."""
    where = _location(spark, table)
    if where is None:
        return True
    if not _same_place(where, path):
        raise ValueError(
            f"catalog: {table} is registered at {where}, not {path}: another crawl uses "
            f"database {db}; give this one another name with catalog.database"
        )
    return False


def register_crawl(spark: SparkSession, files: CrawlRoot, database: str = "") -> dict[str, Any]:
    """Register the crawl at ``files`` (see the module's docstring); what
    was done: the database, tables made and kept, segments added and dropped."""
    root = files.uri
    db = database_name(root, database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{db}` COMMENT 'trawl crawl at {root}'")
    made, kept = [], []
    for name in TABLES:
        if not files.names(f"{name}/_delta_log", ".json"):
            continue  # never made: nothing to register (reads never create)
        path = table_path(root, name)
        if _claim(spark, f"`{db}`.`{name}`", path, db):
            spark.sql(f"CREATE TABLE `{db}`.`{name}` USING DELTA LOCATION '{path}'")
            made.append(name)
        else:
            kept.append(name)
    segments = files.dirs("segments")
    added = dropped = 0
    for name, schema in SEGMENT_TABLES.items():
        complete = [s for s in segments if SEGMENT_COMPLETE in files.names(f"segments/{s}/{name}")]
        table = f"`{db}`.`{name}`"
        if _claim(spark, table, f"{root}/segments", db):
            if not complete:
                continue
            spark.sql(
                f"CREATE TABLE {table} ({_columns(schema)}, `segment` string) USING PARQUET "
                f"PARTITIONED BY (`segment`) LOCATION '{root}/segments'"
            )
            made.append(name)
        else:
            kept.append(name)
        have = {row[0].split("=", 1)[1] for row in spark.sql(f"SHOW PARTITIONS {table}").collect()}
        new = [s for s in complete if s not in have]
        gone = sorted(have - set(complete))
        if new:
            parts = " ".join(
                f"PARTITION (`segment` = '{s}') LOCATION '{segment_path(root, s, name)}'"
                for s in new
            )
            spark.sql(f"ALTER TABLE {table} ADD IF NOT EXISTS {parts}")
        if gone:
            parts = ", ".join(f"PARTITION (`segment` = '{s}')" for s in gone)
            spark.sql(f"ALTER TABLE {table} DROP IF EXISTS {parts}")
        added += len(new)
        dropped += len(gone)
    return {"database": db, "made": made, "kept": kept, "segments_added": added,
            "segments_dropped": dropped}  # fmt: skip
