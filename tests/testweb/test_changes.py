"""The test web as of a logical time: changing pages, validators and 304s, sitemaps.

One small web (seed 23: 20 hosts on 5 IPs, sitemap hosts of both layouts,
three pages only sitemaps list) is served for the module. Each test sets the
web's clock to the times it needs; nothing sleeps and nothing is timed.
Requests go over real HTTP to the host's pinned loopback address with a Host
header, as a crawler using the written hosts file would. Served sitemaps are
read with the crawler's own parser, ``trawl.parse.sitemaps.parse_sitemap``.
"""

from __future__ import annotations

import http.client
import math
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from trawl.parse.sitemap_entries import Sitemap
from trawl.parse.sitemaps import parse_sitemap
from trawl.testweb import EPOCH, ChangeRates, TestWeb, WebModel
from trawl.testweb.__main__ import logical_time
from trawl.testweb.audit import read_log
from trawl.testweb.changes import changefreq
from trawl.testweb.records import HostInfo, Page
from trawl.testweb.render import respond
from trawl.testweb.validators import http_date

SEED = 23
AGENT = "trawl/0.1 (+http://example.invalid/bot)"
DAY = timedelta(days=1)


def time_model() -> WebModel:
    return WebModel.generate(SEED, hosts=20, ips=5, pages_per_host=(5, 30))


@pytest.fixture(scope="module")
def model() -> WebModel:
    return time_model()


