"""The command line's grammar without Spark: commands, arguments, ``--at``."""

from __future__ import annotations

from pathlib import Path

import pytest

from trawl.cli import build_parser


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


def test_the_demo_takes_its_web_size_and_cycles(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["demo"])
    assert (args.hosts, args.cycles) == (60, 2)
    assert build_parser().parse_args(["demo", "--hosts", "300"]).hosts == 300
    for bad in (["demo", "--hosts", "0"], ["demo", "--cycles", "x"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(bad)
        assert exit_.value.code == 2
    assert "at least 1" in capsys.readouterr().err


def test_export_wacz_takes_the_selection_flags_of_export_warc() -> None:
    flags = ["--segments", "s1", "s2", "--since", "2026-01-01", "--until", "2026-02-01",
             "--host", "a.test", "--domain", "b.test", "--status", "2xx",
             "--no-duplicates"]  # fmt: skip
    warc = build_parser().parse_args(["export", "warc", "--out", "folder", *flags])
    wacz = build_parser().parse_args(["export", "wacz", "--out", "x.wacz", *flags])
    keys = ("segments", "since", "until", "host", "domain", "status", "duplicates")
    assert {k: getattr(wacz, k) for k in keys} == {k: getattr(warc, k) for k in keys}
    assert wacz.export_kind == "wacz" and wacz.out == "x.wacz" and wacz.title is None
    assert wacz.duplicates is False


def test_demo_archive_turns_requisite_capture_on_unless_set(tmp_path: Path) -> None:
    from trawl.config import load_config
    from trawl.demo import crawl_config

    assert not build_parser().parse_args(["demo"]).archive
    assert build_parser().parse_args(["demo", "--archive"]).archive
    hosts = tmp_path / "hosts"
    assert not crawl_config(load_config(None, [], environ={}), hosts, []).requisites.capture
    assert crawl_config(load_config(None, [], environ={}), hosts, [], True).requisites.capture
    given = ["requisites.capture=false"]
    cfg = load_config(None, given, environ={})
    assert not crawl_config(cfg, hosts, given, True).requisites.capture


def test_the_demo_plans_as_much_per_host_as_its_fetch_has_time_for(tmp_path: Path) -> None:
    """generate's fetch window follows the demo's fetch time limit (or the
    user's), so the cycle's fetch is not cut off by its own limit; either
    setting given by the user stays as given."""
    from trawl.config import load_config
    from trawl.demo import DEMO_FETCH_S, crawl_config

    hosts = tmp_path / "hosts"
    cfg = crawl_config(load_config(None, [], environ={}), hosts, [])
    assert cfg.fetch.time_limit_s == cfg.generate.fetch_window_s == DEMO_FETCH_S
    given = ["fetch.time_limit_s=40"]
    cfg = crawl_config(load_config(None, given, environ={}), hosts, given)
    assert cfg.fetch.time_limit_s == cfg.generate.fetch_window_s == 40
    given = ["generate.fetch_window_s=90"]
    cfg = crawl_config(load_config(None, given, environ={}), hosts, given)
    assert (cfg.fetch.time_limit_s, cfg.generate.fetch_window_s) == (DEMO_FETCH_S, 90)
