"""Tests for soft-404 detection: trawl.dedup.soft404, and the probe in trawl.fetch.task.

A small threaded server on 127.0.0.1 plays a handful of virtual hosts (told
apart by the Host header, pinned by ``dns.hosts_file``): hosts that answer
every unknown path with 200 and one "page not found" page (byte-identical, or
with a per-request footer outside the main text, or echoing the path asked
for), one that answers 404, 503 or a redirect home to its probe (and to its
missing pages), one that serves its home page for everything, and one whose
robots.txt disallows the probe's path. One fetch task crawls them all; its
rows, the server's own request log and the WARC files are checked. The test
web's own soft-404 hosts (``trawl.testweb.traps``) are crawled too.
"""

from __future__ import annotations

import hashlib
import html as markup
import itertools
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawl.config import Config, load_config
from trawl.crawldb.hoststate import merge_host
from trawl.dedup.fingerprint import page_fingerprint, words
from trawl.dedup.simhash import hamming, to_signed
from trawl.dedup.soft404 import (
    EMPTY_SHA256,
    PROBE_SUFFIX,
    ProbeAnswer,
    echo_free_simhash,
    echoes,
    from_hints,
    from_probe,
    is_site_root,
    location_of,
    probe_counters,
    probe_url,
    redirect_target,
    without_echoes,
)
from trawl.fetch.rules import probe_due
from trawl.fetch.task import run_fetch_task
from trawl.parse.html import parse_page
from trawl.testweb import TestWeb, WebModel, traps
from trawl.url.keys import host_bucket, url_fingerprint
from trawl.url.normalize import normalize

MIN_GAP = 0.05
TOLERANCE = 0.005  # the server's clock readings against the scheduler's
SEGMENT = "seg1"
Answer = tuple[int, dict[str, str], bytes]

NOT_FOUND_TEXT = (
    "We are sorry, but the page you were looking for could not be found. It may have been "
    "moved, renamed or deleted, or perhaps it never existed at all. Please check the address "
    "for typing mistakes, use the search box above, or start again from our home page, where "
    "the latest news and the most popular stories are always waiting for you."
)


def not_found_page(footer: str = "") -> bytes:
    """The sites' error page: with links (none may be followed) and, when the
    site stamps each answer, a footer outside the main text."""
    return (
        "<html><head><title>Page not found</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/search'>Search</a></nav>"
        f"<main><h1>Page not found</h1><p>{NOT_FOUND_TEXT}</p>"
        "<p><a href='/popular'>The most popular stories</a></p></main>"
        f"<footer>Request {footer}</footer></body></html>"
    ).encode()


