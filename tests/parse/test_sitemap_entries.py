"""The checks on each sitemap entry (trawl.parse.sitemap_entries), through
parse_sitemap: locations against the sitemap's bound, and the lastmod,
changefreq and priority hints."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.parse.test_sitemaps import SITEMAP, url, urls, urlset
from trawl.parse.sitemap_entries import CHANGEFREQ_SECONDS, SitemapEntry
from trawl.parse.sitemaps import parse_sitemap

# --------------------------------------------------------------------------- locations


@pytest.mark.parametrize(
    ("loc", "reason"),
    [
        ("/dir/a", "relative"),
        ("dir/a", "relative"),
        ("//example.com/dir/a", "relative"),
        ("ftp://example.com/dir/a", "bad_scheme"),
        ("javascript:alert(1)", "bad_scheme"),
        ("mailto:someone@example.com", "bad_scheme"),
        ("https://example.com/dir/" + "a" * 2024, "too_long"),  # 2,048 characters
        ("", "empty"),
        ("   ", "empty"),
        ("http://", "no_host"),
        ("https://exa mple.com/dir/a", "bad_host"),
        ("https://example.com:99999/dir/a", "bad_port"),
        ("https://other.example/dir/a", "cross_host"),
        ("https://www.example.com/dir/a", "cross_host"),
        ("http://example.com/dir/a", "cross_host"),  # another scheme is another origin
        ("https://example.com:8443/dir/a", "cross_host"),
        ("https://example.com/other/a", "outside_path"),
        ("https://example.com/dir", "outside_path"),
        ("https://example.com/directory/a", "outside_path"),
        ("https://example.com/dir/sub/../../a", "outside_path"),
    ],
)
def test_bad_locs_are_rejected_with_a_reason(loc: str, reason: str) -> None:
    result = parse_sitemap(urlset(url(loc), url("https://example.com/dir/ok")), SITEMAP)
    assert urls(result) == ["https://example.com/dir/ok"]
    assert result.rejected == {reason: 1}


def test_loc_length_limit_and_good_spellings() -> None:
    longest = "https://example.com/dir/" + "a" * 2023  # 2,047 characters: allowed
    locs = [longest, "HTTPS://EXAMPLE.COM:443/dir/sub/x", "https://example.com/dir/a&amp;b"]
    result = parse_sitemap(urlset(*map(url, locs)), SITEMAP)
    assert urls(result) == [longest, "https://example.com/dir/sub/x", "https://example.com/dir/a&b"]


def test_location_check_can_be_relaxed_or_widened() -> None:
    body = urlset(
        url("https://example.com/dir/a"),
        url("https://example.com/other/b"),
        url("https://other.example/c"),
    )
    lax = parse_sitemap(body, SITEMAP, strict_location=False)
    assert len(lax.entries) == 3
    assert lax.warnings == {"outside_path": 1, "cross_host": 1} and lax.rejected == {}
    # Listed in robots.txt: the whole host, but still only that host.
    robots = parse_sitemap(body, SITEMAP, scope_url="https://example.com/robots.txt")
    assert urls(robots) == ["https://example.com/dir/a", "https://example.com/other/b"]
    assert robots.rejected == {"cross_host": 1}


def test_a_bad_sitemap_url_is_an_error_not_an_exception() -> None:
    for bad in ("ftp://example.com/sitemap.xml", "/sitemap.xml", "https:///x"):
        result = parse_sitemap(urlset(url("https://example.com/dir/a")), bad)
        assert result.entries == [] and result.errors[0].startswith("bad_url: ")


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-05", datetime(2024, 5, 1, tzinfo=UTC)),
        ("2024-05-06", datetime(2024, 5, 6, tzinfo=UTC)),
        ("2024-05-06T07:08Z", datetime(2024, 5, 6, 7, 8, tzinfo=UTC)),
        ("2024-05-06T07:08:09+02:00", datetime(2024, 5, 6, 5, 8, 9, tzinfo=UTC)),
        ("2024-05-06T07:08:09.5-05:00", datetime(2024, 5, 6, 12, 8, 9, 500000, tzinfo=UTC)),
        ("2024-05-06t07:08:09z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2024-05-06T07:08:09", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),  # no zone: UTC
        (" 2024-05-06 07:08:09+0100 ", datetime(2024, 5, 6, 6, 8, 9, tzinfo=UTC)),
        ("Mon, 06 May 2024 07:08:09 GMT", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("yesterday", None),
        ("2024-13-01", None),
        ("2024-02-30", None),
        ("2024-00", None),
        ("1715000000", None),
        ("2024-05-06T25:00Z", None),
    ],
)
def test_lastmod_formats(text: str, expected: datetime | None) -> None:
    result = parse_sitemap(
        urlset(url("https://example.com/dir/a", f"<lastmod>{text}</lastmod>")), SITEMAP
    )
    assert result.entries == [SitemapEntry("https://example.com/dir/a", expected)]
    assert result.warnings == ({} if expected else {"lastmod_invalid": 1})


def test_future_lastmod_is_dropped_beyond_the_tolerance() -> None:
    body = urlset(
        url("https://example.com/dir/a", "<lastmod>2025-01-01T23:00Z</lastmod>"),  # within a day
        url("https://example.com/dir/b", "<lastmod>2025-01-03</lastmod>"),
        url("https://example.com/dir/c", "<lastmod></lastmod>"),
    )
    result = parse_sitemap(body, SITEMAP, now=datetime(2025, 1, 1))  # naive: taken as UTC
    assert [e.lastmod for e in result.entries] == [datetime(2025, 1, 1, 23, tzinfo=UTC), None, None]
    assert result.warnings == {"lastmod_future": 1}
    unchecked = parse_sitemap(body, SITEMAP)  # no logical time: no future check
    assert unchecked.entries[1].lastmod == datetime(2025, 1, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("always", "always"),
        ("Hourly", "hourly"),
        (" DAILY ", "daily"),
        ("weekly", "weekly"),
        ("monthly", "monthly"),
        ("yearly", "yearly"),
        ("never", "never"),
        ("biweekly", None),
        ("daily!", None),
        ("", None),
    ],
)
def test_changefreq_values(text: str, expected: str | None) -> None:
    result = parse_sitemap(
        urlset(url("https://example.com/dir/a", f"<changefreq>{text}</changefreq>")), SITEMAP
    )
    assert result.entries[0].changefreq == expected
    assert result.warnings == ({"changefreq_invalid": 1} if text and not expected else {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0.0),
        ("0.0", 0.0),
        ("1", 1.0),
        ("1.0", 1.0),
        (" 0.3 ", 0.3),
        (".5", 0.5),
        ("1.", 1.0),
        ("1.1", None),
        ("-0.1", None),
        ("nan", None),
        ("inf", None),
        ("1e-1", None),
        ("0,5", None),
        ("high", None),
        ("", None),
    ],
)
def test_priority_values(text: str, expected: float | None) -> None:
    result = parse_sitemap(
        urlset(url("https://example.com/dir/a", f"<priority>{text}</priority>")), SITEMAP
    )
    assert result.entries[0].priority == expected
    assert result.warnings == ({"priority_invalid": 1} if text and expected is None else {})


def test_changefreq_seconds_grow_with_the_period() -> None:
    order = ["always", "hourly", "daily", "weekly", "monthly", "yearly"]
    assert set(CHANGEFREQ_SECONDS) == {*order, "never"}
    seconds = [CHANGEFREQ_SECONDS[name] for name in order]
    assert seconds == sorted(seconds) and seconds[2] == 86_400
    assert CHANGEFREQ_SECONDS["never"] >= CHANGEFREQ_SECONDS["yearly"]
