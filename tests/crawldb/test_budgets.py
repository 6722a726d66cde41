"""trawl.crawldb.budgets: path patterns that fold a trap's URLs into one, counter
steps, and BEAST's growing deferral intervals."""

from __future__ import annotations

import pytest

from trawl.crawldb.budgets import (
    counter_key,
    counter_step,
    defer_interval_s,
    farm_like,
    mask_segment,
    path_pattern,
)


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        # a calendar's months share one pattern
        ("http://cal.test/cal/2026/12/", "cal.test/cal/0/0/"),
        ("http://cal.test/cal/9999/01/", "cal.test/cal/0/0/"),
        # counters
        ("http://h.test/list?page=7", "h.test/list?"),
        ("http://h.test/list?page=12000", "h.test/list?"),
        ("http://h.test/p/123", "h.test/p/0"),
        # faceted search: one pattern whatever the filters
        ("http://shop.test/search?color=red", "shop.test/search?"),
        ("http://shop.test/search?size=m&color=red&x=1", "shop.test/search?"),
        # ids and tokens
        ("http://h.test/item/0f8e2c1d9a7b6e5f4c3d", "h.test/item/*"),
        ("http://h.test/u/123e4567-e89b-12d3-a456-426614174000.html", "h.test/u/*.html"),
        ("http://h.test/a/AbCdEfGhIjKlMnOpQrSt9x/", "h.test/a/*/"),
        # ordinary words stay
        ("http://h.test/docs/files/images/", "h.test/docs/files/images/"),
        ("http://h.test/news/2026-12-01-storm.html", "h.test/news/0-0-0-storm.html"),
        ("http://h.test:8080/", "h.test:8080/"),
        ("http://h.test", "h.test"),
    ],
)
def test_path_pattern(url: str, pattern: str) -> None:
    assert path_pattern(url) == pattern


def test_distinct_pages_keep_distinct_patterns() -> None:
    assert path_pattern("http://h.test/about") != path_pattern("http://h.test/contact")
    assert path_pattern("http://a.test/p/1") != path_pattern("http://b.test/p/1")
    assert path_pattern("http://h.test/search") != path_pattern("http://h.test/search?q=1")


@pytest.mark.parametrize(
    ("segment", "masked"),
    [
        ("", ""),
        ("index.html", "index.html"),
        ("v2", "v0"),
        ("deadbeefdeadbeef", "*"),
        ("DEADBEEFDEADBEEF", "*"),
        ("deadbeef", "deadbeef"),  # too short to be a token: only the digits would go
        ("abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),  # no digit: a word
    ],
)
def test_mask_segment(segment: str, masked: str) -> None:
    assert mask_segment(segment) == masked


def test_deferral_doubles_up_to_the_cap() -> None:
    day = 86_400.0
    waits = [defer_interval_s(n, day, 30 * day) for n in range(7)]
    assert waits == [day, 2 * day, 4 * day, 8 * day, 16 * day, 30 * day, 30 * day]
    assert defer_interval_s(10_000, day, 30 * day) == 30 * day  # no overflow


def test_deferral_count_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        defer_interval_s(-1, 1.0, 2.0)


COUNTER_PAIRS = [
    # (source, target, is a step)
    ("http://cal.test/cal/2026/12/", "http://cal.test/cal/2027/01/", True),  # next month
    ("http://cal.test/cal/2026/12/", "http://cal.test/cal/2026/11/", True),  # previous
    ("http://h.test/list?page=3", "http://h.test/list?page=4", True),
    ("http://h.test/list?page=3", "http://h.test/list?page=300", True),
    ("http://h.test/a/b/1.html", "http://h.test/a/b/2.html", True),  # numbered siblings
    ("https://h.test:8443/p/7", "https://h.test:8443/p/8", True),
    ("http://h.test/list?page=3", "http://h.test/list?page=3", False),  # itself
    ("http://cal.test/cal/2026/12/", "http://cal.test/cal/2026/12/01/", False),  # a day
    ("http://h.test/list?page=3", "http://h.test/list?page=3&sort=new", False),
    ("http://shop.test/s?color=red", "http://shop.test/s?color=blue", False),  # a facet
    ("http://h.test/a/b/1.html", "http://h.test/a/c/1.html", False),
    # the origin's digits are not masked: numbered hosts are other sites
    ("http://site-12.test/p/1", "http://site-13.test/p/2", False),
    ("http://h.test:8080/p/1", "http://h.test:8081/p/2", False),
    ("http://h.test/p/1", "https://h.test/p/2", False),
]


@pytest.mark.parametrize(("source", "target", "step"), COUNTER_PAIRS)
def test_counter_step(source: str, target: str, step: bool) -> None:
    assert counter_step(source, target) is step
    assert counter_step(target, source) is step  # a step back is a step too


def test_counter_key_masks_digits_after_the_origin() -> None:
    assert (
        counter_key("http://w7.farm.test:81/cal/2026/12/?d=1")
        == "http://w7.farm.test:81/cal/0/0/?d=0"
    )
    assert counter_key("not a url 12") == "not a url 0"


@pytest.mark.parametrize(
    ("hosts", "links", "pages", "farm"),
    [
        (48, 50, 5, True),  # ten different siblings on each of five pages
        (432, 1000, 100, True),  # a farm of 500 hosts, a hundred pages into it
        (30, 300, 20, False),  # menus by section: each sibling on ten pages
        (40, 40, 20, False),  # menus left out, two more a page
        (140, 140, 140, False),  # one sibling per page: a directory's entries
        (38, 40, 4, False),  # four pages: too few to tell
        (19, 50, 5, False),  # fewer siblings than farm_min_hosts
        (0, 0, 50, False),
    ],
)
def test_farm_like(hosts: int, links: int, pages: int, farm: bool) -> None:
    assert farm_like(hosts, links, pages, 20) is farm
    assert farm_like(hosts, links, pages, 0) is False  # off
