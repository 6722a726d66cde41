"""Benchmark: the near-duplicate join at scale -- completeness and growth.

    .venv/bin/python bench/bench_dedup_join.py [--sizes 250000 500000 1000000]
        [--sample 1000] [--seed 1] [--driver-memory 8g]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_dedup_join.py --sizes 20000 --results /tmp/dedup-smoke.jsonl

For each size N, N synthetic documents get a 64-bit simhash: document i is
random (``xxhash64``) unless ``i % 10 == 1``, in which case it is document
``i - 1``'s fingerprint with ``(i // 10) % 4`` bits flipped -- planted pairs
at distances 0 to 3 (two flips can land on one bit, so the distance is
measured, not assumed). All N are *new* at once (the first big batch, the
shuffle path with hot-key salting; a cycle's increment is broadcast instead),
and the same code as ``trawl dedup`` runs on them: ``near_pairs`` (permuted
blocks, popcount check), ``components`` (the clusters) and ``markings`` (a
canonical page per cluster, by ``dedup.compare_order``).

Checked, per size:

- every planted pair is found (distance 0: the two documents are one node);
- no found pair is farther apart than ``max_distance`` (recomputed in numpy);
- against brute force on a sample: for ``--sample`` random documents, every
  document within ``max_distance`` of them (numpy popcount over all N) is
  paired with them, and nothing else is.

Timed: the pair join, the clusters and the marking, and the total; the growth
exponent is the slope of log(total) over log(N) between the sizes. One JSON
line per size and a summary line go to bench/results/dedup_join.jsonl.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from bench_politeness import append_line, commit, machine
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from trawl.config import load_config
from trawl.stages.dedup import cluster_rows, components, markings, near_pairs, node_column
from trawl.store.session import build_spark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "dedup_join.jsonl"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250_000, 500_000, 1_000_000])
    ap.add_argument("--sample", type=int, default=1000, help="documents checked by brute force")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--shuffle-partitions", type=int, default=16)
    ap.add_argument("--results", type=Path, default=RESULTS)
    return ap.parse_args()


def documents(spark: SparkSession, n: int, seed: int) -> DataFrame:
    """crawldb-like rows (url, score, times, status, node, simhash) of N docs."""
    i = F.col("id")
    own = F.xxhash64(F.lit(seed), i)
    flips = F.lit(0).cast("long")
    for j in range(3):
        bit = F.expr(f"shiftleft(1L, cast(pmod(xxhash64({seed}, id, {j}), 64) AS INT))")
        flips = flips.bitwiseXOR(F.when(F.floor(i / 10) % 4 > j, bit).otherwise(0))
    planted = F.xxhash64(F.lit(seed), i - 1).bitwiseXOR(flips)
    simhash = F.when(i % 10 == 1, planted).otherwise(own)
    return spark.range(n).select(
        "id",
        F.concat(F.lit("https://h"), (i % 5000).cast("string"), F.lit(".example/p"),
                 i.cast("string")).alias("url"),
        (F.lit(1.0) + (i % 7)).cast("double").alias("score"),
        F.lit(datetime(2026, 1, 1, tzinfo=UTC)).cast("timestamp").alias("modified_at"),
        F.lit(None).cast("timestamp").alias("last_fetch_at"),
        F.lit("fetched").alias("status"),
        F.lit(None).cast("string").alias("duplicate_of"),
        F.sha2(i.cast("string"), 256).alias("content_sha256"),
        simhash.alias("simhash"),
    ).withColumn("node", node_column("simhash"))  # fmt: skip


def run_size(spark: SparkSession, n: int, args: argparse.Namespace) -> dict[str, Any]:
    dedup = load_config(None, [], environ={}).dedup
    docs = documents(spark, n, args.seed).cache()
    docs.count()
    nodes = docs.select("node", "simhash").dropDuplicates(["node"])
    t0 = time.monotonic()
    pairs = near_pairs(nodes, None, dedup).cache()
    n_pairs = pairs.count()
    t1 = time.monotonic()
    labels, rounds = components(pairs)
    labels = labels.cache()
    labels.count()
    t2 = time.monotonic()
    with_label = docs.join(labels, "node", "left")
    touched = with_label.select(F.coalesce("label", "node").alias("label")).distinct()
    marks = markings(cluster_rows(docs, labels, touched), dedup).cache()
    marked = marks.count()
    t3 = time.monotonic()
    checks = check(docs, pairs, args.sample, args.seed, dedup.max_distance)
    for frame in (docs, pairs, labels, marks):
        frame.unpersist()
    return {
        "documents": n, "pairs": n_pairs, "label_rounds": rounds, "duplicates_marked": marked,
        "join_s": round(t1 - t0, 1), "clusters_s": round(t2 - t1, 1),
        "marking_s": round(t3 - t2, 1), "total_s": round(t3 - t0, 1), **checks,
    }  # fmt: skip


def check(docs: DataFrame, pairs: DataFrame, sample: int, seed: int, k: int) -> dict[str, Any]:
    """Planted pairs found, no pair beyond k, and brute force on a sample."""
    a, b = docs.alias("a"), docs.alias("b")
    truth = a.join(b, F.col("b.id") == F.col("a.id") + 1).filter(F.col("b.id") % 10 == 1)
    truth = truth.select(
        F.least("a.node", "b.node").alias("a"), F.greatest("a.node", "b.node").alias("b"),
        F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash"))).alias("d"),
    ).collect()  # fmt: skip
    found = {(r["a"], r["b"]) for r in pairs.select("a", "b").collect()}
    missed = [r for r in truth if r["d"] > 0 and (r["a"], r["b"]) not in found]
    by_distance = {d: sum(1 for r in truth if r["d"] == d) for d in range(k + 1)}
    values = np.array([int(x[2:]) for p in found for x in p], dtype=np.int64).view(np.uint64)
    distances = np.bitwise_count(values[0::2] ^ values[1::2])
    fps = np.array(
        [r[0] for r in docs.select("simhash").distinct().collect()], dtype=np.int64
    ).view(np.uint64)
    rng = np.random.default_rng(seed)
    wrong = 0
    for x in rng.choice(fps, size=min(sample, len(fps)), replace=False):
        near = fps[np.bitwise_count(fps ^ x) <= k]
        want = {int(v) for v in near.view(np.int64)} - {int(np.int64(x.view(np.int64)))}
        node = f"s:{int(np.int64(x.view(np.int64)))}"
        got = {int(o[2:]) for p in found if node in p for o in p if o != node}
        wrong += len(want ^ got)
    return {
        "planted_by_distance": by_distance,
        "planted_missed": len(missed),
        "found_beyond_k": int((distances > k).sum()),
        "sample_checked": int(min(sample, len(fps))),
        "sample_disagreements": wrong,
    }


def main() -> None:
    args = parse_args()
    cfg = load_config(None, [
        "spark.master=local[2]", f"spark.shuffle_partitions={args.shuffle_partitions}",
        f'spark.conf={{"spark.driver.memory" = "{args.driver_memory}"}}',
    ], environ={})  # fmt: skip
    spark = build_spark(cfg)
    record = {
        "bench": "dedup_join",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "params": {k: str(v) for k, v in vars(args).items()},
        "dedup": cfg.to_dict()["dedup"],
    }
    rows = []
    for n in args.sizes:
        rows.append(run_size(spark, n, args))
        print(json.dumps(rows[-1]), flush=True)
        append_line(args.results, {**record, "kind": "size", **rows[-1]})
    spark.stop()
    times = [r["total_s"] for r in rows]
    summary = {**record, "kind": "summary", "sizes": args.sizes, "total_s": times,
               "growth_exponent": growth(rows)}  # fmt: skip
    append_line(args.results, summary)
    print(json.dumps({k: summary[k] for k in ("sizes", "total_s", "growth_exponent")}))


def growth(rows: list[dict[str, Any]]) -> float | None:
    """Slope of log(total time) over log(documents), first size to last."""
    if len(rows) < 2 or rows[0]["total_s"] <= 0:
        return None
    first, last = rows[0], rows[-1]
    ratio = math.log(last["total_s"] / first["total_s"])
    return round(ratio / math.log(last["documents"] / first["documents"]), 2)


if __name__ == "__main__":
    main()
