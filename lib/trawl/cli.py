"""``trawl``: every job of the crawl from one command line.

Each command takes ``--crawl DIR`` (the crawl root), ``--config FILE`` and
repeated ``--set section.key=value`` overrides (the value is read as TOML, or
as a plain string when it is not TOML). Jobs take the cycle's logical time as
``--at`` (ISO 8601; the CLI defaults it to now, the only place trawl reads
the wall clock for it) and a ``--segment`` id (default: derived from --at).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trawl import __version__
from trawl.config import Config, ConfigError, load_config
from trawl.store.lease import CrawlLease, LeaseHeld

if TYPE_CHECKING:
    from trawl.store.policy import PolicyRule, PolicyStore

DEFAULT_CRAWL = "crawl"
# The commands that change the crawl hold its lease; EX_TEMPFAIL when it is taken.
WRITING_COMMANDS = (
    "inject", "generate", "fetch", "updatedb", "dedup", "events", "cycle", "compact",
)  # fmt: skip
EXIT_IN_USE = 75


def _at(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--at wants ISO 8601 time, got {text!r}") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--crawl", default=DEFAULT_CRAWL, help="crawl root directory (default: crawl)")
    p.add_argument("--config", help="TOML config file (keys as in conf/trawl.toml)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config key (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print JSON, one object per line")


def _timed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--at", type=_at, help="logical time of this cycle (default: now)")
    p.add_argument("--segment", help="segment id (default: from --at)")


def _job(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
    _common(parser)
    _timed(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trawl", description="A polite batch web crawler on Spark and Delta Lake."
    )
    parser.add_argument("--version", action="version", version=f"trawl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = _job(sub, "inject", "add seed URLs (and sitemaps) to the crawldb")
    p.add_argument("seeds", nargs="*", help="seed files: URL [score] [reason] per line")
    p.add_argument(
        "--sitemaps",
        nargs="+",
        default=[],
        metavar="FILE",
        help="files of sitemap URLs (same format)",
    )
    _job(sub, "generate", "select the next segment's fetch list")
    p = _job(sub, "fetch", "fetch a generated segment (default: the newest)")
    p.add_argument("--time-limit", type=float, help="seconds (default fetch.time_limit_s)")
    _job(sub, "updatedb", "merge a fetched segment (default: the newest)")
    _job(sub, "dedup", "mark exact and near-duplicate pages of an updated segment (the newest)")
    _job(sub, "events", "write a deduplicated segment's events to the events table (the newest)")
    p = _job(sub, "cycle", "generate -> fetch -> updatedb -> dedup -> events, N times")
    p.add_argument("--cycles", type=int, default=1)
    p.add_argument("--seeds", nargs="*", default=[], help="inject these seed files first")
    p.add_argument("--sitemaps", nargs="*", default=[], help="and these files of sitemap URLs")
    p.add_argument(
        "--step", type=float, default=3600.0, help="logical seconds between cycles (default 3600)"
    )
    p.add_argument("--time-limit", type=float, help="fetch time limit per cycle, seconds")
    p = sub.add_parser(
        "compact", help="fold the small files MERGEs leave into larger ones (Delta OPTIMIZE)"
    )
    _common(p)
    p.add_argument("tables", nargs="*", help="crawldb, hostdb, ... (default: every table)")
    p = sub.add_parser("stats", help="crawldb statistics (readdb -stats and more)")
    _common(p)
    p = sub.add_parser("sql", help="run SQL over the crawl tables")
    _common(p)
    p.add_argument("query", help='e.g. "SELECT status, count(*) FROM crawldb GROUP BY 1"')
    p = sub.add_parser("testweb", help="serve the synthetic test web on loopback")
    _common(p)
    p.add_argument("--out", default="testweb", help="folder for hosts file, seeds, access log")
    p.add_argument("--at", type=_at, help="serve the web as of this logical time (ISO 8601)")
    p.add_argument(
        "--traps",
        action="store_true",
        help="also serve the crawler traps (calendar, facets, session ids, link farm, "
        "soft 404s); their entrances are added to the seeds",
    )
    p = sub.add_parser("demo", help="start the test web, crawl it, show what happened")
    _common(p)
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--out", default="demo", help="folder for the demo's crawl and test web")
    _policy_parser(sub)
    _warc_parsers(sub)
    return parser


def _warc_parsers(sub: Any) -> None:
    warc = sub.add_parser("warc", help="read the crawl's WARC files: one record, the index")
    verbs = warc.add_subparsers(dest="warc_command", required=True, metavar="ACTION")
    p = verbs.add_parser(
        "get",
        help="print the record a warc_ref points to (no Spark)",
        description="REF is an event's warc_ref as JSON, or FILE:OFFSET[:LENGTH] "
        "(the fetch table's warc_file, warc_offset, warc_length).",
    )
    _common(p)
    p.add_argument(
        "ref", help='{"file": ..., "offset": ..., "length": ...} or FILE:OFFSET[:LENGTH]'
    )
    part = p.add_mutually_exclusive_group()
    part.add_argument("--headers", action="store_true", help="the WARC header lines only")
    part.add_argument(
        "--payload", action="store_true", help="the HTTP payload only, as stored (still encoded)"
    )
    p = verbs.add_parser(
        "index", help="merge the segments' CDXJ indexes into one sorted file (streaming)"
    )
    _common(p)
    p.add_argument("--segments", nargs="*", default=[], help="default: every fetched segment")
    p.add_argument("--out", required=True, help="the merged .cdxj file to write")
    export = sub.add_parser("export", help="copy selected captures into new WARC files")
    kinds = export.add_subparsers(dest="export_kind", required=True, metavar="KIND")
    p = kinds.add_parser(
        "warc",
        help="captures by segment, time, host, domain, status; byte-exact, rotated, with CDXJ",
        description="Each selected capture is copied record for record (response or revisit, "
        "with its request and metadata) into <prefix>-export-<time>-<serial>.warc.gz files "
        "under --out, rotated at warc.max_file_bytes, each with its own warcinfo, and indexed "
        "into <name>.cdxj beside them.",
    )
    _common(p)
    p.add_argument("--at", type=_at, help="time that names the files (default: now)")
    p.add_argument("--out", required=True, help="folder for the WARC files and their index")
    p.add_argument("--name", help="file name stem (default <prefix>-export-<time>)")
    p.add_argument("--segments", nargs="*", default=[], help="default: every fetched segment")
    p.add_argument("--since", type=_at, help="captured at or after (ISO 8601)")
    p.add_argument("--until", type=_at, help="captured before (ISO 8601)")
    p.add_argument("--host", action="append", default=[], help="this host (repeatable)")
    p.add_argument("--domain", action="append", default=[], help="this registered domain")
    p.add_argument(
        "--status", action="append", default=[], help="HTTP status 200 or class 2xx (repeatable)"
    )
    p.add_argument(
        "--no-duplicates",
        dest="duplicates",
        action="store_false",
        help="leave out pages dedup marked as duplicates of another",
    )


def _policy_target_args(p: argparse.ArgumentParser, required: bool) -> None:
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--host", help="one host, e.g. www.example.com")
    group.add_argument("--domain", help="a registered domain and all its hosts, e.g. example.com")


def _policy_author(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason", required=True, help="why (kept in the audit trail)")
    p.add_argument("--by", help="who (default: your user name)")


def _policy_parser(sub: Any) -> None:
    policy = sub.add_parser(
        "policy",
        help="block / slow / pause / budget a host or domain, with a reason (no Spark)",
        description="Operator rules, kept in the policy table as an audit trail. "
        "Running fetches pick changes up within fetch.policy_refresh_s.",
    )
    verbs = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    p = verbs.add_parser("set", help="change the rule for a host or domain; prints it")
    _common(p)
    _policy_target_args(p, required=True)
    block = p.add_mutually_exclusive_group()
    block.add_argument(
        "--block", dest="blocked", action="store_const", const=True, help="fetch nothing"
    )
    block.add_argument(
        "--unblock", dest="blocked", action="store_const", const=False, help="lift a block"
    )
    p.add_argument(
        "--min-delay", type=float, metavar="SECONDS", help="at least this gap between requests"
    )
    pause = p.add_mutually_exclusive_group()
    pause.add_argument(
        "--pause-until",
        metavar="ISO",
        help="no fetches until then (UTC if no zone; a past time ends a pause)",
    )
    pause.add_argument("--pause-for", metavar="DURATION", help="no fetches for 30m, 2h, 1d ...")
    p.add_argument("--max-pages", type=int, metavar="N", help="at most N pages per cycle")
    _policy_author(p)
    p = verbs.add_parser("list", help="the rules in force (or every change with --history)")
    _common(p)
    _policy_target_args(p, required=False)
    p.add_argument("--history", action="store_true", help="the whole audit trail")
    p = verbs.add_parser("clear", help="remove the rule for a host or domain")
    _common(p)
    _policy_target_args(p, required=True)
    _policy_author(p)


def main(argv: Sequence[str] | None = None, submitted: bool = False) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = load_config(args.config, args.set)
    except ConfigError as exc:
        print(f"trawl: config error: {exc}", file=sys.stderr)
        return 2
    if submitted:  # under spark-submit the master comes from spark-submit
        from dataclasses import replace

        cfg = replace(cfg, spark=replace(cfg.spark, master=""))
    try:
        with _lease(args, cfg):
            return int(_dispatch(args, cfg) or 0)
    except LeaseHeld as exc:
        print(f"trawl: {exc}", file=sys.stderr)
        return EXIT_IN_USE
    except (ValueError, FileNotFoundError) as exc:
        print(f"trawl: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `trawl ... --json | head`: the reader had enough
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _lease(args: argparse.Namespace, cfg: Config) -> AbstractContextManager[Any]:
    """The crawl's lease for the commands that write it (``trawl.store.lease``)."""
    if args.command not in WRITING_COMMANDS or "://" in args.crawl:
        return nullcontext()
    segment = getattr(args, "segment", None)
    command = f"{args.command} --segment {segment}" if segment else args.command
    return CrawlLease(args.crawl, command, cfg.crawl.lease_ttl_s, cfg.crawl.lease_wait_s)


