"""Airflow 3 DAGs: one per crawl, each run one crawl cycle (one segment).

Which crawls
    The Airflow Variable ``trawl_crawls`` (or the environment variable
    ``AIRFLOW_VAR_TRAWL_CRAWLS``, which Airflow reads first and which costs no
    database query at parse time) names trawl config files: a JSON list, or
    one entry per line or comma; an entry may be a folder (its ``*.toml``) or
    a glob, relative to this DAG folder. Each file is one crawl, and the
    ``--config`` its jobs get; its ``[airflow]`` section (documented with its
    defaults in ``conf/trawl.toml``) gives the crawl root, DAG id (default
    ``trawl_<file name>``), schedule, start date, mode and retries. See
    ``crawl_configs.py``. A wrong file is a DAG import error naming the key.

    ::

        export AIRFLOW_VAR_TRAWL_CRAWLS=/opt/trawl/crawls     # news.toml, shops.toml ...
        # /opt/trawl/crawls/news.toml
        [airflow]
        crawl_root = "s3a://lake/crawls/news"
        schedule = "0 */6 * * *"
        mode = "cluster"
        jobs_dir = "/opt/trawl/jobs"
        py_files = ["/opt/trawl/dist/trawl.zip"]
        jars = ["/opt/trawl/jars/delta-spark_4.2_2.13-4.4.0.jar", "..."]  # all of jars/lib

What a run does
    generate -> fetch -> updatedb -> dedup -> events -> stats, one task per
    stage in the task group ``cycle``. The run's data interval end is the
    cycle's logical time (``--at``) and names its segment (``--segment
    20261130T000000Z``); no task reads the wall clock, so a retry or a
    cleared run redoes the same segment, and trawl's jobs are safe to re-run
    for their segment. ``max_active_runs = 1``: a segment locks its URLs
    until updatedb, so cycles of one crawl never overlap (trawl's crawl lease
    would refuse the second anyway). Missed intervals are not caught up: a
    crawl's next cycle simply picks up what is due.

Two modes (``airflow.mode``)
    ``local``: each task runs ``<trawl_executable> <stage> --crawl ... --config
    ... --at ... --segment ... --json`` on the worker (BashOperator; Spark in
    local mode, as the config's ``spark.master`` says). trawl lives in its own
    virtualenv, so Airflow's needs nothing of trawl's.
    ``cluster``: each task is ``spark-submit <jobs_dir>/<stage>.py`` with the
    same arguments through the Airflow connection ``spark_conn_id``
    (SparkSubmitOperator, from apache-airflow-providers-apache-spark), with
    ``py_files`` (trawl as a zip) and ``jars`` shipped; the master,
    deploy mode and resources are the connection's. The config file path is
    read by the driver, so it must exist where the driver runs.

Parsing stays light: this module imports the Airflow SDK and reads small TOML
files; pyspark, trawl and the Spark provider are not imported here (the
provider only when a crawl is in cluster mode).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, TaskGroup, Variable, chain

# Airflow 3 puts a DAG bundle's root on sys.path when its DAG processor parses
# it, but a plain DagBag (`airflow dags list --local`) does not: put the
# helper's folder there ourselves, so that every way of loading finds it.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from crawl_configs import (
    CRAWLS_VARIABLE,
    STAGES,
    Crawl,
    CrawlConfigError,
    load_crawls,
    local_command,
    segment_id,
    stage_args,
)


def stage_task(crawl: Crawl, stage: str) -> Any:
    """The operator of one stage in the crawl's mode."""
    if crawl.mode == "local":
        return BashOperator(task_id=stage, bash_command=local_command(crawl, stage))
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=stage,
        conn_id=crawl.spark_conn_id,
        application=f"{crawl.jobs_dir.rstrip('/')}/{stage}.py",
        application_args=stage_args(crawl, stage),
        py_files=",".join(crawl.py_files) or None,
        jars=",".join(crawl.jars) or None,
        name=f"{crawl.dag_id}-{stage}",
    )


def crawl_dag(crawl: Crawl) -> DAG:
    """The DAG of one crawl: the cycle's stages in order, in one task group."""
    with (
        DAG(
            dag_id=crawl.dag_id,
            description=f"trawl crawl cycle of {crawl.crawl_root} ({crawl.mode} mode)",
            schedule=crawl.schedule or None,
            start_date=crawl.start,
            catchup=False,
            max_active_runs=1,  # a segment locks its URLs: one cycle at a time per crawl
            default_args={
                "retries": crawl.retries,
                "retry_delay": timedelta(seconds=crawl.retry_delay_s),
            },
            user_defined_macros={"trawl_segment": segment_id},
            tags=["trawl", crawl.mode],
            doc_md=__doc__,
        ) as dag,
        TaskGroup(group_id="cycle", tooltip=" -> ".join(STAGES)),
    ):
        chain(*(stage_task(crawl, stage) for stage in STAGES))
    return dag


def configured_crawls() -> list[Crawl]:
    value = Variable.get(CRAWLS_VARIABLE, default="")
    if not value:
        raise CrawlConfigError(
            f"no crawls configured: set the Airflow Variable {CRAWLS_VARIABLE} "
            f"(or AIRFLOW_VAR_{CRAWLS_VARIABLE.upper()}) to trawl config files"
        )
    return load_crawls(str(value))


for _crawl in configured_crawls():
    globals()[_crawl.dag_id] = crawl_dag(_crawl)
