"""The small-table path: small crawl tables read and written from the driver
through deltalake (delta-rs), without a Spark job.

A Delta commit made by Spark costs a small crawl a second or more (a write
job, statistics, the commit and its checksum, then a log replay for the next
reader); the same commit of a few rows by delta-rs costs tens of
milliseconds (``bench/bench_stages.py``). What goes this way: creating the
crawl's tables (``ensure``: ten empty tables in under 0.1 s, against about
ten seconds through Spark), the checks a job makes that they exist with
every column, the job counters (rows the driver holds), and the size and
properties of crawldb and hostdb that ``use_deletion_vectors`` asks for
before every MERGE.

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
    "read_rows",
    "replace_rows",
    "table_state",
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
