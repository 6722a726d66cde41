"""What every job shares: reading a small table once."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.runner import common
from trawl.runner.common import JobContext, read_whole
from trawl.stages.common import release
from trawl.store.tables import append_rows, ensure_table, read_table


def _plan_is_rows(frame: Any) -> bool:
    return bool(frame._jdf.queryExecution().analyzed().getClass().getSimpleName() == "LogicalRDD")


def test_a_small_table_is_read_once_and_a_big_one_stays_a_delta_scan(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "crawl")
    cfg = load_config(None, [], environ={})
    ctx = JobContext(spark, cfg, root, "20261130T000000Z", datetime(2026, 11, 30, tzinfo=UTC))
    ensure_table(spark, root, "hostparams")
    rows = spark.createDataFrame(
        [("a.example", "sid", "s0")], "host string, param string, segment string"
    )
    append_rows(rows, root, "hostparams")

    frame, held = read_whole(ctx, "hostparams")
    assert _plan_is_rows(frame) and held == [frame]
    assert frame.collect() == read_table(spark, root, "hostparams").collect()
    # the rows are the snapshot read: a later commit does not change them
    append_rows(rows, root, "hostparams")
    assert frame.count() == 1
    release(*held)

    monkeypatch.setattr(common, "SMALL_TABLE_BYTES", 1)
    frame, held = read_whole(ctx, "hostparams")
    assert not _plan_is_rows(frame) and held == []
    assert frame.count() == 2
