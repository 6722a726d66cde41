"""``python -m trawl.testweb``: serve the synthetic web until Ctrl-C."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from trawl.testweb.changes import EPOCH
from trawl.testweb.runner import run

#: Families served by default: enough pairs to score a deduplication, few
#: enough pages (some 130 on the default web) not to change a crawl's shape.
DUP_FAMILIES = 20


def logical_time(text: str) -> datetime:
    """An ISO 8601 time ("2026-03-01T00:00:00Z"); one without a zone is UTC."""
    at = datetime.fromisoformat(text)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and call ``run``."""
    parser = argparse.ArgumentParser(prog="python -m trawl.testweb", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--ips", type=int, default=60)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=3, help="number of seed URLs to write")
    parser.add_argument("--out-dir", type=Path, default=Path("testweb-out"))
    parser.add_argument(
        "--at", type=logical_time, default=EPOCH, help="logical time to serve the web as of"
    )
    parser.add_argument(
        "--dup-families",
        type=int,
        default=DUP_FAMILIES,
        help="near-duplicate article families to publish (0: none)",
    )
    parser.add_argument(
        "--traps",
        action="store_true",
        help="also serve the crawler traps of trawl.testweb.traps (entrances added to the seeds)",
    )
    parser.add_argument(
        "--requisites",
        action="store_true",
        help="pages need stylesheets, images, a script and a font (trawl.testweb.requisites)",
    )
    args = parser.parse_args(argv)
    run(
        args.seed,
        args.hosts,
        args.port,
        args.out_dir,
        ips=args.ips,
        n_seeds=args.seeds,
        at=args.at,
        dup_families=args.dup_families,
        traps=args.traps,
        requisites=args.requisites,
    )


if __name__ == "__main__":
    main()
