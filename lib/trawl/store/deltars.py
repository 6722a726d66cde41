"""The small-table path: small crawl tables read and written from the driver
through deltalake (delta-rs), without a Spark job.

A Delta commit made by Spark costs a small crawl a second or more (a write
job, statistics, the commit and its checksum, then a log replay for the next
reader), and so does Spark's first read of a table after any commit; the
same commit or read of a few thousand rows by delta-rs costs tens of
milliseconds (``bench/bench_stages.py``). What goes this way: creating the
crawl's tables (``ensure``: ten empty tables in under 0.1 s, against about
ten seconds through Spark), the checks a job makes that they exist with
every column, the job counters (rows the driver holds), the size and
properties of crawldb and hostdb that ``use_deletion_vectors`` asks for
before every MERGE, and -- chosen by ``trawl.store.tables`` when the table
and the rows are small -- the reads (``read_small``), appends and replaces
(``write_arrow``) and MERGEs (``merge_arrow``) of every crawl table. A big
table or write stays with Spark.

Both writers must agree on the protocol. delta-rs creates the tables at
the lowest protocol their properties need, as Spark does: (1, 2) with no
table features, and (1, 4) for ``events`` (Change Data Feed, which Spark's
MERGEs then write); neither writer adds features on its own. Spark reads what
delta-rs commits (it lists the log for new versions), and delta-rs reads
Spark's checkpoints. A table delta-rs cannot open (a newer protocol, for
instance deletion vectors on an old delta-rs) raises :class:`SmallTableError`
and the caller falls back to Spark where it can.

Object-store roots use the same ``[storage]`` settings as the WARC files
(``S3Store.delta_options``); on S3, delta-rs commits with a conditional put,
so concurrent commits to one table cannot overwrite each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import types as T

from trawl.store.files import CrawlRoot
from trawl.store.schemas import COUNTERS_SCHEMA, arrow_schema

__all__ = [
    "SmallTableError",
    "ensure",
    "is_small",
    "merge_arrow",
    "read_rows",
    "read_small",
    "replace_rows",
    "table_state",
    "write_arrow",
]

# The tables whose rows this path writes, with their Spark schemas.
SCHEMAS: dict[str, T.StructType] = {"counters": COUNTERS_SCHEMA}


class SmallTableError(RuntimeError):
    """delta-rs could not read or write a table (the message says which and why)."""


def _failed(verb: str, uri: str, exc: BaseException) -> SmallTableError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return SmallTableError(f"cannot {verb} the Delta table at {uri}: {first}")


def _open(root: CrawlRoot, name: str) -> DeltaTable | None:
    uri = root.delta_uri(name)
    try:
        return DeltaTable(uri, storage_options=root.delta_options())
    except TableNotFoundError:
        return None
    except Exception as exc:  # delta-rs raises several kinds (protocol, I/O, parse)
        raise _failed("open", uri, exc) from exc


def ensure(
    root: CrawlRoot,
    name: str,
    schema: T.StructType,
    partitions: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Create table ``name`` from ``schema`` when it does not exist; its
    columns and properties as they are now (an older table may lack some).
    Two runs creating it at once both succeed: the second finds it made.

    delta-rs takes only the ``delta.*`` properties it knows at creation, so
    trawl's own (``trawl.domain_rule``) follow in a second commit."""
    table = _open(root, name)
    if table is None:
        uri = root.delta_uri(name)
        wanted = dict(properties or {})
        delta = {k: v for k, v in wanted.items() if k.startswith("delta.")}
        try:
            made = DeltaTable.create(
                uri,
                arrow_schema(schema),
                partition_by=list(partitions) or None,
                mode="ignore",
                configuration=delta or None,
                storage_options=root.delta_options(),
            )
            own = {k: v for k, v in wanted.items() if k not in delta}
            if own:
                made.alter.set_table_properties(own, raise_if_not_exists=False)
        except Exception as exc:  # lost a race to create it: open what the winner made
            if _open(root, name) is None:
                raise _failed("create", uri, exc) from exc
        table = _open(root, name)
        if table is None:
            raise SmallTableError(f"cannot create the Delta table at {uri}")
    uri = root.delta_uri(name)
    try:
        columns = [field.name for field in table.schema().fields]
        return columns, dict(table.metadata().configuration)
    except Exception as exc:
        raise _failed("read", uri, exc) from exc


