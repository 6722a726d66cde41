"""The dedup join on Spark: every pair within k found (against brute force),
none beyond, with hot keys salted, incrementally, and the clusters."""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Any

import numpy as np
import pytest

from trawl.config import DedupConfig
from trawl.dedup.simhash import to_signed


def planted(n: int, seed: int, hot: int = 0) -> list[int]:
    """``n`` random fingerprints, every tenth with a partner 0-4 bits away,
    and ``hot`` fingerprints that share their top 40 bits (one hot key)."""
    rng = random.Random(seed)
    fps = []
    for i in range(n):
        fp = rng.getrandbits(64)
        fps.append(fp)
        if i % 10 == 0:
            for b in rng.sample(range(64), i // 10 % 5):
                fp ^= 1 << b
            fps.append(fp)
    top = rng.getrandbits(40) << 24
    fps += [top | rng.getrandbits(24) for _ in range(hot)]
    return sorted({to_signed(f) for f in fps})


def brute_force(fps: list[int], k: int) -> set[tuple[str, str]]:
    arr = np.array(fps, dtype=np.int64).view(np.uint64)
    out = set()
    for i in range(len(arr)):
        dist = np.bitwise_count(arr[i + 1 :] ^ arr[i])
        for j in np.nonzero(dist <= k)[0]:
            a, b = f"s:{fps[i]}", f"s:{fps[i + 1 + j]}"
            out.add((min(a, b), max(a, b)))
    return out


def frame(spark: Any, fps: list[int]) -> Any:
    return spark.createDataFrame([(f"s:{f}", f) for f in fps], "node string, simhash long")


def found(pairs: Any) -> set[tuple[str, str]]:
    return {(r["a"], r["b"]) for r in pairs.collect()}


# near_pairs' two paths: a small increment's key rows broadcast to one scan,
# and the shuffle join with hot keys salted
PATHS = pytest.mark.parametrize("broadcast_rows", [100_000, 0], ids=["broadcast", "shuffle"])


@PATHS
def test_join_finds_exactly_the_brute_force_pairs(spark: Any, broadcast_rows: int) -> None:
    from trawl.stages.dedup import near_pairs

    fps = planted(3000, seed=1)
    pairs = near_pairs(frame(spark, fps), None, DedupConfig(method="simhash"), broadcast_rows)
    got = found(pairs)
    assert got == brute_force(fps, 3)
    assert len(got) >= 180  # the planted partners 1-3 bits away (0 bits: the same node)
    assert {r["distance"] for r in pairs.collect()} <= {1, 2, 3}


@pytest.mark.parametrize("blocks", [4, 6])
def test_other_block_counts_find_the_same_pairs(spark: Any, blocks: int) -> None:
    from trawl.stages.dedup import near_pairs

    fps = planted(1000, seed=2)
    cfg = DedupConfig(method="simhash", simhash_blocks=blocks)
    assert found(near_pairs(frame(spark, fps), None, cfg)) == brute_force(fps, 3)


def test_hot_keys_are_salted_without_losing_pairs(spark: Any) -> None:
    from trawl.stages.dedup import _side, near_pairs, salted_join, simhash_keys

    fps = planted(500, seed=3, hot=300)
    cfg = DedupConfig(method="simhash", hot_key_rows=20)
    keys = simhash_keys(frame(spark, fps), cfg)
    joined = salted_join(_side(keys, "a_"), _side(keys, "b_"), cfg.hot_key_rows)
    assert joined.agg({"salt": "max"}).first()[0] >= 10  # the hot key was split
    assert found(near_pairs(frame(spark, fps), None, cfg, 0)) == brute_force(fps, 3)


@PATHS
def test_incremental_join_finds_the_pairs_of_the_new_fingerprints(
    spark: Any, broadcast_rows: int
) -> None:
    from trawl.stages.dedup import near_pairs

    fps = planted(2000, seed=4)
    rng = random.Random(5)
    new = set(rng.sample(fps, 300))
    stored = [f for f in fps if f not in new]
    got = found(
        near_pairs(
            frame(spark, sorted(new)), frame(spark, stored), DedupConfig(method="simhash"),
            broadcast_rows,
        )
    )  # fmt: skip
    want = {p for p in brute_force(fps, 3) if int(p[0][2:]) in new or int(p[1][2:]) in new}
    assert got == want and want


def test_minhash_pairs_by_estimated_jaccard(spark: Any) -> None:
    from trawl.stages.dedup import near_pairs

    rng = random.Random(6)
    base = [rng.getrandbits(62) for _ in range(128)]
    near = [v if i % 16 else v + 1 for i, v in enumerate(base)]  # 8 of 128 differ
    far = [v if i % 2 else v + 1 for i, v in enumerate(base)]  # half differ
    other = [rng.getrandbits(62) for _ in range(128)]
    rows = [("c:a", base), ("c:b", near), ("c:c", far), ("c:d", other)]
    df = spark.createDataFrame(rows, "node string, minhash array<long>")
    dedup = DedupConfig(method="minhash", minhash_perm=128, minhash_bands=32)
    pairs = near_pairs(df, None, dedup).collect()
    assert [(r["a"], r["b"]) for r in pairs] == [("c:a", "c:b")]
    assert pairs[0]["similarity"] == pytest.approx(120 / 128)


@PATHS
def test_minhash_pairs_new_against_stored_match_brute_force(
    spark: Any, broadcast_rows: int
) -> None:
    """Key rows carry no signature: the candidates get theirs after the
    join, from the new side or the stored one, and every pair at or above
    the threshold with a new node is found (brute force over all nodes)."""
    from trawl.stages.dedup import candidate_pairs, near_pairs

    rng = random.Random(8)
    dedup = DedupConfig(method="minhash", minhash_perm=128, minhash_bands=32, minhash_threshold=0.6)
    sigs: dict[str, list[int]] = {}
    for family in range(12):
        base = [rng.getrandbits(32) for _ in range(128)]
        for member in range(3):  # copies with 0, 10 and 25 in 100 positions their own
            share = (0.0, 0.1, 0.25)[member]
            sigs[f"c:{family:02d}{member}"] = [
                rng.getrandbits(32) if rng.random() < share else v for v in base
            ]
    names = sorted(sigs)
    new = [n for i, n in enumerate(names) if i % 2 == 0]
    stored = [n for n in names if n not in new]

    def frame(nodes: list[str]) -> Any:
        return spark.createDataFrame(
            [(n, sigs[n]) for n in nodes], "node string, minhash array<long>"
        )

    pairs = near_pairs(frame(new), frame(stored), dedup, broadcast_rows).collect()
    got = {(r["a"], r["b"]) for r in pairs}

    def similar(a: str, b: str) -> bool:
        return sum(x == y for x, y in zip(sigs[a], sigs[b], strict=True)) / 128 >= 0.6

    want = {
        (a, b) for a, b in itertools.combinations(names, 2)
        if (a in new or b in new) and similar(a, b)
    }  # fmt: skip
    assert got == want and len(want) >= 12
    assert all(r["similarity"] >= 0.6 for r in pairs)
    keys = candidate_pairs(frame(new), frame(stored), dedup, broadcast_rows)
    assert set(keys.columns) == {"a_nid", "b_nid"}  # no signatures, no id strings


def test_components_join_chains_and_keep_apart_the_rest(spark: Any) -> None:
    from trawl.stages.dedup import components

    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("x", "y"), ("e", "d")]
    df = spark.createDataFrame(edges, "a string, b string")
    labels, rounds = components(df)
    got = {r["node"]: r["label"] for r in labels.collect()}
    assert got == {"a": "a", "b": "a", "c": "a", "d": "a", "e": "a", "x": "x", "y": "x"}
    assert rounds >= 2


