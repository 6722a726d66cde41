"""Benchmark: a ranking's plan built by DataFrame calls or as one SQL statement.

    .venv/bin/python bench/bench_plan_build.py [--steps 20] [--rows 2000] [--rounds 4]
        [--results bench/results/plan_build.jsonl]

generate's ranking (``trawl.stages.ranking.rank_due``) is a chain of window
ranks, filters and projections, built by some hundred DataFrame calls; each
call makes PySpark's JVM analyse the plan so far. Would one SQL statement,
analysed once, cost the driver less? Both forms of one synthetic chain are
built and run in one warm session (Spark ``local[2]``, the small-job
settings of ``trawl.store.session.SMALL_JOB_CONF``): ``--steps`` steps, each
a row number over a window (by host or by domain, alternately), a filter on
it and two computed columns, over ``--rows`` rows; the SQL form is the same
steps as common table expressions. Per round and form: the seconds to build
the frame (analysis) and to compute it (a local checkpoint: optimisation,
planning and the job). One JSON line per run is appended to
bench/results/plan_build.jsonl.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench_politeness import append_line, commit, line_head, machine
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from trawl.config import load_config
from trawl.store.session import SMALL_JOB_CONF, build_spark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "plan_build.jsonl"
# Spark's analyzer gives up on a statement this deep after 100 rounds of its
# resolution rules; the DataFrame chain never reaches that limit.
MAX_ITERATIONS = "1000"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="window steps in the chain")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--results", type=Path, default=RESULTS)
    return ap.parse_args()


def by_dataframe(base: DataFrame, steps: int) -> DataFrame:
    df = base
    for i in range(steps):
        key = ("host", "domain")[i % 2]
        rank = F.row_number().over(Window.partitionBy(key).orderBy(F.col("score").desc(), "id"))
        df = df.withColumn(f"r{i}", rank).filter(F.col(f"r{i}") <= 1000 - i)
        df = df.withColumns(
            {
                f"c{i}": F.coalesce(F.col("score") * i, F.lit(0.0)),
                f"d{i}": F.greatest(F.col("id"), F.lit(i)),
            }
        )
    return df


def by_sql(spark: SparkSession, steps: int) -> DataFrame:
    ctes, previous = [], "base"
    for i in range(steps):
        key = ("host", "domain")[i % 2]
        ranked = (
            f"SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY score DESC, id) AS r{i} "
            f"FROM {previous}"
        )
        ctes.append(
            f"s{i} AS (SELECT *, coalesce(score * {i}, 0.0) AS c{i}, greatest(id, {i}) AS d{i} "
            f"FROM ({ranked}) WHERE r{i} <= {1000 - i})"
        )
        previous = f"s{i}"
    return spark.sql("WITH " + ", ".join(ctes) + f" SELECT * FROM {previous}")


def main() -> None:
    args = parse_args()
    before = machine()
    settings = [f"spark.conf.{k}={v}" for k, v in SMALL_JOB_CONF.items()]
    settings += ["spark.master=local[2]", "spark.log_level=ERROR"]
    settings.append(f"spark.conf.spark.sql.analyzer.maxIterations={MAX_ITERATIONS}")
    spark = build_spark(load_config(None, settings, environ={}))
    base = spark.range(args.rows).select(
        (F.col("id") % 97).alias("host"),
        (F.col("id") % 13).alias("domain"),
        "id",
        F.rand(1).alias("score"),
    )
    base = base.localCheckpoint(eager=True)
    base.createOrReplaceTempView("base")
    forms = {
        "dataframe": lambda: by_dataframe(base, args.steps),
        "sql": lambda: by_sql(spark, args.steps),
    }
    rounds: list[dict[str, Any]] = []
    for i in range(args.rounds):
        for form, build in forms.items():
            began = time.perf_counter()
            frame = build()
            built = time.perf_counter() - began
            began = time.perf_counter()
            rows = frame.localCheckpoint(eager=True).count()
            ran = time.perf_counter() - began
            rounds.append({"round": i, "form": form, "build_s": round(built, 3),
                           "run_s": round(ran, 3), "rows": rows})  # fmt: skip
            print(f"round {i} {form:>9}: build {built:.2f} s, run {ran:.2f} s", flush=True)
    spark.stop()
    append_line(args.results, {**line_head("plan_build", commit(), before, args), "rounds": rounds})


if __name__ == "__main__":
    main()
