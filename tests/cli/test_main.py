"""``trawl.cli.main`` without Spark: config errors and missing inputs as clear errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from trawl.cli import main


def test_bad_config_override_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--set", "fetch.nope=1"]) == 2
    assert "unknown config key fetch.nope" in capsys.readouterr().err


def test_missing_seed_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trawl.config import Config
    from trawl.runner import JobContext, run_inject

    ctx = JobContext(None, Config(), str(tmp_path), "s1", datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(FileNotFoundError, match="seed file not found"):
        run_inject(ctx, [str(tmp_path / "nope.txt")])
