"""Soft 404s: pages that answer 200 with the host's "page not found" page.

Many servers answer a path that does not exist with 200 and an error page; a
crawler that believes them fills crawldb and the index with copies of one
page. The fix (Bar-Yossef et al., "Sic transit gloria telae", WWW 2004; what
Heritrix and Google's crawlers do) is to ask each host once for a path that
cannot exist: its answer is the host's not-found page. A later 2xx page of
that host whose body has the same sha256, or whose main-text simhash is within
``traps.soft404_max_distance`` bits of it, is that error page again -- a soft
404, which crawldb treats as gone.

Two kinds of not-found answer need more than that:

* Error pages that **echo the requested path** ("The page /news/6 was not
  found"). The echo is a different run of words on every page, and on a short
  error page it moves the simhash by more bits than the threshold. So the
  comparison also uses an *echo-free* simhash (``echo_free_simhash``): the
  main text with every run of words that spells the URL's path (with and
  without its query, as written and percent-decoded; its last segment when
  that is a slug of two words or more) taken out, tokenised as
  ``trawl.dedup.fingerprint`` does. The probe's answer is fingerprinted the same
  way against the probe's own path (its token included), so what remains of
  both is the same error page. Runs are taken out, not each word of the path
  wherever it stands: a path ``/the-best-of`` must not strip every "the" from
  the page's template (which the probe's text keeps), or the echo-free texts
  of two copies of the error page would differ. A real page loses only the
  words that spell its own address and stays as far from the error page as
  it was. The probe's fetch row, and so hostdb's ``soft404_simhash``, holds
  the echo-free simhash; a page is compared by both its plain and its
  echo-free simhash (the closer counts), so a page whose path happens to
  spell words of a non-echoing template is still caught by the plain one.
  The sha256 exact match is unchanged.
* Hosts that **redirect every missing path** to their home page (or to one
  fixed URL) instead of answering 404. The probe's redirect target is
  remembered (``soft404_location``); a page, other than the root, whose fetch
  redirects to that same target is a soft 404 too, and its target is neither
  followed nor recorded as a link (the root is crawled from its own links).
  Targets are compared as ``redirect_target`` spells them (resolved,
  normalised with urlnorm's defaults), the same for the probe and the page.

This module is the pure part: the probe's path, what a probe (or hostdb's
memory of one) says, and the comparison. The fetch task decides when to probe
(``trawl.fetch.rules.probe_due``), the fetcher compares (``trawl.fetch.visit``), hostdb keeps
the answer (``trawl.crawldb.hoststate``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from trawl.config import DedupConfig
from trawl.dedup.fingerprint import shingles, words
from trawl.dedup.simhash import hamming, simhash, to_signed
from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError, resolve

PROBE_SUFFIX = "-trawl-probe"  # names the crawler in the server's logs
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# hostdb columns (and fetch-list hints) that remember a host's probe.
HOSTDB_FIELDS = (
    "soft404_status", "soft404_sha256", "soft404_simhash", "soft404_probed_at",
    "soft404_location",
)  # fmt: skip
# Outcomes of a probe that was answered for good (trawl.crawldb.status.FetchOutcome
# values): a 2xx, a 404/410 (or other permanent 4xx), a redirect.
_REDIRECTS = frozenset({"redir_perm", "redir_temp"})
_ANSWERED = frozenset({"success", "gone"}) | _REDIRECTS


def probe_url(origin: str, segment: str) -> str:
    """The probe's URL on ``origin``: 24 hex characters no site has as a path.

    They are drawn from sha256(segment, origin) rather than a random source,
    so a re-run of the segment asks the same path (a rerun neither doubles nor
    changes anything) while every segment asks a new one, which no server can
    have prepared a page for.
    """
    token = hashlib.sha256(f"{segment}\n{origin}".encode()).hexdigest()[:24]
    return f"{origin}/{token}{PROBE_SUFFIX}"


@dataclass(frozen=True)
class ProbeAnswer:
    """What a host answered to a path that cannot exist."""

    status: int | None  # its HTTP status
    sha256: str | None  # sha256 of the body (2xx only)
    # signed echo-free simhash of the main text (HTML with enough words; 2xx only)
    simhash: int | None
    probed_at: datetime | None
    location: str | None = None  # a redirect's target, as ``redirect_target`` spells it

    @property
    def comparable(self) -> bool:
        """Is there a not-found page to compare pages with? Only a 2xx with a
        body: a real 404/410 means the host says what it means (and a redirect
        is compared by its target, ``redirect_verdict``)."""
        has_body = self.sha256 is not None and self.sha256 != EMPTY_SHA256
        return self.status is not None and 200 <= self.status < 300 and has_body

    def verdict(
        self,
        sha256: str | None,
        simhash: int | None,
        max_distance: int,
        echo_free: int | None = None,
    ) -> str | None:
        """Why a 2xx page with this body is the host's not-found page (the
        ``error`` of its fetch row), or None if it is not one. ``simhash`` is
        the page's as its fetch row has it, ``echo_free`` its echo-free one
        (``echo_free_simhash``); the closer to the probe's counts."""
        if not self.comparable:
            return None
        if sha256 is not None and sha256 == self.sha256:
            return "soft404: distance 0 (same sha256 as the probe)"
        if self.simhash is None:
            return None
        kinds = (("simhash", simhash), ("simhash without the path", echo_free))
        # both signed: hamming masks to 64 bits; a tie names the plain simhash
        found = [(hamming(value, self.simhash), kind) for kind, value in kinds if value is not None]
        if not found:
            return None
        distance, kind = min(found)
        if distance <= max_distance:
            return f"soft404: distance {distance} ({kind} within {max_distance} of the probe)"
        return None

    def compares(self, row: Mapping[str, Any]) -> bool:
        """Is a page with this fetch row compared with this answer? A 2xx if
        there is a not-found page; a redirect if the probe was redirected."""
        if row.get("outcome") == "success":
            return self.comparable
        return row.get("outcome") in _REDIRECTS and self.location is not None

    def judge(
        self, row: Mapping[str, Any], main_text: str | None, dedup: DedupConfig, max_distance: int
    ) -> str | None:
        """Why the page of a fetch row that ``compares`` is a soft 404 (its
        row's ``error``), or None; ``main_text`` is the page's (HTML only)."""
        if row.get("outcome") in _REDIRECTS:
            return self.redirect_verdict(location_of(row))
        url = str(row["url"])
        echo_free = None if main_text is None else echo_free_simhash(main_text, url, dedup)
        return self.verdict(row.get("content_sha256"), row.get("simhash"), max_distance, echo_free)

    def redirect_verdict(self, target: str | None) -> str | None:
        """Why a page's redirect to ``target`` (spelt by ``redirect_target``)
        is the host's answer to a missing page: the probe was sent there too.
        None if it is not, or the probe was not redirected."""
        if self.location is None or target != self.location:
            return None
        return f"soft404: redirect to {target} (where the probe was sent)"


