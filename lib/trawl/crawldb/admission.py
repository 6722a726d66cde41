"""Admission to the frontier: from a raw URL to a crawldb row, or a reason why not.

Seeds (inject), outlinks and redirect targets (updatedb) all come through
``admit``: normalise (``trawl.url.normalize``), filter (``trawl.url.filter``), then
derive the keys every table partitions and joins on (host, host bucket,
registered domain, 64-bit URL fingerprint). Pure functions, called from the
Spark stages per record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trawl.config import Config
from trawl.crawldb.budgets import path_pattern
from trawl.crawldb.status import CrawlStatus
from trawl.url.filter import UrlFilter
from trawl.url.keys import host_bucket, host_of, registered_domain, url_fingerprint
from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError

# The sources of crawldb rows the operator named (at depth 0): inject's seed
# lines and sitemap URLs. Their hosts are trusted with a budget of their own
# (``budget.seed_host_pages``); outlinks, sitemap entries and redirects are not
# (a redirect from a seed is trusted within its domain only).
NAMED_SOURCES = ("seed", "sitemap")


@dataclass(frozen=True)
class SeedLine:
    url: str
    score: float
    reason: str | None


class SeedError(ValueError):
    pass


def parse_seed_line(line: str) -> SeedLine | None:
    """One line of a seed file: ``URL [score] [reason...]``, tab or space
    separated; blank lines and ``#`` comments give None."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    parts = text.split(None, 2)
    score = 1.0
    reason = None
    if len(parts) > 1:
        try:
            score = float(parts[1])
        except ValueError:
            reason = " ".join(parts[1:])
        else:
            reason = parts[2] if len(parts) > 2 else None
    if not math.isfinite(score) or score < 0:
        raise SeedError(f"bad score {parts[1]!r}")
    return SeedLine(parts[0], score, reason)


def url_filter(cfg: Config) -> UrlFilter:
    f = cfg.filter
    return UrlFilter(
        allowed_schemes=f.allowed_schemes,
        max_url_length=f.max_url_length,
        max_path_depth=f.max_path_depth,
        max_repeated_segments=f.max_repeated_segments,
        max_query_params=f.max_query_params,
        skip_extensions=f.skip_extensions,
    )


def admit(
    raw_url: str,
    cfg: Config,
    flt: UrlFilter,
    *,
    source: str,
    depth: int,
    score: float,
    at: datetime,
    segment: str | None,
    reason: str | None = None,
    is_sitemap: bool = False,
    sitemap_lastmod: datetime | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """(crawldb row, None) for an admitted URL, (None, reject reason) otherwise.
    ``is_sitemap``: the URL is a sitemap to read, not a page."""
    try:
        url = normalize(raw_url, cfg.normalize.strip_params, cfg.normalize.session_params)
    except UrlError as exc:
        return None, f"normalize/{exc.reason}"
    # a sitemap is .xml or .txt by nature, an image or a script by what a page needs
    rejected = flt.reject_reason(url, any_extension=is_sitemap or source == "requisite")
    if rejected:
        return None, f"filter/{rejected}"
    host = host_of(url)
    return {
        "url": url,
        "url_fp": url_fingerprint(url),
        "host": host,
        "host_bucket": host_bucket(host, cfg.crawl.host_buckets),
        "domain": registered_domain(host),
        "status": CrawlStatus.UNFETCHED.value,
        "source": source,
        "reason": reason,
        "depth": depth,
        "score": score,
        "discovered_at": at,
        "discovered_segment": segment,
        "next_fetch_at": at,
        "fetch_interval_s": cfg.schedule.fetch_interval_s,
        "fetches": 0,
        "changes": 0,
        "retries": 0,
        "is_sitemap": is_sitemap,
        "sitemap_lastmod": sitemap_lastmod,
        "pattern": path_pattern(url),
    }, None
