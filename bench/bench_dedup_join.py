"""Benchmark: the near-duplicate join at scale -- completeness and growth.

    .venv/bin/python bench/bench_dedup_join.py [--sizes 250000 500000 1000000]
        [--method minhash|simhash] [--sample 1000] [--seed 1] [--driver-memory 8g]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_dedup_join.py --sizes 20000 --results /tmp/dedup-smoke.jsonl

For each size N, N synthetic documents get a fingerprint of ``--method``
(default: ``dedup.method``'s default). Document i is random unless
``i % 10 == 1``: then it is planted as a near-copy of document ``i - 1``,
changed by ``(i // 10) % 4`` steps:

- simhash: a 64-bit value (``xxhash64``); a step flips one bit (two flips
  can land on one bit, so the distance is measured, not assumed): planted
  pairs at distances 0 to 3;
- minhash: ``dedup.minhash_perm`` values below 2**32; a step replaces about
  a tenth of the copy's positions with its own: planted pairs whose
  estimated Jaccard similarity (the share of equal positions, measured) is
  about 1.0, 0.9, 0.8 and 0.7.

All N are *new* at once (the first big batch, the shuffle path with hot-key
salting; a cycle's increment is broadcast instead), and the same code as
``trawl dedup`` runs on them: ``near_pairs`` (permuted blocks and a popcount
check, or LSH bands and the similarity check), ``components`` (the clusters)
and ``markings`` (a canonical page per cluster, by ``dedup.compare_order``).

Checked, per size:

- how wide the first stage is: the distinct candidate pairs per document
  (counted apart, not timed);
- every planted pair within the threshold is found (simhash distance 0: the
  two documents are one node);
- no found pair is beyond the threshold (recomputed in numpy);
- against brute force on a sample: for ``--sample`` random documents, every
  document within the threshold of them (numpy over all N) is paired with
  them, and nothing else is. LSH finds a pair at the threshold with
  probability ``1 - (1 - s**r)**b`` (s its similarity, b bands of r rows), so
  for MinHash a disagreement can be a pair LSH missed by chance; it is
  counted, not hidden.

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
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from trawl.config import DedupConfig, load_config
from trawl.stages.dedup import (
    candidate_pairs,
    cluster_rows,
    components,
    markings,
    near_pairs,
    node_column,
)
from trawl.store.session import build_spark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "dedup_join.jsonl"
CHUNK = 200_000  # documents collected to the driver at a time (check_minhash)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250_000, 500_000, 1_000_000])
    ap.add_argument("--method", choices=["simhash", "minhash"], default=DedupConfig.method)
    ap.add_argument("--sample", type=int, default=1000, help="documents checked by brute force")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--shuffle-partitions", type=int, default=16)
    ap.add_argument("--results", type=Path, default=RESULTS)
    return ap.parse_args()


def documents(spark: SparkSession, n: int, seed: int, dedup: DedupConfig) -> DataFrame:
    """crawldb-like rows (url, score, times, status, node, fingerprint) of N docs."""
    i = F.col("id")
    steps = F.floor(i / 10) % 4
    planted = i % 10 == 1
    if dedup.method == "simhash":
        own = F.xxhash64(F.lit(seed), i)
        flips = F.lit(0).cast("long")
        for j in range(3):
            bit = F.expr(f"shiftleft(1L, cast(pmod(xxhash64({seed}, id, {j}), 64) AS INT))")
            flips = flips.bitwiseXOR(F.when(steps > j, bit).otherwise(0))
        copied = F.xxhash64(F.lit(seed), i - 1).bitwiseXOR(flips)
        fingerprint = F.when(planted, copied).otherwise(own).alias("simhash")
    else:
        # position j of a planted copy is its source's unless a draw below
        # steps / 10 replaces it with the copy's own value
        def value(j: Column) -> Column:
            mine = F.pmod(F.xxhash64(F.lit(seed), F.lit(7), i, j), 1000) < steps * 100
            source = F.when(planted & ~mine, i - 1).otherwise(i)
            return F.xxhash64(F.lit(seed), source, j).bitwiseAND(F.lit(0xFFFFFFFF))

        positions = F.sequence(F.lit(0), F.lit(dedup.minhash_perm - 1))
        fingerprint = F.transform(positions, value).alias("minhash")
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
        fingerprint,
    ).withColumn("node", node_column(dedup.method))  # fmt: skip


def run_size(
    spark: SparkSession, n: int, args: argparse.Namespace, dedup: DedupConfig
) -> dict[str, Any]:
    docs = documents(spark, n, args.seed, dedup).cache()
    docs.count()
    nodes = docs.select("node", dedup.method)
    if dedup.method == "simhash":  # as trawl dedup: several contents can share a simhash
        nodes = nodes.dropDuplicates(["node"])
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
    # the first stage alone (not timed): how wide the candidate join is
    first = candidate_pairs(nodes, None, dedup)
    ids = [c for c in first.columns if c.endswith(("_node", "_nid"))]
    candidates = first.select(*ids).distinct().count()
    timed = {"join_s": round(t1 - t0, 1), "clusters_s": round(t2 - t1, 1),
             "marking_s": round(t3 - t2, 1), "total_s": round(t3 - t0, 1)}  # fmt: skip
    print(json.dumps({"documents": n, "pairs": n_pairs, "candidate_pairs": candidates, **timed}),
          flush=True)  # fmt: skip
    if dedup.method == "simhash":
        checks = check_simhash(docs, pairs, args.sample, args.seed, dedup.max_distance)
    else:
        checks = check_minhash(docs, pairs, args.sample, args.seed, dedup.minhash_threshold)
    for frame in (docs, pairs, labels, marks):
        frame.unpersist()
    return {
        "method": dedup.method, "documents": n, "pairs": n_pairs, "label_rounds": rounds,
        "duplicates_marked": marked, **timed, "candidate_pairs": candidates,
        "candidates_per_document": round(candidates / n, 4), **checks,
    }  # fmt: skip


def check_simhash(
    docs: DataFrame, pairs: DataFrame, sample: int, seed: int, k: int
) -> dict[str, Any]:
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


def check_minhash(
    docs: DataFrame, pairs: DataFrame, sample: int, seed: int, threshold: float
) -> dict[str, Any]:
    """Planted pairs at or above the threshold found, no pair below it, and
    brute force on a sample (similarities recomputed in numpy)."""
    n = docs.count()
    nodes = np.empty(n, dtype=object)
    sigs: Any = None
    for start in range(0, n, CHUNK):  # in slices: the driver's result size is capped
        part = docs.filter(F.col("id").between(start, start + CHUNK - 1))
        table = part.select("id", "node", "minhash").toArrow()
        ids = table.column("id").to_numpy()
        flat = table.column("minhash").combine_chunks().flatten().to_numpy()
        values = flat.astype(np.uint32).reshape(len(ids), -1)
        if sigs is None:
            sigs = np.empty((n, values.shape[1]), dtype=np.uint32)
        sigs[ids] = values
        nodes[ids] = table.column("node").to_pylist()
    row = {node: r for r, node in enumerate(nodes)}

    def similarity(x: int, y: int) -> float:
        return float(np.mean(sigs[x] == sigs[y]))

    found: dict[str, set[str]] = {}
    below = 0
    for r in pairs.select("a", "b").toLocalIterator():
        found.setdefault(r["a"], set()).add(r["b"])
        found.setdefault(r["b"], set()).add(r["a"])
        below += similarity(row[r["a"]], row[r["b"]]) < threshold
    planted = np.arange(1, n, 10)
    planted_s = np.mean(sigs[planted] == sigs[planted - 1], axis=1)
    wanted = planted[planted_s >= threshold]
    missed = sum(1 for i in wanted if nodes[i - 1] not in found.get(nodes[i], set()))
    steps = {f"{lo / 10:.1f}": int(((planted_s >= lo / 10) & (planted_s < (lo + 1) / 10)).sum())
             for lo in range(5, 11)}  # fmt: skip
    rng = np.random.default_rng(seed)
    wrong = 0
    for x in rng.choice(n, size=min(sample, n), replace=False):
        near = np.flatnonzero(np.mean(sigs == sigs[x], axis=1) >= threshold)
        want = {nodes[i] for i in near if i != x}
        wrong += len(want ^ found.get(nodes[x], set()))
    return {
        "planted_by_similarity": steps,
        "planted_wanted": len(wanted),
        "planted_missed": missed,
        "found_below_threshold": int(below),
        "sample_checked": int(min(sample, n)),
        "sample_disagreements": wrong,
    }


def main() -> None:
    args = parse_args()
    cfg = load_config(None, [
        "spark.master=local[2]", f"spark.shuffle_partitions={args.shuffle_partitions}",
        f'spark.conf={{"spark.driver.memory" = "{args.driver_memory}"}}',
        f"dedup.method={args.method}",
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
        rows.append(run_size(spark, n, args, cfg.dedup))
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
