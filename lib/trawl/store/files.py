"""The files under the crawl root that are not tables: each segment's WARC
folder and CDXJ index, the new-host claims folder, and finding a WARC file
by its name.

Every path under the root is made here (tables: ``trawl.store.tables``), so
the rest of trawl never joins a path to the root itself. The fetch tasks
write WARC files and claims from Python on the executors, so those places
must be local (or mounted) paths: ``local_dir`` says which roots are, and a
place that is not comes back as None (an object-store root, whose WARC
writing is the object-store issue's work).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from trawl.store.tables import segment_path
from trawl.warc.lookup import get_record
from trawl.warc.record import WarcRecord
from trawl.warc.writer import WarcRef

INDEX_FILE = "index.cdxj"


def local_dir(path: str) -> str | None:
    """``path`` as a local path (a ``file:`` URI's path), or None for an
    object-store URI that Python on the executors does not write to."""
    if path.startswith("file:"):
        return path[len("file:") :]
    return None if "://" in path else path


def segment_warc_dir(root: str, segment: str) -> Path | None:
    """Where the segment's WARC files are (None: not on a local path)."""
    local = local_dir(segment_path(root, segment, "warc"))
    return None if local is None else Path(local)


def segment_index(root: str, segment: str) -> Path | None:
    """The segment's CDXJ index, beside its ``warc/`` folder (None: not local)."""
    warc_dir = segment_warc_dir(root, segment)
    return None if warc_dir is None else warc_dir.parent / INDEX_FILE


def warc_files(root: str, segment: str) -> list[Path]:
    """The segment's WARC files, sorted by name (none when not local)."""
    warc_dir = segment_warc_dir(root, segment)
    return [] if warc_dir is None else sorted(warc_dir.glob("*.warc.gz"))


def claims_dir(root: str, segment: str) -> str | None:
    """The folder where the segment's tasks claim new hosts' addresses
    (``trawl.fetch.claims``; None: not local, the tasks claim by hash)."""
    return local_dir(segment_path(root, segment, "claims"))


def clear_claims(root: str, segment: str) -> None:
    """A re-run of the fetch claims afresh: the last run's claims go."""
    where = claims_dir(root, segment)
    if where is not None:
        shutil.rmtree(where, ignore_errors=True)


@dataclass(frozen=True)
class FetchPlaces:
    """Where a segment's fetch tasks write and read under the crawl root, as
    local paths (None: not local). ``policy_root`` is the crawl root whose
    policy table the tasks re-read with delta-rs while they run."""

    warc_dir: str | None
    claims_dir: str | None
    policy_root: str | None


def fetch_places(root: str, segment: str) -> FetchPlaces:
    warc_dir = segment_warc_dir(root, segment)
    return FetchPlaces(
        warc_dir=None if warc_dir is None else str(warc_dir),
        claims_dir=claims_dir(root, segment),
        # delta-rs on the executors reads local roots for now (an object store
        # would need its storage options passed along)
        policy_root=local_dir(root),
    )


def locate_warc(root: str, file: str) -> Path:
    """The WARC file ``file`` (a basename) of the crawl at ``root``."""
    if "/" in file or file in ("", ".", ".."):
        raise ValueError(f"not a WARC file name: {file!r}")
    found = sorted(Path(root).glob(f"segments/*/warc/{file}"))
    if not found:
        raise FileNotFoundError(f"no WARC file {file!r} under {root}/segments/*/warc/")
    return found[0]


def warc_record(root: str, ref: WarcRef) -> tuple[WarcRecord, bytes]:
    """The record an event's ``warc_ref`` points to, and its stored bytes."""
    return get_record(locate_warc(root, ref.file), ref)
