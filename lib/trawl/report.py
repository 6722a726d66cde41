"""Printing results: a readable table, or JSON lines with ``--json``."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

if TYPE_CHECKING:
    import pyarrow as pa


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "nan"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    if not rows and not columns:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[_cell(row.get(c)) for c in cols] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, rule, *body])


def json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "replace")
    return str(value)


def emit(
    rows: Sequence[Mapping[str, Any]],
    as_json: bool,
    title: str | None = None,
    out: TextIO | None = None,
) -> None:
    """One JSON object per row with ``--json``; else a titled table."""
    stream = out or sys.stdout
    if as_json:
        for row in rows:
            stream.write(json.dumps(dict(row), default=json_default, sort_keys=False) + "\n")
        return
    if title:
        stream.write(f"\n{title}\n")
    stream.write(format_table(rows) + "\n")


# -- streamed results: trawl sql ----------------------------------------------------

FORMATS = ("table", "json", "csv", "parquet")
_TABLE_SAMPLE = 1000  # rows that set a streamed table's column widths


class OutputError(ValueError):
    """A result cannot go where it was sent (parquet to a terminal)."""


def _limited(batches: Iterable[pa.RecordBatch], limit: int | None) -> Iterator[pa.RecordBatch]:
    left = limit
    for batch in batches:
        if left is not None:
            if left <= 0:
                return
            if batch.num_rows > left:
                batch = batch.slice(0, left)
            left -= batch.num_rows
        if batch.num_rows:
            yield batch


def _plain(value: Any) -> Any:
    """A cell for CSV: nested values as JSON text."""
    if isinstance(value, list | dict):
        return json.dumps(value, default=json_default)
    return "" if value is None else _cell(value)


def write_batches(
    batches: Iterable[pa.RecordBatch],
    fmt: str,
    out: BinaryIO,
    limit: int | None = None,
    schema: pa.Schema | None = None,
) -> int:
    """Write a result as it streams, one batch at a time, never the whole of
    it in memory; returns the rows written. ``table``: a readable table
    whose column widths the first rows set; ``json``: one object per line;
    ``csv``: a header and rows; ``parquet``: a Parquet file (``schema``
    when no batch comes). ``limit``: at most this many rows."""
    if fmt not in FORMATS:
        raise ValueError(f"no output format {fmt!r} (one of {', '.join(FORMATS)})")
    rows = 0
    stream = _limited(batches, limit)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        if out.isatty():
            raise OutputError("parquet is not for a terminal: give --out FILE or redirect")
        first = next(stream, None)
        want = first.schema if first is not None else schema
        if want is None:
            raise OutputError("the statement returned no result to write as parquet")
        with pq.ParquetWriter(out, want) as writer:
            for batch in [first] if first is not None else []:
                writer.write_batch(batch)
                rows += batch.num_rows
            for batch in stream:
                writer.write_batch(batch)
                rows += batch.num_rows
        return rows
    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
    try:
        if fmt == "json":
            for batch in stream:
                for row in batch.to_pylist():
                    text.write(json.dumps(row, default=json_default) + "\n")
                    rows += 1
        elif fmt == "csv":
            writer = csv.writer(text, lineterminator="\n")
            names = schema.names if schema is not None else None
            for batch in stream:
                if names is None or rows == 0:
                    names = batch.schema.names
                    writer.writerow(names)
                writer.writerows([_plain(v) for v in r.values()] for r in batch.to_pylist())
                rows += batch.num_rows
            if rows == 0 and names is not None:
                writer.writerow(names)
        else:
            rows = _write_table(stream, text, schema)
    finally:
        text.flush()
        text.detach()
    return rows


def _write_table(stream: Iterator[pa.RecordBatch], text: TextIO, schema: pa.Schema | None) -> int:
    """The table format, streamed: widths from the first ``_TABLE_SAMPLE``
    rows; a longer cell later on widens its own line only."""
    head: list[dict[str, Any]] = []
    for batch in stream:
        head += batch.to_pylist()
        if len(head) >= _TABLE_SAMPLE:
            break
    if not head:
        text.write("(no rows)\n" if schema is None or not schema.names else
                   format_table([], schema.names) + "\n")  # fmt: skip
        return 0
    cols = list(head[0].keys())
    widths = [max(len(c), *(len(_cell(r.get(c))) for r in head)) for c in cols]

    def line(row: Mapping[str, Any]) -> str:
        cells = (_cell(row.get(c)).ljust(w) for c, w in zip(cols, widths, strict=True))
        return "  ".join(cells).rstrip() + "\n"

    text.write("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip() + "\n")
    text.write("  ".join("-" * w for w in widths) + "\n")
    rows = 0
    for row in head:
        text.write(line(row))
        rows += 1
    for batch in stream:
        for row in batch.to_pylist():
            text.write(line(row))
            rows += 1
    return rows
