"""The WARC files of one fetch task: their names, subsets and rotation.

A fetch task writes its captures into a few files of its own
(``TaskArchive``), so the raw bytes are archived once, in the task that has
them, and never travel through Spark:

* As Common Crawl splits a segment, the files are of three subsets
  (``SUBSETS``): pages and their revisits, robots.txt fetches, and everything
  that is not a page (redirects, 4xx and 5xx answers, failed fetches).
* A subset's file is replaced by the next once it has reached
  ``max_file_bytes``, after WARC 1.1 annex "WARC file size and name
  recommendations" (1 GB by default). The records of one capture stay in
  one file: ``writer`` is asked once per capture, and a file replaced stays
  open until the archive closes, for the metadata record written after parsing.
* Names (``warc_filename``) are the prefix (with the subset), then what makes
  the name unique: segment, task and serial, ``.warc.gz`` for record-at-time
  gzip. A Spark task retry gets the same names and overwrites the failed
  attempt's files.
* The task remembers the first response of every payload digest it archived
  (``stored``/``remember``), so a later identical payload is written as an
  identical-payload-digest revisit (section 6.7.2) pointing at it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from trawl.warc.writer import Closing, Stored, WarcRef, WarcWriter

__all__ = ["SUBSETS", "TaskArchive", "index_name", "warc_filename"]

log = logging.getLogger(__name__)

#: The files of a fetch task, as Common Crawl splits a segment: pages (and
#: their revisits), robots.txt fetches, and everything that is not a page
#: (redirects, 4xx and 5xx answers, failed fetches). The main subset's name
#: carries no subset part.
SUBSETS = ("warc", "robotstxt", "crawldiagnostics")

_FILENAME_PART = re.compile(r"^[A-Za-z0-9._\-]+$")


# name -> a binary sink that makes the file appear under that name on close()
# and leaves nothing on abort() (``trawl.store.files.CrawlRoot.open_write``)
Opener = Callable[[str], BinaryIO]


def warc_filename(prefix: str, segment: str, task: int, serial: int = 0) -> str:
    """``<prefix>-<segment>-<task:05d>-<serial:05d>.warc.gz``.

    Unique per segment, task and file within the task, after WARC 1.1 annex
    "WARC file size and name recommendations" (prefix, then what makes the name
    unique; ``.warc.gz`` for record-at-time gzip). Spark task retries get the
    same name and overwrite the failed attempt's file.
    """
    for name, part in (("prefix", prefix), ("segment", segment)):
        if not _FILENAME_PART.match(part):
            raise ValueError(f"{name} must be [A-Za-z0-9._-]+, got {part!r}")
    if task < 0 or serial < 0:
        raise ValueError("task and serial must be >= 0")
    return f"{prefix}-{segment}-{task:05d}-{serial:05d}.warc.gz"


def index_name(warc_file: str) -> str:
    """The name of a WARC file's own CDXJ index (``TaskArchive``'s ``index``)."""
    return f"{warc_file}.cdxj"


class TaskArchive(Closing):
    """The WARC files of one fetch task: one rotating writer per subset.

    ``writer(subset)`` is the subset's current file, opened on first use
    (with its ``warcinfo``) and replaced by the next serial once it has
    reached ``max_file_bytes``; call it once per capture, so the records of
    one capture stay in one file. Files replaced stay open until ``close``,
    so a metadata record written after parsing still joins its response.
    ``stored``/``remember`` keep the first response of every payload digest
    the task archived, for identical-payload-digest revisits (at most
    ``MAX_REMEMBERED`` of them). Not thread-safe: the caller serialises.
    """

    MAX_REMEMBERED = 200_000

    def __init__(
        self,
        directory: str | Path | Opener,
        segment: str,
        task: int,
        *,
        software: str,
        prefix: str = "trawl",
        max_file_bytes: int = 1_000_000_000,
        operator: str | None = None,
        extra_info: Mapping[str, str] | None = None,
        index: Opener | None = None,
    ) -> None:
        """``index``: an opener of the files' CDXJ indexes, ``<file>.cdxj``
        each (``index_name``), written as each file is closed (None: none)."""
        # where the files go: a local folder, or an opener of named sinks
        # (an object store's uploads, ``trawl.store.files``)
        self._open: Opener | None = None if isinstance(directory, str | Path) else directory
        self._dir = Path(directory) if isinstance(directory, str | Path) else Path()
        self._segment, self._task, self._prefix = segment, task, prefix
        self._max = max_file_bytes
        self._software, self._operator = software, operator
        self._extra = dict(extra_info or {})
        self._current: dict[str, WarcWriter] = {}
        self._all: list[WarcWriter] = []
        self._stored: dict[str, Stored] = {}
        self._index = index
        warc_filename(prefix, segment, task)  # validates the name parts now

    def writer(self, subset: str) -> WarcWriter:
        if subset not in SUBSETS:
            raise ValueError(f"unknown WARC subset {subset!r} (known: {', '.join(SUBSETS)})")
        current = self._current.get(subset)
        if current is not None and current.size < self._max:
            return current
        serial = sum(1 for w in self._all if w.subset == subset)
        prefix = self._prefix if subset == "warc" else f"{self._prefix}-{subset}"
        name = warc_filename(prefix, self._segment, self._task, serial)
        sink = None
        if self._open is not None:
            sink = self._open(name)
        else:
            self._dir.mkdir(parents=True, exist_ok=True)
        path = self._dir / name
        writer = WarcWriter(
            path, self._software, self._operator, self._extra, subset=subset, sink=sink,
            index=self._index is not None,
        )  # fmt: skip
        self._current[subset] = writer
        self._all.append(writer)
        return writer

    @property
    def files(self) -> list[Path]:
        """Every file opened so far, in order."""
        return [w.path for w in self._all]

    def stored(self, digest: str) -> Stored | None:
        return self._stored.get(digest)

    def remember(self, digest: str, ref: WarcRef, url: str, fetched_at: datetime) -> None:
        """Note the response record ``ref`` as the first copy of ``digest``."""
        if digest not in self._stored and len(self._stored) < self.MAX_REMEMBERED:
            self._stored[digest] = Stored.of(ref, url, fetched_at)

    def close(self) -> None:
        """Close every file: each appears, complete, under its name, its
        index (with ``index``) just before it. An index names a file that
        exists, or one whose close failed (the task fails, and its retry
        writes both again): never a file whose index is not its own, nor a
        part of one. An index that cannot be made or written is left out
        (the file is indexed from its records instead,
        ``trawl.runner.fetch.write_segment_index``)."""
        for writer in self._all:
            if self._index is not None and writer.indexed:
                self._write_index(writer)
            writer.close()

    def _write_index(self, writer: WarcWriter) -> None:
        assert self._index is not None
        lines = "".join(f"{line}\n" for line in writer.index_lines).encode()
        sink = None
        try:
            sink = self._index(index_name(writer.name))
            sink.write(lines)
            sink.close()
        except Exception as exc:
            abort = getattr(sink, "abort", None)
            if callable(abort):
                with suppress(Exception):
                    abort()
            log.warning("the index of WARC file %s was not written: %s", writer.name, exc)

    def abort(self) -> None:
        """Drop every file not closed yet (a failed task: its retry writes
        them again under the same names)."""
        for writer in self._all:
            writer.abort()
