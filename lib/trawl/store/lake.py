"""The crawl's tables for SQL without a JVM: DuckDB over what delta-rs reads.

``trawl sql`` and ``trawl stats`` answer from here by default, in about a
second, local and object-store roots alike (Spark stays available with
``--engine spark``, for queries too big for one machine). Every table of
``TABLES`` is a view of its own name, and ``fetch`` / ``fetchlist`` are one
view each over every complete segment with a ``segment`` column, as
``trawl.store.views`` gives Spark.

- A Delta table is a lazy ``pyarrow`` dataset of its current version
  (delta-rs reads the log): DuckDB pushes filters and projections into it
  and streams. A table with deletion vectors, which that dataset cannot
  apply, is read whole through delta-rs's own scan instead.
- A segment table is the Parquet files under its completion marker
  (``SEGMENT_COMPLETE``); one an older trawl wrote as Delta reads through
  delta-rs. A folder without its marker is a write that did not finish and
  is left out, as Spark's readers leave it out.
- A table an older trawl made without some of today's columns shows them as
  nulls; a table it never made is empty. Nothing here creates, alters or
  upgrades a table: reads never write.

DuckDB reserves ``FETCH``: ``quote_tables`` quotes the table names in a
query, so the same SQL runs on both engines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from trawl.store.files import CrawlRoot
from trawl.store.schemas import arrow_schema
from trawl.store.tables import SEGMENT_COMPLETE, SEGMENT_TABLES, TABLES

if TYPE_CHECKING:
    import duckdb
    import pyarrow.dataset as ds
    from pyarrow import fs as pafs

__all__ = [
    "Lake", "NoCrawl", "QueryError", "crawl_exists", "open_lake", "quote_tables", "require_crawl",
]  # fmt: skip


class NoCrawl(ValueError):
    """The root holds no crawl (no crawldb): a typo, or the wrong folder."""


class QueryError(ValueError):
    """A query the engine refused (a syntax error, an unknown table or column)."""


def crawl_exists(root: CrawlRoot) -> bool:
    """Whether ``root`` holds a crawl: crawldb's Delta log has a commit."""
    return bool(root.names("crawldb/_delta_log", ".json"))


def require_crawl(root: CrawlRoot) -> None:
    if not crawl_exists(root):
        raise NoCrawl(
            f"no crawl at {root.uri} (no crawldb there): give --crawl the folder that "
            "holds crawldb/, hostdb/ and segments/"
        )


# A table name DuckDB's grammar reserves, where SQL names a table: after FROM
# or JOIN, or before a column (``fetch.url``).
_RESERVED = ("fetch",)
_STRING = re.compile(r"'(?:[^']|'')*'")


def quote_tables(query: str) -> str:
    """``query`` with the table names DuckDB reserves quoted where they name
    a table, outside string literals (``FROM fetch f`` -> ``FROM "fetch" f``)."""
    names = "|".join(_RESERVED)
    as_table = re.compile(rf"(?i)(\b(?:from|join)\s+)({names})\b(?!\s*\()")
    as_prefix = re.compile(rf"(?i)(?<![\w.\"])({names})(\.\w)")

    def fix(text: str) -> str:
        return as_prefix.sub(r'"\1"\2', as_table.sub(r'\1"\2"', text))

    out, last = [], 0
    for literal in _STRING.finditer(query):
        out += [fix(query[last : literal.start()]), literal.group(0)]
        last = literal.end()
    return "".join([*out, fix(query[last:])])


@dataclass
class Lake:
    """A DuckDB connection with the crawl's tables as views (``open_lake``)."""

    root: CrawlRoot
    con: duckdb.DuckDBPyConnection
    tables: list[str] = field(default_factory=list)

    def relation(self, query: str) -> duckdb.DuckDBPyRelation | None:
        """``query`` as a lazy relation (None for a statement with no rows)."""
        import duckdb

        try:
            return self.con.sql(quote_tables(query))
        except duckdb.Error as exc:
            raise QueryError((str(exc).strip().splitlines() or [type(exc).__name__])[0]) from exc

    def rows(self, query: str) -> list[dict[str, Any]]:
        """Every row of ``query`` (for small results: summaries)."""
        rel = self.relation(query)
        if rel is None:
            return []
        return rel.to_arrow_table().to_pylist()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.con.close()


def open_lake(root: CrawlRoot) -> Lake:
    """The crawl at ``root`` in an in-memory DuckDB (``NoCrawl`` without one)."""
    import duckdb

    require_crawl(root)
    # never fetch an extension at run time (nothing here needs one)
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    lake = Lake(root, con)
    for name, (schema, _) in TABLES.items():
        _register(con, name, _delta_source(root, name), arrow_schema(schema))
        lake.tables.append(name)
    segments = root.dirs("segments")
    filesystem, base = _arrow_fs(root)
    for name, schema in SEGMENT_TABLES.items():
        want = arrow_schema(schema)
        sources = _segment_sources(root, segments, name, want, filesystem, base)
        if sources:
            _register_union(con, name, sources, want)
            lake.tables.append(name)
    return lake


