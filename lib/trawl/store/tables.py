"""All Delta I/O of the crawl directory goes through here.

One root holds every table (a local path now, ``s3a://`` and friends on a
cluster). Tables are created from the schema constants if they do not exist;
crawldb and hostdb take MERGEs (inject, updatedb), segment tables are
replaced whole for their segment (a rerun overwrites, never appends), so every
job is safe to re-run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Union

from trawl import faults
from trawl.store import deltars, domainrule
from trawl.store.files import CrawlRoot, check_segment_id
from trawl.store.frames import materialize, release
from trawl.store.objectstore import StoreError
from trawl.store.schemas import (
    CONTENT_SCHEMA,
    COUNTERS_SCHEMA,
    CRAWLDB_SCHEMA,
    DOMAINLINKS_SCHEMA,
    EVENTS_SCHEMA,
    FETCH_SCHEMA,
    FETCHLIST_SCHEMA,
    HOSTDB_SCHEMA,
    HOSTPARAMS_SCHEMA,
    NEARDUP_SCHEMA,
    POLICY_SCHEMA,
    REJECTED_SCHEMA,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from delta.tables import DeltaTable
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

# A MERGE clause's columns: target column -> SQL expression or Column
Assignments = Mapping[str, Union[str, "Column"]]

# name -> (schema, partition columns)
TABLES: dict[str, tuple[StructType, tuple[str, ...]]] = {
    "crawldb": (CRAWLDB_SCHEMA, ("host_bucket",)),
    "hostdb": (HOSTDB_SCHEMA, ("host_bucket",)),
    "policy": (POLICY_SCHEMA, ()),
    "counters": (COUNTERS_SCHEMA, ()),
    "content": (CONTENT_SCHEMA, ()),
    "neardup": (NEARDUP_SCHEMA, ()),
    "events": (EVENTS_SCHEMA, ("event_date",)),
    "rejected": (REJECTED_SCHEMA, ("segment",)),
    "domainlinks": (DOMAINLINKS_SCHEMA, ()),
    "hostparams": (HOSTPARAMS_SCHEMA, ()),
}
# Table properties: set when a table is created, and added to a table an
# older trawl created the first time a job opens it. The tables that hold
# registered domains record the rule they follow; one without it is migrated
# before it gets it (``trawl.store.domainrule``).
TABLE_PROPERTIES: dict[str, dict[str, str]] = {
    "events": {"delta.enableChangeDataFeed": "true"},  # consumers read increments
    **{name: domainrule.domain_rule_properties(name) for name in domainrule.DOMAIN_TABLES},
}
# The tables that take a MERGE every cycle, each touching a small share of
# their rows (``use_deletion_vectors``).
MERGED_TABLES = ("crawldb", "hostdb")
_WITH_VECTORS: set[str] = set()
SEGMENT_TABLES: dict[str, StructType] = {
    "fetchlist": FETCHLIST_SCHEMA,
    "fetch": FETCH_SCHEMA,
}


# Tables this driver process has created or seen: createIfNotExists reads the
# Delta log each time, and jobs ask for the same tables many times.
_ENSURED: set[str] = set()
# Crawl roots (as the jobs name them) with how delta-rs reaches them.
_ROOTS: dict[str, CrawlRoot] = {}


def table_path(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def segment_path(root: str, segment: str, name: str = "") -> str:
    base = f"{root.rstrip('/')}/segments/{check_segment_id(segment)}"
    return f"{base}/{name}" if name else base


def _files(root: str) -> CrawlRoot | None:
    """The crawl root for delta-rs: the one a job registered (``ensure_all``
    with ``files``: an object store needs its ``[storage]``), else a local
    root as it is; None when only Spark can reach it."""
    known = _ROOTS.get(root.rstrip("/"))
    if known is not None:
        return known
    try:
        files = CrawlRoot.of(root)
    except (StoreError, ValueError):  # a scheme only Spark's connectors know
        return None
    return files if files.s3 is None else None


def ensure_table(spark: SparkSession, root: str, name: str) -> str:
    """Create the table from its schema if it does not exist; return its path.
    Through delta-rs when it can reach the root (milliseconds, no Spark
    job), else through Spark; a table from an older trawl gains the columns
    and properties added since, through Spark (rare: once per upgrade), and
    its registered domains are migrated first when it has them
    (``_upgrade``)."""
    schema, partitions = TABLES[name]
    path = table_path(root, name)
    if path in _ENSURED:
        return path
    wanted = TABLE_PROPERTIES.get(name, {})
    files = _files(root)
    state = None
    if files is not None:
        try:
            state = deltars.ensure(files, name, schema, partitions, wanted)
        except deltars.SmallTableError:
            state = None
    if state is not None:
        have, properties = state
        _add_columns(spark, path, [f for f in schema.fields if f.name not in have])
        _upgrade(spark, root, name, properties)
    else:
        _ensure_with_spark(spark, root, name)
    _ENSURED.add(path)
    return path


def _upgrade(spark: SparkSession, root: str, name: str, properties: Mapping[str, str]) -> None:
    """Give an existing table the properties it lacks; one whose registered
    domains follow the previous rule is migrated before it is marked (the
    mark comes last, so a job that dies in between migrates again). A table
    that has them all costs nothing here: ``properties`` come with its log."""
    wanted = TABLE_PROPERTIES.get(name, {})
    missing = {k: v for k, v in wanted.items() if properties.get(k) != v}
    if domainrule.needs_migration(name, properties):
        domainrule.migrate(spark, name, table_path(root, name), table_path(root, "crawldb"))
    if missing:
        _set_properties(spark, table_path(root, name), missing)


def _ensure_with_spark(spark: SparkSession, root: str, name: str) -> None:
    from delta.tables import DeltaTable

    schema, partitions = TABLES[name]
    path = table_path(root, name)
    if DeltaTable.isDeltaTable(spark, path):
        _add_missing_columns(spark, path, schema)
        if TABLE_PROPERTIES.get(name):
            _upgrade(spark, root, name, _detail(spark, path)[0])
        return
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if partitions:
        builder = builder.partitionedBy(*partitions)
    for key, value in TABLE_PROPERTIES.get(name, {}).items():
        builder = builder.property(key, value)
    builder.execute()


def _add_missing_columns(spark: SparkSession, path: str, schema: StructType) -> None:
    """A table written by an older trawl gains the columns added since (null
    in old rows); nothing is rewritten or dropped."""
    have = set(spark.read.format("delta").load(path).columns)
    _add_columns(spark, path, [f for f in schema.fields if f.name not in have])


def _add_columns(spark: SparkSession, path: str, missing: list[StructField]) -> None:
    if missing:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({columns})")


def _detail(spark: SparkSession, path: str) -> tuple[dict[str, str], int]:
    """A table's properties and size in bytes, from its Delta log."""
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    return dict(row["properties"] or {}), int(row["sizeInBytes"] or 0)


