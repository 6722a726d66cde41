"""What every job shares: reading a small table once."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.runner import common
from trawl.runner.common import JobContext, read_whole, sized_job
from trawl.stages.common import release
from trawl.store.session import SMALL_JOB_CONF
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


def _ctx(spark: Any, root: Path, *sets: str) -> JobContext:
    cfg = load_config(None, list(sets), environ={})
    return JobContext(spark, cfg, str(root), "20261130T000000Z", datetime(2026, 11, 30, tzinfo=UTC))


def test_a_small_job_runs_with_the_small_settings_and_gives_the_sessions_back(
    spark: Any, tmp_path: Path
) -> None:
    ctx = _ctx(spark, tmp_path / "crawl", "spark.conf.spark.sql.adaptive.enabled=true")
    before = {k: spark.conf.get(k, None) for k in SMALL_JOB_CONF}
    seen: dict[str, str | None] = {}

    @sized_job()
    def job(ctx: JobContext) -> dict[str, Any]:
        seen.update({k: ctx.spark.conf.get(k, None) for k in SMALL_JOB_CONF})
        raise RuntimeError("the job failed")

    with pytest.raises(RuntimeError):
        job(ctx)
    # each setting of the profile, but the one the operator set in [spark.conf]
    assert seen == {**SMALL_JOB_CONF, "spark.sql.adaptive.enabled": before[
        "spark.sql.adaptive.enabled"]}  # fmt: skip
    # and the session's own settings back, though the job raised
    assert {k: spark.conf.get(k, None) for k in SMALL_JOB_CONF} == before


def test_a_job_is_small_by_crawldb_its_segment_table_and_its_input(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "crawl"
    ctx = _ctx(spark, root)
    assert common.is_small(ctx)  # no crawldb yet: nothing big to read
    ensure_table(spark, str(root), "crawldb")
    assert common.is_small(ctx) and common.is_small(ctx, "fetch")  # empty, no segment yet
    assert not common.is_small(ctx, input_bytes=common.SMALL_TABLE_BYTES)
    assert not common.is_small(_ctx(spark, root, "spark.small_jobs=false"))

    table = root / "segments" / ctx.segment / "fetch"
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"x" * 1000)
    monkeypatch.setattr(common, "SMALL_SEGMENT_BYTES", 1000)
    assert common.is_small(ctx, "fetchlist") and not common.is_small(ctx, "fetch")

    # crawldb's size is its Delta log's (the bytes of its live files)
    sizes = {"crawldb": common.SMALL_TABLE_BYTES - 1}
    monkeypatch.setattr(common.deltars, "table_state", lambda files, name: ({}, sizes[name]))
    assert common.is_small(ctx)
    sizes["crawldb"] = common.SMALL_TABLE_BYTES
    assert not common.is_small(ctx)


@pytest.mark.spark_defaults  # it compares with the session's own partition count
def test_a_small_job_over_a_segment_of_some_size_shuffles_to_a_partition_per_core(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "crawl"
    ctx = _ctx(spark, root)
    ensure_table(spark, str(root), "crawldb")
    monkeypatch.setattr(common, "SMALL_PARTITION_BYTES", 1000)
    table = root / "segments" / ctx.segment / "fetch"
    table.mkdir(parents=True)
    assert common.small_partitions(ctx) == common.small_partitions(ctx, "fetch") == 1
    seen: list[str | None] = []

    @sized_job("fetch")
    def job(ctx: JobContext) -> dict[str, Any]:
        seen.append(ctx.spark.conf.get("spark.sql.shuffle.partitions", None))
        return {}

    cores = spark.sparkContext.defaultParallelism
    assert cores == 2  # the tests' local[2]
    # one partition per 1000 bytes of the segment table, at most one per core
    for part, partitions in ((0, 1), (1, 1), (2, 2), (3, 2)):
        (table / f"part-{part}.parquet").write_bytes(b"x" * (999 if part == 0 else 1000))
        assert common.small_partitions(ctx, "fetch") == partitions
        job(ctx)
        assert seen[-1] == str(partitions)
    # a partition count the operator set in [spark.conf] stands: the session's
    for part in (2, 3):
        (table / f"part-{part}.parquet").unlink()
    session = spark.conf.get("spark.sql.shuffle.partitions")
    job(ctx)
    assert seen[-1] == "1" != session
    job(_ctx(spark, root, f"spark.conf.spark.sql.shuffle.partitions={session}"))
    assert seen[-1] == session


def test_inject_counts_its_local_seed_files_and_a_remote_one_as_big(tmp_path: Path) -> None:
    from trawl.runner.inject import seed_bytes

    (tmp_path / "a.txt").write_bytes(b"x" * 10)
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "b.txt").write_bytes(b"y" * 5)
    assert seed_bytes([str(tmp_path / "a.txt")]) == 10
    assert seed_bytes([str(tmp_path / "a.txt"), str(tmp_path / "more")]) == 15
    remote = seed_bytes([str(tmp_path / "a.txt"), "s3a://bucket/seeds.txt"])
    assert remote >= common.SMALL_TABLE_BYTES
