"""What every job shares: segment ids, progress lines, and the checks a job
makes before it reads or MERGEs (its tables exist, its segment was fetched,
a job already counted)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from trawl.config import Config
from trawl.stages.common import StageContext, materialize
from trawl.store import deltars
from trawl.store.files import CrawlRoot
from trawl.store.session import small_job_conf
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


# A segment table a small job may read (``small_job``): the fetch table of
# a few thousand pages and their links is a few MB.
SMALL_SEGMENT_BYTES = 32 * 2**20
# A small job shuffles into one partition, or one per MiB of the segment
# table it reads, at most one per core (``small_partitions``). Its row
# functions (admission, the fetch transitions, hostdb's merge) cost 100 us
# and more a row in Python; one partition puts them all in one task on one
# core. updatedb of the fetch bench's segment (6.5 MB, 12,520 rows) in a warm
# session, interleaved: 23.0/17.8/16.0 s with a partition per core against
# 25.8/22.8/24.4 s with one; bench_stages' segments (under 1 MiB) were
# slower with two (docs/benchmarks.md, "Stages").
SMALL_PARTITION_BYTES = 2**20


def is_small(ctx: JobContext, segment_table: str = "", input_bytes: int = 0) -> bool:
    """Whether the job runs as a small one (``spark.small_jobs``): crawldb
    is under ``SMALL_TABLE_BYTES`` by its Delta log (or not there yet), and
    so are the segment table it reads (``segment_table``, under
    ``SMALL_SEGMENT_BYTES``) and its other input (``input_bytes``, the
    seed files of inject). Unknown sizes count as big."""
    if not ctx.cfg.spark.small_jobs or input_bytes >= SMALL_TABLE_BYTES:
        return False
    try:
        state = deltars.table_state(ctx.files, "crawldb")
    except deltars.SmallTableError:
        return False
    if state is not None and state[1] >= SMALL_TABLE_BYTES:
        return False
    if segment_table:
        return _segment_bytes(ctx, segment_table) < SMALL_SEGMENT_BYTES
    return True


def _segment_bytes(ctx: JobContext, table: str) -> int:
    return ctx.files.size(f"segments/{ctx.segment}/{table}")


def small_partitions(ctx: JobContext, segment_table: str = "") -> int:
    """The shuffle partitions of a small job: one per ``SMALL_PARTITION_BYTES``
    of the segment table it reads, at least one, at most the cores Spark
    has (``defaultParallelism``)."""
    if not segment_table:
        return 1
    share = _segment_bytes(ctx, segment_table) // SMALL_PARTITION_BYTES
    return max(1, min(ctx.spark.sparkContext.defaultParallelism, share))


@contextmanager
def small_job(ctx: JobContext, segment_table: str = "", input_bytes: int = 0) -> Iterator[bool]:
    """Run the block with Spark's settings for small data
    (``trawl.store.session.SMALL_JOB_CONF``, with ``small_partitions``) when
    the job is small (``is_small``); yields whether it is."""
    if not is_small(ctx, segment_table, input_bytes):
        yield False
        return
    with small_job_conf(ctx.spark, ctx.cfg, small_partitions(ctx, segment_table)):
        yield True


def sized_job(
    segment_table: str = "",
) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """A job of the cycle (``run_generate(ctx, ...)``) run as a small one
    when it is (``small_job``; ``segment_table``: the one it reads)."""

    def wrap(job: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @wraps(job)
        def run(ctx: JobContext, *args: Any, **kwargs: Any) -> dict[str, Any]:
            with small_job(ctx, segment_table):
                return job(ctx, *args, **kwargs)

        return run

    return wrap