def article(seed: str, links: tuple[str, ...] = ()) -> bytes:
    """A page of its own: 120 made-up words no other page shares."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("bcdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3))
        for _ in range(120)
    ]
    anchors = "".join(f"<a href='{href}'>{href}</a> " for href in links)
    return (
        f"<html><head><title>{seed}</title></head><body><main><article><h1>{seed}</h1>"
        f"<p>{' '.join(words)}</p><p>{anchors}</p></article></main></body></html>"
    ).encode()


def html(body: bytes, status: int = 200) -> Answer:
    return status, {"Content-Type": "text/html; charset=utf-8"}, body


def text(body: str, status: int = 200) -> Answer:
    return status, {"Content-Type": "text/plain"}, body.encode()


HOME = article("home", ("/a", "/b"))
NOT_FOUND = not_found_page()
ROBOTS = "User-agent: *\nDisallow: /private/\n"


@dataclass
class Site:
    pages: dict[str, Answer]
    unknown: Callable[[str], Answer]  # what any other path gets
    robots: str | None = ROBOTS  # None: robots.txt is a 404


def soft(path: str) -> Answer:
    return html(NOT_FOUND)


def stamped(path: str) -> Answer:
    return html(not_found_page(hashlib.sha256(path.encode()).hexdigest()[:12]))


def echoing_page(path: str) -> bytes:
    """A short error page that names the path three times (Apache's "The
    requested URL ... was not found" and its kin): enough to move its simhash
    far past ``traps.soft404_max_distance`` from one path to the next."""
    said = markup.escape(path)
    return (
        f"<html><head><title>Not found: {said}</title></head><body>"
        "<nav><a href='/'>Home</a></nav>"
        f"<main><h1>Not found: {said}</h1><p>Sorry, there is no page at {said} on this site. "
        "The link you followed may be broken, or the page may have been removed. "
        f"Check the spelling of {said}, try the search box, or return to the home page "
        "and browse the sections from there.</p><p><a href='/popular'>Popular</a></p></main>"
        "</body></html>"
    ).encode()


def redirect(location: str, status: int = 302) -> Answer:
    return status, {"Location": location, "Content-Type": "text/plain"}, b""


SITES: dict[str, Site] = {
    "soft.test": Site({"/": html(HOME), "/a": html(article("a")), "/b": html(article("b"))}, soft),
    "echo.test": Site({"/a": html(article("echo a"))}, stamped, robots=None),
    "hard.test": Site(
        {"/a": html(article("hard a")), "/notice": html(NOT_FOUND)},
        lambda path: html(NOT_FOUND, 404),
    ),
    "fresh.test": Site({"/a": html(article("fresh a"))}, soft),
    "stale.test": Site({"/a": html(article("stale a"))}, soft),
    "denied.test": Site(
        {"/p/a": html(article("denied a"))}, soft, robots="User-agent: *\nAllow: /p/\nDisallow: /\n"
    ),
    "flaky.test": Site(
        {"/a": html(article("flaky a"))},
        lambda path: text("busy", 503) if path.endswith(PROBE_SUFFIX) else html(NOT_FOUND),
    ),
    "path.test": Site(
        {
            "/a": html(article("path a")),
            # a real page that names its own address, as an error page would
            "/notes/b": html(article("You are reading /notes/b, a page of its own")),
        },
        lambda path: html(echoing_page(path)),
    ),
    "redir.test": Site(
        {
            "/": html(article("redir home")),
            "/a": html(article("redir a")),
            "/moved": redirect("/a", 301),  # a real redirect, elsewhere than home
        },
        lambda path: redirect("/"),
    ),
    "redir-fresh.test": Site({"/a": html(article("redir fresh a"))}, lambda path: redirect("/")),
    "home.test": Site({"/": html(HOME)}, lambda path: html(HOME)),
}
PATHS = {
    "soft.test": ["/", "/a", "/b", "/old-news"],
    "echo.test": ["/a", "/moved"],
    "hard.test": ["/a", "/notice"],
    "fresh.test": ["/a", "/gone"],
    "stale.test": ["/a", "/gone"],
    "denied.test": ["/p/a", "/p/gone"],
    "flaky.test": ["/a", "/gone"],
    "path.test": ["/a", "/notes/b", "/old/news-12", "/contact"],
    "redir.test": ["/", "/a", "/gone", "/moved"],
    "redir-fresh.test": ["/a", "/gone"],
    "home.test": ["/", "/x"],
}


class _Sites(BaseHTTPRequestHandler):
    log: list[dict[str, Any]]
    lock: threading.Lock

    def do_GET(self) -> None:
        start = time.time()
        host = (self.headers.get("Host") or "").split(":")[0]
        site = SITES[host]
        if self.path == "/robots.txt":
            answer = text(site.robots) if site.robots is not None else text("no", 404)
        else:
            answer = site.pages.get(self.path) or site.unknown(self.path)
        status, headers, body = answer
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            with self.lock:
                self.log.append(
                    {"host": host, "path": self.path, "status": status, "start": start,
                     "end": time.time()}
                )  # fmt: skip

    def log_message(self, format: str, *args: Any) -> None:
        pass


class FetchRow(dict[str, Any]):
    """A fetch row as the table holds it: a column the task left out is null
    (the fetch stage writes ``record.get(name)`` for every column)."""

    def __missing__(self, key: str) -> None:
        return None


@dataclass
class Crawl:
    rows: list[FetchRow]
    log: list[dict[str, Any]]  # the server's requests, in the order they began
    port: int
    warc_dir: Path | None

    def origin(self, host: str) -> str:
        return f"http://{host}:{self.port}"

    def page(self, host: str, path: str) -> dict[str, Any]:
        url = normalize(self.origin(host) + path)
        (row,) = [r for r in self.rows if r["kind"] == "page" and r["url"] == url]
        return row

    def probes(self, host: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == "probe" and r["host"] == host]

    def requests(self, host: str) -> list[dict[str, Any]]:
        return [r for r in self.log if r["host"] == host]


def fingerprint(body: bytes) -> int | None:
    """The simhash the fetcher gives a body (hostdb's soft404_simhash too,
    for a body that does not echo its path)."""
    page = parse_page(body, "text/html", [], "trawl")
    value = page_fingerprint(page.main_text, load_config(None, [], environ={}).dedup).simhash
    return None if value is None else to_signed(value)


def hints(status: int | None, body: bytes | None, age: timedelta) -> dict[str, Any]:
    """hostdb's memory of a probe ``age`` ago, as the fetch list carries it."""
    return {
        "soft404_status": status,
        "soft404_sha256": hashlib.sha256(body).hexdigest() if body else None,
        "soft404_simhash": fingerprint(body) if body else None,
        "soft404_probed_at": datetime.now(UTC) - age,
    }


HINTS = {
    "fresh.test": hints(200, NOT_FOUND, timedelta(days=1)),
    # 40 days (more than traps.soft404_reprobe_s): asked again; what it says
    # (a 404, so nothing to compare) must give way to the new answer.
    "stale.test": hints(404, None, timedelta(days=40)),
    # stale, and the probe will fail: this answer stays in force.
    "flaky.test": hints(200, NOT_FOUND, timedelta(days=40)),
    # redirected home a day ago (the path is made absolute with the port, in items())
    "redir-fresh.test": {**hints(302, None, timedelta(days=1)), "soft404_location": "/"},
}


def items(port: int, hosts: list[str]) -> list[dict[str, Any]]:
    out = []
    for host in hosts:
        for path in PATHS[host]:
            url = normalize(f"http://{host}:{port}{path}")
            item: dict[str, Any] = {
                "url": url, "url_fp": url_fingerprint(url), "host": host,
                "host_bucket": host_bucket(host, 8), "task": 0, "depth": 1,
                "etag": None, "last_modified": None, "delay_s": None, "crawl_delay_s": None,
                "robots_url": None, "robots_status": None, "robots_http_status": None,
                "robots_body": None, "robots_fetched_at": None,
            }  # fmt: skip
            item.update(HINTS.get(host, {}))
            if item.get("soft404_location"):
                item["soft404_location"] = f"http://{host}:{port}{item['soft404_location']}"
            out.append(item)
    return out


def crawl_sites(tmp: Path, hosts: list[str], *extra: str, warc: bool = True) -> Crawl:
    log: list[dict[str, Any]] = []
    handler = type("Handler", (_Sites,), {"log": log, "lock": threading.Lock()})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        port = int(httpd.server_address[1])
        hosts_file = tmp / "hosts"
        hosts_file.write_text("127.0.0.1 " + " ".join(SITES) + "\n")
        cfg = config(hosts_file, *extra)
        warc_dir = tmp / "warc" if warc else None
        found = run_fetch_task(items(port, hosts), cfg, SEGMENT, 0, str(warc_dir or ""), 60)
        rows = [FetchRow(r) for r in found]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
    return Crawl(rows, sorted(log, key=lambda r: r["start"]), port, warc_dir)


def config(hosts_file: Path, *extra: str) -> Config:
    overrides = [
        f"dns.hosts_file={hosts_file}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        f"politeness.min_delay_s={MIN_GAP}",
        "fetch.threads_per_task=4",
    ]
    return load_config(None, [*overrides, *extra], environ={})


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    return crawl_sites(tmp_path_factory.mktemp("soft404"), list(SITES))


PROBE_PATH = re.compile(r"^/[0-9a-f]{24}" + re.escape(PROBE_SUFFIX) + "$")


# --- the probe: once per host, after robots.txt, before the first page, politely ---------------
def test_a_host_is_probed_once_after_robots_and_before_its_first_page(crawl: Crawl) -> None:
    log = crawl.requests("soft.test")
    paths = [r["path"] for r in log]
    assert paths[0] == "/robots.txt"
    assert PROBE_PATH.match(paths[1]), paths
    assert sorted(paths[2:]) == sorted(PATHS["soft.test"])  # then each page once
    (probe,) = crawl.probes("soft.test")
    assert probe["url"] == probe_url(crawl.origin("soft.test"), SEGMENT)
    assert probe["url"] == crawl.origin("soft.test") + paths[1]
    # one request in flight per host, and the politeness gap after each (the probe's too)
    for before, after in itertools.pairwise(log):
        assert after["start"] - before["end"] >= MIN_GAP - TOLERANCE, (before, after)
    assert probe["delay_s"] >= MIN_GAP
    # so for every host that was probed: one probe, between robots.txt and the pages
    for host in SITES:
        asked = crawl.requests(host)
        probes = [i for i, r in enumerate(asked) if r["path"].endswith(PROBE_SUFFIX)]
        assert len(probes) <= 1, host
        if probes:
            assert [r["path"] for r in asked[: probes[0]]] == ["/robots.txt"], host
            assert len(crawl.probes(host)) == 1


def test_the_probe_row_has_the_answer_and_nothing_that_could_become_a_link(crawl: Crawl) -> None:
    (probe,) = crawl.probes("soft.test")
    assert (probe["outcome"], probe["http_status"]) == ("success", 200)
    assert probe["content_sha256"] == hashlib.sha256(NOT_FOUND).hexdigest()
    assert probe["simhash"] == fingerprint(NOT_FOUND) is not None
    assert probe["title"] == "Page not found"
    # not a crawldb URL (updatedb merges kind "page" only), and no links of it are followed
    assert (probe["url_fp"], probe.get("outlinks"), probe.get("redirect_to")) == (None, None, None)
    (redirected,) = crawl.probes("redir.test")
    assert (redirected["outcome"], redirected["http_status"]) == ("redir_temp", 302)
    assert redirected.get("redirect_to") is None  # the target is not a link either...
    home = crawl.origin("redir.test") + "/"
    answer = from_probe(redirected)
    assert answer is not None and location_of(redirected) == home == answer.location  # ...known


# --- pages compared with the probe's answer -------------------------------------------------------
def test_real_pages_are_fetched_as_usual(crawl: Crawl) -> None:
    for path, compared in (("/", None), ("/a", False), ("/b", False)):  # the root is never
        row = crawl.page("soft.test", path)
        assert (row["outcome"], row["soft404"], row["error"]) == ("success", compared, None)
    home = crawl.page("soft.test", "/")
    assert {o["url"] for o in home["outlinks"]} == {
        crawl.origin("soft.test") + "/a",
        crawl.origin("soft.test") + "/b",
    }


def test_a_page_serving_the_not_found_page_is_a_soft404_without_outlinks(crawl: Crawl) -> None:
    row = crawl.page("soft.test", "/old-news")
    assert (row["outcome"], row["http_status"], row["soft404"]) == ("soft404", 200, True)
    assert row["error"] == "soft404: distance 0 (same sha256 as the probe)"
    assert row["outlinks"] is None  # the error page's links are not the site's
    assert row["content_sha256"] == hashlib.sha256(NOT_FOUND).hexdigest()


def test_a_stamped_not_found_page_is_caught_by_its_simhash(crawl: Crawl) -> None:
    (probe,) = crawl.probes("echo.test")
    row = crawl.page("echo.test", "/moved")
    assert row["content_sha256"] != probe["content_sha256"]  # the footer differs...
    assert row["simhash"] == probe["simhash"] is not None  # ...the main text does not
    assert (row["outcome"], row["soft404"], row["outlinks"]) == ("soft404", True, None)
    assert row["error"].startswith("soft404: distance 0 (simhash within 3")
    assert crawl.page("echo.test", "/a")["outcome"] == "success"


def test_the_root_of_a_host_serving_its_home_page_everywhere_is_not_a_soft404(
    crawl: Crawl,
) -> None:
    (probe,) = crawl.probes("home.test")
    assert probe["content_sha256"] == hashlib.sha256(HOME).hexdigest()
    root = crawl.page("home.test", "/")
    assert (root["outcome"], root["soft404"]) == ("success", None)  # not compared
    assert root["outlinks"]
    assert crawl.page("home.test", "/x")["outcome"] == "soft404"


def test_a_host_answering_404_to_the_probe_flags_nothing(crawl: Crawl) -> None:
    (probe,) = crawl.probes("hard.test")
    assert (probe["outcome"], probe["http_status"]) == ("gone", 404)
    # the same body as its 404 page, but answered 200: a page, not compared
    notice = crawl.page("hard.test", "/notice")
    assert notice["content_sha256"] == hashlib.sha256(NOT_FOUND).hexdigest()
    assert (notice["outcome"], notice["soft404"]) == ("success", None)
    assert notice["outlinks"]
    for path in PATHS["hard.test"]:
        assert crawl.page("hard.test", path)["soft404"] is None


def test_a_not_found_page_echoing_the_path_is_caught_without_the_path(crawl: Crawl) -> None:
    (probe,) = crawl.probes("path.test")
    for path in ("/old/news-12", "/contact"):
        row = crawl.page("path.test", path)
        # the echo moves the page's simhash far from the probe's (which is echo-free)...
        echoed = fingerprint(echoing_page(urlsplit(probe["url"]).path))
        assert echoed is not None and hamming(row["simhash"], echoed) > 3
        assert hamming(row["simhash"], probe["simhash"]) > 3
        # ...without it, it is the same page
        assert (row["outcome"], row["soft404"], row["outlinks"]) == ("soft404", True, None)
        assert (
            row["error"] == "soft404: distance 0 (simhash without the path within 3 of the probe)"
        )
    for path in ("/a", "/notes/b"):  # real pages, one naming its own path, stay pages
        row = crawl.page("path.test", path)
        assert (row["outcome"], row["soft404"], row["error"]) == ("success", False, None)


def test_missing_pages_redirected_home_are_soft404s_and_not_followed(crawl: Crawl) -> None:
    gone = crawl.page("redir.test", "/gone")
    assert (gone["outcome"], gone["http_status"], gone["soft404"]) == ("soft404", 302, True)
    home = crawl.origin("redir.test") + "/"
    assert gone["error"] == f"soft404: redirect to {home} (where the probe was sent)"
    assert gone["redirect_to"] is None  # no link for updatedb, nothing followed
    # a real redirect elsewhere stays a redirect; the root and 2xx pages are not compared
    moved = crawl.page("redir.test", "/moved")
    assert (moved["outcome"], moved["soft404"]) == ("redir_perm", False)
    assert moved["redirect_to"] == crawl.origin("redir.test") + "/a"
    for path in ("/", "/a"):
        row = crawl.page("redir.test", path)
        assert (row["outcome"], row["soft404"]) == ("success", None)
    asked = [r["path"] for r in crawl.requests("redir.test")]
    assert sorted(p for p in asked if not p.endswith(PROBE_SUFFIX)) == [
        "/",
        "/a",
        "/gone",
        "/moved",
        "/robots.txt",
    ]  # fmt: skip: each once, the targets not again


def test_a_remembered_redirect_home_is_compared_without_a_new_probe(crawl: Crawl) -> None:
    assert crawl.probes("redir-fresh.test") == []
    gone = crawl.page("redir-fresh.test", "/gone")
    assert (gone["outcome"], gone["redirect_to"]) == ("soft404", None)
    assert crawl.page("redir-fresh.test", "/a")["outcome"] == "success"


def test_the_probes_redirect_is_kept_in_hostdb_for_later_segments(crawl: Crawl) -> None:
    (probe,) = crawl.probes("redir.test")
    at = datetime(2024, 5, 2, tzinfo=UTC)
    base = {"host_bucket": 0, "domain": "redir.test"}
    hostdb = merge_host(None, "redir.test", [probe], None, at, SEGMENT, base, probe=probe)
    home = crawl.origin("redir.test") + "/"
    assert (hostdb["soft404_status"], hostdb["soft404_location"]) == (302, home)
    remembered = from_hints(hostdb)
    assert remembered == from_probe(probe) and remembered is not None
    assert remembered.redirect_verdict(home) is not None
    # a later probe answering 404 forgets the redirect
    later = {**probe, "outcome": "gone", "http_status": 404, "headers": [],
             "fetched_at": probe["fetched_at"] + timedelta(days=31)}  # fmt: skip
    hard = merge_host(hostdb, "redir.test", [later], None, at, "seg2", base, probe=later)
    assert (hard["soft404_status"], hard["soft404_location"]) == (404, None)


# --- what hostdb knew ----------------------------------------------------------------------------
def test_a_host_with_a_fresh_probe_in_the_hints_is_not_probed_again(crawl: Crawl) -> None:
    assert crawl.requests("fresh.test")[0]["path"] == "/robots.txt"
    assert not [r for r in crawl.requests("fresh.test") if r["path"].endswith(PROBE_SUFFIX)]
    assert crawl.probes("fresh.test") == []
    # the remembered answer is compared with all the same
    assert crawl.page("fresh.test", "/gone")["outcome"] == "soft404"
    assert crawl.page("fresh.test", "/a")["soft404"] is False


def test_a_stale_probe_is_asked_again_and_the_new_answer_governs(crawl: Crawl) -> None:
    (probe,) = crawl.probes("stale.test")
    assert probe["http_status"] == 200
    # the old answer (a 404: nothing to compare) gave way to this one
    assert crawl.page("stale.test", "/gone")["outcome"] == "soft404"


def test_robots_disallowing_the_probe_path_means_no_probe(crawl: Crawl) -> None:
    asked = [r["path"] for r in crawl.requests("denied.test")]
    assert asked[0] == "/robots.txt" and sorted(asked[1:]) == sorted(PATHS["denied.test"])
    (skipped,) = crawl.probes("denied.test")
    assert (skipped["outcome"], skipped["error"]) == ("robots_denied", "probe: robots_denied")
    assert skipped["http_status"] is None
    assert skipped["url"] == probe_url(crawl.origin("denied.test"), SEGMENT)
    # nothing known to compare with: the not-found page passes as a page this time
    gone = crawl.page("denied.test", "/p/gone")
    assert (gone["outcome"], gone["soft404"]) == ("success", None)


def test_a_failed_probe_teaches_nothing_and_the_last_answer_stays(crawl: Crawl) -> None:
    (probe,) = crawl.probes("flaky.test")
    assert (probe["outcome"], probe["http_status"]) == ("retry", 503)
    assert from_probe(probe) is None  # hostdb keeps its answer; the next segment asks again
    assert crawl.page("flaky.test", "/gone")["outcome"] == "soft404"
    assert crawl.page("flaky.test", "/a")["outcome"] == "success"


# --- archive -------------------------------------------------------------------------------------
def test_probes_and_soft404s_are_archived_with_the_diagnostics(crawl: Crawl) -> None:
    assert crawl.warc_dir is not None
    uris: dict[str, set[str]] = {}
    for path in crawl.warc_dir.glob("*.warc.gz"):
        subset = next((s for s in ("robotstxt", "crawldiagnostics") if s in path.name), "warc")
        with path.open("rb") as fh:
            uris[subset] = {
                str(r.rec_headers.get_header("WARC-Target-URI"))
                for r in ArchiveIterator(fh)
                if r.rec_type == "response"
            }
    probes = {r["url"] for r in crawl.rows if r["kind"] == "probe" and r["http_status"]}
    soft404s = {r["url"] for r in crawl.rows if r["kind"] == "page" and r["outcome"] == "soft404"}
    assert len(probes) == 8 and len(soft404s) == 10
    assert probes | soft404s <= uris["crawldiagnostics"]
    assert not (probes | soft404s) & (uris["warc"] | uris["robotstxt"])
    assert crawl.page("soft.test", "/a")["url"] in uris["warc"]


def test_the_crawls_probe_counters(crawl: Crawl) -> None:
    groups: dict[tuple[int | None, str | None], int] = {}
    for r in crawl.rows:
        if r["kind"] == "probe":
            key = (r["http_status"], r.get("error"))
            groups[key] = groups.get(key, 0) + 1
    flagged = sum(1 for r in crawl.rows if r.get("soft404"))
    counters = dict(probe_counters([(s, e, n) for (s, e), n in groups.items()], flagged))
    assert counters == {
        "fetch/probe/status/200": 5,  # soft, echo, stale, home, path
        "fetch/probe/status/302": 1,
        "fetch/probe/status/404": 1,
        "fetch/probe/status/503": 1,
        "fetch/probe/why/robots_denied": 1,
        "fetch/soft404": 10,
    }


def test_switched_off_there_is_no_probe_and_no_comparison(tmp_path: Path) -> None:
    off = crawl_sites(tmp_path, ["soft.test", "fresh.test"], "traps.soft404_probe=false",
                      warc=False)  # fmt: skip
    assert not [r for r in off.log if r["path"].endswith(PROBE_SUFFIX)]
    assert [r for r in off.rows if r["kind"] == "probe"] == []
    for host, path in (("soft.test", "/old-news"), ("fresh.test", "/gone")):
        row = off.page(host, path)
        assert (row["outcome"], row["soft404"]) == ("success", None)
        assert row["outlinks"]


# --- the pure parts ------------------------------------------------------------------------------
def test_probe_url_is_a_path_no_site_has_and_the_same_on_a_rerun() -> None:
    url = probe_url("http://example.com:8080", "seg7")
    assert url.startswith("http://example.com:8080/")
    assert PROBE_PATH.match(url.removeprefix("http://example.com:8080"))
    assert probe_url("http://example.com:8080", "seg7") == url  # a rerun asks the same
    assert probe_url("http://example.com:8080", "seg8") != url
    assert probe_url("https://example.com", "seg7") != probe_url("http://example.com", "seg7")


NF = ProbeAnswer(200, "nf", 0b1111, datetime(2024, 5, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    ("sha256", "simhash", "expected"),
    [
        ("nf", None, "soft404: distance 0 (same sha256 as the probe)"),
        ("other", 0b1111, "soft404: distance 0 (simhash within 3 of the probe)"),
        ("other", 0b0001, "soft404: distance 3 (simhash within 3 of the probe)"),
        ("other", 0b0000, None),  # 4 bits away
        ("other", 0b1111 | (1 << 63), "soft404: distance 1 (simhash within 3 of the probe)"),
        ("other", None, None),
        (None, 0b1111 - (1 << 64), "soft404: distance 0 (simhash within 3 of the probe)"),
    ],
)
def test_verdict_by_sha256_or_simhash_distance(
    sha256: str | None, simhash: int | None, expected: str | None
) -> None:
    assert NF.verdict(sha256, simhash, 3) == expected


@pytest.mark.parametrize(
    ("simhash", "echo_free", "expected"),
    [
        (0b0000, 0b1111, "soft404: distance 0 (simhash without the path within 3 of the probe)"),
        (0b0000, 0b0111, "soft404: distance 1 (simhash without the path within 3 of the probe)"),
        (0b0111, 0b0111, "soft404: distance 1 (simhash within 3 of the probe)"),  # a tie
        (0b1111, 0b0000, "soft404: distance 0 (simhash within 3 of the probe)"),  # the closer
        (None, 0b1110, "soft404: distance 1 (simhash without the path within 3 of the probe)"),
        (0b0000, 0b0000, None),
        (None, None, None),
    ],
)
def test_verdict_takes_the_closer_of_the_plain_and_the_echo_free_simhash(
    simhash: int | None, echo_free: int | None, expected: str | None
) -> None:
    assert NF.verdict("other", simhash, 3, echo_free) == expected


@pytest.mark.parametrize(
    "answer",
    [
        ProbeAnswer(404, None, None, None),  # a real 404
        ProbeAnswer(404, "nf", 0b1111, None),  # whatever body it had
        ProbeAnswer(302, None, None, None),
        ProbeAnswer(200, EMPTY_SHA256, None, None),  # 200 without a body
        ProbeAnswer(200, None, 0b1111, None),
        ProbeAnswer(None, "nf", 0b1111, None),
    ],
)
def test_no_comparison_without_a_2xx_with_a_body(answer: ProbeAnswer) -> None:
    assert not answer.comparable
    assert answer.verdict("nf", 0b1111, 63) is None
    assert answer.verdict(EMPTY_SHA256, None, 63) is None


def test_hints_and_probe_rows_as_answers() -> None:
    at = datetime(2024, 5, 1, tzinfo=UTC)
    assert from_hints({"soft404_status": 200}) is None  # never probed
    hinted = {"soft404_status": 200, "soft404_sha256": "nf", "soft404_simhash": 5,
              "soft404_probed_at": at}  # fmt: skip
    assert from_hints(hinted) == ProbeAnswer(200, "nf", 5, at)
    row = {"outcome": "success", "http_status": 200, "content_sha256": "nf", "simhash": 5,
           "fetched_at": at}  # fmt: skip
    assert from_probe(row) == ProbeAnswer(200, "nf", 5, at)
    assert from_probe({**row, "outcome": "gone", "http_status": 410}) == ProbeAnswer(
        410, None, None, at
    )
    moved = {**row, "outcome": "redir_temp", "http_status": 302, "url": "http://h.test/x-probe",
             "headers": [["Content-Type", "text/plain"], ["location", " /?from=x "]]}  # fmt: skip
    assert from_probe(moved) == ProbeAnswer(302, None, None, at, "http://h.test/?from=x")
    assert from_hints({**hinted, "soft404_location": "http://h.test/"}) == ProbeAnswer(
        200, "nf", 5, at, "http://h.test/"
    )
    # no usable Location: a redirect, but nothing to compare with
    unusable = from_probe({**moved, "headers": [["Location", "http://[::1"]]})
    assert unusable is not None and unusable.location is None
    assert from_probe({**moved, "headers": []}) == ProbeAnswer(302, None, None, at)
    assert from_probe({**row, "outcome": "retry", "http_status": 503}) is None
    assert from_probe({**row, "outcome": "retry", "http_status": None}) is None
    assert from_probe({**row, "outcome": "robots_denied", "http_status": None}) is None


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://example.com/", True),
        ("http://example.com:8080/", True),
        ("http://example.com", True),
        ("http://example.com/?p=7", False),
        ("http://example.com/a", False),
        ("http://example.com/index.html", False),
    ],
)
def test_is_site_root(url: str, root: bool) -> None:
    assert is_site_root(url) is root


NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("probed_at", "overrides", "due"),
    [
        (None, (), True),  # never probed
        (NOW - timedelta(days=29), (), False),  # the default: again after 30 days
        (NOW - timedelta(days=31), (), True),
        (NOW.replace(tzinfo=None) - timedelta(days=31), (), True),  # naive, as Spark gives it
        (NOW - timedelta(hours=2), ("traps.soft404_reprobe_s=3600",), True),
        (None, ("traps.soft404_probe=false",), False),
    ],
)
def test_probe_due(probed_at: datetime | None, overrides: tuple[str, ...], due: bool) -> None:
    cfg = load_config(None, list(overrides), environ={})
    known = None if probed_at is None else ProbeAnswer(404, None, None, probed_at)
    assert probe_due(known, cfg, NOW) is due


def test_probe_counters_name_answers_and_reasons() -> None:
    groups = [
        (200, None, 3),
        (404, None, 2),
        (503, None, 1),
        (None, "timeout: read timed out", 2),
        (None, "probe: robots_denied", 1),
        (None, "probe: crawl_delay_over_cap", 1),
    ]
    assert probe_counters(groups, 4) == [
        ("fetch/probe/status/200", 3),
        ("fetch/probe/status/404", 2),
        ("fetch/probe/status/503", 1),
        ("fetch/probe/why/crawl_delay_over_cap", 1),
        ("fetch/probe/why/robots_denied", 1),
        ("fetch/probe/why/timeout", 2),
        ("fetch/soft404", 4),
    ]
    assert probe_counters([], 0) == [("fetch/soft404", 0)]


