"""``python -m trawl.testweb``: serve the synthetic web until Ctrl-C."""

from __future__ import annotations

import argparse
from pathlib import Path

from trawl.testweb.runner import run


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and call ``run``."""
    parser = argparse.ArgumentParser(prog="python -m trawl.testweb", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--ips", type=int, default=60)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=3, help="number of seed URLs to write")
    parser.add_argument("--out-dir", type=Path, default=Path("testweb-out"))
    args = parser.parse_args(argv)
    run(args.seed, args.hosts, args.port, args.out_dir, ips=args.ips, n_seeds=args.seeds)


if __name__ == "__main__":
    main()
