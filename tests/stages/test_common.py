"""``stages.common.beside`` and ``concurrently``: independent actions side by
side, results in order, and no action left running when an error is raised."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from trawl.stages.common import beside, concurrently


def test_concurrently_runs_the_calls_at_once_and_keeps_their_order() -> None:
    barrier = threading.Barrier(3, timeout=5)  # broken unless all three run at once

    def call(value: int) -> int:
        barrier.wait()
        return value

    assert concurrently(lambda: call(1), lambda: call(2), lambda: call(3)) == [1, 2, 3]


def test_an_error_is_raised_only_once_every_call_has_finished() -> None:
    finished: list[str] = []

    def fails() -> None:
        raise ValueError("first")

    def slow() -> str:
        time.sleep(0.3)
        finished.append("slow")
        return "slow"

    with pytest.raises(ValueError, match="first"):
        concurrently(fails, slow)
    assert finished == ["slow"]


def test_leaving_beside_waits_for_what_was_submitted_even_on_error() -> None:
    finished: list[str] = []

    def side() -> None:
        time.sleep(0.3)
        finished.append("side")

    with pytest.raises(RuntimeError, match="main line"), beside() as pool:
        pool.submit(side)
        raise RuntimeError("main line failed")
    assert finished == ["side"]


def test_the_calls_run_with_the_callers_spark_local_properties(spark: Any) -> None:
    """A job a call starts on a helper thread carries what the caller set
    (its job group, description, scheduler pool, a bench's stage tag)."""
    sc = spark.sparkContext
    sc.setLocalProperty("trawl.test.tag", "stage-x")
    try:
        seen = concurrently(lambda: sc.getLocalProperty("trawl.test.tag"), lambda: 1)
    finally:
        sc.setLocalProperty("trawl.test.tag", None)
    assert seen == ["stage-x", 1]
