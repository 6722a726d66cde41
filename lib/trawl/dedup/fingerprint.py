"""Near-duplicate fingerprints of a page's main text: simhash and MinHash.

The fetcher computes them from ``ParsedPage.main_text`` (``trawl.parse.maintext``)
while it holds the page, so ``trawl dedup`` can compare pages without their
bodies. Both methods of ``[dedup]`` start from the same features:

* **Normalised words.** Lowercase, Unicode word tokens (letters and digits,
  no underscore). Every run of digits becomes ``0``, and numbers separated
  only by punctuation or spaces ("12:30", "2024-05-12 10:31", "1,234") become
  a single ``0``: timestamps, dates, comment and view counts change on every
  visit and must not move the fingerprint. Scripts written without spaces
  (Chinese, Japanese, Thai) come out as one long token per run; such pages
  get coarse features (a known limit).
* **Word shingles** of ``dedup.shingle_words`` consecutive words (Broder,
  "On the resemblance and containment of documents", 1997): word order
  matters, so two pages on the same topic with different sentences share
  few features. A text shorter than one shingle is a single shingle.
* Pages with fewer than ``dedup.min_words`` words get no fingerprint: empty
  and tiny pages would all look alike. Exact copies are still found by the
  body's sha256.

**Simhash** (``trawl.dedup.simhash``): shingles weighted by how often they occur.
Insertions move bits in proportion to their share of the features: for ``m``
changed shingles out of ``n`` each bit flips with probability about
``atan(sqrt(m / n)) / pi``, so a sentence of 10 words inserted into an 800-word
article flips 2 to 3 of the 64 bits on average -- near ``dedup.max_distance``.

**MinHash** (datasketch, Broder 1997): the *set* of shingles, ``num_perm``
permutations of the datasketch "affine32" scheme with a 32-bit MurmurHash3
of each shingle. The share of equal positions of two signatures estimates the
Jaccard similarity of the shingle sets; ``trawl.stages.dedup`` cuts signatures
into LSH bands (Indyk & Motwani 1998; Leskovec, Rajaraman & Ullman, *Mining of
Massive Datasets*, 3.4) whose keys an equi-join can match. The scheme, the
shingle hash, ``num_perm`` and ``seed`` define the signature: signatures made
with other values cannot be compared.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mmh3

from trawl.config import DedupConfig
from trawl.dedup.simhash import simhash

__all__ = [
    "PageFingerprint",
    "minhash_jaccard",
    "page_fingerprint",
    "page_minhash",
    "page_simhash",
    "shingles",
    "words",
]

# A number: digit runs joined by anything but letters ("12:30", "1,234", "12 5");
# digits glued to letters ("v2", "3rd") stay in their word, masked there.
_NUMBER = re.compile(r"\d+(?:[\W_]+\d+(?![^\W\d_]))*")
_WORD = re.compile(r"[^\W_]+")
_MINHASH_SCHEME = "affine32"
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class PageFingerprint:
    """What the fetch row keeps of a page's main text: its word count and
    fingerprints (None: too few words, or the method is not in use)."""

    words: int
    simhash: int | None = None  # unsigned 64-bit
    minhash: list[int] | None = None


def words(text: str) -> list[str]:
    """The normalised word tokens of a text (see the module docstring)."""
    return _WORD.findall(_NUMBER.sub("0", text.lower()))


def shingles(tokens: Sequence[str], size: int) -> list[str]:
    """Word shingles: every run of ``size`` consecutive tokens, space-joined."""
    if not tokens:
        return []
    if len(tokens) <= size:
        return [" ".join(tokens)]
    # the i-th list starts i words in; zip stops at the shortest, the last window
    return [" ".join(run) for run in zip(*(tokens[i:] for i in range(size)), strict=False)]


def page_simhash(text: str, shingle_words: int, min_words: int) -> int | None:
    """Unsigned 64-bit simhash of the text's weighted shingles; None when it has
    fewer than ``min_words`` words."""
    tokens = words(text)
    return _simhash(shingles(tokens, shingle_words)) if _enough(tokens, min_words) else None


def page_minhash(
    text: str, shingle_words: int, min_words: int, num_perm: int, seed: int = 1
) -> list[int] | None:
    """MinHash signature (``num_perm`` ints below 2**32) of the text's shingle
    set; None when it has fewer than ``min_words`` words."""
    tokens = words(text)
    if not _enough(tokens, min_words):
        return None
    return _minhash(shingles(tokens, shingle_words), num_perm, seed)


def page_fingerprint(text: str, dedup: DedupConfig) -> PageFingerprint:
    """Word count and the fingerprints ``dedup`` asks for, tokenising once:
    the simhash always (cheap), the MinHash only under ``method = "minhash"``."""
    tokens = words(text)
    if not _enough(tokens, dedup.min_words):
        return PageFingerprint(len(tokens))
    grams = shingles(tokens, dedup.shingle_words)
    signature = _minhash(grams, dedup.minhash_perm) if dedup.method == "minhash" else None
    return PageFingerprint(len(tokens), _simhash(grams), signature)


def minhash_jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    """Estimated Jaccard similarity: the share of positions where two
    signatures (of the same ``num_perm`` and seed) agree."""
    if not a or len(a) != len(b):
        raise ValueError(f"signatures of lengths {len(a)} and {len(b)} cannot be compared")
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def _enough(tokens: Sequence[str], min_words: int) -> bool:
    return len(tokens) >= max(1, min_words)


def _simhash(grams: Sequence[str]) -> int:
    return simhash(Counter(grams).items())  # repeated shingles weigh more


def _shingle_hash32(shingle: Any) -> int:
    return int(mmh3.hash(shingle, signed=False))


@functools.lru_cache(maxsize=8)
def _permutations(num_perm: int, seed: int) -> Any:
    """The permutation parameters (drawn once per process, not per page)."""
    from datasketch import MinHash  # see _minhash

    return MinHash(num_perm=num_perm, seed=seed, scheme=_MINHASH_SCHEME).permutations


def _minhash(grams: Sequence[str], num_perm: int, seed: int = 1) -> list[int]:
    # Imported here: datasketch's package imports its LSH classes and with
    # them scipy, 0.8 s of every Spark Python worker that unpickles a stage
    # function reaching this module, MinHash wanted or not.
    from datasketch import MinHash

    sketch = MinHash(
        num_perm=num_perm,
        seed=seed,
        hashfunc=_shingle_hash32,
        permutations=_permutations(num_perm, seed),
        scheme=_MINHASH_SCHEME,
    )
    sketch.update_batch(set(grams))
    return [int(v) for v in sketch.hashvalues]
