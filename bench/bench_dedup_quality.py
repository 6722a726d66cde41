"""Benchmark: duplicate detection quality on the test web's labelled families.

    .venv/bin/python bench/bench_dedup_quality.py [--families 40] [--hosts 120]
        [--methods simhash minhash] [--distances 0 1 2 3 4 5 6] [--ordinary 400]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_dedup_quality.py --families 6 --hosts 40 --ordinary 50 \
        --distances 3 --results /tmp/dedup-quality-smoke.jsonl

The test web (``WebModel.generate(dup_families=N)``) publishes each family's
article as an original, copies on other hosts under other templates (other
navigation, footers, timestamps, ads, comment counts), a print version,
session-id URL variants and byte-identical copies; near-miss articles share a
family's host, template, topic and title pattern but not its text. Every
family member, every near-miss and ``--ordinary`` other pages (in the same
templates) are injected and fetched in one cycle of the normal path (inject,
generate, fetch, updatedb), then ``trawl dedup`` runs. One crawl per method,
since the MinHash is computed at fetch time only under ``dedup.method =
minhash``. For simhash the job runs again per ``--distances`` value (a
rerun is idempotent; ``max_distance`` is varied on a copy of the crawl).

Scoring is pairwise over the fetched URLs: a predicted pair is two URLs in one
cluster (the canonical page and its duplicates, ``duplicate_of``); a true pair
is two members of one family (``WebModel.duplicate_pairs``). URLs are compared
after trawl's URL normalisation: session-id variants that normalisation
already folds into one URL are counted apart (``folded_by_normalisation``),
not as pairs the detector found. Precision = true predicted pairs / predicted
pairs, recall = true predicted pairs / true pairs. One JSON line per (method,
distance) and a summary go to bench/results/dedup_quality.jsonl.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_politeness import append_line, commit, machine
from pyspark.sql import SparkSession

from trawl.config import Config, load_config
from trawl.runner import JobContext, run_dedup, run_fetch, run_generate, run_inject, run_updatedb
from trawl.store.session import build_spark
from trawl.store.tables import read_table
from trawl.testweb import TestWeb, WebModel
from trawl.testweb.model import make_url
from trawl.url import normalize as urlnorm

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "dedup_quality.jsonl"
AT = datetime(2026, 6, 1, tzinfo=UTC)
SEGMENT = "20260601T000000Z"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--families", type=int, default=40)
    ap.add_argument("--hosts", type=int, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ordinary", type=int, default=400, help="other pages injected")
    ap.add_argument("--methods", nargs="+", default=["simhash", "minhash"])
    ap.add_argument("--distances", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5, 6])
    ap.add_argument("--results", type=Path, default=RESULTS)
    return ap.parse_args()


def seed_urls(model: WebModel, port: int, ordinary: int) -> list[str]:
    members = [u for urls in model.duplicate_families(port).values() for u in urls]
    labelled = set(members) | set(model.near_miss_pages(port))
    others = [
        make_url(h.name, p.path, port)
        for h in model.hosts
        for p in h.pages
        if p.status == 200 and not model.is_disallowed(h.name, p.path)
    ]
    others = [u for u in others if u not in labelled][:ordinary]
    return sorted(labelled) + others


def settings(hosts_file: Path, method: str) -> list[str]:
    return [
        f"dns.hosts_file={hosts_file}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        "politeness.min_delay_s=0.05",
        "politeness.delay_factor=0",
        "fetch.threads_per_task=32",
        "fetch.time_limit_s=900",
        "generate.max_per_host=100000",
        "generate.max_per_domain=100000",
        "generate.fetch_window_s=100000",
        "generate.top_n=1000000",
        "spark.master=local[2]",
        "spark.shuffle_partitions=2",
        "crawl.host_buckets=4",
        f"dedup.method={method}",
    ]


def crawl(spark: SparkSession, cfg: Config, root: str, seeds: Path) -> dict[str, Any]:
    ctx = JobContext(spark, cfg, root, SEGMENT, AT)
    run_inject(ctx, [str(seeds)])
    run_generate(ctx)
    got = run_fetch(ctx)
    run_updatedb(ctx)
    return {"fetched_ok": got.get("fetch/page/success", 0)}


def predicted_pairs(spark: SparkSession, root: str) -> tuple[set[tuple[str, str]], set[str]]:
    """Pairs of URLs in one cluster, and every URL fetched with content."""
    rows = read_table(spark, root, "crawldb").filter("content_sha256 IS NOT NULL")
    clusters: dict[str, list[str]] = defaultdict(list)
    urls = set()
    for r in rows.select("url", "duplicate_of").collect():
        urls.add(r["url"])
        clusters[r["duplicate_of"] or r["url"]].append(r["url"])
    pairs = {
        (min(a, b), max(a, b))
        for members in clusters.values()
        for a, b in itertools.combinations(members, 2)
    }
    return pairs, urls


def truth(model: WebModel, port: int, fetched: set[str], cfg: Config) -> dict[str, Any]:
    """True pairs among the fetched URLs, after URL normalisation."""
    norm = {u: urlnorm.normalize(u, cfg.normalize.strip_params) for u in model_urls(model, port)}
    pairs, folded = set(), 0
    for a, b in model.duplicate_pairs(port):
        na, nb = norm[a], norm[b]
        if na == nb:
            folded += 1
        elif na in fetched and nb in fetched:
            pairs.add((min(na, nb), max(na, nb)))
    return {"pairs": pairs, "folded": folded}


def model_urls(model: WebModel, port: int) -> list[str]:
    return [u for urls in model.duplicate_families(port).values() for u in urls]


def score(predicted: set[tuple[str, str]], true: set[tuple[str, str]]) -> dict[str, Any]:
    hits = len(predicted & true)
    return {
        "predicted_pairs": len(predicted),
        "true_pairs": len(true),
        "true_positives": hits,
        "precision": round(hits / len(predicted), 4) if predicted else None,
        "recall": round(hits / len(true), 4) if true else None,
    }


def evaluate(spark: SparkSession, cfg: Config, root: str, web: TestWeb) -> dict[str, Any]:
    started = time.monotonic()
    result = run_dedup(JobContext(spark, cfg, root, SEGMENT, AT))
    seconds = round(time.monotonic() - started, 1)
    predicted, fetched = predicted_pairs(spark, root)
    want = truth(web.model, web.port, fetched, cfg)
    strip = cfg.normalize.strip_params
    near_miss = {urlnorm.normalize(u, strip) for u in web.model.near_miss_pages(web.port)}
    wrong = predicted - want["pairs"]
    false_near_miss = sum(1 for a, b in wrong if a in near_miss or b in near_miss)
    return {
        **score(predicted, want["pairs"]),
        "folded_by_normalisation": want["folded"],
        "false_pairs_with_near_misses": false_near_miss,
        "dedup_s": seconds,
        "counters": result,
    }


def run_method(
    method: str, args: argparse.Namespace, model: WebModel, work: Path
) -> list[dict[str, Any]]:
    rows = []
    with TestWeb(model, work / method / "web") as web:
        seeds = work / method / "seeds.txt"
        urls = seed_urls(model, web.port, args.ordinary)
        seeds.write_text("".join(f"{u}\n" for u in urls), encoding="utf-8")
        base = settings(web.hosts_file, method)
        cfg = load_config(None, base, environ={})
        spark = build_spark(cfg)
        root = str(work / method / "crawl")
        fetched = crawl(spark, cfg, root, seeds)
        distances = args.distances if method == "simhash" else [None]
        for k in distances:
            extra = [] if k is None else [
                f"dedup.max_distance={k}", f"dedup.simhash_blocks={max(5, k + 2)}",
            ]  # fmt: skip
            kcfg = load_config(None, base + extra, environ={})
            copy = f"{root}-k{k}"
            shutil.copytree(root, copy)
            row = {"method": method, "max_distance": k, "seeds": len(urls), **fetched,
                   **evaluate(spark, kcfg, copy, web)}  # fmt: skip
            print(json.dumps({x: row[x] for x in row if x != "counters"}), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    args = parse_args()
    model = WebModel.generate(args.seed, hosts=args.hosts, ips=max(1, args.hosts // 4),
                              dup_families=args.families)  # fmt: skip
    record = {
        "bench": "dedup_quality",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "params": {k: str(v) for k, v in vars(args).items()},
        "web": {
            "families": len(model.duplicate_families()),
            "members": len(model_urls(model, 80)),
            "true_pairs": len(model.duplicate_pairs()),
            "exact_groups": len(model.exact_copies()),
            "near_misses": len(model.near_miss_pages()),
        },
    }
    work = Path(tempfile.mkdtemp(prefix="trawl-bench-dedup-"))
    try:
        rows = [r for m in args.methods for r in run_method(m, args, model, work)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        append_line(args.results, {**record, "kind": "run", **row})
    best = {f"{r['method']}@{r['max_distance']}": [r["precision"], r["recall"]] for r in rows}
    append_line(args.results, {**record, "kind": "summary", "precision_recall": best})
    print(json.dumps(best))


if __name__ == "__main__":
    main()