def _set_properties(spark: SparkSession, path: str, wanted: dict[str, str]) -> None:
    pairs = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(wanted.items()))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({pairs})")


def use_deletion_vectors(
    spark: SparkSession, root: str, name: str, min_bytes: float, files: CrawlRoot | None = None
) -> bool:
    """Turn Delta's deletion vectors on for table ``name`` once it holds
    ``min_bytes`` (never when negative); True when they are on. With them a
    MERGE marks the rows it replaces in a small side file and writes only the
    changed rows, instead of rewriting every file it touches -- with one file
    per host bucket, the whole table each cycle, as Nutch rewrites its
    CrawlDb. On a small table the rewrite is cheap and the vectors cost more
    (a MERGE and each read run more Spark jobs), hence the threshold. Once
    on, they stay on. Not Delta's auto compaction: it fires after MERGEs that
    leave vectors and rewrites the whole bucket (``compact`` is explicit).

    With ``files`` (the same root), the size and properties come from the
    Delta log through delta-rs, without a Spark job; Spark's ``DESCRIBE
    DETAIL`` is the fallback when delta-rs cannot open the table."""
    path = ensure_table(spark, root, name)
    if path in _WITH_VECTORS:
        return True
    if min_bytes < 0:
        return False
    state = None
    if files is not None:
        try:
            state = deltars.table_state(files, name)
        except deltars.SmallTableError:
            state = None
    properties, size = state if state is not None else _detail(spark, path)
    if properties.get("delta.enableDeletionVectors") != "true":
        if size < min_bytes:
            return False
        _set_properties(spark, path, {"delta.enableDeletionVectors": "true"})
    _WITH_VECTORS.add(path)
    return True


