"""Tests for trawl.dedup.fingerprint: what near-duplicate fingerprints see in a text,
and how they get into the fetch row (trawl.fetch.visit) and crawldb
(trawl.crawldb.transitions), fetched from a real local server."""

from __future__ import annotations

import random
import statistics
import string
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from trawl.config import DedupConfig, ScheduleConfig, load_config
from trawl.crawldb.transitions import apply_fetch
from trawl.dedup.fingerprint import (
    PageFingerprint,
    minhash_jaccard,
    page_fingerprint,
    page_minhash,
    page_simhash,
    shingles,
    words,
)
from trawl.dedup.simhash import hamming, to_signed
from trawl.fetch.visit import Fetcher
from trawl.parse.html import parse_page

K, MIN_WORDS, PERM = 3, 30, 128
# Pseudo-words of letters only (digits would be masked to "0").
VOCAB = ["".join(random.Random(i).choices(string.ascii_lowercase, k=6)) for i in range(3000)]

PARK = (
    "The city council voted on Tuesday evening to approve the long discussed riverside park, "
    "ending nearly three years of public hearings, design competitions and budget disputes "
    "that had divided residents of the eastern districts. Construction is expected to begin "
    "in the spring, starting with the playground and a footpath along the water."
)
PARK_OTHER = (
    "Residents of the eastern districts gathered at the riverside on Saturday to plant the "
    "first trees of the new park, which the city council approved last month. Volunteers "
    "cleared the old boathouse, and the park's designers explained how the footpath and "
    "playground will be laid out along the water before construction starts in spring."
)


def simhash_of(text: str) -> int:
    value = page_simhash(text, K, MIN_WORDS)
    assert value is not None
    return value


def minhash_of(text: str) -> list[int]:
    value = page_minhash(text, K, MIN_WORDS, PERM)
    assert value is not None
    return value


def article(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(VOCAB) for _ in range(n)]


def test_words_are_lowercase_unicode_tokens_with_numbers_masked() -> None:
    assert words("Posted 12:30, 1,234 Comments") == ["posted", "0", "comments"]
    assert words("Updated 2024-05-12 10:31 UTC") == ["updated", "0", "utc"]
    assert words("12 May 2024") == ["0", "may", "0"]
    assert words("v2 3rd") == ["v0", "0rd"]
    assert words("Größe ÉTÉ naïve_word") == ["größe", "été", "naïve", "word"]
    assert words("— … !") == []


def test_shingles_are_runs_of_consecutive_words() -> None:
    assert shingles(["a", "b", "c", "d"], 3) == ["a b c", "b c d"]
    assert shingles(["a", "b"], 3) == ["a b"]
    assert shingles([], 3) == []


def test_timestamps_and_comment_counts_do_not_move_the_fingerprints() -> None:
    before = f"Posted 12 May 2024 10:31 · 34 comments\n{PARK}\nViews: 1,022"
    after = f"Posted 13 May 2024 14:05 · 1,234 comments\n{PARK}\nViews: 98,112"
    assert simhash_of(before) == simhash_of(after)
    assert minhash_of(before) == minhash_of(after)


def test_near_duplicates_with_an_ad_paragraph_are_within_3_bits_and_jaccard_0_8() -> None:
    # 800-word articles, one copy with new timestamp and comment count and a
    # 10-word ad paragraph in the middle: 14 of ~800 shingles differ, so each
    # bit flips with probability ~atan(sqrt(14/800))/pi and 2.7 bits move on
    # average (the module docstring): most pairs, not all, are within 3 bits,
    # while the MinHash similarity stays far above 0.8.
    distances, similarities = [], []
    for seed in range(60):
        rng = random.Random(seed)
        body = article(rng, 800)
        ad = " ".join(article(rng, 10))
        original = "Posted 12 May 2024 10:31 · 34 comments\n" + " ".join(body)
        copy = f"Posted 13 May 2024 14:05 · 35 comments\n{' '.join(body[:400])}\n{ad}\n"
        copy += " ".join(body[400:])
        distances.append(hamming(simhash_of(original), simhash_of(copy)))
        similarities.append(minhash_jaccard(minhash_of(original), minhash_of(copy)))
    assert statistics.mean(distances) < 3.5
    assert sum(d <= 3 for d in distances) >= 0.6 * len(distances)  # ~72 % in theory
    assert max(distances) <= 10
    assert min(similarities) >= 0.8


