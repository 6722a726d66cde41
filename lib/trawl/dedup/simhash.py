"""64-bit Charikar simhash: a content fingerprint that similar pages share.

Charikar ("Similarity estimation techniques from rounding algorithms", STOC
2002) maps a weighted set of features to 64 bits so that the Hamming distance
of two fingerprints tracks the (cosine) distance of the feature sets: every
feature is hashed to 64 bits, bit ``i`` of each hash votes ``+w`` if set and
``-w`` if not, and bit ``i`` of the fingerprint is 1 iff the votes for it sum
to more than zero (a tie gives 0). Manku, Jain & Das Sarma ("Detecting
near-duplicates for web crawling", WWW 2007) found that near-duplicate web
pages are at most 3 bits apart at 64 bits; ``dedup.max_distance`` is that k.

Design choices:

* The feature hash is pluggable. The default is MurmurHash3 x64 (``mmh3``):
  fast and well mixed. ``md5_feature_hash`` is the one of the PyPI
  ``simhash`` package (1e0ng/simhash), so ``conformance/simhash_vectors.json``
  can check the combining step against published values;
  ``simhash_of_hashes`` combines hashes computed elsewhere (the vectors of
  seomoz/simhash-cpp are given that way).
* The votes are summed with numpy (one bit matrix per page, not a Python loop
  over 64 bits per feature): this runs in the fetch loop for every page.
* Fingerprints are unsigned here. Spark's LongType is a signed int64, so
  ``to_signed`` / ``to_unsigned`` convert at the table boundary; ``hamming``
  accepts either form.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

import mmh3
import numpy as np

__all__ = [
    "BITS",
    "FeatureHash",
    "hamming",
    "md5_feature_hash",
    "mmh3_feature_hash",
    "simhash",
    "simhash_of_hashes",
    "to_signed",
    "to_unsigned",
]

BITS = 64
_MASK = (1 << BITS) - 1

FeatureHash = Callable[[str], int]
"""A feature's 64-bit hash (an unsigned int below 2**64)."""


def mmh3_feature_hash(feature: str) -> int:
    """MurmurHash3 x64-128 of the UTF-8 feature, first 64 bits, unsigned."""
    return int(mmh3.hash64(feature, signed=False)[0])


def md5_feature_hash(feature: str) -> int:
    """The last 8 bytes of the feature's MD5, big-endian (1e0ng/simhash's hash)."""
    return int.from_bytes(hashlib.md5(feature.encode("utf-8")).digest()[-8:], "big")


def simhash(
    features: Iterable[str | tuple[str, float]], feature_hash: FeatureHash = mmh3_feature_hash
) -> int:
    """Simhash of features, each a string (weight 1) or a (string, weight) pair.

    A repeated string counts once per occurrence; pass ``Counter(...).items()``
    to weigh by frequency in one pair each. No features give 0.
    """
    pairs = [(f, 1.0) if isinstance(f, str) else f for f in features]
    return simhash_of_hashes([feature_hash(token) for token, _ in pairs], [w for _, w in pairs])


def simhash_of_hashes(hashes: Iterable[int], weights: Iterable[float] | None = None) -> int:
    """Simhash of already hashed features (read modulo 2**64), weight 1 each
    unless ``weights`` (one per hash) says otherwise."""
    column = np.array([h & _MASK for h in hashes], dtype=np.uint64)
    if weights is None:
        votes = np.ones(column.size, dtype=np.float64)
    else:
        votes = np.fromiter(weights, dtype=np.float64)
    if votes.size != column.size:
        raise ValueError(f"{column.size} hashes but {votes.size} weights")
    if column.size == 0:
        return 0
    # Row j holds the 64 bits of hash j, most significant first.
    bits = np.unpackbits(column.astype(">u8").view(np.uint8)).reshape(-1, BITS)
    # sum over j of (+w_j if set else -w_j) = 2 * (weight of set bits) - total weight
    totals = 2.0 * (votes @ bits) - votes.sum()
    return int.from_bytes(np.packbits(totals > 0).tobytes(), "big")


def hamming(a: int, b: int) -> int:
    """Number of bits in which two 64-bit fingerprints differ (signed or not)."""
    return ((a ^ b) & _MASK).bit_count()


def to_signed(value: int) -> int:
    """An unsigned 64-bit fingerprint as the int64 Spark's LongType stores."""
    value &= _MASK
    return value - (1 << BITS) if value >> (BITS - 1) else value


def to_unsigned(value: int) -> int:
    """A stored int64 back as the unsigned 64-bit fingerprint."""
    return value & _MASK
