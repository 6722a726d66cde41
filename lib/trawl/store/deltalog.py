"""The crawl's Delta logs checked before a command trusts them.

Delta's writers never leave a commit half written -- a local commit is a
file renamed into place, an object-store commit one PUT -- so a damaged log
is damage from outside: a disk error, a copy or sync that stopped short, a
hand edit, a file deleted by mistake. Spark then fails deep inside a job
with a JSON parser's stack trace, and delta-rs panics. ``check_logs`` finds
the damage first, without a JVM, and ``DamagedLog`` names the table, the
entry and what an operator can do about it; nothing has been written by
then.

What is read, per table (a folder of the root with a ``_delta_log``): the
log's file names (one listing), ``_last_checkpoint`` and the newest commit
-- the entry a cut-short copy or write damages. Checked:

* ``_last_checkpoint`` is JSON with a version, and that checkpoint exists;
* the commits after the newest checkpoint are numbered without a gap (a
  table without a checkpoint must start at version 0);
* the newest commit is non-empty JSON lines, each an object.

Older commits are not parsed (on an object store that would be one GET per
commit since the last checkpoint, on every command); damage there still
fails the job, with Delta's own error.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trawl.store.files import CrawlRoot
from trawl.store.objectstore import StoreError

__all__ = ["Damage", "DamagedLog", "check_logs", "log_damage"]

LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
# NNN.checkpoint.parquet, NNN.checkpoint.<part>.<parts>.parquet, NNN.checkpoint.<uuid>.json|parquet
_CHECKPOINT = re.compile(
    r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10}|\.[0-9a-f-]{36})?\.(?:parquet|json)$"
)


@dataclass(frozen=True)
class Damage:
    table: str
    entry: str  # the log file, relative to the crawl root
    what: str
    good_version: int | None  # the newest version that reads, when known

    def __str__(self) -> str:
        return f"{self.table}: {self.entry}: {self.what}"


class DamagedLog(StoreError):
    """A crawl table whose Delta log cannot be read as it stands."""

    def __init__(self, root: CrawlRoot, damage: list[Damage]) -> None:
        self.damage = damage
        lines = [f"the Delta log of {len(damage)} table(s) at {root.uri} is damaged:"]
        lines += [f"  {d}" for d in damage]
        lines.append("trawl has written nothing. To go on, for each entry above:")
        lines.append("  restore the file from a backup or the copy it came from; or,")
        lines.append(
            "  if it is the newest commit, move it (and its .crc) out of _delta_log: the "
            "table rolls back to the version before it, and re-running the jobs of the "
            "segments after that version (`trawl <job> --segment ID`) redoes what it did."
        )
        super().__init__("\n".join(lines))


def _versions(names: list[str], pattern: re.Pattern[str]) -> list[int]:
    return sorted({int(m.group(1)) for n in names if (m := pattern.match(n))})


def _json_lines(data: bytes) -> str | None:
    """What is wrong with a commit's bytes, or None when each line is a JSON object."""
    if not data.strip():
        return "empty"
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            cut = "" if data.endswith(b"\n") else " (the file ends inside it: cut short?)"
            return f"line {number} is not JSON{cut}"
        if not isinstance(value, dict):
            return f"line {number} is not a JSON object"
    return None


def log_damage(root: CrawlRoot, table: str) -> list[Damage]:
    """What is wrong with the Delta log of ``table`` (a folder of ``root``);
    empty when nothing is, or when the folder has no log."""
    folder = f"{table}/{LOG}"
    names = root.names(folder)
    commits = _versions(names, _COMMIT)
    if not commits:
        return []
    checkpoints = set(_versions(names, _CHECKPOINT))
    damage: list[Damage] = []

    def at(name: str, what: str, good: int | None) -> None:
        damage.append(Damage(table, f"{folder}/{name}", what, good))

    if "_last_checkpoint" in names:
        raw = root.read_bytes(f"{folder}/_last_checkpoint") or b""
        try:
            pointed = json.loads(raw)["version"]
            if not isinstance(pointed, int):
                raise TypeError(pointed)
        except (ValueError, KeyError, TypeError):
            at("_last_checkpoint", "not a JSON object with a version (remove it: "
               "Delta then finds the checkpoint by listing)", None)  # fmt: skip
        else:
            if pointed not in checkpoints:
                at("_last_checkpoint", f"names checkpoint {pointed}, which is not there", None)
    # a table without a checkpoint starts at 0; one with needs no commit
    # before its newest checkpoint (Delta's log cleanup removes them)
    base = max((c for c in checkpoints if c <= commits[-1]), default=None)
    first = 0 if base is None else max(base, commits[0])
    missing = sorted(set(range(first, commits[-1] + 1)) - set(commits))
    if missing:
        good = missing[0] - 1 if missing[0] > 0 else None
        at(f"{missing[0]:020d}.json", f"commit {missing[0]} is missing"
           f"{f' ({len(missing)} in all)' if len(missing) > 1 else ''}", good)  # fmt: skip
    newest = f"{commits[-1]:020d}.json"
    wrong = _json_lines(root.read_bytes(f"{folder}/{newest}") or b"")
    if wrong:
        good = commits[-1] - 1 if commits[-1] > 0 else None
        at(newest, f"the newest commit: {wrong}", good)
    return damage


def check_logs(root: CrawlRoot, tables: list[str] | None = None) -> None:
    """Raise ``DamagedLog`` when a table's Delta log is damaged. On an object
    store the tables are checked side by side (a few requests each)."""
    names = tables if tables is not None else root.dirs("")
    workers = 1 if root.local is not None else 8
    with ThreadPoolExecutor(workers) as pool:
        found = [d for ds in pool.map(lambda t: log_damage(root, t), names) for d in ds]
    if found:
        raise DamagedLog(root, found)
