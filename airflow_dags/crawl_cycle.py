"""Airflow DAG: one crawl cycle per schedule interval, as spark-submit jobs.

generate -> fetch -> updatedb -> dedup -> events for one segment, each task a spark-submit of
the thin entry points in ``jobs/``. The logical time and segment id come from
Airflow's data interval (``{{ data_interval_end }}``), never from the wall
clock inside a job, so a re-run of a DAG run redoes the same segment and the
jobs' idempotence makes that safe.

Settings come from Airflow Variables with defaults: ``trawl_crawl_root``,
``trawl_config``, ``trawl_jobs_dir`` and ``trawl_spark_submit``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.models import Variable
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

CRAWL = Variable.get("trawl_crawl_root", default="/data/trawl/crawl")
CONFIG = Variable.get("trawl_config", default="/opt/trawl/conf/trawl.toml")
JOBS = Variable.get("trawl_jobs_dir", default="/opt/trawl/jobs")
SUBMIT = Variable.get("trawl_spark_submit", default="spark-submit")

AT = "{{ data_interval_end.isoformat() }}"
SEGMENT = "{{ data_interval_end.strftime('%Y%m%dT%H%M%SZ') }}"


def job(name: str) -> str:
    return (
        f"{SUBMIT} {JOBS}/{name}.py --crawl {CRAWL} --config {CONFIG} --at {AT} --segment {SEGMENT}"
    )


with DAG(
    dag_id="trawl_crawl_cycle",
    schedule=timedelta(hours=6),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,  # segments lock their URLs; one cycle at a time per crawl
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["trawl"],
) as dag:
    generate = BashOperator(task_id="generate", bash_command=job("generate"))
    fetch = BashOperator(task_id="fetch", bash_command=job("fetch"))
    updatedb = BashOperator(task_id="updatedb", bash_command=job("updatedb"))
    dedup = BashOperator(task_id="dedup", bash_command=job("dedup"))
    events = BashOperator(task_id="events", bash_command=job("events"))
    generate >> fetch >> updatedb >> dedup >> events
