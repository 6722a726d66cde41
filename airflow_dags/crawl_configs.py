"""Which crawls the Airflow DAGs run, read from trawl's own TOML config files.

``crawl_cycle.py`` makes one DAG per crawl. A crawl is one trawl config file
(the same file its jobs get as ``--config``) whose ``[airflow]`` section says
where the crawl lives and how to run it; the keys and defaults are those of
``trawl.config.AirflowConfig`` and are documented in ``conf/trawl.toml``.
Which files are crawls is the Airflow Variable ``trawl_crawls`` (read as
``AIRFLOW_VAR_TRAWL_CRAWLS`` from the environment first, like every Variable,
which costs the DAG processor no database query): a JSON list, or text with
one entry per line or comma, each entry a file, a folder (its ``*.toml``
files) or a glob. Relative entries are taken from the DAG folder, so a team
can keep ``crawls/*.toml`` in git beside the DAGs.

This module imports neither Airflow nor trawl: trawl lives in a virtualenv
of its own (its pins and Airflow's clash), and the DAG processor parses DAG
files often, so reading a few small TOML files with ``tomllib`` is all it
does. It mirrors ``trawl.config``'s checks of the section (a test keeps the
defaults equal), so a typo fails at parse time as a DAG import error, not
at 3 a.m. in a task. Only the file is read: ``TRAWL__`` environment
variables and ``--set`` change trawl's jobs, not the shape of the DAG.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CRAWLS_VARIABLE = "trawl_crawls"
DAG_FOLDER = Path(__file__).resolve().parent
MODES = ("local", "cluster")
# The cycle, in order; each runs as `trawl <stage>` (local) or jobs/<stage>.py
# (cluster). stats is read-only and takes no segment.
STAGES = ("generate", "fetch", "updatedb", "dedup", "events", "stats")
DAG_ID = re.compile(r"[A-Za-z0-9_.\-]{1,250}")  # Airflow's rule for DAG ids
# The run's logical time and segment id, as Jinja templates rendered per run
# from its data interval (never the wall clock). trawl_segment is a macro the
# DAG registers (segment_id below).
AT_TEMPLATE = "{{ data_interval_end | ts }}"
SEGMENT_TEMPLATE = "{{ trawl_segment(data_interval_end) }}"


class CrawlConfigError(ValueError):
    """A crawl's config file, or the trawl_crawls Variable, is wrong."""


@dataclass(frozen=True)
class Crawl:
    """One crawl's ``[airflow]`` section (defaults as trawl.config.AirflowConfig)
    and the config file it came from."""

    config_file: str = ""
    crawl_root: str = ""
    dag_id: str = ""
    schedule: str = "@daily"
    start_date: str = "2026-01-01T00:00:00Z"
    mode: str = "local"
    trawl_executable: str = "trawl"
    spark_conn_id: str = "spark_default"
    jobs_dir: str = ""
    py_files: tuple[str, ...] = ()
    jars: tuple[str, ...] = ()
    retries: int = 2
    retry_delay_s: float = 300.0

    @property
    def start(self) -> datetime:
        return datetime.fromisoformat(self.start_date)


SECTION_KEYS = {f.name: f.default for f in fields(Crawl) if f.name != "config_file"}


def segment_id(at: datetime) -> str:
    """The segment id of a run: trawl.runner.segment_id's format, UTC
    (``20261130T000000Z``), which trawl.store.files.check_segment_id accepts."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def crawl_files(value: str, base: Path = DAG_FOLDER) -> list[Path]:
    """The config files the Variable's value names, sorted, each once."""
    text = value.strip()
    if not text:
        return []
    entries: list[str]
    if text.startswith("["):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CrawlConfigError(f"{CRAWLS_VARIABLE}: not a JSON list: {exc}") from exc
        if not isinstance(loaded, list) or not all(isinstance(e, str) for e in loaded):
            raise CrawlConfigError(f"{CRAWLS_VARIABLE}: want a JSON list of paths")
        entries = loaded
    else:
        entries = [e for line in text.splitlines() for e in line.split(",")]
    found: set[Path] = set()
    for entry in (e.strip() for e in entries):
        if entry:
            found.update(_expand(base / Path(entry).expanduser()))
    return sorted(found)


