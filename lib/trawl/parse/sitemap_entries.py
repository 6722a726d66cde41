"""The entries of a sitemap: which reach the frontier, and with what hints.

``trawl.parse.sitemaps`` reads the file; every entry it finds (a page, or a
child sitemap of an index) is offered to an ``EntryCollector``, which checks
it and keeps the good ones in the ``Sitemap`` result. Nothing raises: a
dropped entry is counted in ``rejected`` by reason, a dropped field in
``warnings``.

* Strict about what reaches the frontier: a ``loc`` is an absolute http(s) URL shorter
  than 2,048 characters, inside the sitemap's location: same scheme, host and port (else
  ``cross_host``) and under the directory of its URL (else ``outside_path``; sitemaps.org
  "Sitemap file location"). An index's children need only the same origin ("Sitemap
  index files may only specify Sitemaps ... on the same site"). The scope URL replaces
  the sitemap URL as that bound: the robots.txt URL, for a sitemap listed there, covers
  its whole host ("Sitemaps & Cross Submits"). ``strict=False`` keeps entries
  outside the bound, counted in ``warnings``. URLs come back normalised
  (``normalize`` without parameter stripping) and de-duplicated. A value holding
  markup (an entity reference, child elements) is unusable (``markup``), not
  silently cut short.
* Every entry counts towards ``max_urls`` as the file lists it, valid or not.
* Hints are checked, an invalid one dropped with a warning: ``lastmod`` in W3C
  Datetime, leniently any ISO 8601 form, or an RFC 5322 date (RSS pubDate), as
  UTC, and not later than ``now`` plus ``FUTURE_TOLERANCE``; ``changefreq`` one
  of the sitemaps.org words (``CHANGEFREQ_SECONDS`` turns them into scheduling
  intervals); ``priority`` a plain decimal in [0, 1].
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from types import MappingProxyType
from typing import Final, Literal

from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError

__all__ = [
    "CHANGEFREQ_SECONDS",
    "FUTURE_TOLERANCE",
    "MARKUP",
    "MAX_LOC_CHARS",
    "SCHEME_PREFIX",
    "EntryCollector",
    "Sitemap",
    "SitemapEntry",
    "SitemapKind",
    "location_bound",
]

MAX_LOC_CHARS: Final = 2_048  # sitemaps.org: a loc "must be less than 2,048 characters"
FUTURE_TOLERANCE: Final = timedelta(days=1)  # lastmods later than now + this are dropped
# Scheduling hints in seconds. "always" asks for the scheduler's minimum interval;
# "never" marks archived pages, rechecked like yearly ones rather than never.
CHANGEFREQ_SECONDS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "always": 0,
        "hourly": 3_600,
        "daily": 86_400,
        "weekly": 604_800,
        "monthly": 2_592_000,
        "yearly": 31_536_000,
        "never": 31_536_000,
    }
)

SitemapKind = Literal["urlset", "index", "text", "feed", "unknown"]
MARKUP: Final = "\x00"  # stands for a value with child nodes: XML text can never hold NUL
SCHEME_PREFIX: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # RFC 3986 3.1
_WEB_SCHEMES = frozenset({"http", "https"})
_YEAR_MONTH = re.compile(r"\d{4}(?:-\d\d)?")  # the W3C Datetime forms ISO parsers refuse
_PRIORITY = re.compile(r"\d+(?:\.\d*)?|\.\d+")  # no signs, exponents, "nan" or "inf"


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """A page (in an index: a child sitemap) with the hints the sitemap gives for it."""

    url: str
    lastmod: datetime | None = None  # aware, UTC
    changefreq: str | None = None  # a key of CHANGEFREQ_SECONDS
    priority: float | None = None  # in [0, 1]; None if absent (sitemaps.org default: 0.5)


@dataclass(slots=True)
class Sitemap:
    """What one sitemap file gave: ``entries`` in file order, and what was dropped why."""

    kind: SitemapKind = "unknown"
    entries: list[SitemapEntry] = field(default_factory=list)
    truncated: Literal["max_urls", "max_bytes"] | None = None
    errors: list[str] = field(default_factory=list)  # about the file as a whole
    warnings: Counter[str] = field(default_factory=Counter)  # reason -> count
    rejected: Counter[str] = field(default_factory=Counter)  # reason -> entries dropped


@dataclass(slots=True)
class EntryCollector:
    """Checks each entry the file lists and keeps the good ones in ``result``."""

    result: Sitemap
    scope: tuple[str, str]  # (origin, directory prefix), see location_bound
    strict: bool
    now: datetime | None
    max_urls: int
    index: bool = False  # an index bounds its children by origin only
    seen: set[str] = field(default_factory=set)
    listed: int = 0

    def offer(self, fields: Mapping[str, str]) -> bool:
        """Take one listed entry; False once the file lists more than ``max_urls``.

        Every entry counts towards the limit, valid or not, as the file lists it.
        """
        self.listed += 1
        if self.listed > self.max_urls:
            self.result.truncated = "max_urls"
            return False
        url, reason = self._check_loc(fields.get("loc"))
        if reason is not None:
            self.result.rejected[reason] += 1
            return True
        lastmod = self._lastmod(fields.get("lastmod"))
        changefreq = self._changefreq(fields.get("changefreq"))
        priority = self._priority(fields.get("priority"))
        self.result.entries.append(SitemapEntry(url, lastmod, changefreq, priority))
        return True

    def _check_loc(self, loc: str | None) -> tuple[str, str | None]:
        """(normalised URL, None), or ("", reject reason)."""
        loc = (loc or "").strip()
        if not loc:
            return "", "empty"
        if MARKUP in loc:
            return "", "markup"
        if "\ufffd" in loc:  # U+FFFD: bytes that were not UTF-8
            return "", "bad_encoding"
        if len(loc) >= MAX_LOC_CHARS:
            return "", "too_long"
        scheme = SCHEME_PREFIX.match(loc)
        if scheme is None:  # sitemaps.org: "begin with the protocol (such as http)"
            return "", "relative"
        if scheme.group()[:-1].lower() not in _WEB_SCHEMES:
            return "", "bad_scheme"
        try:
            url = normalize(loc, ())
        except UrlError as exc:
            return "", exc.reason
        if url in self.seen:
            return "", "duplicate"
        outside = self._outside(url)
        if outside is not None:
            if self.strict:
                return "", outside
            self.result.warnings[outside] += 1
        self.seen.add(url)
        return url, None

    def _outside(self, url: str) -> str | None:
        """sitemaps.org "Sitemap file location": same origin, and under the directory."""
        origin, directory = self.scope
        if _origin(url) != origin:
            return "cross_host"
        if not self.index and not url.startswith(directory):
            return "outside_path"
        return None

    def _lastmod(self, text: str | None) -> datetime | None:
        if text is None or not text.strip():
            return None
        when = _parse_datetime(text.strip())
        if when is None:
            self.result.warnings["lastmod_invalid"] += 1
        elif self.now is not None and when > self.now + FUTURE_TOLERANCE:
            self.result.warnings["lastmod_future"] += 1
            when = None
        return when

    def _changefreq(self, text: str | None) -> str | None:
        value = (text or "").strip().lower()
        if value and value not in CHANGEFREQ_SECONDS:
            self.result.warnings["changefreq_invalid"] += 1
        return value if value in CHANGEFREQ_SECONDS else None

    def _priority(self, text: str | None) -> float | None:
        value = (text or "").strip()
        if value and _PRIORITY.fullmatch(value) and float(value) <= 1.0:
            return float(value)
        if value:
            self.result.warnings["priority_invalid"] += 1
        return None


def location_bound(url: str, scope_url: str) -> tuple[str, str]:
    """(origin, directory prefix) that bound the entries; UrlError for a bad URL."""
    for candidate in (url, scope_url):
        scheme = SCHEME_PREFIX.match(candidate.strip())
        if scheme is None or scheme.group()[:-1].lower() not in _WEB_SCHEMES:
            raise UrlError("bad_scheme", candidate)
        normalize(candidate, ())
    bound = normalize(scope_url, ())
    origin = _origin(bound)
    path = bound[len(origin) :].partition("?")[0]
    return origin, origin + path[: path.rfind("/") + 1]


def _origin(normalized: str) -> str:
    """``scheme://authority`` of a normalised URL (whose path always starts with "/")."""
    return normalized[: normalized.index("/", normalized.index("://") + 3)]


def _parse_datetime(text: str) -> datetime | None:
    """W3C Datetime (https://www.w3.org/TR/NOTE-datetime), leniently any ISO 8601 form
    Python reads, else an RFC 5322 date (RSS pubDate); as an aware UTC datetime. A
    missing zone is taken as UTC, a date alone as its first instant."""
    try:
        if _YEAR_MONTH.fullmatch(text):  # "YYYY" or "YYYY-MM"
            when = datetime(int(text[:4]), int(text[5:7] or 1), 1)
        else:
            try:
                when = datetime.fromisoformat(text.upper())
            except ValueError:
                when = parsedate_to_datetime(text)
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, TypeError, OverflowError):
        return None