def replace_rows(root: CrawlRoot, name: str, rows: Sequence[Sequence[Any]], where: str) -> None:
    """Replace the rows of table ``name`` that match ``where`` (a SQL
    predicate) by ``rows`` (tuples in schema order), in one commit: a job
    that runs again replaces what it wrote, never appends to it. The table
    is created when absent."""
    schema = arrow_schema(SCHEMAS[name])
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in schema]
    batch = pa.Table.from_arrays(
        [pa.array(list(col), type=f.type) for col, f in zip(columns, schema, strict=True)],
        schema=schema,
    )
    uri = root.delta_uri(name)
    try:
        if _open(root, name) is None:
            write_deltalake(uri, batch, mode="append", storage_options=root.delta_options())
        else:
            write_deltalake(
                uri, batch, mode="overwrite", predicate=where, storage_options=root.delta_options()
            )
    except SmallTableError:
        raise
    except Exception as exc:
        raise _failed("write", uri, exc) from exc


def write_arrow(
    root: CrawlRoot, name: str, rows: pa.Table, schema: T.StructType, where: str | None = None
) -> None:
    """Write ``rows`` (cast to ``schema``'s columns and types) to the
    existing table ``name`` in one commit: appended, or with ``where``
    replacing the rows that match it (none written and none matching: no
    commit)."""
    wanted = arrow_schema(schema)
    data = rows.select(wanted.names).cast(wanted)
    uri = root.delta_uri(name)
    table = _open(root, name)
    if table is None:
        raise SmallTableError(f"cannot write the Delta table at {uri}: it does not exist")
    before = table.version()
    try:
        if where is None:
            if data.num_rows:
                write_deltalake(table, data, mode="append")
        elif data.num_rows:
            write_deltalake(table, data, mode="overwrite", predicate=where)
        else:
            table.delete(where)  # commits only when some row matches
    except Exception as exc:
        if not _committed(root, name, before):
            raise _failed("write", uri, exc) from exc


# A MERGE clause: (condition or None, target column -> SQL expression; None
# for every column, on an insert)
Clause = tuple[str | None, Mapping[str, str] | None]


def merge_arrow(
    root: CrawlRoot,
    name: str,
    schema: T.StructType,
    source: pa.Table,
    on: str,
    updates: Sequence[Clause] = (),
    delete_matched: bool = False,
    inserts: Sequence[Clause] = (),
) -> None:
    """MERGE ``source`` (aliased ``s``) into the small table ``name`` (``t``,
    of ``schema``) on ``on``, in one commit, with the clauses in Delta's
    order: for a matched row the first of ``updates`` whose condition
    holds, else the delete; for a source row with no match, the first of
    ``inserts`` whose condition holds.

    The table's rows are merged in DuckDB (its ``MERGE INTO`` takes the
    same SQL as Spark's for what trawl writes) and committed by delta-rs:
    an insert-only MERGE appends the rows it inserts (so the Change Data
    Feed shows inserts only); any other that changes a row rewrites the
    table, which is small. Not delta-rs's own MERGE: it writes its string
    columns as Arrow string views, which readers of the lake then meet
    beside plain strings. An expression DuckDB cannot take raises
    :class:`SmallTableError` before anything is committed (the only error:
    the caller may write the same rows another way)."""
    if not source.num_rows:
        return  # no clause can change a row
    uri = root.delta_uri(name)
    table = _open(root, name)
    if table is None:
        raise SmallTableError(f"cannot merge into the Delta table at {uri}: it does not exist")
    wanted = arrow_schema(schema)
    inserting_only = not updates and not delete_matched
    if (
        not inserting_only
        and table.metadata().configuration.get("delta.enableChangeDataFeed") == "true"
    ):
        raise SmallTableError(f"cannot merge into {uri} here: its change feed needs Spark's MERGE")
    before = table.version()
    try:
        current = table.to_pyarrow_table(columns=wanted.names).select(wanted.names).cast(wanted)
        merged = _merged(current, source, on, updates, delete_matched, inserts)
        if merged is None:
            return
        rows, appended = merged
        rows = rows.select(wanted.names).cast(wanted)
        if appended:
            write_deltalake(table, rows, mode="append")
        else:
            write_deltalake(table, rows, mode="overwrite")
    except Exception as exc:
        if not _committed(root, name, before):
            raise _failed("merge into", uri, exc) from exc