def _expand(path: Path) -> list[Path]:
    if path.is_dir():
        matches = sorted(path.glob("*.toml"))
    elif glob.has_magic(str(path)):
        matches = [Path(p) for p in sorted(glob.glob(str(path)))]
    else:
        matches = [path] if path.is_file() else []
    if not matches:
        raise CrawlConfigError(f"{CRAWLS_VARIABLE}: no crawl config file at {path}")
    return [m.resolve() for m in matches]


def read_crawl(path: Path) -> Crawl:
    """The crawl a trawl config file describes, checked."""
    try:
        with path.open("rb") as fh:
            section = tomllib.load(fh).get("airflow", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CrawlConfigError(f"{path}: {exc}") from exc
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key not in SECTION_KEYS:
            raise CrawlConfigError(f"{path}: unknown key airflow.{key}")
        values[key] = _coerce(path, key, SECTION_KEYS[key], value)
    crawl = Crawl(config_file=str(path), **values)
    if not crawl.dag_id:
        stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", path.stem)
        crawl = replace(crawl, dag_id=f"trawl_{stem}")
    _check(path, crawl)
    return crawl


def load_crawls(value: str, base: Path = DAG_FOLDER) -> list[Crawl]:
    """Every crawl the Variable's value names; two with one DAG id are an error."""
    crawls = [read_crawl(p) for p in crawl_files(value, base)]
    seen: dict[str, str] = {}
    for crawl in crawls:
        if crawl.dag_id in seen:
            raise CrawlConfigError(
                f"DAG id {crawl.dag_id} twice: {seen[crawl.dag_id]} and {crawl.config_file}"
            )
        seen[crawl.dag_id] = crawl.config_file
    return crawls


def stage_args(crawl: Crawl, stage: str) -> list[str]:
    """The arguments of ``trawl <stage>`` / ``jobs/<stage>.py`` for one run."""
    args = ["--crawl", crawl.crawl_root, "--config", crawl.config_file, "--json"]
    if stage != "stats":
        args += ["--at", AT_TEMPLATE, "--segment", SEGMENT_TEMPLATE]
    return args


def local_command(crawl: Crawl, stage: str) -> str:
    """The shell command of a stage in local mode. Every word is quoted; the
    templates have no single quote in them, so they render inside the quotes."""
    return shlex.join([crawl.trawl_executable, stage, *stage_args(crawl, stage)])


def _coerce(path: Path, key: str, default: Any, value: Any) -> Any:
    """Check one value against the type of its default (as trawl.config does)."""
    if isinstance(default, tuple):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise CrawlConfigError(f"{path}: airflow.{key} must be {type(default).__name__}")
    return value


def _check(path: Path, crawl: Crawl) -> None:
    """trawl.config.validate._validate_airflow's checks, and a crawl root (which the
    DAG needs and trawl's jobs take from --crawl)."""
    problems = []
    if not crawl.crawl_root:
        problems.append("airflow.crawl_root is required")
    if crawl.mode not in MODES:
        problems.append(f"airflow.mode must be one of {', '.join(MODES)}")
    if crawl.mode == "cluster" and not crawl.jobs_dir:
        problems.append("airflow.mode = cluster needs airflow.jobs_dir")
    if not DAG_ID.fullmatch(crawl.dag_id):
        problems.append("airflow.dag_id must be [A-Za-z0-9_.-]+")
    try:
        zoned = crawl.start.tzinfo is not None
    except ValueError:
        zoned = False
    if not zoned:
        problems.append("airflow.start_date must be ISO 8601 with a zone")
    if crawl.retries < 0 or crawl.retry_delay_s < 0:
        problems.append("airflow: retries and retry_delay_s must not be negative")
    if problems:
        raise CrawlConfigError(f"{path}: {'; '.join(problems)}")