# --- path echoes and redirects home, the pure parts ----------------------------------------------
@pytest.mark.parametrize(
    ("url", "runs"),
    [
        ("http://h.test/", []),
        ("http://h.test/contact", [("contact",)]),
        ("http://h.test/news/6", [("news", "0")]),  # numbers as the fingerprint masks them
        (
            "http://h.test/2024/how-to-fix-a-bike?page=2",
            [
                ("0", "how", "to", "fix", "a", "bike", "page", "0"),
                ("0", "how", "to", "fix", "a", "bike"),
                ("how", "to", "fix", "a", "bike"),
            ],
        ),
        ("http://h.test/caf%C3%A9/menu", [("caf", "c0", "a0", "menu"), ("café", "menu")]),
        (
            "http://h.test/0123456789abcdef01234567-trawl-probe",
            [("0abcdef0", "trawl", "probe")],
        ),
    ],
)
def test_echoes_are_the_runs_of_words_spelling_the_path(
    url: str, runs: list[tuple[str, ...]]
) -> None:
    assert echoes(url) == runs


def test_echoes_are_taken_out_as_runs_not_word_by_word() -> None:
    runs = echoes("http://h.test/the-best-of")
    tokens = words("Sorry, the best of our pages is not the best-of the rest.")
    assert without_echoes(tokens, runs) == words("sorry our pages is not the rest")
    assert without_echoes(["the", "best"], runs) == ["the", "best"]  # a part is no echo
    assert without_echoes([], runs) == []