def from_hints(item: Mapping[str, Any]) -> ProbeAnswer | None:
    """hostdb's memory of the host's last probe, as the fetch list carries it."""
    if item.get("soft404_probed_at") is None:
        return None
    return ProbeAnswer(
        item.get("soft404_status"),
        item.get("soft404_sha256"),
        item.get("soft404_simhash"),
        item.get("soft404_probed_at"),
        item.get("soft404_location"),
    )


def from_probe(row: Mapping[str, Any]) -> ProbeAnswer | None:
    """What a probe's fetch row taught, or None when it taught nothing: no
    answer (timeout, network error), a transient one (5xx, 429: RFC 9110
    15.6), or no request at all (robots.txt disallowed the path). hostdb keeps
    the previous answer then, and the next segment probes again. A redirect's
    target is read from the row's Location header (the probe row records no
    ``redirect_to``: that would make it a link for updatedb)."""
    if row.get("outcome") not in _ANSWERED or row.get("http_status") is None:
        return None
    success = row.get("outcome") == "success"
    location = location_of(row) if row.get("outcome") in _REDIRECTS else None
    return ProbeAnswer(
        int(row["http_status"]),
        row.get("content_sha256") if success else None,
        row.get("simhash") if success else None,
        row.get("fetched_at"),
        location,
    )


def hostdb_fields(answer: ProbeAnswer) -> dict[str, Any]:
    """The hostdb columns (``HOSTDB_FIELDS``) that remember ``answer``."""
    values = (answer.status, answer.sha256, answer.simhash, answer.probed_at, answer.location)
    return dict(zip(HOSTDB_FIELDS, values, strict=True))


