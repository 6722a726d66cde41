"""The layering rule, checked: imports point down, pyspark stays in its layers.

``python -m trawl.devtools.imports`` (and ``tests/devtools/test_imports.py``)
reads every module of ``lib/trawl`` with :mod:`ast` (nothing is imported, so
the check needs no JVM and sees imports inside functions and under
``TYPE_CHECKING`` too) and reports:

* an **upward import**: a module of one part of trawl importing a part with
  the same or a higher rank in ``LAYERS``. Parts of one rank are siblings
  that do not know each other (``net`` and ``parse``); a module may import
  anything of its own package;
* **pyspark** (or delta-spark's ``delta``) imported outside ``SPARK_PARTS``:
  the per-record logic below the stages runs in executors' Python workers
  and in unit tests without a JVM;
* a part of ``trawl`` that ``LAYERS`` does not rank, so a new package has
  to be placed on purpose.

The ranks, lowest first, are the architecture: URLs, then the config, then
the per-record logic, the I/O layer, the fetch task, the Spark stages, the
runner and the command line on top.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LAYERS: dict[str, int] = {
    "trawl": 0,  # the package root: __version__
    "faults": 0,  # the kill tests' fault points: every layer may mark one
    "url": 1,
    "config": 2,
    "net": 3,
    "parse": 3,
    "dedup": 3,
    "warc": 3,
    "crawldb": 4,
    "store": 5,
    "fetch": 6,
    "stages": 7,
    "testweb": 7,
    "runner": 8,
    "stats": 8,
    "report": 8,
    "crawlreport": 8,
    "sql": 8,
    "demo": 9,
    "cli": 10,
    "devtools": 11,
}
SPARK_PARTS = frozenset({"store", "stages", "runner"})
SPARK_MODULES = ("pyspark", "delta", "py4j")
PACKAGE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def part_of(path: Path, package: Path) -> str:
    """The part of trawl a module belongs to: its top-level package or module."""
    rel = path.relative_to(package).with_suffix("").parts
    return "trawl" if rel == ("__init__",) else rel[0]


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every absolute import, ``from trawl import x``
    counted as an import of ``trawl.x``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "trawl":
                for alias in node.names:
                    yield node.lineno, f"trawl.{alias.name}"
            else:
                yield node.lineno, node.module


def target_part(name: str) -> str | None:
    """The part of trawl a dotted import names, or None for another package."""
    parts = name.split(".")
    if parts[0] != "trawl":
        return None
    if len(parts) == 1 or parts[1] == "__version__":
        return "trawl"
    return parts[1]


def check_module(path: Path, package: Path = PACKAGE) -> list[Violation]:
    source = part_of(path, package)
    if source not in LAYERS:
        return [Violation(path, 1, f"'{source}' has no rank in LAYERS: place it there")]
    rank = LAYERS[source]
    found = []
    for line, name in imported(ast.parse(path.read_text(), str(path))):
        if name.split(".")[0] in SPARK_MODULES and source not in SPARK_PARTS:
            found.append(Violation(path, line, f"imports {name}: Spark only in {_spark()}"))
        target = target_part(name)
        if target is None or target == source:
            continue
        if target not in LAYERS:
            found.append(Violation(path, line, f"imports unknown part trawl.{target}"))
        elif LAYERS[target] >= rank:
            found.append(
                Violation(
                    path,
                    line,
                    f"{source} (rank {rank}) imports {name} (rank {LAYERS[target]}):"
                    " imports point down only",
                )
            )
    return found


def check_tree(package: Path = PACKAGE) -> list[Violation]:
    return [v for p in sorted(package.rglob("*.py")) for v in check_module(p, package)]


def _spark() -> str:
    return ", ".join(sorted(SPARK_PARTS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trawl.devtools.imports", description=__doc__.splitlines()[0]
    )
    parser.add_argument("package", nargs="?", type=Path, default=PACKAGE)
    args = parser.parse_args(argv)
    violations = check_tree(args.package.resolve())
    for v in violations:
        print(v)
    if not violations:
        print(f"layering ok: {sum(1 for _ in args.package.rglob('*.py'))} modules")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