def _dispatch(args: argparse.Namespace, cfg: Config) -> int | None:
    if args.command == "testweb":
        from trawl.demo import serve_testweb

        return serve_testweb(cfg, Path(args.out), args.at, traps=args.traps)
    if args.command == "demo":
        from trawl.demo import run_demo

        return run_demo(cfg, Path(args.out), args.cycles, args.set)
    if args.command == "policy":  # deltalake only: never starts a JVM
        return _policy(args)
    if args.command == "warc" and args.warc_command == "get":  # no JVM either
        return _warc_get(args)
    from trawl.report import emit
    from trawl.store.session import build_spark

    spark = build_spark(cfg)
    root = str(Path(args.crawl).absolute()) if "://" not in args.crawl else args.crawl
    if args.command in ("stats", "sql"):
        from trawl.runner import segment_id
        from trawl.stages.common import StageContext

        now = datetime.now(UTC)
        return _query(StageContext(spark, cfg, root, segment_id(now), now), args)
    if args.command in ("warc", "export"):
        return _archive_command(spark, cfg, root, args)
    if args.command == "compact":
        from trawl.runner import run_compact, segment_id
        from trawl.stages.common import StageContext

        now = datetime.now(UTC)
        rows = run_compact(StageContext(spark, cfg, root, segment_id(now), now), args.tables)
        emit(rows, args.json, "compact")
        return 0
    from trawl.runner import (
        run_dedup,
        run_events,
        run_fetch,
        run_generate,
        run_inject,
        run_updatedb,
        segment_id,
    )
    from trawl.stages.common import StageContext

    at = args.at or datetime.now(UTC)
    if args.command == "cycle":
        from trawl.runner import run_cycles

        ctx = StageContext(spark, cfg, root, args.segment or segment_id(at), at)
        if args.seeds or args.sitemaps:
            emit([run_inject(ctx, args.seeds, args.sitemaps)], args.json, "inject")
        rows = run_cycles(ctx, args.cycles, timedelta(seconds=args.step), args.time_limit)
        emit(rows, args.json, "cycles")
        return 0
    segment = args.segment
    if not segment and args.command in ("fetch", "updatedb", "dedup", "events"):
        from trawl.store.tables import list_segments

        known = list_segments(spark, root)
        if not known:
            raise ValueError(f"no segments under {root}: run generate first")
        segment = known[-1]  # the newest, as Nutch's -dir with one segment
    ctx = StageContext(spark, cfg, root, segment or segment_id(at), at)
    if args.command == "inject":
        if not args.seeds and not args.sitemaps:
            raise ValueError("inject: give seed files, --sitemaps files or both")
        result = run_inject(ctx, args.seeds, args.sitemaps)
    elif args.command == "generate":
        result = run_generate(ctx)
    elif args.command == "fetch":
        result = run_fetch(ctx, args.time_limit)
    elif args.command == "dedup":
        result = run_dedup(ctx)
    elif args.command == "events":
        result = run_events(ctx)
    else:
        result = run_updatedb(ctx)
    emit([result], args.json, args.command)
    return 0