def _delta_source(root: CrawlRoot, rel: str) -> ds.Dataset | pa.Table | None:
    """A Delta table's current rows, lazily where delta-rs allows it."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(root.delta_uri(rel), storage_options=root.delta_options())
    except TableNotFoundError:
        return None
    protocol = table.protocol()
    if "deletionVectors" in (protocol.reader_features or []):
        return table.scan().read_all()  # the dataset cannot apply them
    return table.to_pyarrow_dataset()


def _register(con: duckdb.DuckDBPyConnection, name: str, source: Any, schema: pa.Schema) -> None:
    """View ``name`` over ``source`` with ``schema``'s columns: those the
    source lacks (an older table) are nulls, and no source is no rows."""
    empty = f"_empty_{name}"
    con.register(empty, schema.empty_table())
    if source is None:
        con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM {empty}')
        return
    con.register(f"_src_{name}", source)
    if set(schema.names) <= set(source.schema.names):
        con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM _src_{name}')
        return
    # BY NAME fills what the older table lacks, typed by today's schema
    con.execute(
        f'CREATE VIEW "{name}" AS SELECT * FROM {empty} UNION ALL BY NAME SELECT * FROM _src_{name}'
    )


def _register_union(
    con: duckdb.DuckDBPyConnection, name: str, sources: list[Any], schema: pa.Schema
) -> None:
    """View ``name`` over several sources, each with a ``segment`` column."""
    parts = []
    for i, source in enumerate(sources):
        con.register(f"_src_{name}_{i}", source)
        parts.append(f"SELECT * FROM _src_{name}_{i}")
    with_segment = pa.schema([*schema, pa.field("segment", pa.string())])
    con.register(f"_empty_{name}", with_segment.empty_table())
    union = " UNION ALL BY NAME ".join([f"SELECT * FROM _empty_{name}", *parts])
    con.execute(f'CREATE VIEW "{name}" AS {union}')


def _segment_sources(
    root: CrawlRoot,
    segments: list[str],
    name: str,
    schema: pa.Schema,
    filesystem: pafs.FileSystem,
    base: str,
) -> list[Any]:
    """The complete segments' table ``name``: one dataset over every Parquet
    segment (the segment from its folder's name), and one per older Delta
    segment."""
    import pyarrow.dataset as ds

    files: list[str] = []
    older: list[Any] = []
    for segment in segments:
        rel = f"segments/{segment}/{name}"
        found = root.names(rel)
        if SEGMENT_COMPLETE in found:
            files += [f"{base}/{rel}/{n}" for n in found if n.endswith(".parquet")]
        elif root.names(f"{rel}/_delta_log", ".json"):
            table = _delta_source(root, rel)
            if table is not None:
                older.append(_with_segment(table, segment))
    sources: list[Any] = older
    if files:
        with_segment = pa.schema([*schema, pa.field("segment", pa.string())])
        sources.insert(
            0,
            ds.dataset(
                files,
                schema=with_segment,
                format="parquet",
                filesystem=filesystem,
                partitioning=ds.DirectoryPartitioning(pa.schema([("segment", pa.string())])),
                partition_base_dir=f"{base}/segments",
            ),
        )
    return sources


def _with_segment(source: ds.Dataset | pa.Table, segment: str) -> pa.Table:
    table = source if isinstance(source, pa.Table) else source.to_table()
    return table.append_column("segment", pa.array([segment] * table.num_rows, pa.string()))


def _arrow_fs(root: CrawlRoot) -> tuple[pafs.FileSystem, str]:
    """The file system pyarrow reads the root's Parquet files through, and
    the root's path on it (an object store: ``bucket/prefix``, with the same
    ``[storage]`` settings as delta-rs and boto3)."""
    from pyarrow import fs as pafs

    if root.s3 is None:
        return pafs.LocalFileSystem(), str(root.local)
    s3 = root.s3
    options: dict[str, Any] = {"region": s3.region or "us-east-1"}
    if s3.endpoint:
        scheme, _, host = s3.endpoint.partition("://")
        options.update(endpoint_override=host or scheme, scheme=scheme if host else "https")
    options["force_virtual_addressing"] = not s3.path_style
    if s3.anonymous:
        options["anonymous"] = True
    _, _, rest = root.uri.partition("://")
    return pafs.S3FileSystem(**options), rest.rstrip("/")
