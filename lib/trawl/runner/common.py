"""What every job shares: segment ids, progress lines, and the checks a job
makes before it reads or MERGEs (its tables exist, its segment was fetched,
a job already counted)."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession

from trawl.config import Config
from trawl.stages.common import StageContext, materialize
from trawl.store import deltars
from trawl.store.files import CrawlRoot
from trawl.store.tables import SMALL_TABLE_BYTES, ensure_all, read_table, segment_exists
from trawl.store.tables import counted as counted_in


@dataclass(frozen=True)
class JobContext:
    """One job's run: the session, the config, the crawl root, the segment and
    the logical time. The stages get ``stage`` (no session, no root)."""

    spark: SparkSession
    cfg: Config
    root: str
    segment: str
    at: datetime  # the cycle's logical time; no job reads the wall clock for it

    @property
    def stage(self) -> StageContext:
        return StageContext(self.cfg, self.segment, self.at)

    @property
    def files(self) -> CrawlRoot:
        """The crawl root's files (WARC, indexes, claims), local or object store."""
        return CrawlRoot.of(self.root, self.cfg.storage)


def segment_id(at: datetime) -> str:
    """Segment ids sort by logical time: ``20261130T0353Z``-style, UTC."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


_QUIET = threading.Event()  # --quiet: no progress, no stage lines


def set_quiet(on: bool = True) -> None:
    """Silence (or not) the progress lines the jobs print on stderr."""
    if on:
        _QUIET.set()
    else:
        _QUIET.clear()


def quiet() -> bool:
    return _QUIET.is_set()


_PENDING = threading.Event()  # a stage's "running" line waits to be replaced


def say(msg: str) -> None:
    if not _QUIET.is_set():
        lead = "\r\033[K" if _PENDING.is_set() else ""  # over the "running" line
        _PENDING.clear()
        print(f"{lead}[trawl] {msg}", file=sys.stderr, flush=True)


def stage(name: str) -> None:
    """On a terminal, show which stage runs now, on a line the stage's own
    result (``say``) or its progress replaces; nothing in a log."""
    if not _QUIET.is_set() and sys.stderr.isatty():
        print(f"\r\033[K[trawl]   {name} ...", end="", file=sys.stderr, flush=True)
        _PENDING.set()


def tables_ready(ctx: JobContext) -> None:
    """Every crawl table exists, and crawldb and hostdb have deletion vectors
    once they are large enough (``crawl.deletion_vectors_min_mb``), before a
    job MERGEs into them."""
    ensure_all(ctx.spark, ctx.root, ctx.cfg.crawl.deletion_vectors_min_mb * 2**20, ctx.files)


def counted(ctx: JobContext, job: str) -> bool:
    """Whether ``job`` has written its counters for this segment (it finished)."""
    return counted_in(ctx.files, ctx.segment, job)


def fetched_segment(ctx: JobContext, merges: bool = False) -> None:
    """The jobs after fetch need its table, and every crawl table to exist
    (``merges``: ready for the job's MERGE into crawldb or hostdb)."""
    if not segment_exists(ctx.spark, ctx.root, ctx.segment, "fetch"):
        raise SystemExit(f"segment {ctx.segment} has no fetch table: run fetch first")
    if merges:
        tables_ready(ctx)
    else:
        ensure_all(ctx.spark, ctx.root)


def read_whole(ctx: JobContext, name: str) -> tuple[DataFrame, list[DataFrame]]:
    """Table ``name`` for a job that reads it in several queries before its
    own commits, and the frames to ``release`` when the job is done.

    A table under ``SMALL_TABLE_BYTES`` is read once and kept in memory
    (``materialize``): each Delta scan with a filter costs a Spark job over
    the table's file list before any row is read, and a small cycle's
    generate scanned crawldb a dozen times. A bigger table is the Delta
    table itself: holding it would cost more memory than its scans cost
    jobs. Either way the rows are one snapshot, taken before the job's
    writes; a job that must see its own commits reads the table again."""
    table = read_table(ctx.spark, ctx.root, name)
    try:
        state = deltars.table_state(ctx.files, name)
    except deltars.SmallTableError:
        state = None
    if state is None or state[1] >= SMALL_TABLE_BYTES:
        return table, []
    kept = materialize(table)
    return kept, [kept]
