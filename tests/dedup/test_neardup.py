"""Permuted-block keys (the pigeonhole guarantee), canonical order, marking."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from math import comb

import pytest

from trawl.dedup.neardup import (
    block_masks,
    canonical_key,
    key_masks,
    marking,
    node_id,
    search_keys,
)
from trawl.dedup.simhash import to_signed

ORDER = ("https", "score", "url_length", "fetch_time")


@pytest.mark.parametrize("blocks", [1, 4, 5, 6, 7, 64])
def test_blocks_partition_the_64_bits(blocks: int) -> None:
    masks = block_masks(blocks)
    assert len(masks) == blocks
    union = 0
    for m in masks:
        assert union & m == 0
        union |= m
    assert union == (1 << 64) - 1
    widths = {bin(m).count("1") for m in masks}
    assert max(widths) - min(widths) <= 1


@pytest.mark.parametrize(("blocks", "k"), [(4, 3), (5, 3), (6, 3), (5, 2), (8, 4)])
def test_one_table_per_choice_of_blocks(blocks: int, k: int) -> None:
    masks = key_masks(blocks, k)
    assert len(masks) == comb(blocks, blocks - k)
    assert len(set(masks)) == len(masks)


def _flip(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


@pytest.mark.parametrize(("blocks", "k"), [(4, 3), (5, 3), (6, 3), (5, 2)])
def test_pairs_within_k_share_a_key_and_farther_pairs_may_not(blocks: int, k: int) -> None:
    rng = random.Random(blocks * 10 + k)
    masks = key_masks(blocks, k)
    for _ in range(2000):
        fp = rng.getrandbits(64)
        near = _flip(fp, rng.sample(range(64), rng.randint(0, k)))
        assert set(search_keys(fp, masks)) & set(search_keys(near, masks))
    # one bit flipped in every block: no table key survives
    spread = _flip(0, [m.bit_length() - 1 for m in block_masks(blocks)])
    assert not set(search_keys(0, masks)) & set(search_keys(spread, masks))


def test_to_signed_round_trips_the_top_bit() -> None:
    assert to_signed((1 << 64) - 1) == -1
    assert to_signed(1 << 63) == -(1 << 63)
    assert to_signed(5) == 5
    assert to_signed(-1) == -1


def test_node_ids() -> None:
    assert node_id(2**64 - 2, "ab", "simhash") == "s:-2"
    assert node_id(None, "ab", "simhash") == "c:ab"
    assert node_id(7, "ab", "minhash") == "c:ab"


def _page(url: str, score: float = 1.0, day: int = 1) -> dict[str, object]:
    return {"url": url, "score": score, "fetch_time": datetime(2026, 1, day, tzinfo=UTC)}


def test_canonical_order_https_then_score_then_length_then_fetch_time() -> None:
    pages = [
        _page("http://a.example/story", 5.0),
        _page("https://a.example/story/long-version", 1.0),
        _page("https://a.example/story", 1.0, day=3),
        _page("https://b.example/story", 1.0, day=2),
        _page("https://a.example/story-x", 2.0),
    ]
    ranked = sorted(pages, key=lambda p: canonical_key(p, ORDER))
    assert [p["url"] for p in ranked] == [
        "https://a.example/story-x",  # https, then the highest score
        "https://b.example/story",  # same length as the next: earlier fetch first
        "https://a.example/story",
        "https://a.example/story/long-version",
        "http://a.example/story",  # the best score, but http
    ]


def test_canonical_order_follows_the_configured_keys() -> None:
    a, b = _page("http://x.example/a", 9.0), _page("https://x.example/bb", 1.0)
    assert min([a, b], key=lambda p: canonical_key(p, ("score",))) is a
    assert min([a, b], key=lambda p: canonical_key(p, ("https",))) is b
    with pytest.raises(ValueError, match="unknown"):
        canonical_key(a, ("age",))


def test_marking_lowers_the_score_once_and_restores_it() -> None:
    page = {"status": "fetched", "duplicate_of": None, "score": 2.0}
    first = marking(page, "https://a/", 0.1)
    assert first == {
        "status": "duplicate",
        "duplicate_of": "https://a/",
        "score": pytest.approx(0.2),
    }
    assert first is not None
    marked = {**page, **first}
    assert marking(marked, "https://a/", 0.1) is None  # already says so
    refetched = {**marked, "status": "fetched"}  # updatedb after a recrawl
    again = marking(refetched, "https://a/", 0.1)
    assert again is not None and again["score"] == pytest.approx(0.2)  # not lowered twice
    moved = marking(marked, "https://b/", 0.1)
    assert moved is not None and moved["duplicate_of"] == "https://b/"
    restored = marking(marked, None, 0.1)
    assert restored == {"status": "fetched", "duplicate_of": None, "score": pytest.approx(2.0)}
    assert marking(page, None, 0.1) is None
