"""The command line without Spark: parsing, config errors, help."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from trawl.cli import build_parser, main


def test_bad_config_override_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--set", "fetch.nope=1"]) == 2
    assert "unknown config key fetch.nope" in capsys.readouterr().err


def test_bad_at_is_rejected_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["generate", "--at", "yesterday"])
    assert exc.value.code == 2
    assert "ISO 8601" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["inject", "seeds.txt"], "inject"),
        (["cycle", "--cycles", "3", "--seeds", "a.txt", "b.txt"], "cycle"),
        (["sql", "SELECT 1"], "sql"),
        (["fetch", "--segment", "s1", "--time-limit", "5"], "fetch"),
        (["compact", "crawldb", "hostdb"], "compact"),
    ],
)
def test_commands_parse(argv: list[str], command: str) -> None:
    args = build_parser().parse_args(argv)
    assert args.command == command
    assert args.crawl == "crawl"


def test_compact_names_tables() -> None:
    assert build_parser().parse_args(["compact"]).tables == []
    assert build_parser().parse_args(["compact", "crawldb"]).tables == ["crawldb"]


def test_testweb_serves_the_traps_only_when_asked() -> None:
    assert build_parser().parse_args(["testweb", "--traps"]).traps is True
    assert build_parser().parse_args(["testweb"]).traps is False


def test_at_without_zone_is_utc() -> None:
    args = build_parser().parse_args(["generate", "--at", "2026-11-30T12:00:00"])
    assert args.at.utcoffset().total_seconds() == 0


def test_missing_seed_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trawl.config import Config
    from trawl.runner import run_inject
    from trawl.stages.common import StageContext

    ctx = StageContext(None, Config(), str(tmp_path), "s1", datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(FileNotFoundError, match="seed file not found"):
        run_inject(ctx, [str(tmp_path / "nope.txt")])
