"""``python -m trawl.cli``: the ``trawl`` command."""

from __future__ import annotations

from trawl.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