def _warc_get(args: argparse.Namespace) -> int:
    from trawl.warc.lookup import get_record, parse_ref

    record, raw = get_record(args.crawl, parse_ref(args.ref))
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
    from trawl.report import emit
    from trawl.runner import run_export, run_warc_index, segment_id
    from trawl.stages.common import StageContext
    from trawl.stages.export import Selection, parse_statuses

    at = getattr(args, "at", None) or datetime.now(UTC)
    ctx = StageContext(spark, cfg, root, segment_id(at), at)
    if args.command == "warc":
        emit([run_warc_index(ctx, args.segments, args.out)], args.json, "warc index")
        return 0
    selection = Selection(
        segments=tuple(args.segments),
        since=args.since,
        until=args.until,
        hosts=tuple(args.host),
        domains=tuple(args.domain),
        statuses=parse_statuses(args.status),
        duplicates=args.duplicates,
    )
    emit([run_export(ctx, selection, args.out, args.name)], args.json, "export warc")
    return 0


def _query(ctx: Any, args: argparse.Namespace) -> int:
    from trawl.report import emit
    from trawl.runner import QueryError, run_sql, run_stats

    if args.command == "stats":
        for title, rows in run_stats(ctx).items():
            emit(rows, args.json, title)
        return 0
    try:
        rows = run_sql(ctx, args.query)
    except QueryError as exc:
        print(f"trawl sql: {exc}", file=sys.stderr)
        return 2
    emit(rows, args.json)
    return 0


