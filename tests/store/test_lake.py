"""The JVM-free reader (``trawl.store.lake``) and the streamed writers
(``trawl.report.write_batches``), on crawl roots made here with delta-rs and
pyarrow: no Spark. The same queries on both engines over a real crawl are in
``tests/test_cycle.py``."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from trawl.config import load_config
from trawl.report import OutputError, write_batches
from trawl.sql import lake_batches, lake_stats
from trawl.store.files import CrawlRoot
from trawl.store.lake import NoCrawl, QueryError, open_lake, quote_tables, require_crawl
from trawl.store.schemas import CRAWLDB_SCHEMA, FETCH_SCHEMA, arrow_schema
from trawl.store.tables import SEGMENT_COMPLETE

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _crawldb_rows(n: int, drop: tuple[str, ...] = ()) -> pa.Table:
    schema = arrow_schema(CRAWLDB_SCHEMA)
    rows = [
        {"url": f"http://h{i % 3}.test/{i}", "host": f"h{i % 3}.test", "host_bucket": i % 3,
         "domain": f"h{i % 3}.test", "status": "fetched" if i % 2 else "unfetched",
         "source": "seed" if i < 3 else "outlink", "depth": 0 if i < 3 else 1, "fetches": i % 2,
         "pattern": "/N"}
        for i in range(n)
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=schema)
    return table.drop_columns(list(drop)) if drop else table


def _segment(root: Path, segment: str, rows: list[dict[str, object]], complete: bool) -> None:
    folder = root / "segments" / segment / "fetch"
    folder.mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(rows, schema=arrow_schema(FETCH_SCHEMA)), folder / "part-0.parquet"
    )
    if complete:
        (folder / SEGMENT_COMPLETE).write_text('{"table": "fetch", "format": "parquet"}\n')


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An older trawl's crawl: crawldb without the ``pattern`` column, no
    hostdb or rejected table at all, two complete segments and one whose
    write did not finish."""
    crawl = tmp_path / "crawl"
    write_deltalake(str(crawl / "crawldb"), _crawldb_rows(10, drop=("pattern",)),
                    partition_by=["host_bucket"])  # fmt: skip
    page = {"kind": "page", "url": "http://h0.test/", "host": "h0.test", "outcome": "success"}
    _segment(crawl, "20261130T120000Z", [page, {**page, "kind": "robots"}], complete=True)
    _segment(crawl, "20261130T130000Z", [page], complete=True)
    _segment(crawl, "20261130T140000Z", [page] * 5, complete=False)
    return crawl


def test_a_root_without_crawldb_is_no_crawl_and_stays_untouched(tmp_path: Path) -> None:
    typo = tmp_path / "crawl-typo"
    with pytest.raises(NoCrawl, match="no crawl at"):
        require_crawl(CrawlRoot.of(str(typo)))
    with pytest.raises(NoCrawl):
        open_lake(CrawlRoot.of(str(typo)))
    assert not typo.exists()


def test_an_older_crawl_reads_with_todays_columns_and_writes_nothing(root: Path) -> None:
    before = sorted(str(p) for p in root.rglob("*"))
    lake = open_lake(CrawlRoot.of(str(root)))
    try:
        rows = lake.rows("SELECT url, pattern FROM crawldb ORDER BY url")
        assert len(rows) == 10 and {r["pattern"] for r in rows} == {None}
        assert lake.rows("SELECT count(*) AS n FROM hostdb") == [{"n": 0}]
        assert lake.rows("SELECT * FROM rejected") == []
        # the unfinished segment is left out; the others carry their id
        fetched = lake.rows("SELECT segment, count(*) AS n FROM fetch GROUP BY 1 ORDER BY 1")
        assert fetched == [{"segment": "20261130T120000Z", "n": 2},
                           {"segment": "20261130T130000Z", "n": 1}]  # fmt: skip
        assert "fetchlist" not in lake.tables  # no segment has one
    finally:
        lake.close()
    assert sorted(str(p) for p in root.rglob("*")) == before


def test_a_bad_query_is_a_query_error_naming_the_cause(root: Path) -> None:
    lake = open_lake(CrawlRoot.of(str(root)))
    try:
        with pytest.raises(QueryError, match="nope"):
            lake.rows("SELECT nope FROM crawldb")
    finally:
        lake.close()


