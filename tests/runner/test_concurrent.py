"""Runs at the same time on one machine (issue 30): two runs on one crawl
root, and two crawls side by side.

A second ``trawl cycle`` on a crawl another process holds exits 75 at once
(before a JVM starts), naming the holder's host, pid and since when; a
lease is taken over only when its holder is gone or its TTL has passed; two
crawl roots have two leases and share nothing else a run makes (Spark picks
its own ports and local directories, trawl's temporary files are
``tempfile``'s). The holder is a real second process that takes the lease
through ``trawl.store.lease`` and no more, so only the last test, which runs
two ``trawl inject`` at once, starts Spark.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.cli import EXIT_IN_USE, main
from trawl.config import load_config
from trawl.store.lease import LEASE_FILE, CrawlLease, LeaseHeld

LIB = Path(__file__).resolve().parents[2] / "lib"
# A process that takes the crawl's lease, says so, and holds it until its
# stdin closes (then releases it, as a finished run does).
HOLDER = """
import json, sys
from trawl.store.lease import CrawlLease
lease = CrawlLease(sys.argv[1], sys.argv[2], ttl_s=600)
held = lease.acquire()
print(json.dumps({"pid": held.pid, "host": held.host, "acquired_at": held.acquired_at}), flush=True)
sys.stdin.read()
lease.release()
"""


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAWL__")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LIB), env.get("PYTHONPATH")]))
    return env


@contextmanager
def holding(root: Path, command: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """Another process holding ``root``'s lease, and what it holds."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), command],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        held = json.loads(proc.stdout.readline())
        yield proc, held
    finally:
        for pipe in (proc.stdin, proc.stdout):  # stdin closed: the holder releases
            if pipe is not None:
                pipe.close()
        proc.wait(timeout=30)


def run_trawl(*argv: str) -> subprocess.CompletedProcess[str]:
    """The ``trawl`` command line in a process of its own. A master that
    cannot start makes a run that got past the lease fail at once, not crawl."""
    return subprocess.run(
        [sys.executable, "-m", "trawl.cli", *argv, "--set", "spark.master=nosuch://x"],
        capture_output=True, text=True, timeout=120, env=environment(),
    )  # fmt: skip


def since(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def write_lease(root: Path, **fields: Any) -> dict[str, Any]:
    lease = {
        "user": "ops", "host": "crawler-7.example", "pid": 4242, "command": "cycle",
        "acquired_at": time.time() - 60, "expires_at": time.time() + 540, **fields,
    }  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / LEASE_FILE).write_text(json.dumps(lease))
    return lease