def ensure_all(
    spark: SparkSession,
    root: str,
    vectors_min_bytes: float | None = None,
    files: CrawlRoot | None = None,
) -> None:
    """Every table of the crawl exists; with ``vectors_min_bytes``, crawldb
    and hostdb also get deletion vectors once they hold that much
    (``use_deletion_vectors``, which reads their size from the Delta log
    each time: they grow every cycle).

    The first time in a process each table's log is read or its first
    commit written, and each size is a log replay: mostly driver work and
    small jobs, so the tables are done at once from a few threads (one
    Spark session takes jobs from many), the merged tables first."""

    if files is not None:
        _ROOTS[root.rstrip("/")] = files

    def ready(name: str) -> None:
        ensure_table(spark, root, name)
        if vectors_min_bytes is not None and name in MERGED_TABLES:
            use_deletion_vectors(spark, root, name, vectors_min_bytes, files)

    merged = [*MERGED_TABLES] if vectors_min_bytes is not None else []
    todo = merged + [n for n in TABLES if n not in merged and table_path(root, n) not in _ENSURED]
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="ensure-table") as pool:
        list(pool.map(ready, todo))


def read_table(spark: SparkSession, root: str, name: str) -> DataFrame:
    """Table ``name`` as it is now. A small one (``SMALL_ROWS`` rows
    in under ``SMALL_TABLE_BYTES``) is read by delta-rs and handed to Spark
    as Arrow: Spark's own read of a table that changed since it last looked
    replays its log and lists its files first, a second or more of jobs a
    read, against a tenth of that (``bench/bench_stages.py``). Either way
    the rows are the version current at the call."""
    path = ensure_table(spark, root, name)
    files = _files(root)
    if files is not None and path not in _WITH_VECTORS:
        try:
            rows = deltars.read_small(files, name, TABLES[name][0], SMALL_ROWS, SMALL_TABLE_BYTES)
        except deltars.SmallTableError:
            rows = None
        if rows is not None and not rows.num_rows:
            # PySpark cannot take an empty Arrow column of structs with timestamps
            return spark.createDataFrame([], TABLES[name][0])
        if rows is not None:
            return spark.createDataFrame(rows.combine_chunks())
    return spark.read.format("delta").load(path)


