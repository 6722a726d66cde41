"""Near-duplicate search keys and the choice of a cluster's canonical page.

The pure half of ``trawl dedup`` (the Spark half is ``trawl.stages.dedup``).

**Permuted-block keys** (Manku, Jain & Das Sarma, "Detecting near-duplicates
for web crawling", WWW 2007). Split the 64 bits of a simhash into ``blocks``
contiguous blocks. If two fingerprints differ in at most ``k`` bits, those
bits fall in at most ``k`` blocks, so at least ``blocks - k`` blocks are
equal (pigeonhole). Every choice of ``blocks - k`` blocks is one *table*; a
fingerprint's key in that table is the fingerprint with every other bit
masked off. Two fingerprints within ``k`` bits therefore share the key of at
least one table, and an equi-join on (table, key) finds every such pair; the
popcount of the XOR then drops the candidates farther than ``k``. With the
default ``blocks = 5, k = 3`` there are C(5, 2) = 10 tables whose keys keep
25 or 26 bits: few random candidates per key, ten key rows per fingerprint.
More blocks mean longer keys (fewer false candidates) but more tables.

**Graph nodes.** Pairs are found between distinct fingerprints, not URLs:
pages with the same simhash are one node (``s:<simhash>``), and a page
without a simhash (too little text) or under the MinHash method is the node
of its content hash (``c:<sha256>``), so exact copies are always one node.
Duplicate clusters are the connected components of the pairs.

**The canonical page** of a cluster is the first by ``dedup.compare_order``
(Nutch's ``DeduplicationJob -compareOrder``): https over http, higher score,
shorter URL, earlier fetch of its current content, then the URL itself so the
choice is the same on every run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import combinations
from typing import Any

from trawl.dedup.simhash import to_signed

__all__ = [
    "block_masks",
    "canonical_key",
    "key_masks",
    "marking",
    "node_id",
    "search_keys",
]

BITS = 64


def block_masks(blocks: int) -> list[int]:
    """Masks of ``blocks`` contiguous blocks covering the 64 bits, the first
    ``64 % blocks`` of them one bit longer (unsigned ints)."""
    if not 1 <= blocks <= BITS:
        raise ValueError(f"blocks must be in 1..64, got {blocks}")
    size, extra = divmod(BITS, blocks)
    masks, start = [], 0
    for i in range(blocks):
        width = size + (1 if i < extra else 0)
        masks.append(((1 << width) - 1) << start)
        start += width
    return masks


def key_masks(blocks: int, max_distance: int) -> list[int]:
    """One mask per table: the union of each choice of ``blocks - max_distance``
    blocks, as signed int64 (ready for a Spark ``bitwiseAND``)."""
    if not 0 <= max_distance < blocks:
        raise ValueError("need 0 <= max_distance < blocks (pigeonhole)")
    masks = block_masks(blocks)
    keep = blocks - max_distance
    out = []
    for chosen in combinations(masks, keep):
        union = 0
        for mask in chosen:
            union |= mask
        out.append(to_signed(union))
    return out


def search_keys(fingerprint: int, masks: Sequence[int]) -> list[tuple[int, int]]:
    """(table, key) pairs of one fingerprint: the reference for the Spark join."""
    fp = to_signed(fingerprint)
    return [(table, fp & mask) for table, mask in enumerate(masks)]


def node_id(simhash: int | None, content_sha256: str, method: str) -> str:
    """The near-duplicate graph node of a content (see the module docstring)."""
    if method == "simhash" and simhash is not None:
        return f"s:{to_signed(simhash)}"
    return f"c:{content_sha256}"


def canonical_key(page: Mapping[str, Any], order: Sequence[str]) -> tuple[Any, ...]:
    """Sort key of a page in its cluster: the smallest key is the canonical page.

    ``page`` has ``url``, ``score`` and ``fetch_time`` (a datetime, the fetch
    of its current content); ``order`` lists ``dedup.compare_order`` keys.
    """
    parts: list[Any] = []
    url = str(page["url"])
    for name in order:
        if name == "https":
            parts.append(0 if url.startswith("https://") else 1)
        elif name == "score":
            parts.append(-float(page.get("score") or 0.0))
        elif name == "url_length":
            parts.append(len(url))
        elif name == "fetch_time":
            when = page.get("fetch_time")
            parts.append(when.timestamp() if isinstance(when, datetime) else float("inf"))
        else:
            raise ValueError(f"unknown compare_order key {name!r}")
    parts.append(url)
    return tuple(parts)


def marking(
    page: Mapping[str, Any], duplicate_of: str | None, score_factor: float
) -> dict[str, Any] | None:
    """The crawldb change (status, duplicate_of, score) for a page that dedup
    found to be a duplicate of ``duplicate_of`` (None: it is no duplicate), or
    None when its row already says so.

    A new duplicate's score is multiplied by ``score_factor`` once (a page
    refetched while a duplicate keeps ``duplicate_of`` and its lowered score,
    though updatedb set it ``fetched``); a page no longer a duplicate gets the
    score back and status ``fetched``.
    """
    status, before, score = page.get("status"), page.get("duplicate_of"), page.get("score")
    if duplicate_of is not None:
        if status == "duplicate" and before == duplicate_of:
            return None
        if score is not None and before is None:
            score *= score_factor
        return {"status": "duplicate", "duplicate_of": duplicate_of, "score": score}
    if before is None and status != "duplicate":
        return None
    if score is not None and before is not None:
        score /= score_factor
    return {
        "status": "fetched" if status == "duplicate" else status,
        "duplicate_of": None,
        "score": score,
    }