DEDUP = load_config(None, [], environ={}).dedup


def main_text(body: bytes) -> str:
    return parse_page(body, "text/html", [], "trawl").main_text


def request_target(url: str) -> str:
    """What an HTTP/1.1 request line asks for: the path and the query."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_error_pages_echoing_different_paths_have_one_echo_free_simhash() -> None:
    probe = probe_url("http://h.test", "seg9")
    urls = [probe, "http://h.test/old/news-12", "http://h.test/a%20b/c?q=1", "http://h.test/x"]
    pages = {url: main_text(echoing_page(request_target(url))) for url in urls}
    (free,) = {echo_free_simhash(text, url, DEDUP) for url, text in pages.items()}
    assert free is not None
    probed, missing = (fingerprint(echoing_page(urlsplit(u).path)) for u in urls[:2])
    assert probed is not None and missing is not None
    assert hamming(probed, missing) > 3  # what the plain simhash made of them
    # a page without an echo is fingerprinted as the fetcher does it
    assert echo_free_simhash(main_text(NOT_FOUND), probe, DEDUP) == fingerprint(NOT_FOUND)
    # and a real page stays far from the error page, its own path taken out or not
    real = "http://h.test/notes/b"
    own = echo_free_simhash(main_text(article("You are reading /notes/b")), real, DEDUP)
    assert own is not None and hamming(own, free) > 3 * DEDUP.max_distance
    assert echo_free_simhash("too few words " + "/x " * 40, "http://h.test/x", DEDUP) is None


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("/", "http://h.test/"),
        ("http://H.test:80", "http://h.test/"),
        (" ../ ", "http://h.test/"),
        ("/404.html?from=/a", "http://h.test/404.html?from=/a"),
        ("https://h.test/a", "https://h.test/a"),
        ("", None),
        (None, None),
        ("http://[::1", None),
    ],
)
def test_redirect_target_spells_probe_and_page_targets_alike(
    location: str | None, target: str | None
) -> None:
    assert redirect_target("http://h.test/a/b", location) == target


def test_a_redirect_is_compared_with_where_the_probe_was_sent() -> None:
    at = datetime(2024, 5, 1, tzinfo=UTC)
    home = ProbeAnswer(302, None, None, at, "http://h.test/")
    row = {"url": "http://h.test/gone", "outcome": "redir_temp", "headers": [["Location", "/"]]}
    assert home.compares(row) and not home.compares({**row, "outcome": "success"})
    assert home.judge(row, None, DEDUP, 3) == (
        "soft404: redirect to http://h.test/ (where the probe was sent)"
    )
    elsewhere = {**row, "headers": [["Location", "/a"]]}
    assert home.judge(elsewhere, None, DEDUP, 3) is None
    assert not NF.compares(row)  # the probe was answered 200: a redirect is no not-found page
    assert not ProbeAnswer(404, None, None, at).compares(row)
    assert home.redirect_verdict(None) is None
    assert ProbeAnswer(302, None, None, at).redirect_verdict("http://h.test/") is None


# --- the test web's soft-404 hosts, crawled ------------------------------------------------------
def test_the_testwebs_soft404_hosts_are_found_out(tmp_path: Path) -> None:
    model = WebModel.generate(1, hosts=3, ips=3)
    with TestWeb(model, tmp_path / "web", traps=True) as web:
        urls = []
        for kind in ("soft404", "soft404_redirect"):
            host = traps.TRAP_HOSTS[kind]
            redirects = traps.SOFT404_MOVED if kind == "soft404_redirect" else {}
            for path in (*traps.real_paths(kind), *traps.SOFT404_DEAD_LINKS, *redirects):
                urls.append((host, normalize(f"http://{host}:{web.port}{path}")))
        fetch_items = [
            {"url": url, "url_fp": url_fingerprint(url), "host": host,
             "host_bucket": 0, "task": 0, "depth": 1}
            for host, url in urls
        ]  # fmt: skip
        cfg = config(web.hosts_file)
        rows = list(run_fetch_task(fetch_items, cfg, SEGMENT, 0, None, 60))
    pages = {(r["host"], urlsplit(r["url"]).path): r for r in rows if r["kind"] == "page"}
    probes = {r["host"]: r for r in rows if r["kind"] == "probe"}
    echoing, redirecting = traps.TRAP_HOSTS["soft404"], traps.TRAP_HOSTS["soft404_redirect"]
    assert probes[echoing]["http_status"] == 200
    assert from_probe(probes[redirecting]) == ProbeAnswer(
        302, None, None, probes[redirecting]["fetched_at"], f"http://{redirecting}:{web.port}/"
    )
    for host in (echoing, redirecting):
        for path in traps.SOFT404_DEAD_LINKS:
            row = pages[(host, path)]
            assert (row["outcome"], row["soft404"]) == ("soft404", True), (host, path, row["error"])
            assert row["redirect_to"] is None and row["outlinks"] is None
        for path in traps.real_paths("soft404"):
            assert pages[(host, path)]["outcome"] == "success", (host, path)
    assert pages[(echoing, "/news/6")]["error"].startswith("soft404: distance 0 (simhash")
    moved = pages[(redirecting, "/about-us")]
    assert (moved["outcome"], moved["soft404"]) == ("redir_perm", False)
    assert moved["redirect_to"] == f"http://{redirecting}:{web.port}/about"