def read_existing(spark: SparkSession, root: str, name: str) -> DataFrame:
    """Table ``name`` as it is, for the commands that only read (``stats``,
    ``sql``, ``warc``, ``export``): never created, altered or upgraded. A
    table an older trawl never made reads as no rows, and the columns it
    lacks as nulls, as ``trawl.store.lake`` shows them."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    schema, _ = TABLES[name]
    path = table_path(root, name)
    files = _files(root)
    if files is not None and not files.names(f"{name}/_delta_log", ".json"):
        return spark.createDataFrame([], schema)
    try:
        frame = spark.read.format("delta").load(path)
    except AnalysisException:
        if files is not None:
            raise  # the log is there: a real error
        return spark.createDataFrame([], schema)  # a root only Spark reaches, no table
    have = set(frame.columns)
    missing = [F.lit(None).cast(f.dataType).alias(f.name) for f in schema if f.name not in have]
    return frame.select("*", *missing) if missing else frame


def delta_table(spark: SparkSession, root: str, name: str) -> DeltaTable:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, ensure_table(spark, root, name))


@dataclass(frozen=True)
class Merge:
    """A MERGE into one crawl table, as a value: a stage builds it (source
    rows, join condition, clauses), ``merge`` runs it. The target is
    aliased ``t`` and the source ``s``. Clauses apply in Delta's order: the
    first ``updates`` entry whose condition holds, else ``delete_matched``;
    for unmatched source rows the first ``inserts`` entry whose condition
    holds (its assignments, or every column when None)."""

    table: str
    source: DataFrame
    on: str
    updates: tuple[tuple[str | None, Assignments], ...] = ()
    delete_matched: bool = False
    inserts: tuple[tuple[str | None, Assignments | None], ...] = ()


def merge(spark: SparkSession, root: str, plan: Merge) -> None:
    """Run ``plan`` against its table under ``root`` (one commit): from the
    driver through delta-rs when the table and the source are small
    (``small_write``), else as Spark's MERGE."""
    faults.point(f"merge:{plan.table}")  # kill tests: the commit not made
    if _merged_small(spark, root, plan) is None:
        _spark_merge(spark, root, plan)
    faults.point(f"merged:{plan.table}")  # kill tests: made, and nothing after it


class Written(NamedTuple):
    """What a counted write wrote: its rows, and with a ``tally`` column how
    many of them hold each of its values."""

    rows: int
    tally: dict[str, int]


def merge_counted(spark: SparkSession, root: str, plan: Merge, tally: str = "") -> Written:
    """``merge``, with its source's rows counted (``Written``) where they
    are: the Arrow table the small path collects, else the source kept
    (``materialize``) for Spark's MERGE to read. A source of no rows makes
    no commit."""
    faults.point(f"merge:{plan.table}")
    small = _merged_small(spark, root, plan)
    if small is not None:
        written = _counted(small, tally)
    else:
        with _kept(plan.source) as kept:
            written = _counted(kept, tally)
            if written.rows:
                _spark_merge(spark, root, replace(plan, source=kept))
    faults.point(f"merged:{plan.table}")
    return written


@contextmanager
def _kept(df: DataFrame) -> Iterator[DataFrame]:
    """``df`` kept (``materialize``) for a count and a write, freed after."""
    kept = materialize(df)
    try:
        yield kept
    finally:
        release(kept)


def _counted(rows: pa.Table | DataFrame, tally: str) -> Written:
    """``rows`` counted: in all, and by the values of ``tally`` if named."""
    from pyspark.sql import DataFrame

    if isinstance(rows, DataFrame):
        if not tally:
            return Written(rows.count(), {})
        counts = {r[0]: int(r[1]) for r in rows.groupBy(tally).count().collect()}
    elif not tally:
        return Written(rows.num_rows, {})
    else:
        found = rows.column(tally).value_counts().to_pylist()
        counts = {item["values"]: int(item["counts"]) for item in found}
    return Written(sum(counts.values()), counts)


def _spark_merge(spark: SparkSession, root: str, plan: Merge) -> None:
    builder = delta_table(spark, root, plan.table).alias("t").merge(plan.source.alias("s"), plan.on)
    for condition, assignments in plan.updates:
        builder = builder.whenMatchedUpdate(condition=condition, set=dict(assignments))
    if plan.delete_matched:
        builder = builder.whenMatchedDelete()
    for condition, values in plan.inserts:
        if values is None:
            builder = builder.whenNotMatchedInsertAll(condition=condition)
        else:
            builder = builder.whenNotMatchedInsert(condition=condition, values=dict(values))  # type: ignore[arg-type]
    builder.execute()


