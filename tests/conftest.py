"""Shared fixtures: one Spark session for the whole run (local[2], few
shuffle partitions, UI off, Delta on), started only by tests that ask for it,
and the path of the conformance corpora beside the project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT.parent / "shared" / "conformance"


@pytest.fixture(scope="session")
def conformance() -> Path:
    return CONFORMANCE


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from trawl.config import load_config
    from trawl.session import build_spark

    cfg = load_config(
        None, ["spark.master=local[2]", "spark.shuffle_partitions=2", "spark.log_level=ERROR"]
    )
    session = build_spark(cfg)
    yield session
    session.stop()
