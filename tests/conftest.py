"""Shared fixtures: one Spark session for the whole run, or for each of
pytest-xdist's workers (scripts/test.sh starts one a core; local[2], few
shuffle partitions, UI off, Delta on), started only by tests that ask for it,
and the path of the conformance corpora beside the project."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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

    # One JVM serves some 2,700 tests: the blocks earlier modules cached or
    # checkpointed pile up in it, and blocks under spark.memory.storageFraction
    # of the unified region cannot be evicted, so at the default 1 GiB a late
    # crawl (the seeded estate's 3,000 URLs) found no execution memory left
    # (UNABLE_TO_ACQUIRE_MEMORY). 2 GiB, and a smaller share kept for storage
    # (evicted blocks go to disk), give the whole run room.
    cfg = load_config(
        None,
        [
            "spark.master=local[2]",
            "spark.shuffle_partitions=2",
            "spark.log_level=ERROR",
            "spark.conf.spark.driver.memory=2g",
            "spark.conf.spark.memory.storageFraction=0.2",
        ],
    )
    session = build_spark(cfg)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _small_jobs(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test on the shared session runs with Spark's settings for a small
    job (``SMALL_JOB_CONF``: one shuffle partition, no adaptive execution or
    broadcasts, expressions interpreted), as trawl's runner runs every job
    of a small crawl: a test's frames are a few rows, and Spark's defaults
    cost them seconds apiece (generate's ranking of 85 due URLs, warm:
    2.5 to 4.7 s against 1.4 to 1.9 s). A test marked ``spark_defaults``
    keeps the session's own settings, as a big crawl's jobs do; crawls that
    a module fixture starts through the runner choose their settings as it
    does (``tests/test_conftest.py``)."""
    if "spark" not in request.fixturenames or request.node.get_closest_marker("spark_defaults"):
        yield
        return
    from trawl.store.session import SMALL_JOB_CONF, session_conf

    with session_conf(request.getfixturevalue("spark"), SMALL_JOB_CONF):
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts Spark is a slow one: mark it ``crawl`` as well, so
    ``pytest -m "not crawl"`` leaves out every test that needs the JVM, not
    only the modules that say ``pytestmark = pytest.mark.crawl``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.crawl)


# --- an S3 server on loopback -------------------------------------------------------

# Credentials the S3 tests' clients sign with (the server accepts any). Set for
# the whole run before a JVM starts, since S3A reads the environment of the JVM
# it runs in; the secret is distinctive so a test can look for it in outputs.
S3_KEY_ID = "AKIATRAWLTESTKEY0001"
S3_SECRET = "trawl-test-secret-9c41b7e2d05a"


def pytest_configure(config: pytest.Config) -> None:
    import os

    os.environ["AWS_ACCESS_KEY_ID"] = S3_KEY_ID
    os.environ["AWS_SECRET_ACCESS_KEY"] = S3_SECRET
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role probes


@contextmanager
def moto_server(**env: str) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (installed by scripts/setup.sh), with
    ``env`` added to its environment; its endpoint URL."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ROOT / ".venv" / "bin" / "moto_server"
    command = [str(server)] if server.exists() else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen(
        [*command, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"moto's S3 server did not start on {endpoint}")
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """An S3 server for the whole run (any credentials accepted)."""
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def bucket(s3_server: str, request: pytest.FixtureRequest) -> str:
    """A new, empty bucket on the S3 server, named after the test."""
    import re

    import boto3

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"t-{name}-{id(request) % 100000}"
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    client.create_bucket(Bucket=name)
    return name
