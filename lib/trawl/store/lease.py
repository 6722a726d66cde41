"""One writer per crawl: a lease file in the crawl directory.

Two runs against one crawldb -- two DAG runs, or a manual ``trawl cycle``
during a scheduled one -- must not interleave their stages: the second
generate would see the first's URLs as locked, its updatedb would MERGE a
segment half-fetched. Delta's optimistic concurrency already refuses two
conflicting commits (ConcurrentAppendException and friends), so the table
never corrupts, but a run that loses such a race fails midway with a Java
stack trace. The lease makes the second run wait, or fail at once with a
message that says who holds the crawl, since when, and until when.

``_lease.json`` in the crawl root holds the holder (user, host, pid, the
command), when it was taken and when it expires. It is created only if
absent (``trawl.store.files.CrawlRoot.create_exclusive``: ``O_CREAT |
O_EXCL`` on a local or NFS-mounted disk, a conditional ``If-None-Match: *``
PUT on an object store, which S3 and the S3-compatible stores honour),
renewed by a daemon thread every third of ``ttl_s`` while the run lives, and
removed when the run ends. A run that crashed stops renewing, so its lease
expires after ``ttl_s``; one on this host whose process is gone is taken
over at once. Taking over an expired lease goes through a second
create-if-absent object (``.takeover``), replaces the lease whole and
re-reads it, so of two runs racing for one stale lease exactly one wins.

The wall clock is used here on purpose: a lease is about the processes
running now, not the crawl's logical time.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from trawl.store.files import CrawlRoot

LEASE_FILE = "_lease.json"
POLL_S = 1.0


class LeaseHeld(RuntimeError):
    """Another run holds the crawl; the message says who and until when."""


@dataclass(frozen=True)
class Holder:
    user: str
    host: str
    pid: int
    command: str
    acquired_at: float  # epoch seconds
    expires_at: float

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.acquired_at, UTC).isoformat(timespec="seconds")
        until = datetime.fromtimestamp(self.expires_at, UTC).isoformat(timespec="seconds")
        return (
            f"{self.user}@{self.host} pid {self.pid} running '{self.command}' since {since} "
            f"(lease renewed while it runs; expires {until} if it stops)"
        )


class CrawlLease:
    """``with CrawlLease(root, command):`` holds the crawl for the block.

    ``wait_s``: how long to wait for another holder to finish before raising
    ``LeaseHeld`` (0: fail at once). ``clock`` is for tests.
    """

    def __init__(
        self,
        root: str | Path | CrawlRoot,
        command: str,
        ttl_s: float = 600.0,
        wait_s: float = 0.0,
        clock: Any = time.time,
    ) -> None:
        if ttl_s <= 0 or wait_s < 0:
            raise ValueError("need ttl_s > 0 and wait_s >= 0")
        self.files = root if isinstance(root, CrawlRoot) else CrawlRoot.of(str(root))
        self.where = self.files.child(LEASE_FILE)
        self.command, self.ttl_s, self.wait_s, self.clock = command, ttl_s, wait_s, clock
        self.holder: Holder | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # --- public -------------------------------------------------------------------

    def acquire(self) -> Holder:
        deadline = self.clock() + self.wait_s
        while True:
            taken, current = self._try_take()
            if taken:
                assert self.holder is not None
                self._start_renewing()
                return self.holder
            if current is not None and self.clock() >= deadline:
                waited = f" after waiting {self.wait_s:.0f} s" if self.wait_s else ""
                raise LeaseHeld(
                    f"crawl {self.files.uri} is in use{waited}: {current.describe()}. "
                    f"Wait for it, or remove {self.where} if you are sure it is not running."
                )
            time.sleep(min(POLL_S, max(0.0, deadline - self.clock())))

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if self.holder is not None and self._read() == self.holder:
            self.files.delete(LEASE_FILE)
        self.holder = None

    def __enter__(self) -> CrawlLease:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # --- internals ----------------------------------------------------------------

    def _new_holder(self) -> Holder:
        now = self.clock()
        return Holder(
            _user(), socket.gethostname(), os.getpid(), self.command, now, now + self.ttl_s
        )

    def _try_take(self) -> tuple[bool, Holder | None]:
        """(True, None) when the lease is ours now, else (False, who holds it,
        if that could be read)."""
        mine = self._new_holder()
        if not self.files.create_exclusive(LEASE_FILE, _encode(mine)):
            current = self._read()
            if current is not None and not self._stale(current):
                return False, current
            if not self._take_over(current, mine):  # another run is taking it over
                return False, self._read() or current
        self.holder = mine
        return True, None

    def _take_over(self, stale: Holder | None, mine: Holder) -> bool:
        """Replace a stale (or unreadable) lease, one run at a time: the
        ``.takeover`` file is the lock for that (itself stale after ttl_s)."""
        lock = LEASE_FILE + ".takeover"
        made = self.files.modified_at(lock)  # a lock left by a run that died taking over
        if made is not None and made < time.time() - self.ttl_s:
            self.files.delete(lock)
        if not self.files.create_exclusive(lock, b""):
            return False
        try:
            if self._read() != stale:  # it changed while we looked: not ours to take
                return False
            self._replace(mine)
            return True
        finally:
            self.files.delete(lock)

    def _stale(self, holder: Holder) -> bool:
        if holder.expires_at <= self.clock():
            return True
        return holder.host == socket.gethostname() and not _alive(holder.pid)

    def _read(self) -> Holder | None:
        try:
            data = self.files.read_bytes(LEASE_FILE)
            return None if data is None else Holder(**json.loads(data))
        except (OSError, ValueError, TypeError):
            return None

    def _replace(self, holder: Holder) -> None:
        self.files.write_bytes(LEASE_FILE, _encode(holder))

    def _start_renewing(self) -> None:
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="trawl-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            held = self.holder
            if held is None or self._read() != held:
                return  # released, or taken over: nothing of ours to renew
            renewed = Holder(**{**asdict(held), "expires_at": self.clock() + self.ttl_s})
            self._replace(renewed)
            self.holder = renewed


def _encode(holder: Holder) -> bytes:
    return json.dumps(asdict(holder)).encode()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
