"""The crawl-cycle DAG (``airflow_dags/crawl_cycle.py``) under Airflow 3, for real.

Airflow lives in ``.venv-airflow`` (``scripts/setup.sh``; its pins are not
ours) and is run as a program, never imported here; a missing ``.venv-airflow``
fails these tests, it does not skip them. Each Airflow command gets a home of
its own in ``tmp_path`` with a SQLite metadata database (``airflow db
migrate``), no example DAGs, no proxies and the DAG folder of this checkout.

- ``crawl_configs`` (the DAG's config reader, no Airflow in it) keeps the
  ``[airflow]`` defaults of ``trawl.config`` and refuses what trawl refuses;
- a DagBag of the folder has no import errors and one DAG per config file:
  BashOperators for a local crawl, SparkSubmitOperators for a cluster one,
  the six stages in order in the task group ``cycle``, one run at a time; a
  config file with a typo is an import error naming the key;
- ``airflow dags test`` runs a whole cycle in local mode against the test web
  on loopback (seeds injected first): crawldb holds the fetched URLs with
  ``last_segment`` the run's segment, the events table has its events.
  That the same run again changes nothing (what clearing a finished run
  does) is tested on the stages themselves, in-process, by
  ``tests/test_cycle.py``: a second ``dags test`` here would cost six
  more JVM starts.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from subprocess import Popen
from types import ModuleType
from typing import Any

import pytest

from trawl.config import AirflowConfig, ConfigError, load_config
from trawl.runner import JobContext, run_inject, segment_id
from trawl.store.files import check_segment_id
from trawl.store.lease import LEASE_FILE
from trawl.store.tables import read_segment_table, read_table
from trawl.testweb import TestWeb, WebModel

ROOT = Path(__file__).resolve().parents[2]
DAG_FOLDER = ROOT / "airflow_dags"
AIRFLOW_BIN = ROOT / ".venv-airflow" / "bin"
TRAWL = ROOT / ".venv" / "bin" / "trawl"
AT = datetime(2026, 11, 30, tzinfo=UTC)
LOGICAL_DATE = AT.isoformat()  # the run's data interval ends here (a cron timetable)
SEGMENT = "20261130T000000Z"
DAG_ID = "trawl_news"
STAGES = ["generate", "fetch", "updatedb", "dedup", "events", "stats"]
AIRFLOW_TIMEOUT_S = 1800  # one dags test: six trawl jobs, each its own Spark


@functools.cache
def crawl_configs() -> ModuleType:
    """The DAG folder's helper, loaded by path (it needs no Airflow)."""
    spec = importlib.util.spec_from_file_location("crawl_configs", DAG_FOLDER / "crawl_configs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the config reader


def test_the_dag_reader_keeps_trawls_airflow_defaults() -> None:
    cc = crawl_configs()
    assert {f.name: f.default for f in fields(AirflowConfig)} == cc.SECTION_KEYS
    assert tuple(STAGES) == cc.STAGES
    assert cc.segment_id(AT) == segment_id(AT) == check_segment_id(SEGMENT)


def test_the_dag_reader_finds_files_folders_and_globs(tmp_path: Path) -> None:
    cc = crawl_configs()
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(f'[airflow]\ncrawl_root = "/c/{name}"\n')
    both = [tmp_path / "a.toml", tmp_path / "b.toml"]
    assert cc.crawl_files(str(tmp_path)) == both
    assert cc.crawl_files(json.dumps([str(tmp_path / "*.toml")])) == both
    assert cc.crawl_files(f"{tmp_path / 'b.toml'},\n a.toml", base=tmp_path) == both
    assert cc.crawl_files("") == []
    crawls = cc.load_crawls(str(tmp_path))
    assert [(c.dag_id, c.crawl_root, c.mode) for c in crawls] == [
        ("trawl_a", "/c/a", "local"),
        ("trawl_b", "/c/b", "local"),
    ]
    with pytest.raises(cc.CrawlConfigError, match="no crawl config file"):
        cc.crawl_files(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ('crawl_rot = "/c"', "unknown key airflow.crawl_rot"),
        ('mode = "local"', "airflow.crawl_root is required"),
        ('crawl_root = "/c"\nmode = "yarn"', "airflow.mode must be one of"),
        ('crawl_root = "/c"\nmode = "cluster"', "needs airflow.jobs_dir"),
        ('crawl_root = "/c"\nretries = "2"', "airflow.retries must be int"),
        ('crawl_root = "/c"\nstart_date = "2026-01-01"', "ISO 8601 with a zone"),
        ('crawl_root = "/c"\ndag_id = "a b"', "airflow.dag_id must be"),
    ],
)
def test_the_dag_reader_and_trawl_refuse_the_same_sections(
    tmp_path: Path, section: str, problem: str
) -> None:
    cc = crawl_configs()
    path = tmp_path / "bad.toml"
    path.write_text(f"[airflow]\n{section}\n")
    with pytest.raises(cc.CrawlConfigError, match=problem):
        cc.read_crawl(path)
    if "crawl_root is required" not in problem:  # trawl's jobs take the root from --crawl
        with pytest.raises(ConfigError):
            load_config(path, environ={})


