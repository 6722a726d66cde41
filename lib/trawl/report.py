"""Printing results: a readable table, or JSON lines with ``--json``."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, TextIO


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "nan"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[_cell(row.get(c)) for c in cols] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, rule, *body])


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
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
            stream.write(json.dumps(dict(row), default=_json_default, sort_keys=False) + "\n")
        return
    if title:
        stream.write(f"\n{title}\n")
    stream.write(format_table(rows) + "\n")
