"""Tests for trawl.crawldb.admission: seed lines and admission of URLs to the crawldb."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from trawl.config import Config, load_config
from trawl.crawldb.admission import SeedError, SeedLine, admit, parse_seed_line, url_filter
from trawl.url.keys import host_bucket, url_fingerprint

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
CFG = Config()
FLT = url_filter(CFG)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", None),
        ("   \t ", None),
        ("\n", None),
        ("# a comment", None),
        ("   # indented comment http://example.com/", None),
        ("http://example.com/", SeedLine("http://example.com/", 1.0, None)),
        ("  http://example.com/  \n", SeedLine("http://example.com/", 1.0, None)),
        ("http://example.com/ 2.5", SeedLine("http://example.com/", 2.5, None)),
        ("http://example.com/\t0.5", SeedLine("http://example.com/", 0.5, None)),
        ("http://example.com/ 0", SeedLine("http://example.com/", 0.0, None)),
        ("http://example.com/ 1e2", SeedLine("http://example.com/", 100.0, None)),
        ("http://example.com/ 3 editor pick", SeedLine("http://example.com/", 3.0, "editor pick")),
        ("http://example.com/\t0.5\tfrom list", SeedLine("http://example.com/", 0.5, "from list")),
        ("http://example.com/ editor pick", SeedLine("http://example.com/", 1.0, "editor pick")),
        ("http://example.com/ news", SeedLine("http://example.com/", 1.0, "news")),
        ("http://example.com/#x 2", SeedLine("http://example.com/#x", 2.0, None)),  # raw URL
    ],
)
def test_parse_seed_line(line: str, expected: SeedLine | None) -> None:
    assert parse_seed_line(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "http://example.com/ -1",
        "http://example.com/ -0.5 some reason",
        "http://example.com/ nan",
        "http://example.com/ NaN reason",
        "http://example.com/ -inf",
    ],
)
def test_bad_scores_raise(line: str) -> None:
    with pytest.raises(SeedError, match="bad score"):
        parse_seed_line(line)


def test_seed_error_is_a_value_error() -> None:
    assert issubclass(SeedError, ValueError)


# --------------------------------------------------------------------------- admit


def do_admit(raw: str, cfg: Config = CFG, **kw: object) -> tuple[dict | None, str | None]:
    args: dict = {"source": "seed", "depth": 0, "score": 1.0, "at": AT, "segment": "seg1"}
    args.update(kw)
    return admit(raw, cfg, url_filter(cfg), **args)


@pytest.mark.parametrize(
    ("raw", "url", "host", "domain"),
    [
        ("http://example.com/", "http://example.com/", "example.com", "example.com"),
        ("HTTP://Example.COM:80/a/../b?utm_source=x&q=1#frag", "http://example.com/b?q=1",
         "example.com", "example.com"),
        ("https://www.Example.co.uk", "https://www.example.co.uk/", "www.example.co.uk",
         "example.co.uk"),
        ("http://site-0007.test:8080/p/1.html", "http://site-0007.test:8080/p/1.html",
         "site-0007.test", "site-0007.test"),
        ("http://127.0.0.1:9/x", "http://127.0.0.1:9/x", "127.0.0.1", "127.0.0.1"),
        ("  http://a.b.example.org/x?gclid=1  ", "http://a.b.example.org/x", "a.b.example.org",
         "example.org"),
    ],
)  # fmt: skip
def test_admit_normalises_and_fills_the_keys(raw: str, url: str, host: str, domain: str) -> None:
    row, reason = do_admit(raw)
    assert reason is None
    assert row is not None
    assert row["url"] == url
    assert row["url_fp"] == url_fingerprint(url)
    assert -(2**63) <= row["url_fp"] < 2**63
    assert row["host"] == host
    assert 0 <= row["host_bucket"] < CFG.crawl.host_buckets
    assert row["host_bucket"] == host_bucket(host, CFG.crawl.host_buckets)
    assert row["domain"] == domain


def test_admit_row_fields() -> None:
    row, _ = do_admit(
        "http://example.com/a", source="outlink", depth=3, score=0.25, segment="s7", reason="why"
    )
    assert row is not None
    assert {k: row[k] for k in ("status", "source", "depth", "score", "reason")} == {
        "status": "unfetched",
        "source": "outlink",
        "depth": 3,
        "score": 0.25,
        "reason": "why",
    }
    assert row["discovered_at"] == AT
    assert row["next_fetch_at"] == AT  # due at once
    assert row["discovered_segment"] == "s7"
    assert row["fetch_interval_s"] == CFG.schedule.fetch_interval_s
    assert (row["fetches"], row["changes"], row["retries"]) == (0, 0, 0)


def test_same_url_spelled_differently_gets_one_fingerprint() -> None:
    spellings = [
        "http://example.com/a/b",
        "HTTP://EXAMPLE.com:80/a/./b",
        "http://example.com/a/c/../b#top",
        "http://example.com/a/b?utm_medium=x",
    ]
    rows = [do_admit(u)[0] for u in spellings]
    assert {r["url"] for r in rows if r} == {"http://example.com/a/b"}
    assert len({r["url_fp"] for r in rows if r}) == 1


@pytest.mark.parametrize("buckets", [1, 3, 16])
def test_host_bucket_in_range_for_the_configured_buckets(buckets: int) -> None:
    cfg = load_config(None, [f"crawl.host_buckets={buckets}"], environ={})
    seen = set()
    for i in range(40):
        row, _ = do_admit(f"http://host-{i}.example/", cfg)
        assert row is not None
        assert 0 <= row["host_bucket"] < buckets
        seen.add(row["host_bucket"])
    assert len(seen) >= min(buckets, 8)  # hosts spread over the buckets


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not a url", "normalize/no_scheme"),
        ("/relative/path", "normalize/no_scheme"),
        ("http:///path", "normalize/no_host"),
        ("mailto:someone@example.com", "normalize/no_host"),
        ("http://exa mple.com/", "normalize/bad_host"),
        ("http://example.com:99999/", "normalize/bad_port"),
        ("ftp://example.com/file", "filter/scheme"),
        ("http://example.com/image.JPG", "filter/extension"),
        ("http://example.com/style.css?v=3", "filter/extension"),
        ("http://example.com/" + "x" * 2100, "filter/too_long"),
        ("http://example.com/" + "/".join(f"d{i}" for i in range(17)), "filter/path_depth"),
        ("http://example.com/a/b/a/b/a/b/a/b", "filter/repeated_segments"),
    ],
)
def test_admit_rejects_with_a_prefixed_reason(raw: str, reason: str) -> None:
    row, why = do_admit(raw)
    assert row is None
    assert why == reason


def test_filter_follows_the_config() -> None:
    cfg = load_config(None, ['filter.allowed_schemes=["https"]', "filter.skip_extensions=[]"],
                      environ={})  # fmt: skip
    assert do_admit("http://example.com/", cfg) == (None, "filter/scheme")
    row, why = do_admit("https://example.com/a.jpg", cfg)
    assert why is None
    assert row is not None
    assert row["url"] == "https://example.com/a.jpg"


def test_strip_params_follow_the_config() -> None:
    cfg = load_config(None, ['normalize.strip_params=["sid"]'], environ={})
    row, _ = do_admit("http://example.com/?sid=1&utm_source=x", cfg)
    assert row is not None
    assert row["url"] == "http://example.com/?utm_source=x"
