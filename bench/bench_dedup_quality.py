"""Benchmark: duplicate detection quality on the test web's labelled families.

    .venv/bin/python bench/bench_dedup_quality.py [--families 40] [--hosts 120]
        [--methods simhash minhash] [--distances 0 1 2 3 4 5 6]
        [--thresholds 0.6 0.7 0.8 0.9] [--ordinary 400]
    smoke check (results kept out of the recorded ones):
    .venv/bin/python bench/bench_dedup_quality.py --families 6 --hosts 40 --ordinary 50 \
        --distances 3 --thresholds 0.7 --results /tmp/dedup-quality-smoke.jsonl

The test web (``WebModel.generate(dup_families=N)``, ``trawl.testweb.dups``)
publishes each family's article as an original, copies on other hosts under
other templates (other navigation, footers, timestamps, ads, comment
counts), a print version, session-id URL variants, byte-identical copies
and edited copies (a correction or an update on the origin host, an
aggregator's trimmed or extended copy: from one word up to about 10% of the
sentences changed). Near-miss articles share a family's host, template,
topic and title pattern but not its text ("topic" near-misses), and some
also share a paragraph of the site's boilerplate with the family's text (a
bio, a disclosure, a newsletter pitch: "boilerplate" near-misses). Every
family member, every near-miss and ``--ordinary`` other pages (in the same
templates) are injected and fetched in one cycle of the normal path (inject,
generate, fetch, updatedb), then ``trawl dedup`` runs. One crawl per method,
since the MinHash is computed at fetch time only under ``dedup.method =
minhash``. The job then runs once per setting on a copy of the crawl: per
``--distances`` value (``dedup.max_distance``) for simhash, per
``--thresholds`` value (``dedup.minhash_threshold``) for MinHash.

Scoring is pairwise over the fetched URLs: a predicted pair is two URLs in one
cluster (the canonical page and its duplicates, ``duplicate_of``); a true pair
is two members of one family (``WebModel.duplicate_pairs``). URLs are compared
after trawl's URL normalisation: session-id variants that normalisation
already folds into one URL are counted apart (``folded_by_normalisation``),
not as pairs the detector found. Precision = true predicted pairs / predicted
pairs, recall = true predicted pairs / true pairs.

Recall is also split by the kind of the true pair
(``WebModel.duplicate_pair_kinds``: "exact", "retemplated", "print",
"session", "edited"; a pair with an edited member is "edited" whatever the
other is, see ``trawl.testweb.model.PAIR_KINDS``), so a regression in one
kind shows. When normalisation folds a session URL into its original, a
pair the session URL made with a third page is that page's pair with the
original and takes its kind. A false pair has no kind, so precision is
overall only; the false pairs are counted by what they involve: a
near-miss (all, and per near-miss kind; a pair of two near-misses of two
kinds counts under both) or members of two different families. One JSON line
per (method, setting) and a summary go to bench/results/dedup_quality.jsonl.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
import time
from collections import Counter, defaultdict
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
from trawl.testweb.model import NEAR_MISS_KINDS, PAIR_KINDS, make_url
from trawl.url import normalize as urlnorm

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "dedup_quality.jsonl"
AT = datetime(2026, 6, 1, tzinfo=UTC)
SEGMENT = "20260601T000000Z"
#: Pair kinds in the order the rows report them (the reverse of their precedence).
KIND_ORDER = tuple(reversed(PAIR_KINDS))
Pair = tuple[str, str]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--families", type=int, default=40)
    ap.add_argument("--hosts", type=int, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ordinary", type=int, default=400, help="other pages injected")
    ap.add_argument("--methods", nargs="+", default=["simhash", "minhash"])
    ap.add_argument("--distances", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5, 6])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.6, 0.7, 0.8, 0.9],
                    help="dedup.minhash_threshold values for the minhash method")  # fmt: skip
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


def normalise(url: str, cfg: Config) -> str:
    """``url`` as the crawl spells it (trawl's normalisation under ``cfg``)."""
    return urlnorm.normalize(url, cfg.normalize.strip_params, cfg.normalize.session_params)


def truth(model: WebModel, port: int, fetched: set[str], cfg: Config) -> dict[str, Any]:
    """True pairs among the fetched URLs, after URL normalisation, each with its kind.

    Pairs whose URLs normalisation leaves as they are go first, so a pair that
    only exists through a folded session URL takes the kind of the pair of the
    pages actually fetched.
    """
    norm = {u: normalise(u, cfg) for u in model_urls(model, port)}
    kinds = model.duplicate_pair_kinds(port)
    pairs: dict[Pair, str] = {}
    folded: Counter[str] = Counter()
    for (a, b), kind in sorted(kinds.items(), key=lambda i: sum(norm[u] != u for u in i[0])):
        na, nb = norm[a], norm[b]
        if na == nb:
            folded[kind] += 1
        elif na in fetched and nb in fetched:
            pairs.setdefault((min(na, nb), max(na, nb)), kind)
    return {"pairs": pairs, "folded": folded}


def model_urls(model: WebModel, port: int) -> list[str]:
    return [u for urls in model.duplicate_families(port).values() for u in urls]


def score(predicted: set[Pair], true: dict[Pair, str]) -> dict[str, Any]:
    """Overall precision and recall, and recall per kind of true pair."""
    hits = len(predicted & true.keys())
    by_kind = {}
    for kind in KIND_ORDER:
        want = {pair for pair, k in true.items() if k == kind}
        found = len(want & predicted)
        recall = round(found / len(want), 4) if want else None
        by_kind[kind] = {"true_pairs": len(want), "found": found, "recall": recall}
    return {
        "predicted_pairs": len(predicted),
        "true_pairs": len(true),
        "true_positives": hits,
        "precision": round(hits / len(predicted), 4) if predicted else None,
        "recall": round(hits / len(true), 4) if true else None,
        "recall_by_kind": by_kind,
    }


def false_pairs(
    wrong: set[Pair], near_miss: dict[str, str], family: dict[str, str]
) -> dict[str, Any]:
    """Counts of predicted pairs that are not true: with a near-miss (all, per
    near-miss kind) and between members of two families."""
    by_kind = dict.fromkeys(NEAR_MISS_KINDS, 0)
    with_near_miss = across = 0
    for a, b in wrong:
        kinds = {near_miss[u] for u in (a, b) if u in near_miss}
        with_near_miss += bool(kinds)
        for kind in kinds:
            by_kind[kind] += 1
        across += a in family and b in family and family[a] != family[b]
    return {
        "false_pairs": len(wrong),
        "false_pairs_with_near_misses": with_near_miss,
        "false_pairs_by_near_miss_kind": by_kind,
        "false_pairs_across_families": across,
    }


def evaluate(spark: SparkSession, cfg: Config, root: str, web: TestWeb) -> dict[str, Any]:
    started = time.monotonic()
    result = run_dedup(JobContext(spark, cfg, root, SEGMENT, AT))
    seconds = round(time.monotonic() - started, 1)
    predicted, fetched = predicted_pairs(spark, root)
    want = truth(web.model, web.port, fetched, cfg)
    model, port = web.model, web.port
    near_miss = {normalise(u, cfg): kind for u, kind in model.near_miss_kinds(port).items()}
    family = {
        normalise(u, cfg): f for f, urls in model.duplicate_families(port).items() for u in urls
    }
    return {
        **score(predicted, want["pairs"]),
        "folded_by_normalisation": sum(want["folded"].values()),
        "folded_by_kind": dict(want["folded"]),
        **false_pairs(predicted - want["pairs"].keys(), near_miss, family),
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
        for n, (setting, extra) in enumerate(method_settings(method, args)):
            kcfg = load_config(None, base + extra, environ={})
            copy = f"{root}-{n}"
            shutil.copytree(root, copy)
            row = {"method": method, **setting, "seeds": len(urls), **fetched,
                   **evaluate(spark, kcfg, copy, web)}  # fmt: skip
            print(json.dumps({x: row[x] for x in row if x != "counters"}), flush=True)
            rows.append(row)
    return rows


def method_settings(
    method: str, args: argparse.Namespace
) -> list[tuple[dict[str, Any], list[str]]]:
    """(row fields, config settings) of each dedup run of ``method``: one per
    ``--distances`` value for simhash, per ``--thresholds`` value for MinHash."""
    if method == "simhash":
        return [
            ({"max_distance": k, "minhash_threshold": None},
             [f"dedup.max_distance={k}", f"dedup.simhash_blocks={max(5, k + 2)}"])
            for k in args.distances
        ]  # fmt: skip
    return [
        ({"max_distance": None, "minhash_threshold": t}, [f"dedup.minhash_threshold={t}"])
        for t in args.thresholds
    ]


def setting_name(row: dict[str, Any]) -> str:
    """ "simhash@3", "minhash@0.8"."""
    value = row["max_distance"] if row["method"] == "simhash" else row["minhash_threshold"]
    return f"{row['method']}@{value}"


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
            "true_pairs_by_kind": dict(Counter(model.duplicate_pair_kinds().values())),
            "exact_groups": len(model.exact_copies()),
            "near_misses": len(model.near_miss_pages()),
            "near_misses_by_kind": dict(Counter(model.near_miss_kinds().values())),
        },
    }
    work = Path(tempfile.mkdtemp(prefix="trawl-bench-dedup-"))
    try:
        rows = [r for m in args.methods for r in run_method(m, args, model, work)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        append_line(args.results, {**record, "kind": "run", **row})
    best = {setting_name(r): [r["precision"], r["recall"]] for r in rows}
    by_kind = {
        setting_name(r): {k: v["recall"] for k, v in r["recall_by_kind"].items()} for r in rows
    }
    summary = {"precision_recall": best, "recall_by_kind": by_kind}
    append_line(args.results, {**record, "kind": "summary", **summary})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