def _merged_small(spark: SparkSession, root: str, plan: Merge) -> pa.Table | None:
    """``plan`` committed through delta-rs: its source's rows; None when
    not attempted (a big table or source, or an expression only Spark has)."""
    clauses = [*plan.updates, *plan.inserts]
    if any(not isinstance(v, str) for _, a in clauses for v in (a or {}).values()):
        return None  # a Spark Column: only Spark's MERGE takes it
    write = small_write(spark, root, plan.table, plan.source)
    if write is None:
        return None
    files, rows = write
    strings = [(c, None if a is None else {k: str(v) for k, v in a.items()}) for c, a in clauses]
    try:
        deltars.merge_arrow(
            files, plan.table, TABLES[plan.table][0], rows, plan.on, strings[: len(plan.updates)],
            plan.delete_matched, strings[len(plan.updates) :],
        )  # fmt: skip
    except deltars.SmallTableError:
        return None  # refused before its commit: Spark's MERGE does it
    return rows


# The small-table path (``trawl.store.deltars``): a read or write of a table
# of at most SMALL_ROWS rows in under SMALL_TABLE_BYTES of Parquet (by its
# Delta log), writing at most SMALL_ROWS rows, goes from the driver: delta-rs reads and commits,
# DuckDB computes a MERGE, and the rows reach Spark (or come from it) as Arrow.
# Spark's own read or commit of a table that changed since it last looked
# replays the log and lists the files first: 0.8 to 1.4 s each at any size
# here, against 0.12 to 0.33 s by this path at 2,000 to 20,000 rows and
# 0.74 s for a read (0.25 s for a MERGE) at 100,000 rows, where the two meet
# (``bench/bench_small_path.py``). A bigger table or write goes through
# Spark, which scales out; deletion vectors (on for crawldb and hostdb only
# far above this size) keep a table on Spark for good.
SMALL_TABLE_BYTES = 16 * 2**20
SMALL_ROWS = 100_000


def small_write(
    spark: SparkSession, root: str, name: str, rows: DataFrame
) -> tuple[CrawlRoot, pa.Table] | None:
    """The root for delta-rs and ``rows`` on the driver, when a write of
    ``rows`` to table ``name`` takes the small-table path; None when it
    does not (``rows`` then computed no further than its first
    ``SMALL_ROWS + 1``)."""
    files = _files(root)
    path = ensure_table(spark, root, name)
    if files is None or path in _WITH_VECTORS:
        return None
    try:
        if not deltars.is_small(files, name, SMALL_ROWS, SMALL_TABLE_BYTES):
            return None
    except deltars.SmallTableError:
        return None
    collected = rows.limit(SMALL_ROWS + 1).toArrow()
    if collected.num_rows > SMALL_ROWS:
        return None
    return files, collected


def append_rows(df: DataFrame, root: str, name: str) -> int:
    """Append ``df`` to table ``name`` (one commit), in the table's column
    order, through delta-rs when small (``small_write``); how many rows
    (none: no commit), counted where they are (``merge_counted``)."""
    schema, _ = TABLES[name]
    path = ensure_table(df.sparkSession, root, name)
    small = _wrote_small(df, root, name)
    if small is not None:
        return int(small.num_rows)
    with _kept(df.select(*schema.fieldNames())) as kept:
        rows = kept.count()
        if rows:
            kept.write.format("delta").mode("append").save(path)
    return rows


def _wrote_small(df: DataFrame, root: str, name: str, where: str | None = None) -> pa.Table | None:
    """``df`` appended to table ``name`` (or replacing its rows matching
    ``where``) through delta-rs: the rows written; None when not attempted."""
    small = small_write(df.sparkSession, root, name, df)
    if small is None:
        return None
    try:
        deltars.write_arrow(small[0], name, small[1], TABLES[name][0], where)
    except deltars.SmallTableError:
        return None  # refused before its commit: Spark writes it
    return small[1]


def read_seed_lines(
    spark: SparkSession, seed_paths: Sequence[str], sitemap_paths: Sequence[str] = ()
) -> DataFrame:
    """The lines of seed files (``value``), with ``sitemap`` true for the
    files given as sitemap lists (``--sitemaps``)."""
    from pyspark.sql import functions as F

    lines = None
    for paths, sitemap in ((seed_paths, False), (sitemap_paths, True)):
        if paths:
            part = spark.read.text(list(paths)).withColumn("sitemap", F.lit(sitemap))
            lines = part if lines is None else lines.unionByName(part)
    if lines is None:
        raise ValueError("nothing to inject: give seed files or --sitemaps files")
    return lines