@pytest.fixture(scope="module")
def web(model: WebModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    with TestWeb(model, tmp_path_factory.mktemp("timeweb")) as served:
        yield served


def fetch(
    web: TestWeb, host: str, path: str, method: str = "GET", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body); keyword headers are spelled with "_" for "-"."""
    info = web.model.host(host)
    assert info is not None
    conn = http.client.HTTPConnection(info.ip, web.port, timeout=5)
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    try:
        conn.request(
            method, path, headers={"Host": f"{host}:{web.port}", "User-Agent": AGENT, **sent}
        )
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def logged(web: TestWeb, agent: str, count: int) -> list[dict[str, Any]]:
    """Log rows of ``agent`` in request order, waiting for ``count`` of them: the
    server writes a row just after the response's last byte, so the client may
    read first, and rows of consecutive requests may be written in either order."""
    deadline = time.time() + 3
    while True:
        rows = [r for r in read_log(web.access_log) if r["user_agent"] == agent]
        if len(rows) >= count or time.time() > deadline:
            return sorted(rows, key=lambda r: float(r["start"]))
        time.sleep(0.005)


def plain_hosts(model: WebModel) -> list[HostInfo]:
    """Hosts that answer at once and never push back."""
    return [h for h in model.hosts if not h.slow and h.throttle is None and h.robots != "error"]


def changing_page(model: WebModel, lo: float = 0.5, hi: float = 5.0) -> tuple[HostInfo, Page]:
    """A page on a plain host changing between ``lo`` and ``hi`` times a day."""
    return next((h, p) for h in plain_hosts(model) for p in h.pages if lo <= p.change_rate <= hi)


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(str(dict(attrs).get("href")))


def hrefs(body: bytes) -> list[str]:
    parser = Links()
    parser.feed(body.decode())
    return parser.hrefs


# -- change rates and versions -------------------------------------------------------


def test_change_rates_follow_the_distribution_and_move_no_draws() -> None:
    model = WebModel.generate(1, hosts=300)
    pages = [p for h in model.hosts for p in h.pages]
    rates = [p.change_rate for p in pages if p.status == 200]
    assert all(p.change_rate == 0.0 for p in pages if p.status != 200)
    static = sum(r == 0.0 for r in rates) / len(rates)
    assert 0.08 < static < 0.12  # 10% never change
    logs = [math.log(r) for r in rates if r]
    low, high = math.log(1 / 180), math.log(24.0)
    assert low <= min(logs) and max(logs) <= high
    # log-uniform: mean and spread of log(rate) are those of a uniform on [low, high]
    assert abs(statistics.fmean(logs) - (low + high) / 2) < 0.1
    assert abs(statistics.pstdev(logs) - (high - low) / math.sqrt(12)) < 0.1
    # turning pages static, or rates off, leaves every other draw where it was
    mostly_static = WebModel.generate(1, hosts=300, change_rates=ChangeRates(static=0.5))
    for a, b in zip(model.hosts, mostly_static.hosts, strict=True):
        for p, q in zip(a.pages, b.pages, strict=True):
            assert q.change_rate in (0.0, p.change_rate)
    frozen = WebModel.generate(1, hosts=300, change_rates=None)
    assert all(p.change_rate == 0.0 for h in frozen.hosts for p in h.pages)
    assert [len(h.pages) for h in frozen.hosts] == [len(h.pages) for h in model.hosts]


def test_version_at_is_monotone_pure_and_counts_changes(model: WebModel) -> None:
    host, page = changing_page(model)
    times = [EPOCH - DAY, EPOCH] + [EPOCH + k * timedelta(hours=7) for k in range(1, 60)]
    versions = [model.version_at(host.name, page.path, t) for t in times]
    assert versions[:2] == [0, 0] and versions[-1] > 3
    assert versions == sorted(versions)
    # a fresh model asked in another order (far future first) says the same
    fresh = time_model()
    assert fresh.version_at(host.name, page.path, times[-1] + 300 * DAY) > versions[-1]
    assert [fresh.version_at(host.name, page.path, t) for t in reversed(times)] == versions[::-1]
    # the changes are whole seconds; the version steps by one at each
    until = times[-1]
    changes = model.change_times(host.name, page.path, until)
    assert len(changes) == versions[-1] and changes == sorted(set(changes))
    for n, when in enumerate(changes, start=1):
        assert when.microsecond == 0
        assert model.version_at(host.name, page.path, when) == n
        assert model.version_at(host.name, page.path, when - timedelta(seconds=1)) == n - 1
        assert model.last_change_at(host.name, page.path, when + timedelta(seconds=1)) == when
    assert model.last_change_at(host.name, page.path, EPOCH) == EPOCH
    static = next(p for h in model.hosts for p in h.pages if p.status == 200 and not p.change_rate)
    owner = next(h for h in model.hosts if static in h.pages)
    assert model.version_at(owner.name, static.path, EPOCH + 3650 * DAY) == 0
    with pytest.raises(KeyError):
        model.version_at(host.name, "/no/such/page.html", EPOCH)
    with pytest.raises(ValueError):
        model.version_at(host.name, page.path, datetime(2026, 2, 1))  # naive


def test_changes_are_a_poisson_process_at_the_drawn_rate(model: WebModel) -> None:
    span_days = 365
    until = EPOCH + span_days * DAY
    counted = expected = 0.0
    scaled_gaps: list[float] = []  # gaps x rate: exponential with mean 1
    for host in model.hosts:
        for page in host.pages:
            rate = page.change_rate
            if rate < 0.2:  # fewer than ~70 changes in the span: too few to judge one page
                continue
            changes = model.change_times(host.name, page.path, until)
            mean = rate * span_days
            assert abs(len(changes) - mean) <= 5 * math.sqrt(mean), (host.name, page.path)
            counted, expected = counted + len(changes), expected + mean
            days = [(c - EPOCH) / DAY for c in changes]
            scaled_gaps += [(b - a) * rate for a, b in zip([0.0, *days], days, strict=False)]
    assert abs(counted / expected - 1) < 0.01
    assert abs(statistics.fmean(scaled_gaps) - 1) < 0.01
    assert abs(statistics.pstdev(scaled_gaps) - 1) < 0.02  # exponential: sd == mean
    below_mean = sum(g < 1 for g in scaled_gaps) / len(scaled_gaps)
    assert abs(below_mean - (1 - math.exp(-1))) < 0.01


# -- served content and validators ----------------------------------------------------


def test_content_changes_with_the_version_and_links_stay(model: WebModel, web: TestWeb) -> None:
    host, page = changing_page(model)
    first, second = model.change_times(host.name, page.path, EPOCH + 30 * DAY)[:2]
    before, between, still = first - timedelta(seconds=1), first, second - timedelta(seconds=1)
    bodies, etags = {}, {}
    for name, at in (("before", before), ("between", between), ("still", still)):
        web.set_time(at)
        status, headers, body = fetch(web, host.name, page.path)
        assert status == 200
        bodies[name], etags[name] = body, headers["ETag"]
    assert b"revision" not in bodies["before"] and b"revision 1: " in bodies["between"]
    assert bodies["between"] == bodies["still"] and etags["between"] == etags["still"]
    assert bodies["before"] != bodies["between"] and etags["before"] != etags["between"]
    assert hrefs(bodies["before"]) == hrefs(bodies["between"])
    assert f"<title>{page.title}</title>".encode() in bodies["between"]
    # a pure function of (page, version): another model from the seed, the same bytes
    again = respond(time_model(), host.name, page.path, web.port, host.ip, at=still)
    assert again.body == bodies["still"] and again.version == 1
    web.set_time(before)
    assert fetch(web, host.name, page.path)[2] == bodies["before"]  # the clock can go back


def test_validators_follow_the_clock(model: WebModel, web: TestWeb) -> None:
    host, page = changing_page(model)
    for at in (EPOCH, EPOCH + 2 * DAY + timedelta(seconds=0.7), EPOCH + 9 * DAY):
        web.set_time(at)
        status, headers, _ = fetch(web, host.name, page.path)
        assert status == 200 and headers["ETag"].startswith('"') and headers["ETag"].endswith('"')
        last = model.last_change_at(host.name, page.path, at)
        assert headers["Last-Modified"] == http_date(last)
        assert parsedate_to_datetime(headers["Last-Modified"]) == last <= at
    assert http_date(EPOCH) == "Thu, 01 Jan 2026 00:00:00 GMT"
    owner, static = next(
        (h, p) for h in plain_hosts(model) for p in h.pages if p.status == 200 and not p.change_rate
    )
    web.set_time(EPOCH + 400 * DAY)
    assert fetch(web, owner.name, static.path)[1]["Last-Modified"] == http_date(EPOCH)


def test_if_none_match_answers_304_for_any_form_of_the_tag(model: WebModel, web: TestWeb) -> None:
    host, page = changing_page(model)
    at = EPOCH + 5 * DAY
    web.set_time(at)
    _, headers, _ = fetch(web, host.name, page.path)
    etag, last_modified = headers["ETag"], headers["Last-Modified"]
    for field in (etag, f'"stale", {etag}', f"W/{etag}", f'W/"x",W/{etag}', "*"):
        status, got, body = fetch(web, host.name, page.path, If_None_Match=field)
        assert (status, body) == (304, b""), field
        assert got["ETag"] == etag and got["Last-Modified"] == last_modified
        assert "Content-Length" not in got and "Content-Type" not in got
    assert fetch(web, host.name, page.path, "HEAD", If_None_Match=etag)[0] == 304
    for field in ('"stale"', etag[1:-1], 'W/"nope", "stale"'):
        assert fetch(web, host.name, page.path, If_None_Match=field)[0] == 200, field
    # once the page has changed the old tag no longer matches
    web.set_time(model.change_times(host.name, page.path, at + 30 * DAY)[-1])
    status, got, body = fetch(web, host.name, page.path, If_None_Match=etag)
    assert status == 200 and got["ETag"] != etag and body


def test_if_modified_since_compares_whole_seconds(model: WebModel, web: TestWeb) -> None:
    host, page = changing_page(model)
    changed = model.change_times(host.name, page.path, EPOCH + 10 * DAY)[-1]
    web.set_time(changed)

    def status_since(since: datetime | str) -> int:
        value = since if isinstance(since, str) else http_date(since)
        return fetch(web, host.name, page.path, If_Modified_Since=value)[0]

    assert status_since(changed) == 304
    assert status_since(changed + timedelta(minutes=10)) == 304
    assert status_since(changed - timedelta(seconds=1)) == 200
    assert status_since(EPOCH) == 200
    assert status_since("not a date") == 200  # RFC 9110 13.1.3: ignored
    web.set_time(model.change_times(host.name, page.path, changed + 40 * DAY)[-1])
    assert status_since(changed) == 200


def test_if_none_match_takes_precedence_over_if_modified_since(
    model: WebModel, web: TestWeb
) -> None:
    host, page = changing_page(model)
    web.set_time(EPOCH + 3 * DAY)
    _, headers, _ = fetch(web, host.name, page.path)
    etag, last_modified = headers["ETag"], headers["Last-Modified"]
    both = {"If_Modified_Since": last_modified}
    assert fetch(web, host.name, page.path, If_None_Match='"other"', **both)[0] == 200
    old = http_date(EPOCH - DAY)
    assert fetch(web, host.name, page.path, If_None_Match=etag, If_Modified_Since=old)[0] == 304


def test_access_log_records_the_version_and_the_304(model: WebModel, web: TestWeb) -> None:
    host, page = changing_page(model)
    at = EPOCH + 12 * DAY
    web.set_time(at)
    agent = "versioncheck/1"
    etag = fetch(web, host.name, page.path, User_Agent=agent)[1]["ETag"]
    fetch(web, host.name, page.path, If_None_Match=etag, User_Agent=agent)
    fetch(web, host.name, "/robots.txt", User_Agent=agent)
    rows = logged(web, agent, 3)
    version = model.version_at(host.name, page.path, at)
    assert version > 0
    assert [(r["status"], r["version"]) for r in rows] == [
        (200, version),
        (304, version),
        (model.expected_status(host.name, "/robots.txt"), None),
    ]
    assert rows[1]["bytes"] == 0
    assert {datetime.fromisoformat(r["at"]) for r in rows} == {at}


def test_the_clock_is_aware_utc_and_starts_at_the_epoch(model: WebModel, tmp_path: Path) -> None:
    web = TestWeb(model, tmp_path)
    assert web.time == EPOCH == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        web.set_time(datetime(2026, 3, 1))
    later = TestWeb(model, tmp_path, at=EPOCH + DAY)
    assert later.time == EPOCH + DAY
    assert logical_time("2026-03-01T00:00:00Z") == logical_time("2026-03-01T00:00:00")
    assert logical_time("2026-03-01T01:00:00+01:00") == datetime(2026, 3, 1, tzinfo=UTC)


# -- sitemaps -------------------------------------------------------------------------


def sitemap_hosts(model: WebModel, layout: str) -> list[HostInfo]:
    return [h for h in plain_hosts(model) if h.sitemaps and h.sitemaps.layout == layout]


def parsed(web: TestWeb, host: str, path: str) -> tuple[Sitemap, dict[str, str], bytes]:
    """The sitemap at ``path``, parsed as listed in robots.txt (the host is its scope)."""
    status, headers, body = fetch(web, host, path)
    assert status == 200, path
    url = f"http://{host}:{web.port}{path}"
    robots = f"http://{host}:{web.port}/robots.txt"
    sitemap = parse_sitemap(body, url, scope_url=robots, now=web.time)
    assert not sitemap.errors and not sitemap.rejected and not sitemap.warnings, sitemap
    return sitemap, headers, body


def expected_entries(model: WebModel, web: TestWeb, host: HostInfo) -> dict[str, datetime]:
    """URL -> lastmod as the model has them at the web's time."""
    return {
        f"http://{host.name}:{web.port}{p}": model.last_change_at(host.name, p, web.time)
        for p in model.sitemap_paths(host.name)
    }


def test_robots_txt_names_the_sitemaps(model: WebModel, web: TestWeb) -> None:
    web.set_time(EPOCH)
    for host in plain_hosts(model):
        status, _, body = fetch(web, host.name, "/robots.txt")
        lines = [ln.removeprefix("Sitemap: ") for ln in body.decode().splitlines()]
        named = [ln for ln in lines if ln.startswith("http")] if status == 200 else []
        assert named == model.sitemap_urls(host.name, web.port)
        if host.sitemaps is None:
            assert fetch(web, host.name, "/sitemap.xml")[0] == 404
    assert sitemap_hosts(model, "urlset") and sitemap_hosts(model, "index")


def test_urlset_lists_allowed_pages_with_the_lastmods_of_now(model: WebModel, web: TestWeb) -> None:
    lastmods: set[datetime] = set()
    for at in (EPOCH, EPOCH + 20 * DAY):
        web.set_time(at)
        for host in sitemap_hosts(model, "urlset"):
            sitemap, headers, _ = parsed(web, host.name, "/sitemap.xml")
            assert sitemap.kind == "urlset"
            assert headers["Content-Type"].startswith("application/xml")
            want = expected_entries(model, web, host)
            assert {e.url: e.lastmod for e in sitemap.entries} == want
            lastmods |= set(want.values())
            assert headers["Last-Modified"] == http_date(max(want.values()))
            for entry in sitemap.entries:
                path = "/" + entry.url.split("/", 3)[3]
                assert entry.changefreq == changefreq(model.change_rate(host.name, path))
                assert entry.priority is not None and 0 < entry.priority <= 1
                assert model.expected_status(host.name, path) == 200
                assert not model.is_disallowed(host.name, path, AGENT)
                assert not model.is_disallowed(host.name, path, "otherbot/2")
    assert EPOCH in lastmods and max(lastmods) > EPOCH  # some pages changed in the 20 days


def test_index_splits_pages_into_gzip_and_text_sitemaps(model: WebModel, web: TestWeb) -> None:
    web.set_time(EPOCH + 45 * DAY)
    for host in sitemap_hosts(model, "index"):
        index, _, _ = parsed(web, host.name, "/sitemap_index.xml")
        assert index.kind == "index"
        base = f"http://{host.name}:{web.port}"
        assert [e.url for e in index.entries] == [
            f"{base}/sitemaps/1.xml.gz",
            f"{base}/sitemaps/2.txt",
        ]
        gz, gz_headers, gz_body = parsed(web, host.name, "/sitemaps/1.xml.gz")
        text, text_headers, _ = parsed(web, host.name, "/sitemaps/2.txt")
        assert gz_body[:2] == b"\x1f\x8b" and gz_headers["Content-Type"] == "application/gzip"
        assert "Content-Encoding" not in gz_headers
        assert (gz.kind, text.kind) == ("urlset", "text")
        assert text_headers["Content-Type"].startswith("text/plain")
        want = expected_entries(model, web, host)
        assert {e.url: e.lastmod for e in gz.entries} == {e.url: want[e.url] for e in gz.entries}
        assert [e.url for e in gz.entries + text.entries] == list(want)
        assert all(e.lastmod is None for e in text.entries)  # text sitemaps carry no hints
        assert [e.lastmod for e in index.entries] == [
            max(want[e.url] for e in gz.entries),
            max(want[e.url] for e in text.entries),
        ]
        # the children sit in /sitemaps/: only the robots.txt listing puts pages in scope
        alone = parse_sitemap(gz_body, f"{base}/sitemaps/1.xml.gz")
        assert alone.rejected["outside_path"] == len(gz.entries)


def test_sitemaps_answer_conditional_requests(model: WebModel, web: TestWeb) -> None:
    host = sitemap_hosts(model, "index")[0]
    web.set_time(EPOCH + 6 * DAY)
    _, headers, _ = fetch(web, host.name, "/sitemaps/1.xml.gz")
    etag, last_modified = headers["ETag"], headers["Last-Modified"]
    assert fetch(web, host.name, "/sitemaps/1.xml.gz", If_None_Match=etag)[0] == 304
    path = "/sitemaps/1.xml.gz"
    assert fetch(web, host.name, path, If_Modified_Since=last_modified)[0] == 304
    web.set_time(EPOCH + 60 * DAY)  # with a dozen pages, one of them has changed
    assert fetch(web, host.name, "/sitemaps/1.xml.gz", If_None_Match=etag)[0] == 200


def test_some_pages_are_reachable_only_through_sitemaps(model: WebModel, web: TestWeb) -> None:
    hidden = model.sitemap_only_pages()
    assert hidden
    linked = {(link.host, link.path) for h in model.hosts for p in h.pages for link in p.links}
    assert not hidden & linked
    seeds = model.seed_urls(1)
    by_links, with_sitemaps = model.reachable(seeds), model.reachable(seeds, sitemaps=True)
    assert not hidden & by_links and hidden <= with_sitemaps
    allowed = {
        (h.name, p.path)
        for h in model.hosts
        for p in h.pages
        if not model.is_disallowed(h.name, p.path)
    }
    assert with_sitemaps == allowed and by_links == allowed - hidden
    web.set_time(EPOCH)
    for host, path in sorted(hidden):
        info = model.host(host)
        assert info is not None and info.sitemaps is not None and path in info.sitemaps.hidden
        assert path in model.sitemap_paths(host)
        if info in plain_hosts(model):
            assert fetch(web, host, path)[0] == 200
