"""One visit to one URL: robots.txt, a page or a soft-404 probe, and all that follows.

A visit fetches the bytes once and does all the per-page work in the same
task: the page is parsed for links, canonical and robots directives, its
fields of the fetch row are built (``trawl.fetch.row``: outlinks, sha256,
near-duplicate fingerprints), and the raw exchange goes to WARC once its
outcome is known (``trawl.fetch.capture``). The result is one row of the
segment's ``fetch`` table (``trawl.store.schemas``). A 2xx page whose body is its
host's not-found page (the answer to the soft-404 probe, ``trawl.dedup.soft404``)
comes out as a soft 404, without outlinks, and is archived with the
diagnostics; so does a redirect to where the host sent the probe (a host
that redirects every missing path home), without its target.

``Fetcher`` is built from the config (``Fetcher.from_config``) and is shared
by the worker threads of a fetch task; it holds no per-host state (that is
the scheduler's, ``trawl.fetch.politeness``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trawl import __version__
from trawl.config import Config
from trawl.crawldb.status import FetchOutcome, outcome_for_http
from trawl.dedup.soft404 import ProbeAnswer, echo_free_simhash, is_site_root
from trawl.fetch.capture import FetchArchive, subset_for
from trawl.fetch.row import (
    Row,
    absolute,
    base_row,
    fingerprint_fields,
    item_kind,
    page_fields,
    requisite_fields,
    response_fields,
)
from trawl.net.client import HttpClient
from trawl.net.dates import parse_http_date
from trawl.net.request import user_agent_string
from trawl.net.resolver import AddressRefused, Resolver
from trawl.net.response import FetchError, HttpResponse
from trawl.net.robots import RobotsRules, rules_for_fetch
from trawl.parse.html import ParsedPage, parse_page
from trawl.parse.sitemaps import parse_sitemap
from trawl.url.keys import host_of
from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError, resolve
from trawl.warc.archive import TaskArchive

MAX_ROBOTS_REDIRECTS = 5  # RFC 9309 2.3.1.2: follow at least five redirects


def origin_of(url: str) -> str:
    """``scheme://authority`` of a URL: robots.txt's scope (RFC 9309 2.3)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0]}"


def _is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def user_agent(cfg: Config) -> str:
    """The User-Agent header the fetcher sends."""
    h = cfg.http
    return h.user_agent or user_agent_string(h.agent_name, __version__, h.contact_url or None)


def robots_url_for(url: str) -> str:
    return origin_of(url) + "/robots.txt"


