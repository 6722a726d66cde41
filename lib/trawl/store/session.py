"""The Spark session, built from config, with Delta Lake on and logs quiet.

The Delta jars are loaded from disk (``jars/lib``, filled once by
``scripts/setup.sh``), never through ``spark.jars.packages``, so after setup
no job touches the network. On a cluster, ``spark.jars_dir`` points at the
jars there, or is left empty when spark-submit already ships them
(``--jars``/``--packages``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trawl.config import Config
from trawl.store import classcache
from trawl.store.objectstore import S3Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROJECT_ROOT = Path(__file__).resolve().parents[3]
LOG4J2_PROPERTIES = Path(__file__).resolve().parents[1] / "conf" / "log4j2.properties"

# Settings that suit a crawl's small-to-medium tables; any of them can be
# overridden with ``--set spark.conf.<key>=<value>``.
BASE_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    # A join whose smaller side's shuffle partitions all fit in 64 MiB hashes
    # them instead of sorting both sides: a MERGE's source against crawldb's
    # rows (bench_scale, 3M URLs, against Spark's default 0: generate 64 -> 49 s,
    # updatedb 95 -> 92 s; see docs/scale.md).
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": "64m",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    # PySpark's DataFrame query context: on by default, every Column function
    # and DataFrame method called from Python first records its Python call
    # site in the JVM (a walk of the Python stack and four or five py4j round
    # trips), so that an error can name the line that built the failing
    # expression. A cycle's jobs build thousands of expressions: with it off,
    # bench_stages' generate made 4,187 py4j calls from the driver's main
    # thread instead of 9,057, and updatedb 4,565 instead of 7,935
    # (docs/benchmarks.md, "Stages"). trawl reports a job's failure itself;
    # the error names the expression, not the Python line that built it.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Its JVM half: every Column and DataFrame built through the Dataset API
    # captures the JVM's stack for the same purpose, and from Python that
    # stack is py4j's frames, naming nothing a user wrote.
    "spark.sql.dataFrameQueryContext.enabled": "false",
    # lower() and upper() by the JVM's own case mapping, as Spark 3 did,
    # instead of ICU's: ICU loads its data and rules on a JVM's first call,
    # 2.5 s of every process whose updatedb lowers its links' hosts (20,000
    # host names: 2.7-2.9 s the first time with ICU, 0.8 s with the JVM's,
    # 0.2 s either way after). Host names are ASCII; the two mappings differ
    # only on a few special-cased letters.
    "spark.sql.icu.caseMappings.enabled": "false",
}


# ``spark.small_jobs``: the SQL settings of a job over a small crawl
# (``trawl.runner.common.sized_job`` decides which). On a few thousand rows a
# Spark job's time is the driver's, not the rows': each shuffle of a plan is
# a stage, each stage under adaptive execution its own job planned again,
# each broadcast a job of its own, and each stage's code generated and
# compiled by Janino before one row is read. So: one shuffle partition (one
# per core over a segment of some MB: ``trawl.runner.common.small_partitions``)
# and no adaptive re-planning (a shuffle is a step inside the job, not a
# job), no broadcasts (a sort-merge join of one partition is cheap), and
# expressions interpreted instead of compiled. On millions of rows every one
# of these costs more than it saves, hence only for small jobs
# (docs/benchmarks.md, "Stages"). A key the operator sets in [spark.conf] is
# left as set.
SMALL_JOB_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

# ``spark.driver_jit``: how the driver's JVM (in local mode also the
# executor) compiles hot code. The JVM's default ("tiered") compiles it twice,
# quickly with C1 and then optimised with C2. A crawl cycle runs hundreds of
# small Spark jobs, each planned anew, so much of Spark's and Delta's code
# turns hot for a while and C2 compiles a lot of it: in the fetch benchmark's
# crawl, the compiler threads used 70 of the crawl's 192 CPU-seconds, on two
# cores beside the jobs waiting for it. "c1" stops at C1, with the code cache the
# tiered JVM would have (C1 alone gets 48 MB, and its sweeper then spends
# seconds evicting and recompiling), and compiles a method after a tenth of
# the calls and loop turns the JVM waits for by default: a small cycle plans
# hundreds of queries once each, and much of that code ran interpreted
# (bench_stages' fixed cost 30.8 s -> 26.3 s and the driver's CPU 35.2 s ->
# 31.4 s, means of interleaved runs; 0.03 gained no more).
# docs/scale.md, "The driver's JIT".
DRIVER_JIT_OPTIONS: dict[str, list[str]] = {
    "c1": [
        "-XX:TieredStopAtLevel=1",
        "-XX:ReservedCodeCacheSize=240m",
        "-XX:CompileThresholdScaling=0.1",
    ],
    "tiered": [],
}


def delta_jars(cfg: Config) -> list[str]:
    """The Delta jar files to load from disk (empty when none are configured)."""
    folder = Path(cfg.spark.jars_dir) if cfg.spark.jars_dir else PROJECT_ROOT / "jars" / "lib"
    return sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []


def local_driver_memory() -> str:
    """A quarter of the machine's memory, between 1 and 8 GiB (``spark.driver.memory``)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "1g"
    return f"{max(1024, min(8192, total // 4 // 2**20))}m"