def test_stats_on_an_older_crawl(root: Path) -> None:
    stats = lake_stats(CrawlRoot.of(str(root)), load_config(None, [], environ={}), AT)
    assert stats["totals"] == [{"urls": 10, "hosts": 3, "domains": 3, "fetches": 5}]
    assert {r["status"]: r["urls"] for r in stats["by_status"]} == {"fetched": 5, "unfetched": 5}
    assert stats["rejected"] == [] and stats["segments"] == []
    domains = {r["domain"]: r for r in stats["domains"]}
    assert {r["named_hosts"] for r in domains.values()} == {1}  # each host has a seed
    assert {r["star_budget"] for r in domains.values()} == {20}  # nothing links in
    assert all(r["due"] == r["urls"] and r["deferred_why"] == [] for r in domains.values())


def test_limit_is_planned_into_the_query(root: Path) -> None:
    with lake_batches(CrawlRoot.of(str(root)), "SELECT url FROM crawldb", limit=3) as (s, got):
        assert s is not None and s.names == ["url"]
        assert sum(b.num_rows for b in got) == 3


@pytest.mark.parametrize(
    ("query", "quoted"),
    [
        ("SELECT * FROM fetch", 'SELECT * FROM "fetch"'),
        ("select fetch.url from FETCH join fetchlist l", 'select "fetch".url from "FETCH" join '
         "fetchlist l"),
        ("SELECT 'from fetch' AS s FROM fetch f", "SELECT 'from fetch' AS s FROM \"fetch\" f"),
        ('SELECT * FROM "fetch"', 'SELECT * FROM "fetch"'),
        ("SELECT * FROM t ORDER BY x FETCH FIRST 2 ROWS ONLY",
         "SELECT * FROM t ORDER BY x FETCH FIRST 2 ROWS ONLY"),
    ],
)  # fmt: skip
def test_reserved_table_names_are_quoted_outside_strings(query: str, quoted: str) -> None:
    assert quote_tables(query) == quoted


# -- the writers --------------------------------------------------------------------------

SCHEMA = pa.schema([("host", pa.string()), ("n", pa.int64()), ("links", pa.list_(pa.string())),
                    ("at", pa.timestamp("us", tz="UTC"))])  # fmt: skip


def _batches(n: int, size: int) -> list[pa.RecordBatch]:
    rows = [{"host": f"h{i}.test", "n": i, "links": [f"/{i}"], "at": AT} for i in range(n)]
    return [
        pa.RecordBatch.from_pylist(rows[i : i + size], schema=SCHEMA) for i in range(0, n, size)
    ]


class _Pipe(io.BytesIO):
    def isatty(self) -> bool:
        return False


def _written(fmt: str, n: int = 25, limit: int | None = None) -> tuple[int, bytes]:
    out = _Pipe()
    rows = write_batches(iter(_batches(n, 10)), fmt, out, limit, SCHEMA)
    return rows, out.getvalue()


def test_json_lines_and_csv_stream_with_a_limit() -> None:
    rows, data = _written("json", limit=12)
    lines = [json.loads(line) for line in data.decode().splitlines()]
    assert rows == 12 and [r["n"] for r in lines] == list(range(12))
    at = "2026-11-30T12:00:00+00:00"
    assert lines[0] == {"host": "h0.test", "n": 0, "links": ["/0"], "at": at}
    rows, data = _written("csv")
    table = list(csv.reader(io.StringIO(data.decode())))
    assert rows == 25 and table[0] == ["host", "n", "links", "at"] and len(table) == 26
    assert table[1][2] == '["/0"]'


def test_parquet_keeps_types_and_refuses_a_terminal() -> None:
    rows, data = _written("parquet", limit=15)
    back = pq.read_table(io.BytesIO(data))
    assert rows == 15 and back.num_rows == 15 and back.schema.equals(SCHEMA)

    class Terminal(_Pipe):
        def isatty(self) -> bool:
            return True

    with pytest.raises(OutputError, match="--out"):
        write_batches(iter(_batches(3, 3)), "parquet", Terminal(), None, SCHEMA)
    empty = _Pipe()
    assert write_batches(iter(()), "parquet", empty, None, SCHEMA) == 0
    assert pq.read_table(io.BytesIO(empty.getvalue())).schema.equals(SCHEMA)


def test_the_table_format_sets_widths_from_the_first_rows() -> None:
    rows, data = _written("table", n=3)
    lines = data.decode().splitlines()
    assert rows == 3 and lines[0].split() == ["host", "n", "links", "at"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split()[:2] == ["h0.test", "0"]
    assert write_batches(iter(()), "table", _Pipe(), None, SCHEMA) == 0
