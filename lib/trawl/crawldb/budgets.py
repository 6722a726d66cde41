"""Crawl budgets against traps: path patterns, new-URL caps, domain budgets.

A crawler trap is a site that mints URLs faster than a crawl can read them:
a calendar offering "next month" until the year 9999, faceted search, a
``?page=N`` counter, relative links that echo their own path. No single URL
of a trap looks wrong, so URL-shape rules (``trawl.url.filter``,
``trawl.url.normalize``'s session parameters) catch only part of it; the rest is
caught by **counting**, the way IRLbot does (Lee et al., "IRLbot: Scaling to 6
Billion Pages and Beyond", WWW 2008):

* **New-URL caps per segment** (``traps.max_new_per_host`` and
  ``traps.max_new_per_pattern``): updatedb adds at most so many new URLs of
  one host, and of one *path pattern* (:func:`path_pattern`: the URL with its
  numbers and ids masked), per segment. A calendar's months all share one
  pattern, so it grows by at most the pattern cap per cycle however many
  months it links. Links over a cap are not added; each is recorded with its
  reason (``cap/new_per_host``, ``cap/new_per_pattern``) in the ``rejected``
  table. Ranking inside a cap is by link score, then URL fingerprint, so a
  re-run of updatedb admits the same URLs.
* **Counter runs** (``traps.max_counter_run``): a link to a URL spelled
  like its page but for the numbers (:func:`counter_step`: the next month,
  ``?page=N+1``) is one step along a counter; updatedb counts the steps in a
  row that led to a URL and rejects a link past the limit
  (``trap/counter``). The caps bound a counter per cycle; this bounds it for
  good, since a calendar that grows one month a cycle never meets a cap.
* **Domain budgets** (IRLbot's STAR, "Spam Tracking and Avoidance through
  Reputation"): a registered domain may have in one segment
  ``budget.pages_per_linking_domain`` pages per distinct *other* domain that
  links to it, between ``budget.min_pages`` and ``budget.max_pages``. A link
  farm of a thousand subdomains under one domain links only to itself, so it
  earns nothing beyond the minimum however many pages it has. The in-links
  are the ``domainlinks`` table, the domain graph updatedb gathers from every
  segment's followed links.
* **Link farms behind a seed** (``budget.farm_min_hosts``): a host the
  operator named gets a budget of its own, but a named host can be a link
  farm's front page. A farm's pages each link to several other hosts of the
  farm's registered domain, a different few on every page (wildcard DNS
  mints them by the thousand); a real site links to its sister hosts from a
  menu, the same ones on every page, or to one of them from a page about
  it. updatedb counts, per host and segment, the links from its pages to
  hosts of its registered domain that the operator did not name
  (:func:`farm_like`); a named host whose last telling count looks like a
  farm loses its trust and is budgeted with its domain, as a discovered
  host is.
* **Deferral, not deletion** (IRLbot's BEAST, "Budget Enforcement with Anti-Spam
  Tactics"): a due URL over its domain's budget is not dropped but put off for
  ``budget.defer_s``, doubling with each deferral in a row up to
  ``budget.defer_max_s`` (:func:`defer_interval_s`). It comes back, and is
  fetched once its domain has earned the budget or others of it are done.

The functions here are pure, called per record from the Spark stages
(updatedb computes patterns inside its admission pass).
"""

from __future__ import annotations

import re

__all__ = [
    "COUNTER_DIGITS",
    "FARM_LINKS_PER_PAGE",
    "FARM_MIN_PAGES",
    "FARM_PAGES_PER_SIBLING",
    "ORIGIN_PREFIX",
    "counter_key",
    "counter_step",
    "defer_interval_s",
    "farm_like",
    "mask_segment",
    "path_pattern",
]

# RFC 3986 Appendix B, authority and path only.
_URL_RE = re.compile(r"^(?:[^:/?#]+:)?(?://([^/?#]*))?([^?#]*)(\?[^#]*)?")
# A run of digits: years, months, page numbers, ids.
COUNTER_DIGITS = r"[0-9]+"
_DIGITS = re.compile(COUNTER_DIGITS)
# scheme://authority at the start of an absolute URL (RFC 3986 3).
ORIGIN_PREFIX = r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*"
_ORIGIN = re.compile(ORIGIN_PREFIX)
# An opaque token: 16+ characters of one case of hex, or 20+ of base64url
# letters mixed with digits (session ids, hashes, UUIDs without dashes).
_TOKEN = re.compile(r"^(?:[0-9a-f]{16,}|[0-9A-F]{16,}|(?=.*[0-9])[A-Za-z0-9_-]{20,})$")
# A UUID (RFC 9562 4's hex-and-dashes form).
_UUID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


