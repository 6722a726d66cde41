"""A damaged Delta log is named before any job reads it (issue 30: bad
state). Tables made here with delta-rs; the commands run in process, and no
JVM starts: the check comes first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from trawl.cli import main
from trawl.store.deltalog import LOG, DamagedLog, check_logs, log_damage
from trawl.store.files import CrawlRoot


def _table(root: Path, name: str, versions: int, checkpoint_at: int | None = None) -> Path:
    path = root / name
    for v in range(versions):
        write_deltalake(str(path), pa.table({"url": [f"http://h.test/{v}"]}), mode="append")
        if v == checkpoint_at:
            DeltaTable(str(path)).create_checkpoint()
    return path / LOG


def _commit(log: Path, version: int) -> Path:
    return log / f"{version:020d}.json"


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_a_sound_crawl_passes(tmp_path: Path) -> None:
    _table(tmp_path, "crawldb", 4, checkpoint_at=1)
    _table(tmp_path, "hostdb", 2)
    (tmp_path / "segments").mkdir()  # a folder that is no table is no concern
    check_logs(CrawlRoot.of(str(tmp_path)))


def test_a_newest_commit_cut_short_is_named_with_the_version_before_it(tmp_path: Path) -> None:
    log = _table(tmp_path, "crawldb", 3)
    newest = _commit(log, 2)
    newest.write_bytes(newest.read_bytes()[:-25])
    [damage] = log_damage(CrawlRoot.of(str(tmp_path)), "crawldb")
    assert damage.entry == f"crawldb/{LOG}/{newest.name}"
    assert "cut short" in damage.what and damage.good_version == 1


def test_an_empty_newest_commit_is_damage(tmp_path: Path) -> None:
    log = _table(tmp_path, "crawldb", 2)
    _commit(log, 1).write_bytes(b"")
    [damage] = log_damage(CrawlRoot.of(str(tmp_path)), "crawldb")
    assert "empty" in damage.what


def test_a_commit_missing_after_the_checkpoint_is_named(tmp_path: Path) -> None:
    log = _table(tmp_path, "events", 6, checkpoint_at=1)
    _commit(log, 3).unlink()
    [damage] = log_damage(CrawlRoot.of(str(tmp_path)), "events")
    assert damage.what == "commit 3 is missing" and damage.good_version == 2


def test_commits_before_the_checkpoint_may_be_gone(tmp_path: Path) -> None:
    """Delta's log clean-up deletes commits older than a checkpoint."""
    log = _table(tmp_path, "events", 5, checkpoint_at=2)
    for v in (0, 1):
        _commit(log, v).unlink()
    assert log_damage(CrawlRoot.of(str(tmp_path)), "events") == []


def test_a_table_without_a_checkpoint_must_start_at_version_0(tmp_path: Path) -> None:
    log = _table(tmp_path, "events", 3)
    _commit(log, 0).unlink()
    [damage] = log_damage(CrawlRoot.of(str(tmp_path)), "events")
    assert damage.what == "commit 0 is missing"


def test_a_last_checkpoint_that_is_no_json_or_names_no_checkpoint(tmp_path: Path) -> None:
    log = _table(tmp_path, "hostdb", 3, checkpoint_at=1)
    pointer = log / "_last_checkpoint"
    pointer.write_text('{"version": 1, "si')
    [damage] = log_damage(CrawlRoot.of(str(tmp_path)), "hostdb")
    assert damage.entry.endswith("_last_checkpoint") and "remove it" in damage.what
    pointer.write_text('{"version": 1, "size": 3}')
    for checkpoint in log.glob("*.checkpoint*.parquet"):
        checkpoint.unlink()
    assert [d.what for d in log_damage(CrawlRoot.of(str(tmp_path)), "hostdb")] == [
        "names checkpoint 1, which is not there"
    ]


def test_every_damaged_table_is_listed_in_one_error(tmp_path: Path) -> None:
    for name in ("crawldb", "hostdb"):
        _commit(_table(tmp_path, name, 2), 1).write_text('{"add": {')
    with pytest.raises(DamagedLog) as raised:
        check_logs(CrawlRoot.of(str(tmp_path)))
    assert [d.table for d in raised.value.damage] == ["crawldb", "hostdb"]
    assert "trawl has written nothing" in str(raised.value)


@pytest.mark.parametrize(
    "argv",
    [["stats"], ["sql", "select count(*) from crawldb"], ["generate"], ["cycle", "--cycles", "1"]],
    ids=["stats", "sql", "generate", "cycle"],
)
def test_commands_stop_at_a_damaged_log_with_exit_2_and_change_nothing(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "crawl"
    log = _table(root, "crawldb", 3)
    shutil.copytree(log.parent, root / "hostdb")  # a second table, sound
    newest = _commit(log, 2)
    newest.write_bytes(newest.read_bytes()[:40])
    before = _files(root)
    assert main([argv[0], "--crawl", str(root), *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert f"crawldb/{LOG}/{newest.name}" in err and "hostdb" not in err
    assert "Traceback" not in err and "move it" in err
    assert _files(root) == before
