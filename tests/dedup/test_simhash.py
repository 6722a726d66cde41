"""Tests for trawl.dedup.simhash: the published vectors (conformance/simhash_vectors.json)
and the behaviour near-duplicate detection relies on."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from trawl.dedup.simhash import (
    hamming,
    md5_feature_hash,
    mmh3_feature_hash,
    simhash,
    simhash_of_hashes,
    to_signed,
    to_unsigned,
)

# The vector file spells some inputs as Python-ish descriptions; these are the
# ones it uses. An unknown description fails the test instead of being skipped.
FEATURES = {"str(i) for i in range(500)": [str(i) for i in range(500)]}
WEIGHTS = {"50*i": [50 * i for i in range(500)]}
REPEATED = re.compile(r"^(0x[0-9A-Fa-f]+) repeated (\d+) times$")


@pytest.fixture(scope="module")
def vectors(conformance: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((conformance / "simhash_vectors.json").read_text())
    return data


def _features(spec: list[str] | str, weights: list[int] | str | None) -> list[Any]:
    names = spec if isinstance(spec, list) else FEATURES[spec]
    if weights is None:
        return list(names)
    values = weights if isinstance(weights, list) else WEIGHTS[weights]
    return list(zip(names, values, strict=True))


def _hashes(spec: list[str] | str) -> list[int]:
    if isinstance(spec, list):
        return [int(h, 16) for h in spec]
    match = REPEATED.match(spec)
    assert match, f"unknown hash list description {spec!r}"
    return [int(match.group(1), 16)] * int(match.group(2))


def test_md5_feature_vectors(vectors: dict[str, Any]) -> None:
    cases = vectors["charikar_md5_1e0ng"]["cases"]
    assert len(cases) == 3
    for case in cases:
        features = _features(case["features"], case["weights"])
        assert simhash(features, md5_feature_hash) == case["expected"], case


def test_prehashed_compute_vectors(vectors: dict[str, Any]) -> None:
    cases = vectors["charikar_prehashed_seomoz"]["compute_cases"]
    assert len(cases) == 4
    for case in cases:
        assert simhash_of_hashes(_hashes(case["hashes"])) == int(case["expected"], 16), case


def test_hamming_vectors(vectors: dict[str, Any]) -> None:
    cases = vectors["charikar_prehashed_seomoz"]["hamming_cases"]
    assert len(cases) == 2
    for case in cases:
        a, b = int(case["a"], 16), int(case["b"], 16)
        assert hamming(a, b) == case["expected"]
        assert hamming(to_signed(a), to_signed(b)) == case["expected"]  # as stored


def test_ties_give_zero_and_weights_break_them() -> None:
    assert simhash_of_hashes([0b01, 0b10]) == 0  # every bit: one vote for, one against
    assert simhash_of_hashes([0b01, 0b10], [2, 1]) == 0b01
    assert simhash_of_hashes([0b01, 0b10], [1, 2]) == 0b10


def test_a_pair_is_its_string_repeated() -> None:
    assert simhash([("apple", 3), ("pear", 1)]) == simhash(["apple"] * 3 + ["pear"])


def test_weights_must_match_hashes() -> None:
    with pytest.raises(ValueError):
        simhash_of_hashes([1, 2], [1])


def test_hashes_are_read_modulo_2_64() -> None:
    h = 0xFEDCBA9876543210
    assert simhash_of_hashes([to_signed(h)]) == h
    assert simhash_of_hashes([h | (1 << 70)]) == h


def test_signed_round_trip() -> None:
    for value in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 0xDEADBEEFDEADBEEF):
        signed = to_signed(value)
        assert -(1 << 63) <= signed < (1 << 63)
        assert to_unsigned(signed) == value
    assert to_signed((1 << 64) - 1) == -1
    assert to_signed(1 << 63) == -(1 << 63)


def test_default_feature_hash_is_64_bit_murmur() -> None:
    assert mmh3_feature_hash("abc") == 13012657714217449575
    assert all(0 <= mmh3_feature_hash(str(i)) < 1 << 64 for i in range(100))


def _words(rng: random.Random, n: int) -> list[str]:
    return [f"w{rng.randrange(5000)}" for _ in range(n)]


def test_one_word_changed_moves_few_bits() -> None:
    rng = random.Random(7)
    moved = []
    for _ in range(50):
        words = _words(rng, 300)
        before = simhash(words)
        words[rng.randrange(len(words))] = "changed"
        moved.append(hamming(before, simhash(words)))
    assert max(moved) <= 6
    assert sum(moved) / len(moved) < 2


def test_unrelated_texts_are_about_32_bits_apart() -> None:
    rng = random.Random(11)
    distances = [hamming(simhash(_words(rng, 200)), simhash(_words(rng, 200))) for _ in range(200)]
    assert 29 < sum(distances) / len(distances) < 35
    assert min(distances) > 10