def test_config_checks_the_pigeonhole() -> None:
    from trawl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="max_distance"):
        load_config(None, ["dedup.max_distance=5", "dedup.simhash_blocks=5"], environ={})
    assert dataclasses.asdict(load_config(None, [], environ={}).dedup)["method"] == "minhash"


def test_updatedb_follows_no_links_of_a_known_duplicate_refetched_unchanged(spark: Any) -> None:
    from trawl.stages.updatedb import link_sources

    schema = "host_bucket int, url_fp long, url string, changed boolean"
    fetch = spark.createDataFrame(
        [(0, 1, "dup-same", False), (0, 2, "dup-changed", True), (0, 3, "page", False),
         (0, None, "robots", None)],
        schema,
    )  # fmt: skip
    crawldb = spark.createDataFrame(
        [(0, 1, "dup-same", "x"), (0, 2, "dup-changed", "x"), (0, 3, "page", None)],
        "host_bucket int, url_fp long, url string, duplicate_of string",
    )
    kept = sorted(r["url"] for r in link_sources(fetch, crawldb).collect())
    assert kept == ["dup-changed", "page", "robots"]


@pytest.mark.parametrize("method", ["simhash", "minhash"])
def test_the_spark_node_column_agrees_with_node_id(spark: Any, method: str) -> None:
    from trawl.dedup.neardup import node_id
    from trawl.stages.dedup import node_column

    rows = [(-5, "aa"), (None, "bb"), (2**62, "cc")]
    df = spark.createDataFrame(rows, "simhash long, content_sha256 string")
    got = [r[0] for r in df.select(node_column(method)).collect()]
    assert got == [node_id(s, sha, method) for s, sha in rows]