def _operator() -> str:
    import getpass

    try:
        return getpass.getuser() or "unknown"
    except (OSError, KeyError, ImportError):
        return "unknown"


def _policy(args: argparse.Namespace) -> int:
    from trawl.report import emit
    from trawl.store.policy import PolicyStore, PolicyTableError

    store = PolicyStore(args.crawl if "://" in args.crawl else Path(args.crawl).absolute())
    try:
        if args.policy_command == "list":
            rows, title = _policy_list(store, args)
        else:
            rows, title = [_policy_change(store, args).as_row()], "policy in force"
    except PolicyTableError as exc:
        print(f"trawl policy: {exc}", file=sys.stderr)
        return 1
    emit(rows, args.json, title)
    return 0


def _policy_target(args: argparse.Namespace) -> tuple[str, str] | None:
    if args.host is not None:
        return ("host", args.host)
    return ("domain", args.domain) if args.domain is not None else None


def _policy_list(store: PolicyStore, args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    from trawl.store.policy import rules_for

    if args.history:
        rules, title = store.rules(), "policy history"
    else:
        rules, title = sorted(store.in_force().values(), key=lambda r: r.key), "policy in force"
    wanted = _policy_target(args)
    if wanted is not None:
        rules = rules_for(rules, *wanted)
    return [r.as_row() for r in rules], title


def _policy_change(store: PolicyStore, args: argparse.Namespace) -> PolicyRule:
    from trawl.store.policy import RuleChange, parse_duration, parse_time, pause_end

    wanted = _policy_target(args)
    assert wanted is not None  # argparse requires --host or --domain here
    scope, target = wanted
    by = args.by if args.by is not None else _operator()
    now = datetime.now(UTC)  # an operator action happens now
    if args.policy_command == "clear":
        return store.clear(scope, target, set_by=by, reason=args.reason, at=now)
    pause = parse_time(args.pause_until) if args.pause_until is not None else None
    if args.pause_for is not None:
        pause = pause_end(now, parse_duration(args.pause_for))
    change = RuleChange(args.blocked, args.min_delay, pause, args.max_pages)
    return store.set(scope, target, change, set_by=by, reason=args.reason, at=now)


if __name__ == "__main__":
    raise SystemExit(main())
