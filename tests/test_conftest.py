"""The suite's own fixtures: a test on the shared Spark session runs with
trawl's small-job settings unless marked ``spark_defaults`` (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from trawl.store.session import SMALL_JOB_CONF


def test_a_test_on_the_shared_session_runs_with_the_small_job_settings(spark: Any) -> None:
    for key, value in SMALL_JOB_CONF.items():
        assert spark.conf.get(key) == value, key


@pytest.mark.spark_defaults
def test_a_test_marked_spark_defaults_keeps_the_sessions_own(spark: Any) -> None:
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # the session's, in conftest
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"  # Spark's default


@pytest.fixture(scope="module")
def module_settings(spark: Any) -> str:
    return spark.conf.get("spark.sql.adaptive.enabled")


def test_a_module_fixture_sees_the_sessions_own_settings(module_settings: str, spark: Any) -> None:
    """A module's crawl fixture is set up before its first test's settings:
    the runner chooses a crawl's settings, as it does for a real one."""
    assert module_settings == "true"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
