"""Live progress of a segment's fetch: what each task has done, and the sum.

Each fetch task keeps a ``TaskProgress`` as it makes its rows and hands a
snapshot to a reporter every ``fetch.progress_interval_s`` and when it ends
(the fetch stage writes it under the segment, ``progress/task-N.json``,
through the storage layer, so the driver sees executors on other machines
too). The driver sums the snapshots (``summarize``) and shows the sum: a
line redrawn on a terminal, else a log line every ``fetch.progress_log_s``
(``render``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from trawl.crawldb.status import FetchOutcome

Reporter = Callable[[dict[str, Any]], None]

# An error in the progress line: the server or the network failed us (5xx,
# 429, timeouts: tried again later), or trawl did (an internal error);
# 404s, denials, redirects and not-modified are answers.
ERRORS = frozenset({FetchOutcome.RETRY.value})


@dataclass
class TaskProgress:
    """One task's counts, kept as its rows are made (thread-safe)."""

    task: int
    planned: int  # fetch list rows the task was given
    deadline: float  # time.monotonic() at which the segment's time limit ends
    pages: int = 0  # page rows made: fetched, or decided without a request
    ok: int = 0
    deferred: int = 0
    errors: int = 0
    active_hosts: int = 0
    done: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, row: Mapping[str, Any]) -> None:
        if row.get("kind") != "page":
            return
        outcome = row.get("outcome")
        with self._lock:
            self.pages += 1
            self.ok += outcome == FetchOutcome.SUCCESS.value
            self.deferred += outcome == FetchOutcome.DEFERRED.value
            self.errors += outcome in ERRORS or str(row.get("error") or "").startswith("internal:")

    def snapshot(self, active_hosts: int | None = None, done: bool = False) -> dict[str, Any]:
        with self._lock:
            if active_hosts is not None:
                self.active_hosts = active_hosts
            self.done = self.done or done
            out = {f.name: getattr(self, f.name) for f in fields(self) if f.name[0] != "_"}
        out["left_s"] = round(max(0.0, self.deadline - time.monotonic()), 1)
        out["deadline"] = None  # monotonic clocks differ between machines
        out["at"] = time.time()
        return out

    def reporting(
        self, report: Reporter, every_s: float, hosts: Callable[[], int]
    ) -> Callable[[], None]:
        """Start a thread reporting a snapshot every ``every_s``; the returned
        function stops it and reports the last one (``done``)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(every_s):
                _quietly(report, self.snapshot(hosts()))

        thread = threading.Thread(target=loop, name=f"progress-{self.task}", daemon=True)
        thread.start()

        def finish() -> None:
            stop.set()
            thread.join()
            _quietly(report, self.snapshot(0, done=True))

        return finish


def _quietly(report: Reporter, snapshot: dict[str, Any]) -> None:
    """Progress is for people: a report that fails (a store hiccup, a full
    disk) never stops the fetch."""
    with contextlib.suppress(Exception):
        report(snapshot)


@dataclass(frozen=True)
class Summary:
    """The fetch as a whole, from the tasks' latest snapshots."""

    planned: int
    pages: int
    ok: int
    deferred: int
    errors: int
    active_hosts: int
    tasks_done: int
    tasks: int
    pages_per_s: float
    left_s: float | None

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def summarize(
    snapshots: Iterable[Mapping[str, Any]], planned: int, elapsed_s: float, tasks: int
) -> Summary:
    """Sum the tasks' snapshots; ``planned``: the fetch list's rows (tasks
    not started yet have reported nothing)."""
    snaps = list(snapshots)
    pages = sum(int(s.get("pages", 0)) for s in snaps)
    running = [s for s in snaps if not s.get("done")]
    lefts = [float(s["left_s"]) for s in running if s.get("left_s") is not None]
    return Summary(
        planned=max(planned, sum(int(s.get("planned", 0)) for s in snaps)),
        pages=pages,
        ok=sum(int(s.get("ok", 0)) for s in snaps),
        deferred=sum(int(s.get("deferred", 0)) for s in snaps),
        errors=sum(int(s.get("errors", 0)) for s in snaps),
        active_hosts=sum(int(s.get("active_hosts", 0)) for s in running),
        tasks_done=len(snaps) - len(running),
        tasks=tasks,
        pages_per_s=round(pages / elapsed_s, 1) if elapsed_s > 0 else 0.0,
        left_s=max(lefts) if lefts else None,
    )


def render(summary: Summary, width: int = 24) -> str:
    """One line: a bar, pages done of the fetch list, rate, hosts, deferrals,
    errors and the time left to the segment's limit."""
    share = min(1.0, summary.pages / summary.planned) if summary.planned else 0.0
    filled = round(share * width)
    bar = "#" * filled + "-" * (width - filled)
    left = "" if summary.left_s is None else f", {_clock(summary.left_s)} left"
    return (
        f"fetch [{bar}] {summary.pages}/{summary.planned} pages ({summary.ok} ok), "
        f"{summary.pages_per_s:g}/s, {summary.active_hosts} hosts active, "
        f"{summary.deferred} deferred, {summary.errors} errors, "
        f"tasks {summary.tasks_done}/{summary.tasks} done{left}"
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