def mask_segment(segment: str) -> str:
    """One path segment with its variable parts masked: a whole token or UUID
    becomes ``*``, each run of digits ``0`` (``2026-12`` -> ``0-0``)."""
    name, dot, ext = segment.rpartition(".") if "." in segment else (segment, "", "")
    if _UUID.match(name) or _TOKEN.match(name):
        return "*" + dot + ext
    return _DIGITS.sub("0", segment)


def path_pattern(url: str) -> str:
    """The URL's shape: authority, path with every segment masked
    (:func:`mask_segment`), and ``?`` when it has a query, whatever its
    parameters. ``http://h/cal/2026/12/`` and ``http://h/cal/9999/01/`` share
    ``h/cal/0/0/``; ``/search?color=red`` and ``/search?size=m&color=red`` share
    ``h/search?``, since faceted search is one trap whatever its filters."""
    m = _URL_RE.match(url)
    assert m is not None  # every string matches: all groups are optional
    authority, path, query = m.group(1) or "", m.group(2), m.group(3)
    masked = "/".join(mask_segment(s) for s in path.split("/"))
    return authority + masked + ("?" if query else "")


def counter_key(url: str) -> str:
    """The URL with every run of digits after its origin masked: the pages of
    one counter (a calendar's months, ``?page=N``) share it, and so does the
    origin, digits and all (``site-12.test`` is not ``site-13.test``)."""
    m = _ORIGIN.match(url)
    origin = m.group(0) if m else ""
    return origin + _DIGITS.sub("0", url[len(origin) :])


def counter_step(source: str, target: str) -> bool:
    """Is the link ``source`` -> ``target`` a step along a counter: another
    URL of the same origin spelled the same but for its numbers?

    Calendars offering "next month" without end, ``?page=N`` links and
    numbered archives all step this way. Each step alone is harmless; the
    crawl counts the steps in a row that led to a URL (crawldb's
    ``counter_run``) and stops following at ``traps.max_counter_run``. Any
    link that is not a step starts the count again, so a page also linked
    from outside the sequence is not deep in it."""
    return source != target and counter_key(source) == counter_key(target)


def defer_interval_s(deferrals: int, base_s: float, max_s: float) -> float:
    """How long a URL over its domain's budget is put off, after ``deferrals``
    earlier deferrals in a row (BEAST's growing intervals): ``base_s`` doubled
    that many times, at most ``max_s``."""
    if deferrals < 0:
        raise ValueError(f"deferrals must not be negative, got {deferrals}")
    return min(max_s, base_s * 2.0 ** min(deferrals, 64))


#: Pages of a segment with links before a verdict: a portal's home alone
#: cannot tell a menu from a farm, nor can a couple of pages.
FARM_MIN_PAGES = 5
#: A farm's page links several sibling hosts; a page about one (a
#: directory's entry) links one.
FARM_LINKS_PER_PAGE = 3.0
#: A farm links a different few siblings on every page, so each is linked
#: from few of its pages; menus that differ by section repeat theirs on
#: every page of the section.
FARM_PAGES_PER_SIBLING = 4.0


def farm_like(sibling_hosts: int, sibling_links: int, sibling_pages: int, min_hosts: int) -> bool:
    """Do a host's pages of one segment link out like a link farm's?

    ``sibling_pages``: its pages with links; ``sibling_hosts``: the other
    hosts of its registered domain, not named by the operator, that they
    link, menus left out (a sibling linked from more than half of the pages);
    ``sibling_links``: the (page, such host) pairs. A farm: at least
    ``min_hosts`` such siblings (0 turns the test off), ``FARM_LINKS_PER_PAGE``
    or more a page, each from fewer than ``FARM_PAGES_PER_SIBLING`` pages on
    average, judged on ``FARM_MIN_PAGES`` pages or more.
    """
    if min_hosts <= 0 or sibling_pages < FARM_MIN_PAGES:
        return False
    return (
        sibling_hosts >= min_hosts
        and sibling_links >= FARM_LINKS_PER_PAGE * sibling_pages
        and sibling_links < FARM_PAGES_PER_SIBLING * sibling_hosts
    )
