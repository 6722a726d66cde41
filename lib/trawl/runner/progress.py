"""The driver's side of a fetch's live progress (``trawl.fetch.progress``):
the tasks' snapshots read from the segment every ``fetch.progress_interval_s``
and summed, shown as a line redrawn in place on a terminal, else as a log
line every ``fetch.progress_log_s``; nothing with ``--quiet``."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

from trawl.config import Config
from trawl.fetch.progress import Summary, render, summarize
from trawl.runner.common import quiet, say
from trawl.store import deltars
from trawl.store.files import FetchPlaces


def planned(places: FetchPlaces) -> tuple[int, int]:
    """(URLs, tasks) of the segment's fetch list, from generate's counters
    (0 when they are not there: the tasks' own counts then stand)."""
    try:
        rows = deltars.read_rows(places.root, "counters", segment=places.segment, job="generate")
    except deltars.SmallTableError:
        return 0, 0
    values = {r["name"]: int(r["value"]) for r in rows}
    return values.get("generate/urls", 0), values.get("generate/tasks", 0)


class FetchProgress:
    """``with FetchProgress(...):`` around a fetch shows its progress."""

    def __init__(self, places: FetchPlaces, cfg: Config, stream: TextIO | None = None) -> None:
        self.places = places
        self.poll_s = cfg.fetch.progress_interval_s
        self.log_s = cfg.fetch.progress_log_s
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.urls, self.tasks = planned(places)
        self.tasks = self.tasks or cfg.fetch.tasks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fetch-progress", daemon=True)
        self._started = time.monotonic()
        self._width = 0
        self.last: Summary | None = None

    def __enter__(self) -> FetchProgress:
        if not quiet():
            self._started = time.monotonic()
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if quiet():
            return
        self._stop.set()
        self._thread.join()
        self._show(final=True)

    def summary(self) -> Summary:
        elapsed = time.monotonic() - self._started
        return summarize(self.places.read_progress(), self.urls, elapsed, self.tasks)

    def _loop(self) -> None:
        logged = time.monotonic()
        while not self._stop.wait(self.poll_s):
            if self.live:
                self._show()
            elif time.monotonic() - logged >= self.log_s:
                self._show()
                logged = time.monotonic()

    def _show(self, final: bool = False) -> None:
        try:
            self.last = self.summary()
        except Exception as exc:
            say(f"fetch progress unreadable: {exc}")
            return
        line = render(self.last)
        if self.live:
            self.stream.write("\r" + line.ljust(self._width) + ("\n" if final else ""))
            self.stream.flush()
            self._width = len(line)
        elif not final:
            say(line)
