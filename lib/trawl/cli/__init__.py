"""``trawl``: every job of the crawl from one command line.

Each command takes ``--crawl DIR`` (the crawl root), ``--config FILE`` and
repeated ``--set section.key=value`` overrides (the value is read as TOML, or
as a plain string when it is not TOML). Jobs take the cycle's logical time as
``--at`` (ISO 8601; the CLI defaults it to now, the only place trawl reads
the wall clock for it) and a ``--segment`` id (default: derived from --at).

:func:`main` is the entry point (through :func:`entry`, the console script
``trawl = "trawl.cli:entry"``, and ``jobs/*.py`` under spark-submit): it
parses, loads the config, takes the crawl's lease for the commands that
write the crawl, and turns the errors an operator can fix into one line on
stderr and an exit code. The grammar is
``trawl.cli.parser``; what the commands do is ``trawl.cli.commands``, and
``trawl.cli.policy`` for ``trawl policy``, which never starts a JVM.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from trawl.cli.commands import dispatch
from trawl.cli.failures import report, spark_failure
from trawl.cli.parser import DEFAULT_CRAWL, build_parser
from trawl.config import Config, ConfigError, load_config
from trawl.store.deltalog import check_logs
from trawl.store.files import CrawlRoot
from trawl.store.lease import CrawlLease, LeaseHeld
from trawl.store.objectstore import StoreError

if TYPE_CHECKING:
    import argparse

__all__ = ["DEFAULT_CRAWL", "EXIT_IN_USE", "WRITING_COMMANDS", "build_parser", "entry", "main"]

# The commands that change the crawl hold its lease; EX_TEMPFAIL when it is taken.
WRITING_COMMANDS = (
    "inject", "generate", "fetch", "updatedb", "dedup", "events", "cycle", "compact", "vacuum",
)  # fmt: skip
EXIT_IN_USE = 75


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
        if args.command not in ("testweb", "demo"):
            # an object store that cannot be used fails here, in seconds and
            # one line, before a JVM starts or anything is written
            root = CrawlRoot.of(args.crawl, cfg.storage)
            root.check()
            check_logs(root)  # a damaged Delta log named here, not deep in a job
        with _lease(args, cfg):
            return int(dispatch(args, cfg) or 0)
    except StoreError as exc:
        print(f"trawl: {exc}", file=sys.stderr)
        return 2
    except LeaseHeld as exc:
        print(f"trawl: {exc}", file=sys.stderr)
        return EXIT_IN_USE
    except (ValueError, FileNotFoundError) as exc:
        print(f"trawl: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `trawl ... --json | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a Spark job that failed: its cause, not 300 lines
        cause = spark_failure(exc)
        if cause is None:
            raise
        print(f"trawl: {report(args.command, cause, exc)}", file=sys.stderr)
        return 1


def _lease(args: argparse.Namespace, cfg: Config) -> AbstractContextManager[Any]:
    """The crawl's lease for the commands that write it (``trawl.store.lease``)."""
    if args.command not in WRITING_COMMANDS:
        return nullcontext()
    segment = getattr(args, "segment", None)
    command = f"{args.command} --segment {segment}" if segment else args.command
    root = CrawlRoot.of(args.crawl, cfg.storage)
    return CrawlLease(root, command, cfg.crawl.lease_ttl_s, cfg.crawl.lease_wait_s)


def entry() -> None:
    """The ``trawl`` console script: ``main``, then exit with its code. After
    delta-rs touched an object store, the interpreter's teardown is skipped
    (output flushed first): delta-rs may abort there (its issue 2184), which
    would turn a finished command into exit 134."""
    code = main()
    from trawl.store.policy import REMOTE_TABLES_OPENED

    if REMOTE_TABLES_OPENED.is_set():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