def _log_options() -> list[str]:
    """The JVM option that gives it trawl's log settings (quiet Spark)."""
    if LOG4J2_PROPERTIES.is_file():
        return [f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"]
    return []


def _driver_options(cfg: Config, archive: bool = True) -> list[str]:
    """The driver JVM's options trawl sets: its log settings, the JIT of
    ``spark.driver_jit`` and (``archive``) the class archive."""
    return [
        *_log_options(),
        *DRIVER_JIT_OPTIONS[cfg.spark.driver_jit],
        *(classcache.driver_options(cfg) if archive else []),
    ]


def spark_conf(cfg: Config) -> dict[str, str]:
    """Every spark.* setting trawl sets, config overrides applied last."""
    conf = dict(BASE_CONF)
    conf["spark.sql.shuffle.partitions"] = str(cfg.spark.shuffle_partitions)
    jars = delta_jars(cfg)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    log_opts = _log_options()
    if log_opts:
        conf["spark.executor.extraJavaOptions"] = log_opts[0]
    driver_opts = _driver_options(cfg)
    if driver_opts:
        conf["spark.driver.extraJavaOptions"] = " ".join(driver_opts)
    if cfg.spark.master.startswith("local"):
        # Python workers run this interpreter (the virtualenv with trawl in it),
        # not whatever "python3" is first on PATH.
        conf["spark.pyspark.python"] = sys.executable
        # In local mode the driver's JVM is the executor too: Spark's 1 GiB
        # default heap holds every cached block and broadcast of the cycle (a
        # six-cycle trap crawl ran out building a broadcast in dedup). The
        # JVM's own default instead: a quarter of the memory, within 1-8 GiB.
        conf["spark.driver.memory"] = local_driver_memory()
    conf.update(S3Store.from_config(cfg.storage).spark_conf())
    conf.update(cfg.spark.conf)
    return conf


def catalog_conf(cfg: Config) -> dict[str, str]:
    """The settings of a session whose catalog is a Hive metastore
    (``[catalog]``): the cluster's, or Spark's embedded one, in the current
    folder or ``catalog.metastore_dir``."""
    conf = {"spark.sql.catalogImplementation": "hive"}
    c = cfg.catalog
    if c.metastore_uri:
        conf["spark.hadoop.hive.metastore.uris"] = c.metastore_uri
    elif c.metastore_dir:
        folder = Path(c.metastore_dir).absolute()
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
        )
        conf["spark.sql.warehouse.dir"] = str(folder / "spark-warehouse")
    return conf


