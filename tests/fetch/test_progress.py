"""Live fetch progress: the tasks' counts, their snapshots, the driver's sum
and its line (``trawl.fetch.progress``, ``trawl.runner.progress``)."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

from trawl.config import load_config
from trawl.fetch.progress import TaskProgress, render, summarize
from trawl.runner.progress import FetchProgress


def _row(outcome: str, kind: str = "page", error: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "outcome": outcome, "error": error}


def test_a_task_counts_its_page_rows_by_outcome() -> None:
    progress = TaskProgress(task=3, planned=10, deadline=time.monotonic() + 60)
    for row in [_row("success"), _row("success"), _row("deferred"), _row("retry"),
                _row("gone"), _row("success", kind="robots"),
                _row("blocked", error="internal: boom")]:  # fmt: skip
        progress.count(row)
    snap = progress.snapshot(active_hosts=4)
    assert (snap["pages"], snap["ok"], snap["deferred"], snap["errors"]) == (6, 2, 1, 2)
    assert snap["active_hosts"] == 4 and snap["task"] == 3 and not snap["done"]
    assert 0 < snap["left_s"] <= 60


def test_reporting_sends_snapshots_then_a_last_one() -> None:
    progress = TaskProgress(task=0, planned=2, deadline=time.monotonic() + 60)
    got: list[dict[str, Any]] = []
    arrived = threading.Event()

    def report(snapshot: dict[str, Any]) -> None:
        got.append(snapshot)
        arrived.set()

    finish = progress.reporting(report, 0.01, lambda: 7)
    assert arrived.wait(5)
    progress.count(_row("success"))
    finish()
    assert got[0]["active_hosts"] == 7
    assert got[-1]["done"] and got[-1]["pages"] == 1 and got[-1]["active_hosts"] == 0


def test_a_failing_report_never_stops_the_task() -> None:
    def broken(snapshot: dict[str, Any]) -> None:
        raise OSError("disk full")

    progress = TaskProgress(task=0, planned=1, deadline=time.monotonic() + 1)
    progress.reporting(broken, 0.01, lambda: 0)()  # no exception


def test_the_sum_of_tasks_and_its_line() -> None:
    snaps = [
        {"task": 0, "planned": 40, "pages": 30, "ok": 25, "deferred": 2, "errors": 1,
         "active_hosts": 5, "done": False, "left_s": 95.0},
        {"task": 1, "planned": 60, "pages": 60, "ok": 58, "deferred": 0, "errors": 0,
         "active_hosts": 0, "done": True, "left_s": 80.0},
    ]  # fmt: skip
    summary = summarize(snaps, planned=100, elapsed_s=10.0, tasks=3)
    assert (summary.pages, summary.ok, summary.deferred, summary.errors) == (90, 83, 2, 1)
    assert (summary.active_hosts, summary.tasks_done, summary.tasks) == (5, 1, 3)
    assert summary.pages_per_s == 9.0 and summary.left_s == 95.0
    line = render(summary, width=10)
    assert line.startswith("fetch [#########-] 90/100 pages (83 ok), 9/s, 5 hosts active")
    assert line.endswith("2 deferred, 1 errors, tasks 1/3 done, 1:35 left")


class _Places:
    def __init__(self) -> None:
        self.snaps: list[dict[str, Any]] = []
        self.root = None
        self.segment = "20261130T120000Z"

    def read_progress(self) -> list[dict[str, Any]]:
        return list(self.snaps)


def test_the_driver_logs_lines_when_not_on_a_terminal(monkeypatch: Any) -> None:
    monkeypatch.setattr("trawl.runner.progress.planned", lambda places: (10, 1))
    cfg = load_config(
        None, ["fetch.progress_interval_s=0.01", "fetch.progress_log_s=0.01"], environ={}
    )
    places = _Places()
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    with FetchProgress(places, cfg, stream=io.StringIO()) as shown:  # type: ignore[arg-type]
        places.snaps = [{"task": 0, "planned": 10, "pages": 4, "ok": 4, "left_s": 9.0}]
        time.sleep(0.2)
    assert shown.last is not None and shown.last.pages == 4
    assert "fetch [" in log.getvalue() and "4/10 pages" in log.getvalue()