def test_local_commands_quote_paths_and_template_the_segment() -> None:
    cc = crawl_configs()
    crawl = cc.Crawl(config_file="/conf/my crawl.toml", crawl_root="/data/c", trawl_executable="t")
    command = cc.local_command(crawl, "fetch")
    assert command == (
        "t fetch --crawl /data/c --config '/conf/my crawl.toml' --json "
        "--at '{{ data_interval_end | ts }}' --segment '{{ trawl_segment(data_interval_end) }}'"
    )
    assert "--segment" not in cc.local_command(crawl, "stats")


# --------------------------------------------------------------------------- Airflow itself


@pytest.fixture(scope="module")
def airflow_bin() -> Path:
    if not (AIRFLOW_BIN / "airflow").is_file():
        pytest.fail(f"{AIRFLOW_BIN / 'airflow'} is missing: run scripts/setup.sh")
    return AIRFLOW_BIN


def airflow_env(home: Path, crawls: str) -> dict[str, str]:
    """A private Airflow: its own home and SQLite database, this DAG folder,
    no examples, nothing inherited that could send it to the network."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy") and not k.startswith(("AIRFLOW", "TRAWL__"))
    }
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAG_FOLDER),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW_VAR_TRAWL_CRAWLS=crawls,
        PYTHONDONTWRITEBYTECODE="1",
        NO_COLOR="1",
    )
    return env


@contextmanager
def airflow_process(argv: list[str], env: dict[str, str], log: Path) -> Iterator[Popen[str]]:
    """An Airflow program running in the background, its output going to
    ``log``; killed if it is still running when the block ends."""
    with log.open("w") as sink:
        proc = subprocess.Popen(
            argv, env=env, cwd=log.parent, stdout=sink, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def succeeded(proc: Popen[str], log: Path, timeout: float) -> None:
    """Wait for an Airflow program; a failure puts the tail of its log in the message."""
    code = proc.wait(timeout=timeout)
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:])
        pytest.fail(f"airflow exited {code}; log {log}:\n{tail}")


# Parse the DAG folder as the DAG processor would, once per Variable value
# given, and describe what came out as JSON.
DAGBAG_SNIPPET = r"""
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
out = []
for crawls in sys.argv[2:]:
    os.environ["AIRFLOW_VAR_TRAWL_CRAWLS"] = crawls
    bag = DagBag(dag_folder=sys.argv[1])
    dags = {}
    for dag_id, dag in bag.dags.items():
        tasks = {
            t.task_id: {
                "type": type(t).__name__,
                "group": t.task_group.group_id if t.task_group else None,
                "upstream": sorted(t.upstream_task_ids),
                "retries": t.retries,
                "bash_command": getattr(t, "bash_command", None),
                "application": getattr(t, "application", None),
                "application_args": getattr(t, "application_args", None),
                "py_files": getattr(t, "py_files", None),
                "jars": getattr(t, "jars", None),
                "conn_id": getattr(t, "_conn_id", None),
            }
            for t in dag.tasks
        }
        dags[dag_id] = {
            "max_active_runs": dag.max_active_runs,
            "catchup": dag.catchup,
            "timetable": type(dag.timetable).__name__,
            "tasks": tasks,
        }
    out.append({"import_errors": bag.import_errors, "dags": dags})
