"""What each ``trawl`` command does with its parsed arguments and config.

:func:`dispatch` sends a command to its handler. The commands that need no
Spark (``testweb``, ``demo`` which starts its own, ``policy``, ``warc
get``) run first and never build a session; every other one builds one
session and a ``trawl.runner.JobContext`` for the crawl root, then calls its
runner job and prints the result (``trawl.report.emit``). Imports are made
inside the handlers, so ``trawl --help`` and the light commands load
neither Spark nor the stages.

The jobs take the cycle's logical time from ``--at``, defaulting to now
here, the only place trawl reads the wall clock for it; the jobs that work
on a segment default to the newest one (as Nutch's ``-dir`` with one
segment).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from trawl.cli.policy import policy_command
from trawl.config import Config
from trawl.store.files import CrawlRoot

if TYPE_CHECKING:
    from trawl.runner import JobContext

# Jobs that work on an existing segment: the newest when --segment is not given.
SEGMENT_JOBS = ("fetch", "updatedb", "dedup", "events")
# Commands that only read the crawl (vacuum only deletes, catalog writes the
# metastore): a root without one is an error (exit 2), never a new empty crawl.
READING_COMMANDS = ("stats", "sql", "report", "warc", "export", "vacuum", "catalog")


def dispatch(args: argparse.Namespace, cfg: Config) -> int | None:
    if args.command == "testweb":
        from trawl.demo import serve_testweb

        return serve_testweb(
            cfg, Path(args.out), args.at, traps=args.traps, requisites=args.requisites
        )
    if args.command == "demo":
        from trawl.demo import run_demo

        return run_demo(cfg, Path(args.out), args.cycles, args.set, args.hosts, args.archive)
    if args.command == "policy":  # deltalake only: never starts a JVM
        return policy_command(args, cfg)
    if args.command == "warc" and args.warc_command == "get":  # no JVM either
        return _warc_get(args, cfg)
    if args.command == "export" and args.export_kind == "wacz":  # a bad --out: before any JVM
        from trawl.warc.wacz import WaczSigner, wacz_target

        wacz_target(args.out)
        if args.sign_key:
            WaczSigner.from_pem(args.sign_key)
    if args.command in READING_COMMANDS:  # reads never write: no crawl, no JVM, exit 2
        from trawl.store.lake import require_crawl

        require_crawl(CrawlRoot.of(args.crawl, cfg.storage))
        if args.command in ("stats", "sql") and args.engine == "duckdb":
            return _query(args, cfg, None)
        if args.command == "report":
            return _report(args, cfg)
    return _spark_command(args, cfg)


def _spark_command(args: argparse.Namespace, cfg: Config) -> int:
    from trawl.runner.common import set_quiet
    from trawl.store.session import build_spark

    set_quiet(args.quiet)

    in_cycle = args.command == "cycle" and cfg.catalog.register_in_cycle
    spark = build_spark(cfg, catalog=args.command == "catalog" or in_cycle)
    root = CrawlRoot.of(args.crawl, cfg.storage).uri
    if args.command in ("stats", "sql"):
        from trawl.runner import JobContext, segment_id

        now = args.at if args.command == "stats" and args.at else datetime.now(UTC)
        return _query(args, cfg, JobContext(spark, cfg, root, segment_id(now), now))
    if args.command in ("warc", "export"):
        return _archive_command(spark, cfg, root, args)
    if args.command == "compact":
        return _compact(spark, cfg, root, args)
    if args.command == "vacuum":
        return _vacuum(spark, cfg, root, args)
    if args.command == "catalog":
        from trawl.report import emit
        from trawl.runner import JobContext, segment_id
        from trawl.runner.catalog import run_catalog

        now = datetime.now(UTC)
        emit(
            [run_catalog(JobContext(spark, cfg, root, segment_id(now), now))], args.json, "catalog"
        )
        return 0
    at = args.at or datetime.now(UTC)
    if args.command == "cycle":
        return _cycle(spark, cfg, root, at, args)
    return _segment_job(spark, cfg, root, at, args)


def _compact(spark: Any, cfg: Config, root: str, args: argparse.Namespace) -> int:
    from trawl.report import emit
    from trawl.runner import JobContext, run_compact, segment_id

    now = datetime.now(UTC)
    rows = run_compact(JobContext(spark, cfg, root, segment_id(now), now), args.tables)
    emit(rows, args.json, "compact")
    return 0


def _vacuum(spark: Any, cfg: Config, root: str, args: argparse.Namespace) -> int:
    from trawl.report import emit
    from trawl.runner import JobContext, segment_id
    from trawl.runner.vacuum import run_vacuum

    now = datetime.now(UTC)
    ctx = JobContext(spark, cfg, root, segment_id(now), now)
    emit(run_vacuum(ctx, args.tables, args.retain_hours, args.dry_run), args.json, "vacuum")
    return 0


def _cycle(spark: Any, cfg: Config, root: str, at: datetime, args: argparse.Namespace) -> int:
    from trawl.report import emit
    from trawl.runner import JobContext, run_cycles, run_inject, segment_id

    ctx = JobContext(spark, cfg, root, args.segment or segment_id(at), at)
    if args.seeds or args.sitemaps:
        emit([run_inject(ctx, args.seeds, args.sitemaps)], args.json, "inject")
    rows = run_cycles(ctx, args.cycles, timedelta(seconds=args.step), args.time_limit)
    emit(rows, args.json, "cycles")
    return 0


def _segment_job(spark: Any, cfg: Config, root: str, at: datetime, args: argparse.Namespace) -> int:
    """One job of the cycle, on ``--segment``, the newest segment or a new one."""
    from trawl.report import emit
    from trawl.runner import JobContext, segment_id

    segment = args.segment
    if not segment and args.command in SEGMENT_JOBS:
        from trawl.store.tables import list_segments

        known = list_segments(spark, root)
        if not known:
            raise ValueError(f"no segments under {root}: run generate first")
        segment = known[-1]  # the newest, as Nutch's -dir with one segment
    ctx = JobContext(spark, cfg, root, segment or segment_id(at), at)
    emit([_run_job(ctx, args)], args.json, args.command)
    return 0


def _run_job(ctx: JobContext, args: argparse.Namespace) -> dict[str, Any]:
    from trawl.runner import (
        run_dedup,
        run_events,
        run_fetch,
        run_generate,
        run_inject,
        run_updatedb,
    )

    if args.command == "inject":
        if not args.seeds and not args.sitemaps:
            raise ValueError("inject: give seed files, --sitemaps files or both")
        return run_inject(ctx, args.seeds, args.sitemaps)
    if args.command == "generate":
        return run_generate(ctx)
    if args.command == "fetch":
        return run_fetch(ctx, args.time_limit)
    if args.command == "dedup":
        return run_dedup(ctx)
    if args.command == "events":
        return run_events(ctx)
    return run_updatedb(ctx)


def _warc_get(args: argparse.Namespace, cfg: Config) -> int:
    from trawl.store.files import warc_record
    from trawl.warc.lookup import parse_ref

    record, raw = warc_record(CrawlRoot.of(args.crawl, cfg.storage), parse_ref(args.ref))
    if args.headers:
        out = raw[: raw.index(b"\r\n\r\n") + 4]
    elif args.payload:
        out = record.payload()
    else:
        out = raw
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


def _archive_command(spark: Any, cfg: Config, root: str, args: argparse.Namespace) -> int:
    from trawl.crawldb.policy import normalize_target
    from trawl.report import emit
    from trawl.runner import JobContext, run_export, run_wacz_export, run_warc_index, segment_id
    from trawl.stages.export import Selection, parse_statuses

    at = getattr(args, "at", None) or datetime.now(UTC)
    ctx = JobContext(spark, cfg, root, segment_id(at), at)
    if args.command == "warc":
        emit([run_warc_index(ctx, args.segments, args.out)], args.json, "warc index")
        return 0
    selection = Selection(
        segments=tuple(args.segments),
        since=args.since,
        until=args.until,
        hosts=tuple(args.host),
        # registered domains as crawldb holds them; "github.io" (a public
        # suffix, not a site) is refused with what to give instead
        domains=tuple(normalize_target("domain", d) for d in args.domain),
        statuses=parse_statuses(args.status),
        duplicates=args.duplicates,
    )
    if args.export_kind == "wacz":
        made = run_wacz_export(ctx, selection, args.out, args.title, args.sign_key)
        emit([made], args.json, "export wacz")
        return 0
    emit([run_export(ctx, selection, args.out, args.name)], args.json, "export warc")
    return 0


def _query(args: argparse.Namespace, cfg: Config, ctx: JobContext | None) -> int:
    """``stats`` and ``sql`` on DuckDB (``ctx`` None) or on Spark."""
    from trawl.store.lake import QueryError

    if args.command == "stats":
        return _stats(args, cfg, ctx)
    fmt = args.format or ("json" if args.json else "table")
    try:
        with _result(args, cfg, ctx) as (schema, batches), _output(args.out) as out:
            _write(batches, fmt, out, args.limit, schema)
    except QueryError as exc:
        print(f"trawl sql: {exc}", file=sys.stderr)
        return 2
    return 0


def _report(args: argparse.Namespace, cfg: Config) -> int:
    from trawl.crawlreport import write_report
    from trawl.report import emit

    done = write_report(CrawlRoot.of(args.crawl, cfg.storage), cfg, Path(args.out), args.at)
    path = Path(done.path).absolute()
    emit([{"report": str(path), "sections": len(done.sections), "plots": done.plots,
           "bytes": done.bytes}], args.json, "report")  # fmt: skip
    if not args.json:
        print(f"\nopen it in a browser: {path.as_uri()}")
    return 0


def _stats(args: argparse.Namespace, cfg: Config, ctx: JobContext | None) -> int:
    import json

    from trawl.report import emit

    if ctx is None:
        from trawl.sql import lake_stats

        at = args.at or datetime.now(UTC)
        sections = lake_stats(CrawlRoot.of(args.crawl, cfg.storage), cfg, at)
    else:
        from trawl.runner import run_stats

        sections = run_stats(ctx)
    if args.json:  # one object, a list of rows per section
        from trawl.report import json_default

        print(json.dumps(sections, default=json_default))
        return 0
    for title, rows in sections.items():
        emit(rows, False, title)
    return 0


@contextmanager
def _result(args: argparse.Namespace, cfg: Config, ctx: JobContext | None) -> Iterator[Any]:
    if ctx is None:
        from trawl.sql import lake_batches

        with lake_batches(CrawlRoot.of(args.crawl, cfg.storage), args.query, args.limit) as got:
            yield got
    else:
        from trawl.runner.query import sql_batches

        yield sql_batches(ctx, args.query, args.limit)


@contextmanager
def _output(path: str | None) -> Iterator[BinaryIO]:
    """Where a result goes: ``--out FILE`` (written whole or not at all:
    a temporary file renamed at the end), else stdout."""
    if path is None:
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    part = target.with_name(f".{target.name}.part")
    try:
        with part.open("wb") as out:
            yield out
        part.replace(target)
    finally:
        part.unlink(missing_ok=True)


def _write(batches: Any, fmt: str, out: BinaryIO, limit: int | None, schema: Any) -> None:
    from trawl.report import write_batches

    write_batches(batches, fmt, out, limit, schema)
