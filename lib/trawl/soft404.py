"""Soft 404s: pages that answer 200 with the host's "page not found" page.

Many servers answer a path that does not exist with 200 and an error page; a
crawler that believes them fills crawldb and the index with copies of one
page. The fix (Bar-Yossef et al., "Sic transit gloria telae", WWW 2004; what
Heritrix and Google's crawlers do) is to ask each host once for a path that
cannot exist: its answer is the host's not-found page. A later 2xx page of
that host whose body has the same sha256, or whose main-text simhash is within
``traps.soft404_max_distance`` bits of it, is that error page again -- a soft
404, which crawldb treats as gone.

This module is the pure part: the probe's path, what a probe (or hostdb's
memory of one) says, and the comparison. The fetch task decides when to probe
(``trawl.fetchtask``), the fetcher compares (``trawl.fetcher``), hostdb keeps
the answer (``trawl.hoststate``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trawl.simhash import hamming

PROBE_SUFFIX = "-trawl-probe"  # names the crawler in the server's logs
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# hostdb columns (and fetch-list hints) that remember a host's probe.
HOSTDB_FIELDS = ("soft404_status", "soft404_sha256", "soft404_simhash", "soft404_probed_at")
# Outcomes of a probe that was answered for good (trawl.status.FetchOutcome
# values): a 2xx, a 404/410 (or other permanent 4xx), a redirect.
_ANSWERED = frozenset({"success", "gone", "redir_perm", "redir_temp"})


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
    simhash: int | None  # signed simhash of the main text (HTML with enough words)
    probed_at: datetime | None

    @property
    def comparable(self) -> bool:
        """Is there a not-found page to compare pages with? Only a 2xx with a
        body: a real 404/410 (or a redirect) means the host says what it means."""
        has_body = self.sha256 is not None and self.sha256 != EMPTY_SHA256
        return self.status is not None and 200 <= self.status < 300 and has_body

    def verdict(self, sha256: str | None, simhash: int | None, max_distance: int) -> str | None:
        """Why a 2xx page with this body is the host's not-found page (the
        ``error`` of its fetch row), or None if it is not one."""
        if not self.comparable:
            return None
        if sha256 is not None and sha256 == self.sha256:
            return "soft404: distance 0 (same sha256 as the probe)"
        if simhash is None or self.simhash is None:
            return None
        distance = hamming(simhash, self.simhash)  # both signed: hamming masks to 64 bits
        if distance <= max_distance:
            return f"soft404: distance {distance} (simhash within {max_distance} of the probe)"
        return None


def from_hints(item: Mapping[str, Any]) -> ProbeAnswer | None:
    """hostdb's memory of the host's last probe, as the fetch list carries it."""
    if item.get("soft404_probed_at") is None:
        return None
    return ProbeAnswer(
        item.get("soft404_status"),
        item.get("soft404_sha256"),
        item.get("soft404_simhash"),
        item.get("soft404_probed_at"),
    )


def from_probe(row: Mapping[str, Any]) -> ProbeAnswer | None:
    """What a probe's fetch row taught, or None when it taught nothing: no
    answer (timeout, network error), a transient one (5xx, 429: RFC 9110
    15.6), or no request at all (robots.txt disallowed the path). hostdb keeps
    the previous answer then, and the next segment probes again."""
    if row.get("outcome") not in _ANSWERED or row.get("http_status") is None:
        return None
    success = row.get("outcome") == "success"
    return ProbeAnswer(
        int(row["http_status"]),
        row.get("content_sha256") if success else None,
        row.get("simhash") if success else None,
        row.get("fetched_at"),
    )


def hostdb_fields(answer: ProbeAnswer) -> dict[str, Any]:
    """The hostdb columns (``HOSTDB_FIELDS``) that remember ``answer``."""
    values = (answer.status, answer.sha256, answer.simhash, answer.probed_at)
    return dict(zip(HOSTDB_FIELDS, values, strict=True))


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