def _merged(
    current: pa.Table,
    source: pa.Table,
    on: str,
    updates: Sequence[Clause],
    delete_matched: bool,
    inserts: Sequence[Clause],
) -> tuple[pa.Table, bool] | None:
    """The MERGE in DuckDB: (the rows inserted, True) for an insert-only
    one, else (every row after it, False); None when no row changed."""
    import duckdb

    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        con.register("_target", current)
        con.register("_source", source)
        con.execute("CREATE TABLE t AS SELECT *, false AS _inserted FROM _target")
        clauses = []
        for condition, assignments in updates:
            sets = assignments or {
                c: f"s.{c}" for c in current.column_names if c in source.column_names
            }
            pairs = ", ".join(f'"{c}" = {e}' for c, e in sets.items())
            clauses.append(f"WHEN MATCHED{_and(condition)} THEN UPDATE SET {pairs}")
        if delete_matched:
            clauses.append("WHEN MATCHED THEN DELETE")
        for condition, values in inserts:
            given = values or {
                c: f"s.{c}" for c in current.column_names if c in source.column_names
            }
            columns = ", ".join(f'"{c}"' for c in [*given, "_inserted"])
            exprs = ", ".join([*given.values(), "true"])
            clauses.append(
                f"WHEN NOT MATCHED{_and(condition)} THEN INSERT ({columns}) VALUES ({exprs})"
            )
        changed = con.execute(
            f"MERGE INTO t USING _source AS s ON {on} {' '.join(clauses)}"
        ).fetchone()
        if not changed or not changed[0]:
            return None
        if not updates and not delete_matched:
            inserted = con.sql("SELECT * EXCLUDE (_inserted) FROM t WHERE _inserted")
            return inserted.to_arrow_table(), True
        return con.sql("SELECT * EXCLUDE (_inserted) FROM t").to_arrow_table(), False
    finally:
        con.close()


def _and(condition: str | None) -> str:
    return f" AND ({condition})" if condition else ""


def _committed(root: CrawlRoot, name: str, before: int) -> bool:
    """Whether table ``name`` has a commit after version ``before``: a write
    that failed after its commit (in a post-commit hook, such as the
    checkpoint) is done, and must not be made again by another writer."""
    try:
        table = _open(root, name)
    except SmallTableError:
        return False
    return table is not None and table.version() > before


def read_rows(root: CrawlRoot, name: str, **equal: str) -> list[dict[str, Any]]:
    """The rows of table ``name`` whose columns equal the given values
    (none when the table does not exist)."""
    table = _open(root, name)
    if table is None:
        return []
    uri = root.delta_uri(name)
    try:
        dataset = table.to_pyarrow_dataset()
        condition = None
        for column, value in equal.items():
            term = pc.field(column) == value
            condition = term if condition is None else condition & term
        return dataset.to_table(filter=condition).to_pylist()  # type: ignore[no-any-return]
    except Exception as exc:
        raise _failed("read", uri, exc) from exc


def is_small(root: CrawlRoot, name: str, max_rows: int, max_bytes: int) -> bool:
    """Whether table ``name`` exists and holds at most ``max_rows`` rows in
    under ``max_bytes`` of Parquet, by its Delta log, without deletion
    vectors (files that do not say how many rows they hold: not small)."""
    table = _open(root, name)
    return table is not None and _small(table, root.delta_uri(name), max_rows, max_bytes)


def _small(table: DeltaTable, uri: str, max_rows: int, max_bytes: int) -> bool:
    try:
        if table.metadata().configuration.get("delta.enableDeletionVectors") == "true":
            return False
        actions = pa.table(table.get_add_actions(flatten=True))
        if not actions.num_rows:
            return True
        if int(pc.sum(actions["size_bytes"]).as_py() or 0) >= max_bytes:
            return False
        records = actions["num_records"]
        return not records.null_count and int(pc.sum(records).as_py() or 0) <= max_rows
    except Exception as exc:
        raise _failed("read", uri, exc) from exc


def read_small(
    root: CrawlRoot, name: str, schema: T.StructType, max_rows: int, max_bytes: int
) -> pa.Table | None:
    """Every row of table ``name`` (in ``schema``'s columns and types) when
    it is small (``is_small``); None when it is not, or does not exist
    (then Spark reads it)."""
    table = _open(root, name)
    uri = root.delta_uri(name)
    if table is None or not _small(table, uri, max_rows, max_bytes):
        return None
    try:
        wanted = arrow_schema(schema)
        rows = table.to_pyarrow_table(columns=wanted.names)
        return rows.select(wanted.names).cast(wanted)
    except Exception as exc:
        raise _failed("read", uri, exc) from exc


def table_state(root: CrawlRoot, name: str) -> tuple[dict[str, str], int] | None:
    """Table ``name``'s properties and the bytes of its live data files,
    from its log alone (None when it does not exist)."""
    table = _open(root, name)
    if table is None:
        return None
    uri = root.delta_uri(name)
    try:
        properties = dict(table.metadata().configuration)
        actions = pa.table(table.get_add_actions(flatten=True))
        size = int(pc.sum(actions["size_bytes"]).as_py() or 0) if actions.num_rows else 0
    except Exception as exc:
        raise _failed("read", uri, exc) from exc
    return properties, size
