"""Fault injection for the kill tests: a named point that SIGKILLs the run.

trawl promises that every job may be re-run after a crash and neither lose
nor double anything (docs: the cycle). A crash at a random time rarely
lands in the narrow windows where that promise is hardest to keep -- a
MERGE about to commit, the fetch's rows computed but not yet written, a
WARC file half written -- so the code marks those places with
``point(name)`` and ``tests/runner/test_kills.py`` (and
``bench/bench_kills.py``) ask for a kill at one of them:

    TRAWL_FAULT_KILL=merge:crawldb trawl cycle ...     # the first time it is reached
    TRAWL_FAULT_KILL=merge:crawldb@3 trawl cycle ...   # the third time, in this process

A point reached as asked sends SIGKILL to its own process group
(``os.killpg(os.getpgrp(), SIGKILL)``): no ``finally``, no ``atexit``,
nothing flushed -- what a power cut or the kernel's OOM killer leaves.
Run from a command started in a session of its own (``start_new_session``)
that is the driver and its JVM. In a PySpark worker it is the worker
daemon's group (PySpark's ``daemon.py`` makes one): the workers die, Spark
fails the task, and in local mode (no task retries) the job and the run.

The points, and the names they answer to:

* ``stage:<name>`` -- ``trawl.runner.cycle``, before each stage of a cycle;
* ``merge:<table>`` / ``merged:<table>`` -- ``trawl.store.tables.merge``,
  just before a MERGE executes and just after it committed;
* ``fetch:before-write`` -- ``trawl.runner.fetch``, the fetch's rows
  computed (the Spark job runs as the table is written) and the table not
  yet replaced;
* ``warc:mid-file`` -- ``trawl.warc.writer``, after each record written to
  a WARC file that is still open (``@N``: the N-th record of the worker).

The variable is read once, when this module is imported: this is the one
place besides ``trawl.config`` that reads the environment, on purpose -- a
test asks a whole process tree (driver, JVM, Python workers) for a crash,
and the environment is what reaches all of them. Unset (always, outside
these tests), ``point`` returns at once.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["ENV", "point"]

ENV = "TRAWL_FAULT_KILL"


def _wanted(value: str) -> tuple[str, int] | None:
    """``name`` or ``name@N`` as (name, N); None when unset or empty."""
    if not value:
        return None
    name, at, nth = value.rpartition("@")
    if at and nth.isdigit() and int(nth) > 0:
        return name, int(nth)
    return value, 1


_WANTED = _wanted(os.environ.get(ENV, ""))
_reached = 0
_lock = threading.Lock()


def point(name: str) -> None:
    """A place a run may be killed at: SIGKILL to this process group when
    ``TRAWL_FAULT_KILL`` names it and this is the time it asks for."""
    if _WANTED is None or name != _WANTED[0]:
        return
    global _reached
    with _lock:
        _reached += 1
        if _reached == _WANTED[1]:
            os.killpg(os.getpgrp(), signal.SIGKILL)
