"""The ``trawl`` command line's grammar: every command, its arguments, its help.

Only argparse, no behaviour: ``trawl.cli.commands`` and ``trawl.cli.policy``
act on the parsed arguments, so the whole grammar reads in one place and a
test can parse any command line without running it. Every command takes
``--crawl``, ``--config``, repeated ``--set`` and ``--json``; the jobs also
``--at`` (the cycle's logical time, ISO 8601, UTC when no zone is given) and
``--segment``.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from trawl import __version__

DEFAULT_CRAWL = "crawl"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trawl", description="A polite batch web crawler on Spark and Delta Lake."
    )
    parser.add_argument("--version", action="version", version=f"trawl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _job_parsers(sub)
    _query_parsers(sub)
    _demo_parsers(sub)
    _policy_parser(sub)
    _warc_parsers(sub)
    _export_parser(sub)
    return parser


def _job_parsers(sub: Any) -> None:
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


def _query_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "compact", help="fold the small files MERGEs leave into larger ones (Delta OPTIMIZE)"
    )
    _common(p)
    p.add_argument("tables", nargs="*", help="crawldb, hostdb, ... (default: every table)")
    p = sub.add_parser(
        "vacuum",
        help="delete files no table version of the last segments needs (Delta VACUUM)",
        description="Keeps time travel over the newest crawl.vacuum_keep_segments segments "
        "and over any segment still running; an explicit --retain-hours shorter than a "
        "running segment is refused. Segment tables (plain files) are not touched.",
    )
    _common(p)
    p.add_argument("tables", nargs="*", help="crawldb, hostdb, ... (default: every table)")
    p.add_argument("--retain-hours", type=float, metavar="H", help="keep files removed in the "
                   "last H hours (default: from crawl.vacuum_keep_segments)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="count the files, delete none")
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report of the crawl, with plots (no JVM)",
        description="One HTML file, no external resources: pages by status and outcome per "
        "segment, new, deferred and rejected URLs, politeness (requests and gaps per "
        "address), response times, robots.txt outcomes, duplicates, change rates, the "
        "largest hosts and domains. Open it in any browser.",
    )
    _common(p)
    p.add_argument("--out", default="report.html", help="the HTML file (default report.html)")
    p.add_argument("--at", type=_at, help="the time 'due' is counted at (default: now)")
    p = sub.add_parser(
        "catalog",
        help="register the crawl's tables in the metastore, by name (idempotent)",
        description="Makes a database for the crawl ([catalog] database, default the root's "
        "last folder name) in the Hive metastore ([catalog] metastore_uri, or Spark's embedded "
        "one in [catalog] metastore_dir or the current folder), with every Delta table and "
        "fetch/fetchlist partitioned by segment; prints the spark-sql command that sees them. "
        "Run again, it adds new segments.",
    )
    _common(p)
    p = sub.add_parser(
        "stats",
        help="crawldb statistics (readdb -stats and more); reads only, no JVM by default",
        description="The crawl summed up: URLs by status, segments, rejected and deferred "
        "URLs, domains and their budgets. --json prints one object with a list per section.",
    )
    _common(p)
    _engine(p)
    p.add_argument("--at", type=_at, help="the time 'due' is counted at (default: now)")
    p = sub.add_parser(
        "sql",
        help="run SQL over the crawl tables; reads only, no JVM by default",
        description="Tables: crawldb, hostdb, policy, counters, content, neardup, events, "
        "rejected, domainlinks, hostparams, and fetch / fetchlist over every segment (with a "
        "segment column). The result streams to stdout or --out; nothing is collected whole.",
    )
    _common(p)
    _engine(p)
    p.add_argument("query", help='e.g. "SELECT status, count(*) FROM crawldb GROUP BY 1"')
    p.add_argument("--limit", type=_positive, metavar="N", help="at most N rows")
    p.add_argument(
        "--format",
        choices=("table", "json", "csv", "parquet"),
        help="table (default), json (one object per line, as --json), csv, parquet",
    )
    p.add_argument("--out", metavar="FILE", help="write the result here (default: stdout)")


def _engine(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=("duckdb", "spark"),
        default="duckdb",
        help="duckdb (default: delta-rs and DuckDB, no JVM, about a second) or spark (a "
        "Spark session, for queries too big for one machine)",
    )


def _demo_parsers(sub: Any) -> None:
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
    p.add_argument(
        "--requisites",
        action="store_true",
        help="pages need images, stylesheets, a font and a script (for requisites.capture)",
    )
    p = sub.add_parser("demo", help="start the test web, crawl it, show what happened")
    _common(p)
    p.add_argument("--cycles", type=_positive, default=2, help="cycles to crawl (default 2)")
    p.add_argument(
        "--hosts", type=_positive, default=60,
        help="hosts of the demo's test web (default 60; [testweb] sets the rest)",
    )  # fmt: skip
    p.add_argument("--out", default="demo", help="folder for the demo's crawl and test web")
    p.add_argument(
        "--archive",
        action="store_true",
        help="pages need images, stylesheets, a font and a script, and the crawl captures "
        "them (requisites.capture), so the exported WACZ replays as the pages looked",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"wants a whole number of at least 1, got {text!r}")
    return value


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
    p.add_argument(
        "--quiet", action="store_true", help="no progress lines on stderr (errors still show)"
    )


def _timed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--at", type=_at, help="logical time of this cycle (default: now)")
    p.add_argument("--segment", help="segment id (default: from --at)")


def _job(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
    _common(parser)
    _timed(parser)
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


def _export_parser(sub: Any) -> None:
    export = sub.add_parser(
        "export", help="copy selected captures into new WARC files, or a WACZ package"
    )
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
    _selection_args(p)
    p = kinds.add_parser(
        "wacz",
        help="the same selection as one WACZ 1.1.1 file (WARCs, CDXJ, pages, hashes)",
        description="The captures `export warc` would write, packed as a WACZ 1.1.1 file "
        "that ReplayWeb.page opens and `wacz validate` accepts: archive/*.warc.gz (stored), "
        "indexes/index.cdx (CDXJ), pages/pages.jsonl (the HTML pages: url, ts, title), "
        "datapackage.json with the sha256 and size of each, datapackage-digest.json "
        "(signed with --sign-key). Nothing selected is an error (exit 2).",
    )
    _common(p)
    p.add_argument(
        "--at", type=_at, help="time that names the WARC files and dates the package (default: now)"
    )
    p.add_argument(
        "--out", required=True, metavar="FILE", help="the .wacz file (local, or s3a://...)"
    )
    p.add_argument("--title", help="the package's title (default: trawl crawl <crawl name>)")
    p.add_argument(
        "--sign-key",
        metavar="PEM",
        help="sign the package (WACZ's anonymous signature) with this EC private key "
        "(P-256 or P-384, unencrypted PEM); its public key goes into the package",
    )
    _selection_args(p)


def _selection_args(p: argparse.ArgumentParser) -> None:
    """What an export takes: the captures by segment, time, host, domain, status."""
    p.add_argument("--segments", nargs="*", default=[], help="default: every fetched segment")
    p.add_argument("--since", type=_at, help="captured at or after (ISO 8601)")
    p.add_argument("--until", type=_at, help="captured before (ISO 8601)")
    p.add_argument("--host", action="append", default=[], help="this host (repeatable)")
    p.add_argument(
        "--domain",
        action="append",
        default=[],
        help="this registered domain (repeatable), e.g. example.com or alice.github.io",
    )
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
    group.add_argument(
        "--domain", help="a registered domain and all its hosts, e.g. example.com, alice.github.io"
    )


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
    p.add_argument(
        "--max-pages",
        type=int,
        metavar="N",
        help="at most N pages per cycle; on a domain also its budget (raises or lowers STAR's)",
    )
    _policy_author(p)
    p = verbs.add_parser(
        "budget",
        help="pages per cycle for a host or domain (on a domain: its budget, up or down)",
        description="Same as `policy set --max-pages N`. On a domain it replaces the budget "
        "the domain earns from the domains linking to it (IRLbot's STAR), higher or lower, "
        "within generate.max_per_domain.",
    )
    _common(p)
    _policy_target_args(p, required=True)
    p.add_argument("--pages", type=int, required=True, metavar="N", help="pages per cycle")
    _policy_author(p)
    p = verbs.add_parser("list", help="the rules in force (or every change with --history)")
    _common(p)
    _policy_target_args(p, required=False)
    p.add_argument("--history", action="store_true", help="the whole audit trail")
    p = verbs.add_parser("clear", help="remove the rule for a host or domain")
    _common(p)
    _policy_target_args(p, required=True)
    _policy_author(p)