def retry_after_s(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP-date
    (RFC 9110 10.2.3). Unparsable values are ignored (None)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    when = parse_http_date(value)
    return None if when is None else max(0.0, (when - now).total_seconds())


@dataclass
class Visit:
    """A finished visit: the fetch row plus what the scheduler needs."""

    row: Row
    response_s: float
    failed: bool = False
    retry_after_s: float | None = None
    rules: RobotsRules | None = None  # robots visits only
    no_request: bool = False  # decided without contacting the host


def _start() -> tuple[float, datetime]:
    """A request's start on both clocks: the monotonic one first, so that
    ``fetched_at`` + ``elapsed_s`` is never before the response's end."""
    clock = time.monotonic()
    return clock, datetime.now(UTC)


def _answered(row: Row, resp: HttpResponse, outcome: FetchOutcome, started: datetime) -> Visit:
    """The visit of a request that got a response: a transient error (5xx,
    429) is a failure for the scheduler, with its Retry-After."""
    failed = outcome is FetchOutcome.RETRY
    wait = retry_after_s(resp.header("retry-after"), started) if failed else None
    return Visit(row, resp.elapsed_s, failed=failed, retry_after_s=wait)


class Fetcher:
    def __init__(
        self, cfg: Config, resolver: Resolver, client: HttpClient, warc: TaskArchive | None
    ) -> None:
        self.cfg = cfg
        self.agent = cfg.http.agent_name
        self.resolver = resolver
        self.client = client
        self.archive = FetchArchive(warc, cfg.warc)
        # A time.monotonic() reading no request may outlast (the task's deadline).
        self.not_after: float | None = None

    @classmethod
    def from_config(cls, cfg: Config, warc: TaskArchive | None = None) -> Fetcher:
        client = HttpClient.from_config(cfg, user_agent(cfg))
        return cls(cfg, Resolver.from_config(cfg), client, warc)

    # -- robots.txt ------------------------------------------------------------

    def visit_robots(self, item: Mapping[str, Any], ip: str) -> Visit:
        """Fetch robots.txt for the item's origin, following up to five redirects."""
        url = robots_url_for(str(item["url"]))
        started = datetime.now(UTC)
        status: int | None = None
        body: bytes | None = None
        error: str | None = None
        resp: HttpResponse | None = None
        target, target_ip, hops = url, ip, 0
        while True:
            try:
                resp = self.client.get(target, target_ip, not_after=self.not_after)
            except FetchError as exc:
                error = f"{exc.kind}: {exc}"
                break
            self.archive.exchange(target, resp, started, "robotstxt")
            status = resp.status
            location = resp.header("location")
            if status in (301, 302, 303, 307, 308) and location and hops < MAX_ROBOTS_REDIRECTS:
                try:
                    target = normalize(resolve(target, location))
                    target_ip = self.resolver.resolve(host_of(target))
                except (UrlError, AddressRefused) as exc:
                    error = f"redirect: {exc}"
                    status = None
                    break
                hops += 1
                continue
            body = resp.body
            break
        if status is not None and 300 <= status < 400:
            hops += 1  # RFC 9309 2.3.1.2: more redirects than followed = unavailable
        rules = rules_for_fetch(status, body, self.agent, redirects_followed=hops)
        row = base_row(item, "robots", url, ip, started)
        row.update(
            http_status=status,
            outcome=(outcome_for_http(status) if status else FetchOutcome.RETRY).value,
            robots_decision=rules.reason,
            robots_body=(body or b"")[: self.cfg.robots.max_bytes].decode("utf-8", "replace")
            if status == 200
            else None,
            crawl_delay_s=rules.crawl_delay(),
            outlinks=self._sitemap_links(rules.sitemaps()),
            error=error,
            elapsed_s=resp.elapsed_s if resp else None,
        )
        failed = status is None or status == 429 or status >= 500
        return Visit(row, resp.elapsed_s if resp else 0.0, failed=failed, rules=rules)

    # -- pages -----------------------------------------------------------------

    def visit_page(
        self,
        item: Mapping[str, Any],
        ip: str,
        robots: str = "allowed",
        not_found: ProbeAnswer | None = None,
    ) -> Visit:
        """Fetch one page (``robots``: the robots decision that allowed it;
        ``not_found``: the host's answer to its soft-404 probe, which a 2xx
        page or a redirect is compared with). A page requisite
        (``requisites.capture``) is fetched the same way, but not parsed
        (a stylesheet for its own requisites only) and never judged a soft
        404 (an image is no page)."""
        url = str(item["url"])
        clock, started = _start()
        kind = item_kind(item)
        row = base_row(item, kind, url, ip, started)
        row["robots_decision"] = robots
        resp = self._get(url, ip, row, (clock, started), self._conditional_headers(item))
        if resp is None:
            return Visit(row, self.cfg.http.read_timeout_s, failed=True)
        outcome = outcome_for_http(resp.status)
        row.update(response_fields(resp, outcome))
        page: ParsedPage | None = None
        if outcome is FetchOutcome.SUCCESS:
            before = item.get("content_sha256")
            row["changed"] = None if not before else row["content_sha256"] != before
            if kind == "requisite":
                row.update(requisite_fields(url, resp, self.cfg))
            elif item.get("is_sitemap"):
                row.update(self._sitemap_fields(url, resp))
            else:
                page = parse_page(
                    resp.body,
                    resp.header("content-type"),
                    resp.headers,
                    self.agent,
                    max_links=self.cfg.fetch.max_outlinks_per_page,
                    requisites=self.cfg.requisites.capture,
                )
                row.update(page_fields(url, page, self.cfg))
        elif outcome is FetchOutcome.NOTMODIFIED:
            row["changed"] = False  # RFC 9110 15.4.5: the stored copy is current
        elif outcome in (FetchOutcome.REDIR_PERM, FetchOutcome.REDIR_TEMP):
            row["redirect_to"] = absolute(url, resp.header("location"), self.cfg)
        if kind == "page":
            outcome = self._soft404(row, outcome, not_found, page)
        # Archived once the outcome is known (the body is read in full by now):
        # a soft 404 goes with the 404s to crawldiagnostics, not with the pages.
        fields, capture = self.archive.exchange(url, resp, started, subset_for(outcome), item)
        row.update(fields)
        if capture is not None and outcome in (FetchOutcome.SUCCESS, FetchOutcome.NOTMODIFIED):
            self.archive.metadata(url, started, row, capture)
        return _answered(row, resp, outcome, started)

    def _soft404(
        self, row: Row, outcome: FetchOutcome, known: ProbeAnswer | None, page: ParsedPage | None
    ) -> FetchOutcome:
        """A page's outcome after comparing it with its host's soft-404 probe
        (``trawl.dedup.soft404``): SOFT404 for a 2xx that is the not-found page or a
        redirect to where the probe was sent, else ``outcome``; the root is
        never one. Sets ``soft404`` when compared."""
        if known is None or is_site_root(row["url"]) or not known.compares(row):
            return outcome
        text = page.main_text if page is not None and page.is_html else None
        why = known.judge(row, text, self.cfg.dedup, self.cfg.traps.soft404_max_distance)
        row["soft404"] = why is not None
        if why is None:
            return outcome
        # A soft 404's links and redirect target are not the site's: none is followed.
        row.update(outcome=FetchOutcome.SOFT404.value, error=why, outlinks=None, redirect_to=None)
        return FetchOutcome.SOFT404

    # -- the soft-404 probe ----------------------------------------------------

    def visit_probe(self, item: Mapping[str, Any], ip: str, url: str) -> Visit:
        """Ask the item's host for ``url``, a path that cannot exist
        (``trawl.dedup.soft404.probe_url``): a ``probe`` row with the answer's status,
        sha256 and simhash, the simhash without the echo of the probe's path
        (``echo_free_simhash``: what hostdb keeps to compare pages with).
        Archived with the diagnostics (it is no page of the site); its links
        and any redirect target are not recorded, so nothing of it reaches
        crawldb (hostdb reads the target from its Location header)."""
        clock, started = _start()
        row = base_row(item, "probe", url, ip, started)
        resp = self._get(url, ip, row, (clock, started))
        if resp is None:
            return Visit(row, self.cfg.http.read_timeout_s, failed=True)
        outcome = outcome_for_http(resp.status)
        row.update(response_fields(resp, outcome))
        if outcome is FetchOutcome.SUCCESS:
            page = parse_page(resp.body, resp.header("content-type"), resp.headers, self.agent)
            row.update(
                fingerprint_fields(page, self.cfg), title=page.title[:500] if page.title else None
            )
            if page.is_html:
                row["simhash"] = echo_free_simhash(page.main_text, url, self.cfg.dedup)
        row.update(self.archive.exchange(url, resp, started, "crawldiagnostics")[0])
        return _answered(row, resp, outcome, started)

    def _get(
        self,
        url: str,
        ip: str,
        row: Row,
        start: tuple[float, datetime],
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse | None:
        """The response, or None when none came (the row then says why, and a
        metadata record in crawldiagnostics keeps the failure)."""
        clock, started = start
        try:
            return self.client.get(url, ip, headers, not_after=self.not_after, started=clock)
        except FetchError as exc:
            elapsed = time.monotonic() - clock
            row.update(
                outcome=FetchOutcome.RETRY.value, error=f"{exc.kind}: {exc}", elapsed_s=elapsed
            )
            self.archive.failure(url, ip, started, row)
            return None

    def _conditional_headers(self, item: Mapping[str, Any]) -> dict[str, str]:
        """Validators of the stored copy (none without one: a 304 must have a
        copy to refer to). RFC 9110 13.2.2: the server evaluates If-None-Match
        first and ignores If-Modified-Since when it is present; both are sent."""
        headers: dict[str, str] = {}
        if not item.get("content_sha256"):
            return headers
        if item.get("etag"):
            headers["If-None-Match"] = str(item["etag"])
        if item.get("last_modified"):
            headers["If-Modified-Since"] = str(item["last_modified"])
        return headers

    def _sitemap_links(self, urls: list[str]) -> list[Row]:
        """robots.txt ``Sitemap:`` lines as links to sitemaps (RFC 9309 2.2.4)."""
        links = []
        for raw in urls:
            url = absolute(raw, raw, self.cfg)
            if url:
                links.append(
                    {
                        "url": url,
                        "anchor": None,
                        "nofollow": False,
                        "sitemap": True,
                        "lastmod": None,
                    }
                )
        return links

    def _sitemap_fields(self, url: str, resp: HttpResponse) -> Row:
        """A sitemap's entries as outlinks (with their <lastmod>); an index's
        entries are sitemaps themselves. Parse problems go to ``error``."""
        # The host's sitemaps may list any URL of the host (as robots.txt-listed
        # ones may, sitemaps.org "cross submits"); other hosts' are rejected.
        body = resp.raw_body if _is_gzip(resp.raw_body) else resp.body
        sitemap = parse_sitemap(body, url, scope_url=robots_url_for(url))
        nested = sitemap.kind == "index"
        outlinks = [
            {"url": e.url, "anchor": None, "nofollow": False, "sitemap": nested,
             "lastmod": e.lastmod}
            for e in sitemap.entries
        ]  # fmt: skip
        problems = list(sitemap.errors)
        if sitemap.truncated:
            problems.append(f"truncated at {sitemap.truncated}")
        problems += [f"{n} {why}" for why, n in sorted(sitemap.rejected.items())]
        return {
            "outlinks": outlinks,
            "title": f"sitemap ({sitemap.kind}, {len(outlinks)} entries)",
            "error": ("sitemap: " + "; ".join(problems))[:1000] if problems else None,
        }
