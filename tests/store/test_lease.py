"""Tests for trawl.store.lease: one writer per crawl, stale leases taken over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trawl.cli import EXIT_IN_USE, main
from trawl.store.lease import LEASE_FILE, CrawlLease, LeaseHeld


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_acquire_writes_who_holds_the_crawl_and_release_removes_it(tmp_path: Path) -> None:
    with CrawlLease(tmp_path, "cycle --segment s1", ttl_s=60) as lease:
        held = json.loads((tmp_path / LEASE_FILE).read_text())
        assert held["pid"] == os.getpid() and held["command"] == "cycle --segment s1"
        assert held["expires_at"] == pytest.approx(held["acquired_at"] + 60)
        assert lease.holder is not None
    assert not (tmp_path / LEASE_FILE).exists()


def test_a_second_run_fails_at_once_saying_who_holds_it(tmp_path: Path) -> None:
    with CrawlLease(tmp_path, "cycle", ttl_s=60):
        with pytest.raises(LeaseHeld) as caught:
            CrawlLease(tmp_path, "generate", ttl_s=60).acquire()
        message = str(caught.value)
        assert f"pid {os.getpid()} running 'cycle'" in message and "in use" in message
        assert str(tmp_path / LEASE_FILE) in message  # what to remove if it is stale


def test_an_expired_lease_is_taken_over(tmp_path: Path) -> None:
    clock = Clock()
    CrawlLease(tmp_path, "crashed", ttl_s=60, clock=clock)._try_take()  # never renewed
    clock.now += 30
    with pytest.raises(LeaseHeld):
        CrawlLease(tmp_path, "second", ttl_s=60, clock=clock).acquire()
    clock.now += 31
    lease = CrawlLease(tmp_path, "second", ttl_s=60, clock=clock)
    assert lease.acquire().command == "second"
    lease.release()


def test_a_lease_whose_process_is_gone_is_taken_over_at_once(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = {
        "user": "someone", "host": os.uname().nodename, "pid": int(gone.stdout),
        "command": "cycle", "acquired_at": time.time(), "expires_at": time.time() + 3600,
    }  # fmt: skip
    (tmp_path / LEASE_FILE).write_text(json.dumps(stale))
    with CrawlLease(tmp_path, "generate", ttl_s=60) as lease:
        assert lease.holder is not None and lease.holder.command == "generate"


def test_a_waiting_run_gets_the_lease_when_the_holder_ends(tmp_path: Path) -> None:
    first = CrawlLease(tmp_path, "first", ttl_s=60)
    first.acquire()
    threading.Timer(0.5, first.release).start()
    started = time.monotonic()
    with CrawlLease(tmp_path, "second", ttl_s=60, wait_s=10) as second:
        assert second.holder is not None and second.holder.command == "second"
    assert time.monotonic() - started < 9


def test_the_holder_renews_while_it_runs(tmp_path: Path) -> None:
    with CrawlLease(tmp_path, "long", ttl_s=0.6):
        first = json.loads((tmp_path / LEASE_FILE).read_text())["expires_at"]
        time.sleep(0.9)
        later = json.loads((tmp_path / LEASE_FILE).read_text())["expires_at"]
        assert later > first
        with pytest.raises(LeaseHeld):  # renewed, so never expired
            CrawlLease(tmp_path, "other", ttl_s=0.6).acquire()


@pytest.mark.parametrize("round_", range(20))  # a race: many rounds to catch it
def test_of_many_runs_racing_for_a_stale_lease_one_wins(tmp_path: Path, round_: int) -> None:
    clock = Clock()
    CrawlLease(tmp_path, "crashed", ttl_s=60, clock=clock)._try_take()
    clock.now += 120
    barrier, won, lost, failed = threading.Barrier(8), [], [], []

    def race(i: int) -> None:
        lease = CrawlLease(tmp_path, f"run{i}", ttl_s=60, clock=clock)
        barrier.wait()
        try:
            won.append(lease.acquire().command)
        except LeaseHeld:
            lost.append(i)
        except Exception as exc:  # e.g. the takeover lock vanishing under a stat
            failed.append(repr(exc))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    assert len(won) == 1 and len(lost) == 7
    assert json.loads((tmp_path / LEASE_FILE).read_text())["command"] == won[0]


def test_a_takeover_lock_left_by_a_dead_run_expires_on_the_wall_clock(tmp_path: Path) -> None:
    clock = Clock()
    CrawlLease(tmp_path, "crashed", ttl_s=60, clock=clock)._try_take()
    clock.now += 120
    lock = tmp_path / (LEASE_FILE + ".takeover")
    lock.touch()  # a run taking over the stale lease right now
    with pytest.raises(LeaseHeld):
        CrawlLease(tmp_path, "second", ttl_s=60, clock=clock).acquire()
    old = time.time() - 120
    os.utime(lock, (old, old))  # ... or one that died doing so two minutes ago
    assert CrawlLease(tmp_path, "third", ttl_s=60, clock=clock).acquire().command == "third"
    assert not lock.exists()


def test_writing_commands_refuse_a_held_crawl_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with CrawlLease(tmp_path, "cycle", ttl_s=60):
        assert main(["generate", "--crawl", str(tmp_path)]) == EXIT_IN_USE
    err = capsys.readouterr().err
    assert "is in use" in err and "running 'cycle'" in err


def test_lease_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        CrawlLease("/tmp", "x", ttl_s=0)
    with pytest.raises(ValueError):
        CrawlLease("/tmp", "x", wait_s=-1)