def spark_sql_command(cfg: Config, object_store: bool = False) -> list[str]:
    """The ``spark-sql`` command line that sees the registered tables: the
    Delta jars (their folder on the class path) and extension, the
    metastore, and for an ``object_store`` root its S3A settings. Its JVM
    gets the driver's JIT and log settings (``spark.driver_jit``; not the
    class archive, which is for trawl's class path): C1 alone took its CPU
    for two queries on the fetch bench's crawl from 46 to 30 seconds."""
    conf = spark_conf(cfg)
    keep = ("spark.sql.extensions", "spark.sql.catalog.", "spark.sql.session.timeZone", "spark.ui.")
    wanted = {k: v for k, v in conf.items() if k.startswith(keep)}
    if object_store:
        wanted.update({k: v for k, v in conf.items() if k.startswith("spark.hadoop.fs.s3a.")})
    wanted.update(catalog_conf(cfg))
    command = ["spark-sql"]
    java = cfg.spark.conf.get("spark.driver.extraJavaOptions") or " ".join(
        _driver_options(cfg, archive=False)
    )
    if java:
        command += ["--driver-java-options", java]
    jars = delta_jars(cfg)
    if jars:
        command += ["--driver-class-path", str(Path(jars[0]).parent / "*")]
    for key, value in sorted(wanted.items()):
        command += ["--conf", f"{key}={value}"]
    return command


def apply_storage(spark: SparkSession, cfg: Config) -> None:
    """Set ``[storage]``'s S3A settings on a running session's Hadoop
    configuration (a session made before, or by spark-submit, gets them too;
    S3A reads them when it first opens a bucket)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in S3Store.from_config(cfg.storage).spark_conf().items():
        if key not in cfg.spark.conf:
            hadoop.set(key.removeprefix("spark.hadoop."), value)


def build_spark(cfg: Config, catalog: bool = False) -> SparkSession:
    """Get or create the session (inside spark-submit the master comes from
    there); ``catalog``: with the Hive metastore of ``[catalog]``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(cfg.spark.app_name)
    if cfg.spark.master:
        builder = builder.master(cfg.spark.master)
    conf = spark_conf(cfg)
    if catalog:
        conf = {**catalog_conf(cfg), **conf}
        builder = builder.enableHiveSupport()
    if "spark.pyspark.python" in conf:
        # PySpark's SparkContext takes the worker interpreter from this variable.
        os.environ.setdefault("PYSPARK_PYTHON", conf["spark.pyspark.python"])
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(cfg.spark.log_level)
    if cfg.spark.log_level.upper() in QUIET_LEVELS:
        quiet_task_failures(spark)
    apply_storage(spark, cfg)
    return spark


# The driver's loggers that print a failed task's stack traces (a task's
# Python traceback, then the JVM's, for every task and again for the job:
# some 170 lines for one full disk). The failure reaches trawl as the job's
# exception, which the CLI tells in one line and keeps whole in a file
# (``trawl.cli.failures``); at a log level of WARN or lower they print.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.util.Utils",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
)
QUIET_LEVELS = ("ERROR", "FATAL", "OFF")


def quiet_task_failures(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    level = jvm.org.apache.logging.log4j.Level.OFF
    for name in TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)


def wait_for_running_tasks(spark: SparkSession, timeout_s: float = 60.0) -> bool:
    """Wait until no task runs on any executor, at most ``timeout_s``: when
    one task fails its job, Spark reports the failure at once and cancels
    the others, which end (their Python workers killed after
    ``spark.python.task.killTimeout``) a little later. True: none runs."""
    import time

    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        running = sum(info.numRunningTasks() for info in tracker.getExecutorInfos())
        if running == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


@contextmanager
def session_conf(spark: SparkSession, values: dict[str, str]) -> Iterator[None]:
    """``values`` set in the session for the block, the previous ones back
    after it, whatever it raised (runtime SQL settings: nothing restarts)."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def small_job_conf(
    spark: SparkSession, cfg: Config, partitions: int = 1
) -> AbstractContextManager[None]:
    """``session_conf`` with ``SMALL_JOB_CONF`` (``partitions`` shuffle
    partitions), less the keys set in ``[spark.conf]``."""
    conf = {**SMALL_JOB_CONF, "spark.sql.shuffle.partitions": str(partitions)}
    return session_conf(spark, {k: v for k, v in conf.items() if k not in cfg.spark.conf})
