"""Benchmark and proof: the cycle's jobs on a Spark standalone cluster, against local mode.

    .venv/bin/python bench/bench_cluster.py [--hosts 24] [--ips 6] [--seeds 12]
        [--pages 5 20] [--cycles 2] [--min-delay 0.2] [--jvm default|quick]
        [--keep] [--results bench/results/cluster.jsonl]

What it does, on loopback only:

1. starts a standalone cluster from the pyspark install (``spark-class``): a
   master and two workers of 1 core / 1 GB, each with its own work folder and
   web UI port, and waits until the master's ``/json/`` lists both workers
   alive (``StandaloneCluster``; stopped on the way out, also on failure);
2. ships trawl as a zip of ``lib/trawl`` (``package_zip``). Not a wheel: a
   ``.whl`` given to ``--py-files`` reaches the driver's ``sys.path`` but not
   the executors', because pyspark adds only ``.zip``, ``.egg`` and ``.jar``
   files there (``SparkContext.PACKAGE_EXTENSIONS``, pyspark 4.2);
3. runs inject and then generate -> fetch -> updatedb -> dedup -> events per
   cycle, every stage one ``spark-submit jobs/<stage>.py`` against the
   cluster (``Submitter``), with the Delta jars as ``--jars`` and the zip as
   ``--py-files``, each stage timed;
4. runs the same stages with ``--master local[2]`` on a second crawl root,
   against the same test web at the same logical times;
5. compares the two crawls table by table (``compare_crawls``): crawldb,
   hostdb, the fetch lists, the fetch tables, events and counters, row for
   row on their keys. Columns that two honest runs fill differently
   (``VOLATILE``: wall-clock times, measured response times, WARC record
   ids, dates and offsets) are left out of the verdict; every column that
   differed is reported either way.

With ``--s3`` the cluster's crawl root is ``s3a://bench/crawl-cluster`` on
moto's S3 server, started on loopback with a bucket ``bench``: every process
gets only the standard AWS environment (endpoint, region, keys), the
executors upload their WARC files there, and the comparison reads the
cluster's tables from the bucket with delta-rs.

The driver and the executors run a Python that sees the main virtualenv's
packages but not trawl itself (``bare_python``: the virtualenv's
site-packages on a plain path, so the editable install's ``.pth`` is never
read). The jobs can only import trawl from the shipped zip, so a run that
passes proves the packaging, not the machine's virtualenv.

The test web serves its pages as of the crawl's logical time and has no
throttled hosts here (a rate limiter's answers depend on wall-clock arrival),
so the two crawls see the same web. One JSON line per run is appended to
``bench/results/cluster.jsonl``: machine facts, settings, the cluster's
start-up time, per-stage wall times in both modes and the comparison. The
process exits 1 when the crawls disagree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import pyspark
from bench_politeness import append_line, commit, machine

from trawl.runner import segment_id
from trawl.testweb import TestWeb, WebModel

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "cluster.jsonl"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
JARS = ROOT / "jars" / "lib"
LOG4J2 = ROOT / "lib" / "trawl" / "conf" / "log4j2.properties"
AT = datetime(2026, 11, 30, tzinfo=UTC)
STAGES = ("generate", "fetch", "updatedb", "dedup", "events")
# JVM flags for short jobs on small data: C1 only and the serial collector
# halve the CPU a stage's driver burns on a 2-core machine (JIT and GC
# threads); the daemons get them always, the jobs with --jvm quick.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# Environment the cluster's processes must not inherit: another Spark's
# settings, a PYTHONPATH that would hand executors trawl from elsewhere, and
# trawl's own config variables (TRAWL__SECTION__KEY).
INHERITED = ("PYTHONPATH", "PYSPARK_", "SPARK_", "TRAWL__", "JAVA_TOOL_OPTIONS")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 just now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``INHERITED``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED)}
    return env | {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"} | extra


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} unreadable)"


class ClusterError(RuntimeError):
    """The standalone cluster did not come up, or a submitted job failed."""


class StandaloneCluster:
    """A Spark standalone master and workers on 127.0.0.1; a context manager.

    Each daemon is ``spark-class`` in a process group of its own (its
    executors and their Python workers are its children), so ``stop()``
    ends exactly what this object started. ``start_s`` is the time from
    launch until the master listed every worker alive.
    """

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir = workdir
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.webui_port = free_port(), free_port()
        self.worker_ui_ports: list[int] = []
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.start_s = 0.0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        log = self.workdir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        conf_dir = self.workdir / "conf"  # empty: no spark-defaults from elsewhere
        conf_dir.mkdir(exist_ok=True)
        env = clean_env(
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
            SPARK_LOCAL_DIRS=str(self.workdir / "local" / name),
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self._procs.append((name, proc))

    def start(self, timeout_s: float = 180.0) -> StandaloneCluster:
        started = time.monotonic()
        self._spawn("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", str(self.webui_port),
        ])  # fmt: skip
        for i in range(1, self.workers + 1):
            ui = free_port()
            self.worker_ui_ports.append(ui)
            self._spawn(f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", self.master_url,
                "--cores", str(self.cores), "--memory", self.memory, "--host", "127.0.0.1",
                "--webui-port", str(ui), "--work-dir", str(self.workdir / f"work{i}"),
            ])  # fmt: skip
        self._wait_for_workers(started + timeout_s)
        self.start_s = round(time.monotonic() - started, 1)
        return self

    def _wait_for_workers(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            for name, proc in self._procs:
                if proc.poll() is not None:
                    log = tail(self.workdir / "logs" / f"{name}.log")
                    raise ClusterError(f"{name} exited with {proc.returncode}:\n{log}")
            with contextlib.suppress(OSError, ValueError):
                if self.status()["aliveworkers"] == self.workers:
                    return
            time.sleep(0.5)
        raise ClusterError(
            f"{self.workers} workers not registered in time:\n"
            + tail(self.workdir / "logs" / "master.log")
        )

    def status(self) -> dict[str, Any]:
        """The master's state (workers, applications) from its web UI's JSON."""
        return _get_json(f"http://127.0.0.1:{self.webui_port}/json/")

    def executors_per_worker(self) -> list[Counter[str]]:
        """For each worker, how many executors each application had on it."""
        counts = []
        for port in self.worker_ui_ports:
            state = _get_json(f"http://127.0.0.1:{port}/json/")
            runs = state.get("executors", []) + state.get("finishedexecutors", [])
            counts.append(Counter(run["appid"] for run in runs))
        return counts

    def stop(self) -> None:
        """Workers first (they end their executors), then the master."""
        for _, proc in reversed(self._procs):
            _end_group(proc)
        self._procs = []

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return dict(json.load(resp))


def _end_group(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM the process group ``proc`` leads, SIGKILL what is left after
    ``grace_s`` (the group is our own: started with start_new_session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):  # children that outlived it
            os.killpg(proc.pid, signal.SIGKILL)
        return


def bare_python(folder: Path) -> Path:
    """A virtualenv whose site-packages path is the main virtualenv's, as a
    plain path: every dependency imports, trawl does not (the editable
    install is a ``.pth`` file in there, and ``.pth`` files on a plain path
    are not read)."""
    import sysconfig

    base = getattr(sys, "_base_executable", sys.executable)  # not this virtualenv's python
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
    purelib = sysconfig.get_paths()["purelib"]
    site = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "trawl-deps.pth").write_text(purelib + "\n", encoding="utf-8")
    return folder / "bin" / "python"


def package_zip(out: Path) -> Path:
    """``lib/trawl`` as a zip for ``--py-files`` (trawl/ at its top level)."""
    lib = ROOT / "lib"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((lib / "trawl").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(lib).as_posix())
    return out


def write_config(path: Path, web: TestWeb, **overrides: Any) -> Path:
    """The crawl's trawl.toml: the test web's hosts file and loopback allowed,
    plus ``overrides`` given as ``section__key=value``."""
    sections: dict[str, dict[str, Any]] = {
        "dns": {"hosts_file": str(web.hosts_file)},
        "fetch": {"allow_networks": ["127.0.0.0/8"]},
    }
    for name, value in overrides.items():
        section, key = name.split("__")
        sections.setdefault(section, {})[key] = value
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class Submitter:
    """Runs ``jobs/<stage>.py`` through spark-submit against one master."""

    master: str
    package: Path
    python: Path
    workdir: Path
    driver_memory: str = "768m"
    conf: dict[str, str] = field(default_factory=dict)
    java_options: str = ""  # for the driver and the executors, e.g. QUICK_JVM
    timeout_s: float = 1800.0
    _runs: int = field(default=0, init=False)

    def command(self, stage: str, args: Sequence[str]) -> list[str]:
        jars = ",".join(str(p) for p in sorted(JARS.glob("*.jar")))
        java = f"-Dlog4j2.configurationFile=file:{LOG4J2} {self.java_options}".strip()
        conf = {
            "spark.local.dir": str(self.workdir / "local"),
            "spark.driver.extraJavaOptions": java,
            "spark.executor.extraJavaOptions": java,
            **self.conf,
        }
        cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.master]
        cmd += ["--name", f"trawl-{stage}", "--driver-memory", self.driver_memory]
        cmd += ["--jars", jars, "--py-files", str(self.package)]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return [*cmd, str(ROOT / "jobs" / f"{stage}.py"), *args, "--json"]

    def run(self, stage: str, args: Sequence[str]) -> tuple[dict[str, Any], float]:
        """The job's JSON result and its wall time; ClusterError if it failed
        or outlived ``timeout_s``. Its stdout (where spark-submit also puts
        the Python driver's stderr) and the JVM's stderr go to ``logs/``."""
        self._runs += 1
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        out, err = (logs / f"{self._runs}-{stage}.{ext}" for ext in ("out", "log"))
        env = clean_env(PYSPARK_PYTHON=str(self.python), PYSPARK_DRIVER_PYTHON=str(self.python))
        started = time.monotonic()
        with out.open("wb") as stdout, err.open("wb") as stderr:
            job = subprocess.Popen(
                self.command(stage, args),
                stdout=stdout,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # its own group: a timeout ends the driver too
            )
            try:
                job.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                pass
            finally:  # also when the caller is interrupted
                if job.returncode is None:
                    _end_group(job, grace_s=5.0)
        seconds = round(time.monotonic() - started, 1)
        if job.returncode != 0:
            why = "timed out" if seconds >= self.timeout_s else f"exited with {job.returncode}"
            raise ClusterError(f"{stage} {why}; {out}:\n{tail(out)}\n{err}:\n{tail(err)}")
        lines = out.read_text(errors="replace").splitlines()
        rows = [json.loads(line) for line in lines if line.startswith("{")]
        return (rows[-1] if rows else {}), seconds


def cycle_times(
    first: datetime, cycles: int, step: timedelta = timedelta(days=1)
) -> list[datetime]:
    return [first + i * step for i in range(cycles)]


def crawl_with_jobs(
    submitter: Submitter, root: str, config: Path, seeds: Path, web: TestWeb, ats: list[datetime]
) -> list[dict[str, Any]]:
    """inject, then every stage of every cycle as its own spark-submit; the
    web's clock follows the cycles' logical time. One row per job run."""
    rows = []

    def job(stage: str, at: datetime, *extra: str) -> dict[str, Any]:
        args = ["--crawl", root, "--config", str(config)]
        args += ["--at", at.isoformat(), "--segment", segment_id(at), *extra]
        result, seconds = submitter.run(stage, args)
        row = {"stage": stage, "segment": segment_id(at), "seconds": seconds, "result": result}
        rows.append(row)
        print(json.dumps(row), flush=True)
        return result

    job("inject", ats[0], str(seeds))
    for at in ats:
        web.set_time(at)
        for stage in STAGES:
            if job(stage, at).get("urls") == 0:  # generate found nothing due
                return rows
    return rows


# -- comparing two crawls ---------------------------------------------------

# Rows are matched on these keys (every crawl table, per segment where the
# table is per segment).
KEYS: dict[str, tuple[str, ...]] = {
    "crawldb": ("url",),
    "hostdb": ("host",),
    "fetchlist": ("segment", "url"),
    "fetch": ("segment", "kind", "url"),
    "events": ("segment", "event", "url"),
    "counters": ("segment", "job", "name"),
}

# Columns two correct runs of the same crawl fill differently, and why. A
# dotted name is a field of a struct column. Everything else must be equal.
_WARC_ID = "a WARC-Record-ID is a fresh UUID per record"
_WARC_DATE = "WARC-Date is the wall-clock capture time"
_GZIP = "the record's gzip member holds its UUID and wall-clock dates"
_MEASURED = "delay_factor x the measured response time"
_PACKED = "host groups packed over tasks by expected duration, from measured gaps"
VOLATILE: dict[str, dict[str, str]] = {
    "crawldb": {"stored_capture.record_id": _WARC_ID, "stored_capture.date": _WARC_DATE},
    "hostdb": {
        "robots_fetched_at": "wall-clock time of the robots.txt fetch (its cache age is wall time)",
        "robots_unreachable_since": "wall-clock time of the first failed robots.txt fetch",
        "next_allowed_at": "the politeness clock: wall time of the last request + the gap",
        "backoff_until": "wall-clock end of a Retry-After or error back-off",
        "delay_s": _MEASURED,
        "resp_time_avg_s": "measured response time",
        "soft404_probed_at": "wall-clock time of the soft-404 probe",
    },
    "fetchlist": {  # generate copies these from hostdb and crawldb
        "robots_fetched_at": "hostdb's, wall-clock",
        "robots_unreachable_since": "hostdb's, wall-clock",
        "next_allowed_at": "hostdb's politeness clock, wall-clock",
        "soft404_probed_at": "hostdb's, wall-clock",
        "delay_s": "hostdb's, " + _MEASURED,
        "task": _PACKED,
        "stored_capture.record_id": _WARC_ID,
        "stored_capture.date": _WARC_DATE,
    },
    "fetch": {
        "fetched_at": "wall-clock time of the request",
        "ttfb_s": "measured",
        "elapsed_s": "measured",
        "delay_s": _MEASURED,
        "task": _PACKED,
        "warc_file": "named after its task (" + _PACKED + ")",
        "warc_offset": "records land in the file in fetch order",
        "warc_length": _GZIP,
        "stored_capture.record_id": _WARC_ID,
        "stored_capture.date": _WARC_DATE,
    },
    "events": {
        "fetched_at": "wall-clock time of the request",
        "warc_ref.file": "named after its task (" + _PACKED + ")",
        "warc_ref.offset": "records land in the file in fetch order",
        "warc_ref.length": _GZIP,
    },
    "counters": {},
}


def _without_date(headers: list[list[str]] | None) -> list[list[str]] | None:
    """Response headers less ``Date`` (the server's wall clock, RFC 9110 6.6.1)."""
    return None if headers is None else [h for h in headers if h[0].lower() != "date"]


def table_rows(root: str, table: str) -> list[dict[str, Any]]:
    """Every row of a crawl table, read with delta-rs (no JVM), on a local or
    an object-store root; per-segment tables of all segments, with a
    ``segment`` column."""
    from deltalake import DeltaTable

    from trawl.config import load_config
    from trawl.store.files import CrawlRoot
    from trawl.store.policy import delta_uri

    files = CrawlRoot.of(root, load_config().storage)
    options = files.s3.delta_options() if files.s3 is not None else None

    def read(rel: str) -> list[dict[str, Any]]:
        uri = delta_uri(files.child(rel))
        return list(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist())

    if table not in ("fetchlist", "fetch"):
        return read(table)
    rows = []
    for seg in files.dirs("segments"):
        if files.names(f"segments/{seg}/{table}/_delta_log", ".json"):
            rows += [{"segment": seg, **row} for row in read(f"segments/{seg}/{table}")]
    if table == "fetch":
        for row in rows:
            row["headers"] = _without_date(row["headers"])
    return rows


def _same(a: Any, b: Any) -> bool:
    """Equal, with floats equal to 1e-9 relative (sums in another order)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _column_diffs(row_a: dict[str, Any], row_b: dict[str, Any]) -> Iterator[str]:
    """Names of the columns (struct fields dotted) where two rows differ."""
    for name in row_a.keys() | row_b.keys():
        a, b = row_a.get(name), row_b.get(name)
        if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
            yield from (f"{name}.{k}" for k in a if not _same(a[k], b[k]))
        elif not _same(a, b):
            yield name


def compare_table(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]], table: str
) -> dict[str, Any]:
    """Rows only in one crawl, and per column how many matched rows differ
    (``differ``), split into the volatile ones and the rest (``mismatched``)."""
    key = KEYS[table]
    by_a = {tuple(r[k] for k in key): r for r in rows_a}
    by_b = {tuple(r[k] for k in key): r for r in rows_b}
    differ: Counter[str] = Counter()
    examples: dict[str, list[Any]] = {}
    for k in by_a.keys() & by_b.keys():
        for col in _column_diffs(by_a[k], by_b[k]):
            differ[col] += 1
            if col not in VOLATILE[table] and len(examples.setdefault(col, [])) < 3:
                examples[col].append({"key": k, "a": _pick(by_a[k], col), "b": _pick(by_b[k], col)})
    return {
        "rows": [len(rows_a), len(rows_b)],
        "only_a": sorted(map(repr, by_a.keys() - by_b.keys()))[:10],
        "only_b": sorted(map(repr, by_b.keys() - by_a.keys()))[:10],
        "differ": dict(sorted(differ.items())),
        "mismatched": {c: n for c, n in sorted(differ.items()) if c not in VOLATILE[table]},
        "examples": {c: repr(v) for c, v in examples.items()},
    }


def _pick(row: dict[str, Any], col: str) -> Any:
    value: Any = row
    for part in col.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def compare_crawls(a: str, b: str) -> dict[str, dict[str, Any]]:
    """``compare_table`` for every table in ``KEYS``."""
    return {t: compare_table(table_rows(a, t), table_rows(b, t), t) for t in KEYS}


def agrees(comparison: dict[str, Any]) -> bool:
    """Same rows, and no column beyond the volatile ones differs."""
    return not (comparison["only_a"] or comparison["only_b"] or comparison["mismatched"])


# -- the benchmark ----------------------------------------------------------


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=24)
    ap.add_argument("--ips", type=int, default=6)
    ap.add_argument("--pages", type=int, nargs=2, default=(5, 20), help="pages per host, range")
    ap.add_argument("--seeds", type=int, default=12, help="homepages injected")
    ap.add_argument("--seed", type=int, default=7, help="test web seed")
    ap.add_argument("--cycles", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=300.0, help="fetch.time_limit_s")
    ap.add_argument("--min-delay", type=float, default=0.2, help="politeness.min_delay_s")
    ap.add_argument(
        "--jvm", choices=("default", "quick"), default="default", help="quick: QUICK_JVM for jobs"
    )
    ap.add_argument(
        "--s3", action="store_true",
        help="the cluster's crawl root on an S3 server (moto's, started on loopback)",
    )  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSONL file to append to")
    return ap.parse_args()


def crawl_config(path: Path, web: TestWeb, args: argparse.Namespace) -> Path:
    return write_config(
        path,
        web,
        politeness__min_delay_s=args.min_delay,
        fetch__time_limit_s=args.time_limit,
        fetch__tasks=2,
        crawl__host_buckets=4,
        spark__shuffle_partitions=4,
    )


def cluster_conf() -> dict[str, str]:
    """Executors small: one core and 512 MB on each of the two workers."""
    return {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    model = WebModel.generate(
        args.seed, hosts=args.hosts, ips=args.ips, pages_per_host=tuple(args.pages), throttled=0.0
    )
    ats = cycle_times(AT, args.cycles)
    record: dict[str, Any] = {"web": {"hosts": len(model.hosts), "pages": model.page_count}}
    python = bare_python(work / "python")
    package = package_zip(work / "trawl.zip")
    java = QUICK_JVM if args.jvm == "quick" else ""
    cluster_root = str(work / "crawl-cluster")
    stack = contextlib.ExitStack()
    if args.s3:  # every process started from here on gets the store's environment
        os.environ.update(stack.enter_context(s3_server(work / "s3")))
        cluster_root = "s3a://bench/crawl-cluster"
    record["cluster_root"] = cluster_root.split("://")[0] if "://" in cluster_root else "local"
    with stack, TestWeb(model, work / "web", n_seeds=args.seeds, at=ats[0]) as web:
        config = crawl_config(work / "trawl.toml", web, args)
        with StandaloneCluster(work / "cluster") as cluster:
            record["cluster_start_s"] = cluster.start_s
            on_cluster = Submitter(
                cluster.master_url, package, python, work / "submit-cluster",
                conf=cluster_conf(), java_options=java,
            )  # fmt: skip
            record["cluster"] = crawl_with_jobs(
                on_cluster, cluster_root, config, web.seeds_file, web, ats
            )
            record["executors_per_worker"] = [dict(c) for c in cluster.executors_per_worker()]
        local = Submitter(
            "local[2]", package, python, work / "submit-local", driver_memory="1g",
            java_options=java,
        )  # fmt: skip
        record["local"] = crawl_with_jobs(
            local, str(work / "crawl-local"), config, web.seeds_file, web, ats
        )
        record["comparison"] = compare_crawls(cluster_root, str(work / "crawl-local"))
    record["agree"] = {t: agrees(c) for t, c in record["comparison"].items()}
    return record


@contextlib.contextmanager
def s3_server(workdir: Path) -> Iterator[dict[str, str]]:
    """moto's S3 server on 127.0.0.1 with a bucket "bench"; yields the AWS
    environment that reaches it (the same variables a real store takes)."""
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret",
        "AWS_EC2_METADATA_DISABLED": "true",
    }  # fmt: skip
    with (workdir / "moto.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"moto did not start: {tail(workdir / 'moto.log')}"
                    ) from None
                time.sleep(0.2)
        client = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="bench", aws_secret_access_key="bench-secret",
        )  # fmt: skip
        client.create_bucket(Bucket="bench")
        yield env
    finally:
        _end_group(proc, grace_s=5.0)


def stage_totals(rows: list[dict[str, Any]]) -> dict[str, float]:
    totals: Counter[str] = Counter()
    for row in rows:
        totals[row["stage"]] += row["seconds"]
    return {stage: round(s, 1) for stage, s in totals.items()}


def main() -> None:
    args = parse_args()
    record: dict[str, Any] = {
        "bench": "cluster",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "params": {k: v for k, v in vars(args).items() if k not in ("keep", "results")},
    }
    work = Path(tempfile.mkdtemp(prefix="trawl-bench-cluster-"))
    started = time.monotonic()
    try:
        record.update(run(args, work))
    finally:
        if args.keep:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    record["wall_s"] = round(time.monotonic() - started, 1)
    record["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    record["seconds_by_stage"] = {m: stage_totals(record[m]) for m in ("cluster", "local")}
    append_line(args.results, record)
    summary = {
        "cluster_start_s": record["cluster_start_s"],
        "seconds_by_stage": record["seconds_by_stage"],
        "agree": record["agree"],
        "differ": {t: c["differ"] for t, c in record["comparison"].items()},
    }
    print(json.dumps(summary, indent=1))
    if not all(record["agree"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