def test_a_one_word_edit_of_a_long_article_mostly_stays_within_3_bits() -> None:
    # 6 of 1500 shingles change: 1.3 bits move on average, over 3 in ~5 % of cases.
    rng = random.Random(5)
    moved = []
    for _ in range(100):
        body = article(rng, 1500)
        edited = list(body)
        edited[rng.randrange(len(edited))] = "edited"
        moved.append(hamming(simhash_of(" ".join(body)), simhash_of(" ".join(edited))))
    assert statistics.mean(moved) < 2
    assert sum(d <= 3 for d in moved) >= 90


def test_different_articles_on_the_same_topic_are_far_apart() -> None:
    assert hamming(simhash_of(PARK), simhash_of(PARK_OTHER)) > 10
    assert minhash_jaccard(minhash_of(PARK), minhash_of(PARK_OTHER)) < 0.2
    rng = random.Random(3)
    topic = VOCAB[:150]  # same vocabulary, different sentences
    for _ in range(30):
        a = " ".join(rng.choice(topic) for _ in range(300))
        b = " ".join(rng.choice(topic) for _ in range(300))
        assert hamming(simhash_of(a), simhash_of(b)) > 10


def test_short_texts_get_no_fingerprint() -> None:
    short = " ".join(VOCAB[:29])
    assert page_simhash(short, K, MIN_WORDS) is None
    assert page_minhash(short, K, MIN_WORDS, PERM) is None
    assert page_simhash(short + " one", K, MIN_WORDS) is not None
    assert page_simhash("", K, 0) is None  # no words is never a fingerprint


def test_page_fingerprint_computes_what_the_method_needs() -> None:
    dedup = DedupConfig(method="simhash", minhash_perm=PERM)
    text = " ".join(VOCAB[:100])
    fp = page_fingerprint(text, dedup)
    assert fp == PageFingerprint(100, simhash_of(text), None)
    fp = page_fingerprint(text, replace(dedup, method="minhash"))
    assert fp == PageFingerprint(100, simhash_of(text), minhash_of(text))
    assert page_fingerprint("12 words only", dedup) == PageFingerprint(3)


def test_minhash_signature_shape_and_determinism() -> None:
    signature = minhash_of(PARK)
    assert len(signature) == PERM
    assert all(isinstance(v, int) and 0 <= v < 1 << 32 for v in signature)
    assert page_minhash(PARK, K, MIN_WORDS, PERM) == signature
    assert page_minhash(PARK, K, MIN_WORDS, PERM, seed=2) != signature
    assert len(page_minhash(PARK, K, MIN_WORDS, 64) or []) == 64


