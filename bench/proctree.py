"""CPU seconds and memory of a process tree, read from /proc (stdlib only).

The fetch benchmark (``bench_fetch.py``) compares crawlers whose work is
spread over several processes -- trawl's driver, its JVM and the PySpark
Python workers it forks; Scrapy's single process -- so every number is taken
over the whole tree under one process, the same way for each crawler:

* ``cpu_s``: user + system time of every live process in the tree, plus the
  time of the children each has already reaped (``cutime``/``cstime``), so a
  worker that exited is not lost; a difference of two readings is the CPU
  the tree spent between them;
* ``rss`` / ``pss``: resident memory summed over the tree; PSS splits pages
  shared between forked processes (PySpark's workers share the daemon's) so
  the sum is not inflated, RSS is what ``ps`` shows. ``PeakMemory`` samples
  both in a thread and keeps the peak per named phase.

Stdlib only: it is imported by the trawl runner in ``.venv`` and by the Scrapy
runner in ``.venv-scrapy`` alike. Linux only (/proc).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def stat_fields(pid: int, tid: int | None = None) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (after the command name), or of thread
    ``tid``'s /proc/PID/task/TID/stat; None if gone. (/proc/TID/stat of a
    thread that does not lead its process holds the whole process's times.)"""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def tree_pids(root: int, exclude: Iterable[int] = ()) -> list[int]:
    """``root`` and its descendants, leaving out the subtrees under ``exclude``."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    skip = set(exclude)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in skip:
            continue
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def cpu_s(root: int, exclude: Iterable[int] = ()) -> float:
    """CPU seconds (user + system, reaped children included) of the tree so far."""
    ticks = 0
    for pid in tree_pids(root, exclude):
        fields = stat_fields(pid)
        if fields is not None:  # utime, stime, cutime, cstime: stat fields 14-17
            ticks += sum(int(v) for v in fields[11:15])
    return ticks / CLOCK_TICKS


# The JVM names its JIT compiler threads "C1 CompilerThread0", "C2
# CompilerThread0", ...; Linux keeps the first 15 bytes of a thread's name.
JIT_THREAD_PREFIXES = ("C1 CompilerThre", "C2 CompilerThre")


def jit_cpu_s(root: int) -> float:
    """CPU seconds the tree's JVMs have spent in their JIT compiler threads
    (threads still alive; a JVM's compiler threads live as long as it)."""
    ticks = 0
    for pid in tree_pids(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue
            jit = name.startswith(JIT_THREAD_PREFIXES)
            fields = stat_fields(pid, int(tid)) if jit else None
            if fields is not None:
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / CLOCK_TICKS


def memory(root: int, exclude: Iterable[int] = ()) -> tuple[int, int]:
    """(RSS, PSS) in bytes summed over the tree."""
    rss = pss = 0
    for pid in tree_pids(root, exclude):
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("Rss:"):
                rss += int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss += int(line.split()[1]) * 1024
    return rss, pss


class PeakMemory:
    """Samples a tree's memory every ``interval_s`` and keeps the peak per phase.

    ``phase = "fetch"`` starts attributing samples to that phase; every
    sample also counts for ``"all"``. Use as a context manager.
    """

    def __init__(self, root: int, interval_s: float = 0.5, exclude: Iterable[int] = ()) -> None:
        self.root = root
        self.exclude = tuple(exclude)
        self.interval_s = interval_s
        self.phase = "all"
        self.peaks: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                return

    def sample(self) -> None:
        rss, pss = memory(self.root, self.exclude)
        for phase in {"all", self.phase}:
            peak = self.peaks.setdefault(phase, {"rss": 0, "pss": 0})
            peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)

    def mb(self, phase: str = "all") -> dict[str, float]:
        """Peak ``rss_mb`` and ``pss_mb`` of a phase (zeros if never sampled)."""
        peak = self.peaks.get(phase, {"rss": 0, "pss": 0})
        return {"rss_mb": round(peak["rss"] / 2**20, 1), "pss_mb": round(peak["pss"] / 2**20, 1)}

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