# A segment table is complete once this file is in its folder (see
# ``write_segment_table``); Parquet readers skip names starting with "_".
SEGMENT_COMPLETE = "_TRAWL_COMPLETE"


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """``path``'s Hadoop file system (the one Spark writes through) and path."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    return jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), jpath


def write_segment_table(df: DataFrame, root: str, segment: str, name: str) -> str:
    """Replace the segment's table whole (idempotent re-runs).

    Plain Parquet, as Nutch's segments are plain files: a segment table is
    written once by one job and never merged into, so Delta's log, commit
    and snapshot (a few Spark jobs per write and per first read, seconds of
    every small cycle) buy nothing a marker does not. The marker
    (``SEGMENT_COMPLETE``) is removed first and written last: a run that
    dies half-way leaves a folder without it, which ``segment_exists`` does
    not count and the re-run replaces. A segment written by an older trawl
    as a Delta table is read as one and replaced the same way."""
    spark = df.sparkSession
    schema = SEGMENT_TABLES[name]
    path = segment_path(root, segment, name)
    fs, folder = _hadoop_path(spark, path)
    marker = folder.suffix(f"/{SEGMENT_COMPLETE}")
    fs.delete(marker, False)
    ordered = df.select(*[f.name for f in schema.fields])
    ordered.write.mode("overwrite").parquet(path)
    faults.point(f"unmarked:{name}")  # kill tests: the files written, no marker yet
    out = fs.create(marker, True)
    out.write(bytearray(f'{{"table": "{name}", "format": "parquet"}}\n', "ascii"))
    out.close()
    return path


def read_segment_table(spark: SparkSession, root: str, segment: str, name: str) -> DataFrame:
    """A segment's table; one written by an older trawl (a Delta table, or
    one without the columns added since) reads with those columns as nulls
    (a segment fetched before an upgrade still goes through updatedb)."""
    from pyspark.sql import functions as F

    path = segment_path(root, segment, name)
    schema = SEGMENT_TABLES.get(name)
    if schema is None or _segment_format(spark, path) == "delta":
        frame = spark.read.format("delta").load(path)
    else:
        # the schema given: no job to read it from the files' footers, and
        # a column an older file lacks reads as null
        frame = spark.read.schema(schema).parquet(path)
    have = set(frame.columns)
    for missing in (f for f in (schema.fields if schema else []) if f.name not in have):
        frame = frame.withColumn(missing.name, F.lit(None).cast(missing.dataType))
    return frame


def _segment_format(spark: SparkSession, path: str) -> str | None:
    """How a segment table was written whole: "parquet" (its marker),
    "delta" (a first commit: an older trawl's segment), None (not, or not
    yet: no table)."""
    fs, folder = _hadoop_path(spark, path)
    if fs.exists(folder.suffix(f"/{SEGMENT_COMPLETE}")):
        return "parquet"
    if fs.exists(folder.suffix("/_delta_log/00000000000000000000.json")):
        return "delta"
    return None


def segment_exists(spark: SparkSession, root: str, segment: str, name: str) -> bool:
    """The segment's table was written whole."""
    return _segment_format(spark, segment_path(root, segment, name)) is not None


def fetched_segments(spark: SparkSession, root: str, wanted: Sequence[str] = ()) -> list[str]:
    """The segments of ``wanted`` (default: all) that have a fetch table;
    ValueError naming those that do not, or when there is none."""
    segments = list(wanted) or list_segments(spark, root)
    fetched = [s for s in segments if segment_exists(spark, root, s, "fetch")]
    missing = sorted(set(wanted) - set(fetched))
    if missing:
        raise ValueError(f"no fetched segment {', '.join(missing)} under {root}")
    if not fetched:
        raise ValueError(f"no fetched segments under {root}")
    return fetched