@pytest.fixture
def without_spark(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``trawl.cli.main`` in this process with the command itself replaced:
    each list entry is the lease file as the command found it."""
    seen: list[dict[str, Any]] = []

    def dispatch(args: Any, cfg: Any) -> int:
        seen.append(json.loads((Path(args.crawl) / LEASE_FILE).read_text()))
        return 0

    monkeypatch.setattr("trawl.cli.dispatch", dispatch)
    return seen


# --------------------------------------------------------------------------- one crawl, two runs


def test_a_second_cycle_exits_75_at_once_naming_the_holder(tmp_path: Path) -> None:
    root = tmp_path / "crawl"
    with holding(root, "cycle --segment 20260101T000000Z") as (_, held):
        before = (root / LEASE_FILE).read_bytes()
        run = run_trawl("cycle", "--crawl", str(root))
        assert run.returncode == EXIT_IN_USE, run.stderr[-2000:]
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
        message = run.stderr
        assert message.startswith(f"trawl: crawl {root} is in use: ")
        assert f"@{socket.gethostname()} pid {held['pid']} " in message
        assert "running 'cycle --segment 20260101T000000Z'" in message
        assert f"since {since(held['acquired_at'])}" in message
        assert str(root / LEASE_FILE) in message  # what to remove if it is stale
        assert (root / LEASE_FILE).read_bytes() == before  # the holder's lease untouched


@pytest.mark.parametrize("command", ["inject", "generate", "fetch", "updatedb", "compact"])
def test_every_writing_command_is_refused_while_another_process_holds_the_crawl(
    tmp_path: Path, command: str, without_spark: list[dict[str, Any]], capsys: Any
) -> None:
    with holding(tmp_path, "cycle") as (_, held):
        assert main([command, "--crawl", str(tmp_path)]) == EXIT_IN_USE
    assert without_spark == []  # the command never ran
    assert f"pid {held['pid']} running 'cycle'" in capsys.readouterr().err


def test_reading_commands_run_beside_the_holder(
    tmp_path: Path, without_spark: list[dict[str, Any]]
) -> None:
    with holding(tmp_path, "cycle") as (_, held):
        assert main(["stats", "--crawl", str(tmp_path)]) == 0
    assert without_spark[0]["pid"] == held["pid"]  # still the holder's


def test_the_crawl_is_free_once_the_holder_ends(
    tmp_path: Path, without_spark: list[dict[str, Any]]
) -> None:
    with holding(tmp_path, "cycle"):
        pass
    assert not (tmp_path / LEASE_FILE).exists()
    assert main(["cycle", "--crawl", str(tmp_path)]) == 0
    assert without_spark[0]["pid"] == os.getpid() and without_spark[0]["command"] == "cycle"
    assert not (tmp_path / LEASE_FILE).exists()  # released again


def test_a_killed_holder_on_this_host_is_taken_over_at_once(
    tmp_path: Path, without_spark: list[dict[str, Any]]
) -> None:
    """A crashed run never releases, but its pid is gone on this host."""
    with holding(tmp_path, "cycle") as (proc, held):
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert json.loads((tmp_path / LEASE_FILE).read_text())["pid"] == held["pid"]
        assert main(["cycle", "--crawl", str(tmp_path)]) == 0
    assert without_spark[0]["pid"] == os.getpid()


def test_a_lease_from_another_host_is_taken_over_only_after_its_ttl(
    tmp_path: Path, without_spark: list[dict[str, Any]]
) -> None:
    """Another host's pid cannot be checked from here: only the TTL frees it."""
    root = tmp_path / "crawl"
    lease = write_lease(root, pid=os.getpid() + 100_000)  # no such pid here: not looked at
    run = run_trawl("cycle", "--crawl", str(root))
    assert run.returncode == EXIT_IN_USE, run.stderr[-2000:]
    assert f"ops@crawler-7.example pid {lease['pid']} running 'cycle'" in run.stderr
    assert f"since {since(lease['acquired_at'])}" in run.stderr
    assert json.loads((root / LEASE_FILE).read_text()) == lease

    expired = write_lease(root, expires_at=time.time() - 1)
    assert main(["cycle", "--crawl", str(root)]) == 0
    assert without_spark[0]["pid"] == os.getpid() != expired["pid"]


def test_a_second_run_waits_lease_wait_s_for_the_holder(
    tmp_path: Path, without_spark: list[dict[str, Any]]
) -> None:
    with holding(tmp_path, "cycle") as (proc, _):
        assert proc.stdin is not None
        threading.Timer(0.5, proc.stdin.close).start()  # the holder finishes soon
        assert main(["generate", "--crawl", str(tmp_path), "--set", "crawl.lease_wait_s=60"]) == 0
    assert without_spark[0]["command"] == "generate" and without_spark[0]["pid"] == os.getpid()


def test_runs_racing_for_a_free_crawl_leave_one_holder(tmp_path: Path) -> None:
    """The lease file is never seen empty (``CrawlRoot.create_exclusive``
    links a written file into place): of runs starting at the same instant
    exactly one holds the crawl, round after round."""
    for round_ in range(20):
        root = tmp_path / f"r{round_}"
        start = threading.Barrier(4)
        won: list[CrawlLease] = []

        def race(
            name: str, root: Path = root, start: threading.Barrier = start,
            won: list[CrawlLease] = won,
        ) -> None:  # fmt: skip
            lease = CrawlLease(root, name, ttl_s=60)
            start.wait()
            try:
                lease.acquire()
            except LeaseHeld:
                return
            won.append(lease)

        threads = [threading.Thread(target=race, args=(f"run{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1, round_
        won[0].release()
        assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []


def test_an_empty_lease_left_by_a_dead_run_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / LEASE_FILE).write_bytes(b"")  # created, never written: the run died
    with CrawlLease(tmp_path, "second", ttl_s=60) as lease:
        assert lease.holder is not None and lease.holder.command == "second"


# --------------------------------------------------------------------------- two crawls


def test_two_crawls_have_two_leases(tmp_path: Path, without_spark: list[dict[str, Any]]) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    with holding(first, "cycle") as (_, held):
        before = (first / LEASE_FILE).read_bytes()
        assert main(["cycle", "--crawl", str(second)]) == 0
        assert (first / LEASE_FILE).read_bytes() == before
    assert without_spark[0]["pid"] == os.getpid() != held["pid"]


def test_trawl_pins_no_port_or_directory_two_sessions_would_share() -> None:
    """Spark gives each application free ports and its own local directories
    unless told otherwise; trawl tells it nothing of the kind (and no UI)."""
    from trawl.store.session import spark_conf

    conf = spark_conf(load_config(None, [], environ={}))
    pinned = {
        "spark.driver.port", "spark.blockManager.port", "spark.driver.blockManager.port",
        "spark.ui.port", "spark.port.maxRetries", "spark.local.dir",
        "spark.sql.warehouse.dir", "spark.eventLog.dir", "spark.sql.catalogImplementation",
    }  # fmt: skip
    assert not pinned & set(conf)
    assert conf["spark.ui.enabled"] == "false"


@pytest.mark.crawl
def test_two_crawls_inject_at_the_same_time(tmp_path: Path) -> None:
    """Two ``trawl inject`` processes, two Spark drivers, two crawl roots,
    at once: both finish, each crawldb holds its own seeds only."""
    from deltalake import DeltaTable

    runs = {}
    for name in ("a", "b"):
        seeds = tmp_path / f"{name}.txt"
        seeds.write_text(f"http://{name}1.example/\nhttp://{name}2.example/page\n")
        runs[name] = subprocess.Popen(
            [sys.executable, "-m", "trawl.cli", "inject", "--crawl", str(tmp_path / name),
             str(seeds), "--json", "--at", "2026-01-01T00:00:00Z",
             "--set", "spark.master=local[1]", "--set", "spark.shuffle_partitions=1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(),
        )  # fmt: skip
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1])["accepted"] == 2
        urls = DeltaTable(str(tmp_path / name / "crawldb")).to_pyarrow_table(columns=["url"])
        assert sorted(urls.column("url").to_pylist()) == [
            f"http://{name}1.example/",
            f"http://{name}2.example/page",
        ]
        assert not (tmp_path / name / LEASE_FILE).exists()