print(json.dumps(out))
"""


def write_crawl_config(path: Path, crawl_root: Path, web: TestWeb | None = None) -> Path:
    """A crawl's trawl config: the test web's names and loopback allowed, a
    small local Spark, and the [airflow] section for local mode."""
    web_keys = (
        f'[dns]\nhosts_file = "{web.hosts_file}"\n'
        '[fetch]\nallow_networks = ["127.0.0.0/8"]\n'
        # The deadline starts when the fetch job is planned; on a busy machine
        # the executors take a while to start. The test web's few pages are
        # done long before it.
        "time_limit_s = 300.0\n"
        "[politeness]\nmin_delay_s = 0.05\ndelay_factor = 1.0\n"
        if web
        else ""
    )
    path.write_text(
        web_keys
        + '[spark]\nmaster = "local[2]"\nshuffle_partitions = 2\n'
        + "[crawl]\nhost_buckets = 2\n"
        + f'[airflow]\ncrawl_root = "{crawl_root}"\ntrawl_executable = "{TRAWL}"\n'
        + 'schedule = "0 0 * * *"\nretries = 0\n'
    )
    return path


def test_the_dag_folder_parses_into_one_dag_per_crawl(airflow_bin: Path, tmp_path: Path) -> None:
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    write_crawl_config(crawls / "news.toml", tmp_path / "news")
    (crawls / "shops.toml").write_text(
        '[airflow]\ncrawl_root = "s3a://lake/shops"\nmode = "cluster"\n'
        'spark_conn_id = "spark_lake"\njobs_dir = "/opt/trawl/jobs"\n'
        'py_files = ["/opt/trawl/trawl.whl"]\njars = ["/opt/a.jar", "/opt/b.jar"]\n'
    )
    typo = tmp_path / "typo.toml"
    typo.write_text('[airflow]\ncrawl_root = "/c"\nschedul = "@hourly"\n')
    env = airflow_env(tmp_path / "airflow", str(crawls))
    log = tmp_path / "dagbag.log"
    argv = [str(airflow_bin / "python"), "-c", DAGBAG_SNIPPET, str(DAG_FOLDER)]
    done = subprocess.run(
        [*argv, str(crawls), str(typo)], env=env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=300, check=False,
    )  # fmt: skip
    log.write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    good, bad = json.loads(done.stdout.splitlines()[-1])

    assert good["import_errors"] == {}
    assert set(good["dags"]) == {"trawl_news", "trawl_shops"}
    for dag in good["dags"].values():
        assert dag["max_active_runs"] == 1 and dag["catchup"] is False
        ids = [f"cycle.{s}" for s in STAGES]
        assert sorted(dag["tasks"]) == sorted(ids)
        for before, task_id in zip([None, *ids], ids, strict=False):
            task = dag["tasks"][task_id]
            assert task["group"] == "cycle"
            assert task["upstream"] == ([before] if before else [])
    news = good["dags"]["trawl_news"]["tasks"]["cycle.generate"]
    assert news["type"] == "BashOperator" and news["retries"] == 0
    assert news["bash_command"].startswith(f"{TRAWL} generate --crawl {tmp_path / 'news'} ")
    shops = good["dags"]["trawl_shops"]["tasks"]["cycle.fetch"]
    assert shops["type"] == "SparkSubmitOperator" and shops["retries"] == 2
    assert shops["application"] == "/opt/trawl/jobs/fetch.py"
    assert shops["conn_id"] == "spark_lake"
    assert shops["py_files"] == "/opt/trawl/trawl.whl" and shops["jars"] == "/opt/a.jar,/opt/b.jar"
    assert shops["application_args"][:2] == ["--crawl", "s3a://lake/shops"]
    assert "--segment" in shops["application_args"]

    assert bad["dags"] == {}
    [error] = bad["import_errors"].values()
    assert "unknown key airflow.schedul" in error


# --------------------------------------------------------------------------- a real run


@dataclass
class DagRun:
    spark: Any
    root: str
    fetched_urls: set[str]  # pages the run's fetch got
    tables: dict[str, list[Any]]  # the tables after the run
    seconds: float
    log: str  # what `airflow dags test` printed
    manual: subprocess.CompletedProcess[str]  # a `trawl cycle` started during the run
    holder: dict[str, Any]  # the lease the manual cycle found


def snapshot(spark: Any, root: str) -> dict[str, list[Any]]:
    """Every row of the tables the tests look at, in a stable order."""
    tables = {name: read_table(spark, root, name) for name in ("crawldb", "events")}
    tables["fetch"] = read_segment_table(spark, root, SEGMENT, "fetch")
    return {name: sorted(df.collect(), key=repr) for name, df in tables.items()}


@pytest.fixture(scope="module")
def dag_run(
    spark: Any, airflow_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DagRun]:
    out = tmp_path_factory.mktemp("airflow_dag")
    root, config = out / "crawl", out / "news.toml"
    env = airflow_env(out / "airflow", str(config))
    airflow = str(airflow_bin / "airflow")
    model = WebModel.generate(5, hosts=4, ips=2, pages_per_host=(2, 4))
    # Airflow's metadata database is made while the seeds are injected: the
    # two need nothing of each other, and each takes seconds.
    with (
        airflow_process([airflow, "db", "migrate"], env, out / "migrate.log") as migrate,
        TestWeb(model, out / "web", n_seeds=4) as web,
    ):
        cfg = load_config(write_crawl_config(config, root, web), environ={})
        injected = run_inject(JobContext(spark, cfg, str(root), SEGMENT, AT), [str(web.seeds_file)])
        assert injected["accepted"] == 4
        succeeded(migrate, out / "migrate.log", timeout=300)
        started = time.monotonic()
        log = out / "dags-test.log"
        with airflow_process([airflow, "dags", "test", DAG_ID, LOGICAL_DATE], env, log) as run:
            # A manual cycle while the scheduled run's generate holds the crawl.
            lease = root / LEASE_FILE
            while not lease.exists():
                assert run.poll() is None, log.read_text()[-3000:]
                time.sleep(0.1)
            holder = json.loads(lease.read_text())
            manual = subprocess.run(
                [str(TRAWL), "cycle", "--crawl", str(root), "--config", str(config),
                 "--at", "2026-11-30T06:00:00Z"],
                capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                env={k: v for k, v in env.items() if not k.startswith("AIRFLOW")},
            )  # fmt: skip
            succeeded(run, log, timeout=AIRFLOW_TIMEOUT_S)
        seconds = time.monotonic() - started
        tables = snapshot(spark, str(root))
        fetched = {
            r["url"] for r in tables["fetch"] if r["kind"] == "page" and r["outcome"] == "success"
        }
        yield DagRun(spark, str(root), fetched, tables, seconds, log.read_text(), manual, holder)


def test_the_dag_run_fetched_its_segment_into_crawldb(dag_run: DagRun) -> None:
    assert len(dag_run.fetched_urls) >= 4  # at least the seeds
    crawldb = {r["url"]: r for r in dag_run.tables["crawldb"]}
    for url in dag_run.fetched_urls:
        row = crawldb[url]
        assert row["last_segment"] == SEGMENT
        assert row["last_fetch_at"].replace(tzinfo=UTC) == AT  # the data interval's time
        assert row["generated_segment"] is None  # released by updatedb
    assert len(crawldb) > len(dag_run.fetched_urls)  # updatedb added the outlinks
    print(f"dags test: {dag_run.seconds:.0f} s")


def test_the_dag_run_wrote_the_segments_events(dag_run: DagRun) -> None:
    events = [r for r in dag_run.tables["events"] if r["segment"] == SEGMENT]
    fetched = {r["url"] for r in events if r["event"] == "crawl.fetched"}
    assert fetched and fetched <= {r["url"] for r in dag_run.tables["fetch"] if r["kind"] == "page"}
    assert dag_run.fetched_urls <= fetched | {r["final_url"] for r in events}
    assert all(r["warc_ref"] is not None for r in events if r["event"] == "crawl.fetched")


def test_a_manual_cycle_during_the_run_is_refused_and_corrupts_nothing(dag_run: DagRun) -> None:
    """Collisions (a cycle run by hand while the scheduled one works): the
    second is refused at once, naming the holder, and starts no JVM; the
    scheduled run completes and its crawl is whole."""
    manual = dag_run.manual
    assert manual.returncode == 75, manual.stderr[-3000:]
    assert "is in use" in manual.stderr
    assert f"pid {dag_run.holder['pid']} running '{dag_run.holder['command']}" in manual.stderr
    assert dag_run.holder["command"].startswith("generate")
    # refused before a JVM started: Java's start-up line, which each Spark stage
    # printed (stats reads without a JVM)
    assert dag_run.log.count("Using incubator modules") == len(STAGES) - 1
    assert "Using incubator modules" not in manual.stderr
    assert not (Path(dag_run.root) / LEASE_FILE).exists()  # released when the run ended
    urls = [r["url"] for r in dag_run.tables["crawldb"]]
    assert len(urls) == len(set(urls))
    segments = {r["last_segment"] for r in dag_run.tables["crawldb"] if r["last_segment"]}
    assert segments == {SEGMENT}  # only the scheduled run's segment was fetched