def read_segments(spark: SparkSession, root: str, segments: Sequence[str], name: str) -> DataFrame:
    """Table ``name`` of every one of ``segments`` (which have it), as one
    frame with a ``segment`` column."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = [
        read_segment_table(spark, root, s, name).withColumn("segment", F.lit(s)) for s in segments
    ]
    return reduce(lambda a, b: a.unionByName(b), frames)


def list_segments(spark: SparkSession, root: str) -> list[str]:
    """Segment ids under the root, oldest first (ids sort by time)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(f"{root.rstrip('/')}/segments")
    fs = path.getFileSystem(hadoop_conf)
    if not fs.exists(path):
        return []
    return sorted(
        status.getPath().getName() for status in fs.listStatus(path) if status.isDirectory()
    )


def write_counters(
    root: CrawlRoot, segment: str, job: str, counters: Sequence[tuple[str, int]]
) -> None:
    """Replace this (segment, job)'s counters, in one commit: re-runs do not
    double them. Through delta-rs (a few rows the driver holds; no Spark
    job), see ``trawl.store.deltars``."""
    check_segment_id(segment)
    rows = [(segment, job, name, int(value)) for name, value in counters]
    deltars.replace_rows(root, "counters", rows, f"segment = '{segment}' AND job = '{job}'")


def counted(root: CrawlRoot, segment: str, job: str) -> bool:
    """Whether ``job`` has written its counters for ``segment`` (it finished)."""
    check_segment_id(segment)
    return bool(deltars.read_rows(root, "counters", segment=segment, job=job))


def replace_rows(
    df: DataFrame, root: str, name: str, where: str, rows: int | None = None, tally: str = ""
) -> Written | None:
    """Replace the rows of table ``name`` matching ``where`` by ``df`` (one
    commit): a re-run of the job that wrote them replaces, never appends.
    A small write goes through delta-rs (``small_write``). ``rows``:
    ``df``'s row count when the caller knows it; with none to write and
    none to replace there is nothing to commit. With ``tally`` (a column)
    the rows written are counted where they are (``merge_counted``) and
    returned; without it, nothing is counted (None)."""
    schema, _ = TABLES[name]
    spark = df.sparkSession
    path = ensure_table(spark, root, name)
    small = _wrote_small(df, root, name, where)
    if small is not None:
        return _counted(small, tally) if tally else None
    with _kept(df) if tally else nullcontext(df) as source:
        written = _counted(source, tally) if tally else None
        if written is not None:
            rows = written.rows
        if rows == 0 and read_table(spark, root, name).filter(where).isEmpty():
            return written
        ordered = source.select(*[f.name for f in schema.fields])
        ordered.write.format("delta").mode("overwrite").option("replaceWhere", where).save(path)
    return written


def compact(spark: SparkSession, root: str, name: str) -> dict[str, int]:
    """OPTIMIZE one table (bin-packing per partition): the small files that
    MERGEs and per-segment writes leave are folded into larger ones, and a
    file rewritten drops its deletion vector (the rows it marked are gone
    for good). Readers see the same rows; ``VACUUM`` later frees the old
    files once no reader needs that version. Returns the files and bytes
    removed and added."""
    metrics = delta_table(spark, root, name).optimize().executeCompaction().collect()[0]["metrics"]
    m = metrics.asDict(recursive=True)
    return {
        "files_removed": int(m.get("numFilesRemoved") or 0),
        "files_added": int(m.get("numFilesAdded") or 0),
        "bytes_removed": int((m.get("filesRemoved") or {}).get("totalSize") or 0),
        "bytes_added": int((m.get("filesAdded") or {}).get("totalSize") or 0),
        "deletion_vectors_removed": int(
            (m.get("deletionVectorStats") or {}).get("numDeletionVectorsRemoved") or 0
        ),
    }
