"""Benchmark: where the small-table path stops paying, read by read and MERGE by MERGE.

    .venv/bin/python bench/bench_small_path.py [--rows 2000 20000 100000] [--repeat 2]
        [--results bench/results/small_path.jsonl]

For each size, a crawldb of that many rows (500 hosts over 8 buckets) is
read whole (``read_table``, then a local checkpoint: what a job does with
it) and takes a MERGE of 1,000 updated rows (``merge``), alternately by the
small-table path (delta-rs, DuckDB and Arrow; ``trawl.store.deltars``) and
by Spark (``SMALL_TABLE_BYTES`` set to 0 for the run), ``--repeat`` times
each on Spark ``local[2]``. The thresholds in ``trawl.store.tables``
(``SMALL_ROWS``) is where these meet. One JSON
line per run is appended to bench/results/small_path.jsonl.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_politeness import append_line, commit, line_head, machine
from pyspark.sql import functions as F

from trawl.config import load_config
from trawl.store import tables
from trawl.store.schemas import CRAWLDB_SCHEMA
from trawl.store.session import build_spark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "small_path.jsonl"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2000, 20000, 100000])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--results", type=Path, default=RESULTS)
    return ap.parse_args()


def crawldb(spark: Any, root: str, rows: int) -> None:
    cols = [F.lit(None).cast(f.dataType).alias(f.name) for f in CRAWLDB_SCHEMA.fields]
    host = F.concat(F.lit("h"), (F.col("id") % 500).cast("string"), F.lit(".test"))
    df = (
        spark.range(rows)
        .select("id", *cols)
        .withColumn("host", host)
        .withColumn("url", F.concat(F.lit("http://"), F.col("host"), F.lit("/p/"), F.col("id")))
        .withColumn("url_fp", F.xxhash64("url"))
        .withColumn("host_bucket", (F.abs(F.hash("host")) % 8).cast("int"))
        .withColumn("status", F.lit("unfetched"))
        .withColumn("score", F.rand(1))
        .drop("id")
    )
    tables.ensure_table(spark, root, "crawldb")
    df.write.format("delta").mode("append").save(f"{root}/crawldb")


def once(spark: Any, root: str) -> tuple[float, float]:
    began = time.monotonic()
    tables.read_table(spark, root, "crawldb").localCheckpoint(eager=True).count()
    read = time.monotonic() - began
    source = (
        tables.read_table(spark, root, "crawldb")
        .limit(1000)
        .select("host_bucket", "url_fp", "url", F.lit("fetched").alias("status"))
        .localCheckpoint(eager=True)
    )
    on = "t.host_bucket = s.host_bucket AND t.url_fp = s.url_fp AND t.url = s.url"
    plan = tables.Merge("crawldb", source, on, updates=((None, {"status": "s.status"}),))
    began = time.monotonic()
    tables.merge(spark, root, plan)
    return read, time.monotonic() - began


def main() -> None:
    args = parse_args()
    before = machine()
    cfg = load_config(None, ["spark.master=local[2]", "spark.shuffle_partitions=4",
                             "spark.log_level=ERROR"], environ={})  # fmt: skip
    spark = build_spark(cfg)
    work = Path(tempfile.mkdtemp(prefix="trawl-bench-small-"))
    small_bytes = tables.SMALL_TABLE_BYTES
    sizes = []
    try:
        for rows in args.rows:
            root = str(work / f"c{rows}")
            crawldb(spark, root, rows)
            runs: dict[str, list[list[float]]] = {"small": [], "spark": []}
            for _ in range(args.repeat):
                for way in ("small", "spark"):
                    tables.SMALL_TABLE_BYTES = small_bytes if way == "small" else 0
                    runs[way].append([round(t, 3) for t in once(spark, root)])
            tables.SMALL_TABLE_BYTES = small_bytes
            line = {"rows": rows, **{f"{w}_read_merge_s": r for w, r in runs.items()}}
            print(line, flush=True)
            sizes.append(line)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    append_line(args.results, {**line_head("small_path", commit(), before, args), "sizes": sizes})


if __name__ == "__main__":
    main()