def redirect_target(url: str, location: str | None) -> str | None:
    """A Location header's target as soft-404 comparisons spell it: resolved
    against the URL asked (RFC 9110 10.2.2 allows a relative reference) and
    normalised with urlnorm's defaults, whatever the crawl's own parameters,
    so the probe's target and a page's are spelt alike. None if unusable."""
    if not location or not location.strip():
        return None
    try:
        return normalize(resolve(url, location.strip()))
    except UrlError:
        return None


def location_of(row: Mapping[str, Any]) -> str | None:
    """The target of a fetch row's redirect, as ``redirect_target`` spells it,
    from the first Location in its ``headers`` (RFC 9110 5.1: names are
    case-insensitive); None without one."""
    for pair in row.get("headers") or ():
        if len(pair) == 2 and str(pair[0]).lower() == "location":
            return redirect_target(str(row["url"]), str(pair[1]))
    return None


def echoes(url: str) -> list[tuple[str, ...]]:
    """The word runs (``trawl.dedup.fingerprint.words``) in which a not-found page
    may echo ``url``: its path with and without the query, as written and
    percent-decoded, and its last segment when that has two words or more (a
    slug offered back as search terms). Longest first; none for the root."""
    parts = urlsplit(url)
    path, query = parts.path, parts.query
    last = path.rstrip("/").rsplit("/", 1)[-1]
    spellings = {path, f"{path}?{query}" if query else path}
    spellings |= {unquote(s) for s in spellings}
    runs = {tuple(words(s)) for s in spellings}
    runs |= {run for run in (tuple(words(last)), tuple(words(unquote(last)))) if len(run) >= 2}
    return sorted((run for run in runs if run), key=lambda run: (-len(run), run))


def without_echoes(tokens: Sequence[str], runs: Sequence[tuple[str, ...]]) -> list[str]:
    """``tokens`` with every occurrence of each run taken out (longest first,
    left to right)."""
    by_first: dict[str, list[tuple[str, ...]]] = {}
    for run in runs:
        by_first.setdefault(run[0], []).append(run)
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        found = next(
            (r for r in by_first.get(tokens[i], ()) if tuple(tokens[i : i + len(r)]) == r), None
        )
        if found is None:
            kept.append(tokens[i])
        i += len(found) if found else 1
    return kept


def echo_free_simhash(main_text: str, url: str, dedup: DedupConfig) -> int | None:
    """The signed simhash of ``main_text`` with the echoes of ``url``'s path
    taken out (``echoes``), made as ``trawl.dedup.fingerprint`` makes a page's
    (shingles of ``dedup.shingle_words``, weighted by count); None when fewer
    than ``dedup.min_words`` words remain."""
    tokens = without_echoes(words(main_text), echoes(url))
    if len(tokens) < max(1, dedup.min_words):
        return None
    return to_signed(simhash(Counter(shingles(tokens, dedup.shingle_words)).items()))


def is_site_root(url: str) -> bool:
    """Is ``url`` the host's root page? A host that answers unknown paths with
    its home page still has a home page: the root is never a soft 404."""
    rest = url.partition("://")[2]
    return rest.partition("/")[2] == ""  # "/?p=7" is a page of its own


def probe_counters(
    probes: Iterable[tuple[int | None, str | None, int]], soft404_pages: int
) -> list[tuple[str, int]]:
    """The fetch job's counters for soft 404s, from (http_status, error, rows)
    groups of the segment's probe rows and the number of pages found to be
    soft 404s: ``fetch/probe/status/<code>`` for what the probes were
    answered, ``fetch/probe/why/<why>`` for probes not sent or not answered
    (robots_denied, crawl_delay_over_cap, timeout, ...), ``fetch/soft404``.
    (Probe outcomes are ``fetch/probe/<outcome>``, counted with every row's.)"""
    counts: Counter[str] = Counter()
    for status, error, rows in probes:
        if status is not None:
            counts[f"fetch/probe/status/{status}"] += rows
        if error:
            why = error.removeprefix("probe: ").split(":", 1)[0].strip()
            counts[f"fetch/probe/why/{why}"] += rows
    counts["fetch/soft404"] += soft404_pages
    return sorted(counts.items())
