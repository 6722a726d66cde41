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


@pytest.fixture(autouse=True)
def _no_proxy_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's servers are on loopback: a proxy the developer's shell
    sets (``trawl.config.proxy`` reads it) must not carry their requests."""
    for name in ("http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture(scope="session")
def conformance() -> Path:
    return CONFORMANCE


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from trawl.config import load_config
    from trawl.store.session import build_spark

    cfg = load_config(
        None, ["spark.master=local[2]", "spark.shuffle_partitions=2", "spark.log_level=ERROR"]
    )
    session = build_spark(cfg)
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts Spark is a slow one: mark it ``crawl`` as well, so
    ``pytest -m "not crawl"`` leaves out every test that needs the JVM, not
    only the modules that say ``pytestmark = pytest.mark.crawl``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.crawl)
