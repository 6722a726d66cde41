"""``python -m trawl.cli``: the ``trawl`` command."""

from __future__ import annotations

from trawl.cli import entry

if __name__ == "__main__":
    entry()