def test_minhash_jaccard_estimates_the_shingle_set_similarity() -> None:
    rng = random.Random(9)
    shared, only_a, only_b = article(rng, 300), article(rng, 150), article(rng, 150)
    a, b = " ".join(shared + only_a), " ".join(only_b + shared)
    true = len(set(shingles(words(a), K)) & set(shingles(words(b), K))) / len(
        set(shingles(words(a), K)) | set(shingles(words(b), K))
    )
    assert abs(minhash_jaccard(minhash_of(a), minhash_of(b)) - true) < 0.15
    assert minhash_jaccard([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
    with pytest.raises(ValueError):
        minhash_jaccard([1, 2], [1])
    with pytest.raises(ValueError):
        minhash_jaccard([], [])


# --- in the fetch row and crawldb ------------------------------------------------

ARTICLE = "<h1>Park approved</h1>" + "".join(
    f"<p>{' '.join(VOCAB[i * 60 : (i + 1) * 60])}</p>" for i in range(5)
)
NAV = "".join(f"<li><a href='/s{i}'>section {i}</a></li>" for i in range(10))
FULL_PAGE = f"""<html><body><div id="cookie-bar">We use cookies on this site.</div>
<header><nav><ul>{NAV}</ul></nav></header><main><article>
<span class="comment-count">17 comments</span>{ARTICLE}</article></main>
<aside class="sidebar"><p>{" ".join(VOCAB[1000:1060])}</p></aside>
<footer>&copy; 2024 Example</footer></body></html>"""
PAGES = {
    "/article": ("text/html; charset=utf-8", FULL_PAGE),
    "/print": ("text/html; charset=utf-8", f"<html><body>{ARTICLE}</body></html>"),
    "/short": ("text/html", "<html><body><p>Just a few words here.</p></body></html>"),
    "/plain": ("text/plain", " ".join(VOCAB[:300])),
}


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        content_type, body = PAGES.get(self.path, ("text/html", "<p>not found</p>"))
        data = body.encode()
        self.send_response(200 if self.path in PAGES else 404)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def fetch_rows(base: str, *overrides: str) -> dict[str, dict[str, Any]]:
    cfg = load_config(None, ['fetch.allow_networks=["127.0.0.0/8"]', *overrides], environ={})
    fetcher = Fetcher.from_config(cfg)
    rows = {}
    for path in [*PAGES, "/missing"]:
        item = {"url": base + path, "host": "127.0.0.1", "depth": 0}
        rows[path] = fetcher.visit_page(item, "127.0.0.1").row
    return rows


def test_fetched_html_pages_carry_their_fingerprints(server: str) -> None:
    rows = fetch_rows(server, 'dedup.method="simhash"')
    article = rows["/article"]
    main = parse_page(FULL_PAGE.encode(), "text/html", [], "trawl").main_text
    assert article["simhash"] == to_signed(simhash_of(main))
    assert article["text_words"] == 300 + 2  # the title's two words and the paragraphs
    assert article["minhash"] is None  # dedup.method = "simhash"
    # the template does not count: the print version has the same fingerprint
    assert rows["/print"]["simhash"] == article["simhash"]
    assert rows["/short"]["text_words"] == 5
    assert rows["/short"]["simhash"] is None  # under dedup.min_words
    for path in ("/plain", "/missing"):  # not HTML; not fetched successfully
        assert [rows[path].get(k) for k in ("simhash", "minhash", "text_words")] == [None] * 3


def test_the_minhash_is_computed_only_under_the_minhash_method(server: str) -> None:
    rows = fetch_rows(server, 'dedup.method="minhash"', "dedup.minhash_perm=64")
    main = parse_page(FULL_PAGE.encode(), "text/html", [], "trawl").main_text
    assert rows["/article"]["minhash"] == page_minhash(main, K, MIN_WORDS, 64)
    assert rows["/article"]["minhash"] == rows["/print"]["minhash"]
    assert rows["/article"]["simhash"] is not None
    assert rows["/short"]["minhash"] is None


def _crawl_row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"url": "http://example.com/a", "status": "fetched", "fetches": 1}
    row.update(content_sha256="h0", simhash=-42, etag=None, last_modified=None)
    row.update(changes)
    return row


AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_crawldb_takes_the_simhash_of_a_new_copy_and_keeps_it_on_304() -> None:
    schedule = ScheduleConfig(policy="uniform")
    fetched = {"outcome": "success", "http_status": 200, "content_sha256": "h1", "simhash": 7}
    assert apply_fetch(_crawl_row(), fetched, AT, "s1", schedule)["simhash"] == 7
    too_short = {**fetched, "simhash": None}  # the new copy has too little text
    assert apply_fetch(_crawl_row(), too_short, AT, "s1", schedule)["simhash"] is None
    not_modified = {"outcome": "notmodified", "http_status": 304}
    kept = apply_fetch(_crawl_row(), not_modified, AT, "s1", schedule)
    assert (kept["simhash"], kept["content_sha256"]) == (-42, "h0")
