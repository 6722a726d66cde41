"""The layering rule holds for trawl, and the check catches what breaks it."""

from __future__ import annotations

from pathlib import Path

from trawl.devtools.imports import PACKAGE, check_tree, main


def _tree(root: Path, files: dict[str, str]) -> Path:
    package = root / "trawl"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_trawl_keeps_its_layers() -> None:
    assert [str(v) for v in check_tree(PACKAGE)] == []


def test_a_planted_upward_import_is_caught(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "url/__init__.py": "",
            "url/normalize.py": "from trawl.fetch.task import run\n",
            "fetch/__init__.py": "",
            "fetch/task.py": "from trawl.url.normalize import normalize\n",
        },
    )
    found = check_tree(package)
    assert [(v.path.name, v.line) for v in found] == [("normalize.py", 1)]
    assert "imports point down only" in found[0].message


def test_siblings_do_not_import_each_other(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {"net/__init__.py": "", "net/robots.py": "def f():\n    from trawl import parse\n"},
    )
    found = check_tree(package)
    assert [(v.path.name, v.line) for v in found] == [("robots.py", 2)]


def test_pyspark_outside_its_layers_is_caught(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {
            "crawldb/status.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from pyspark.sql import DataFrame\n",
            "stages/generate.py": "from pyspark.sql import DataFrame\n",
        },
    )
    found = check_tree(package)
    assert [(v.path.name, v.line) for v in found] == [("status.py", 3)]
    assert "Spark only in" in found[0].message


def test_an_unranked_package_must_be_placed(tmp_path: Path) -> None:
    package = _tree(tmp_path, {"misc/helpers.py": "import os\n"})
    assert "no rank in LAYERS" in check_tree(package)[0].message


def test_the_command_exits_nonzero_on_a_violation(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    package = _tree(tmp_path, {"url/x.py": "import trawl.stages.generate\n"})
    assert main([str(package)]) == 1
    assert "url (rank 1) imports trawl.stages.generate" in capsys.readouterr().out
