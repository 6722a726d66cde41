"""Tests for trawl.testweb: the model, the loopback server and the audits.

Real HTTP over loopback: requests go to the host's pinned 127.0.1.x address
with an explicit Host header, as a crawler using the written hosts file would.
One small web (20 hosts on 5 IPs) is served for the whole module. Throttled
hosts are tested through ``respond`` with an explicit clock (no sleeping) and
once over HTTP with an interval far longer than the test takes.
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from trawl.testweb import TestWeb, WebModel, politeness_audit, robots_audit, run
from trawl.testweb.audit import read_log
from trawl.testweb.generate import EXTRA_DELAYS, LONG_DELAYS
from trawl.testweb.records import HostInfo, Throttle
from trawl.testweb.render import respond

SEED = 44  # 20 hosts with every robots variant, a slow host, a Crawl-delay host
AGENT = "trawl/0.1 (+http://example.invalid/bot)"


def small_model(seed: int = SEED) -> WebModel:
    return WebModel.generate(seed, hosts=20, ips=5, pages_per_host=(5, 20))


@pytest.fixture(scope="module")
def model() -> WebModel:
    return small_model()


@pytest.fixture(scope="module")
def web(model: WebModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    with TestWeb(model, tmp_path_factory.mktemp("testweb")) as served:
        yield served


def fetch(
    web: TestWeb, host: str, path: str, *, ip: str | None = None, agent: str = AGENT
) -> tuple[int, dict[str, str], bytes]:
    info = web.model.host(host)
    conn = http.client.HTTPConnection(ip or (info.ip if info else "127.0.1.1"), web.port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{web.port}", "User-Agent": agent})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


class LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.links: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "base" and self.base is None:
            self.base = a.get("href")
        elif tag == "a" and a.get("href") is not None:
            self.links.append((str(a["href"]), a.get("rel") == "nofollow"))


def plain(host: HostInfo) -> bool:
    """Answers at once and never pushes back: safe to fetch many times quickly."""
    return not host.slow and host.throttle is None


def hosts_by(model: WebModel, robots: str) -> list[HostInfo]:
    return [h for h in model.hosts if h.robots == robots and plain(h)]


def page_with(host: HostInfo, status: int) -> str:
    return next(p.path for p in host.pages if p.status == status)


def logged(web: TestWeb, key: str, value: str, count: int) -> list[dict[str, Any]]:
    """Log rows with row[key] == value, waiting for ``count`` of them.

    The server writes a row just after the response's last byte, so a client
    can read the log a moment before its own request appears there, and the
    rows of two requests in a row may be written in either order: they come
    back in request order (by ``start``).
    """
    deadline = time.time() + 3
    while True:
        rows = [r for r in read_log(web.access_log) if r[key] == value]
        if len(rows) >= count or time.time() > deadline:
            return sorted(rows, key=lambda r: float(r["start"]))
        time.sleep(0.005)


# -- model ---------------------------------------------------------------------


def test_same_seed_gives_same_model_and_pages() -> None:
    a, b = small_model(), small_model()
    assert a == b
    assert a.hosts_file_text() == b.hosts_file_text()
    assert small_model(SEED + 1) != a
    default = WebModel.generate(1, hosts=40)
    assert default == WebModel.generate(1, hosts=40)
    sizes = sorted(len(h.pages) for h in default.hosts)
    assert sizes[-1] >= 3 * sizes[len(sizes) // 2]  # a few big hosts, many small


def test_hosts_file_pins_names_to_shared_loopback_ips(model: WebModel, web: TestWeb) -> None:
    lines = [ln.split() for ln in web.hosts_file.read_text().splitlines() if ln[:1] != "#"]
    assert {name for _, name in lines} == {h.name for h in model.hosts}
    assert all(ip.startswith("127.0.1.") and name.endswith(".test") for ip, name in lines)
    per_ip = Counter(ip for ip, _ in lines)
    assert len(per_ip) <= 5 and max(per_ip.values()) >= 2
    seeds = web.seeds_file.read_text().split()
    assert seeds and all(u.endswith(f".test:{web.port}/") for u in seeds)


def test_seeds_reach_every_allowed_page(model: WebModel) -> None:
    reached = model.reachable(model.seed_urls(1))
    allowed = {
        (h.name, p.path)
        for h in model.hosts
        for p in h.pages
        if not model.is_disallowed(h.name, p.path)
    }
    assert allowed and reached == allowed


def test_robots_ground_truth_is_per_agent_group(model: WebModel) -> None:
    host = hosts_by(model, "agent")[0]
    star = next(g for g in host.groups if g.agent == "*")
    mine = next(g for g in host.groups if g.agent == "trawl")
    assert set(star.disallow).isdisjoint(mine.disallow)
    assert model.is_disallowed(host.name, mine.disallow[0] + "1.html", AGENT)
    assert not model.is_disallowed(host.name, star.disallow[0] + "1.html", AGENT)
    assert model.is_disallowed(host.name, star.disallow[0] + "1.html", "otherbot/2.0")
    assert model.is_disallowed(host.name, "/", "badbot")
    assert model.is_disallowed(hosts_by(model, "error")[0].name, "/", AGENT)
    assert not model.is_disallowed(hosts_by(model, "none")[0].name, "/private/1.html", AGENT)


HOSTILE_SEED = 9  # at raised shares: every throttle kind, both Retry-After forms, long delays


def hostile_model(throttled: float = 0.15, crawl_delays: float = 0.15) -> WebModel:
    return WebModel.generate(
        HOSTILE_SEED,
        hosts=200,
        ips=30,
        pages_per_host=(3, 8),
        throttled=throttled,
        crawl_delays=crawl_delays,
    )


def test_extras_leave_the_rest_of_the_web_as_it_was() -> None:
    bare, few, many = hostile_model(0, 0), hostile_model(0.03, 0.03), hostile_model()
    assert many == hostile_model() and many != bare
    for a, f, m in zip(bare.hosts, few.hosts, many.hosts, strict=True):
        # stripped of its extras, a host is the one drawn without them
        assert dataclasses.replace(m, throttle=None, crawl_delay=a.crawl_delay) == a
        if m.crawl_delay != a.crawl_delay:
            assert m.crawl_delay in EXTRA_DELAYS + LONG_DELAYS
        # a larger share only adds hosts, each with the extras it had
        if f.throttle is not None:
            assert m.throttle == f.throttle
        if f.crawl_delay != a.crawl_delay:
            assert m.crawl_delay == f.crawl_delay
    assert sum(h.throttle is not None for h in few.hosts) < sum(
        h.throttle is not None for h in many.hosts
    )


@pytest.mark.parametrize(
    ("seed", "hosts", "ips", "pages"),
    [(34, 12, 3, (5, 15)), (3, 16, 4, (3, 10)), (5, 4, 2, (2, 4)), (SEED, 20, 5, (5, 20))],
)
def test_small_webs_the_suite_pins_get_no_extras(
    seed: int, hosts: int, ips: int, pages: tuple[int, int]
) -> None:
    web = WebModel.generate(seed, hosts=hosts, ips=ips, pages_per_host=pages)
    bare = WebModel.generate(
        seed, hosts=hosts, ips=ips, pages_per_host=pages, throttled=0, crawl_delays=0
    )
    assert web == bare


def strip_time_and_sitemaps(model: WebModel) -> tuple[HostInfo, ...]:
    """The hosts without change rates, sitemaps and the pages only sitemaps list."""
    hidden = model.sitemap_only_pages()
    return tuple(
        dataclasses.replace(
            h,
            sitemaps=None,
            pages=tuple(
                dataclasses.replace(p, change_rate=0.0)
                for p in h.pages
                if (h.name, p.path) not in hidden
            ),
        )
        for h in model.hosts
    )


def test_sitemaps_and_change_rates_leave_the_rest_of_the_web_as_it_was() -> None:
    model = hostile_model()
    bare = WebModel.generate(
        HOSTILE_SEED,
        hosts=200,
        ips=30,
        pages_per_host=(3, 8),
        throttled=0.15,
        crawl_delays=0.15,
        sitemaps=0,
        change_rates=None,
    )
    assert model != bare and model.sitemap_only_pages()
    assert strip_time_and_sitemaps(model) == bare.hosts
    assert all(h.robots_status == 200 for h in model.hosts if h.sitemaps)
    assert all(p.change_rate == 0 for h in bare.hosts for p in h.pages)


@pytest.mark.parametrize(
    ("seed", "hosts", "ips", "pages", "crawled"),
    [
        (34, 12, 3, (5, 15), True),  # tests/fetch/test_task.py
        (3, 16, 4, (3, 10), True),  # tests/test_cycle.py
        (5, 4, 2, (2, 4), True),  # tests/test_cycle.py (the cycle command)
        (34, 6, 2, (5, 40), True),  # tests/testweb/test_hostile.py
        (3, 4, 2, (3, 5), False),  # test_stop_cuts_keepalive_connections_and_joins_threads
        (5, 6, 3, (5, 40), False),  # test_run_serves_until_stopped
        (SEED, 20, 5, (5, 20), False),
    ],
)
def test_small_webs_the_suite_pins_keep_their_pages(
    seed: int, hosts: int, ips: int, pages: tuple[int, int], crawled: bool
) -> None:
    """The webs crawler tests pin publish no sitemaps (the crawler would follow
    them); no pinned web gains a page only sitemaps list."""
    web = WebModel.generate(seed, hosts=hosts, ips=ips, pages_per_host=pages)
    bare = WebModel.generate(
        seed, hosts=hosts, ips=ips, pages_per_host=pages, sitemaps=0, change_rates=None
    )
    assert not web.sitemap_only_pages()
    assert strip_time_and_sitemaps(web) == bare.hosts
    if crawled:
        assert not any(h.sitemaps for h in web.hosts)


def test_extras_cover_every_throttle_and_crawl_delays_past_a_cap() -> None:
    model = hostile_model()
    throttles = [h.throttle for h in model.hosts if h.throttle is not None]
    assert {(t.kind, t.status) for t in throttles} == {
        ("limit", 429),
        ("limit", 503),
        ("flaky", 503),
    }
    assert {(t.kind, t.http_date) for t in throttles} == {
        ("limit", True), ("limit", False), ("flaky", True), ("flaky", False)
    }  # fmt: skip
    assert all(t.interval_s > 0 for t in throttles if t.kind == "limit")
    assert all(t.every >= 2 and t.retry_after_s >= 1 for t in throttles if t.kind == "flaky")
    assert all(h.robots != "error" for h in model.hosts if h.throttle is not None)
    delayed = [h for h in model.hosts if h.crawl_delay]
    assert all(h.robots_status == 200 for h in delayed)
    delays = {h.crawl_delay for h in delayed}
    assert delays & {3.0, 4.0, 5.0} and delays & set(LONG_DELAYS)
    host = next(h for h in delayed if h.crawl_delay in LONG_DELAYS)
    assert host.crawl_delay_for(AGENT) == host.crawl_delay
    assert host.crawl_delay_for("badbot") is None


# -- server --------------------------------------------------------------------


def test_robots_variants_are_served_as_modelled(model: WebModel, web: TestWeb) -> None:
    for variant in ("none", "error", "open", "star", "agent"):
        host = hosts_by(model, variant)[0]
        status, headers, body = fetch(web, host.name, "/robots.txt")
        assert status == model.expected_status(host.name, "/robots.txt")
        assert (status >= 500) == (variant == "error") and (status == 404) == (variant == "none")
        if status == 200:
            assert headers["Content-Type"].startswith("text/plain")
            for group in host.groups:
                assert f"User-agent: {group.agent}" in body.decode()
                assert all(f"Disallow: {p}\n" in body.decode() for p in group.disallow)
    delayed = next(h for h in model.hosts if h.crawl_delay and plain(h))
    assert (
        f"Crawl-delay: {delayed.crawl_delay:g}"
        in fetch(web, delayed.name, "/robots.txt")[2].decode()
    )


def test_links_use_every_form_and_resolve_to_model_targets(model: WebModel, web: TestWeb) -> None:
    hrefs: list[str] = []
    bases = 0
    for host in [h for h in model.hosts if plain(h)][:8]:
        for page in [p for p in host.pages if p.status == 200]:
            url = f"http://{host.name}:{web.port}{page.path}"
            status, headers, body = fetch(web, host.name, page.path)
            assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
            assert f"<title>{page.title}</title>" in body.decode()
            parser = LinkParser()
            parser.feed(body.decode())
            base = urljoin(url, parser.base) if parser.base else url
            bases += parser.base is not None
            got = [(urldefrag(urljoin(base, h))[0], nf) for h, nf in parser.links]
            assert got == model.page_links(host.name, page.path, web.port)
            hrefs += [h for h, _ in parser.links]
    assert bases > 0
    assert any(h.startswith("http://") for h in hrefs) and any(h.startswith("//") for h in hrefs)
    assert any(h.startswith("/") and not h.startswith("//") for h in hrefs)
    assert any(h.startswith("../") for h in hrefs)
    assert any(not h.startswith(("/", ".", "http")) for h in hrefs)  # "5.html"


def test_error_pages_redirects_and_unknown_hosts(model: WebModel, web: TestWeb) -> None:
    fast = [h for h in model.hosts if plain(h)]
    for status in (404, 410, 500):
        host = next(h for h in fast if status in {p.status for p in h.pages})
        assert fetch(web, host.name, page_with(host, status))[0] == status
    host = next(h for h in fast if 301 in {p.status for p in h.pages})
    moved = next(p for p in host.pages if p.status == 301)
    status, headers, _ = fetch(web, host.name, moved.path)
    assert status == 301
    assert headers["Location"] == f"http://{host.name}:{web.port}{moved.redirect_to}"
    assert model.expected_status(host.name, str(moved.redirect_to)) == 200
    assert fetch(web, host.name, "/no/such/page.html")[0] == 404
    assert fetch(web, "nowhere.test", "/", ip=model.ips[0])[0] == 404
    wrong_ip = next(ip for ip in model.ips if ip != host.ip)
    assert fetch(web, host.name, "/", ip=wrong_ip)[0] == 421


def test_access_log_records_each_request(model: WebModel, web: TestWeb) -> None:
    host = hosts_by(model, "open")[0]
    before = time.time()
    fetch(web, host.name, "/", agent="logcheck/1")
    fetch(web, "nowhere.test", "/?q=1", ip=host.ip, agent="logcheck/1")
    rows = logged(web, "user_agent", "logcheck/1", 2)
    assert [(r["host"], r["path"], r["status"]) for r in rows] == [
        (host.name, "/", 200),
        ("nowhere.test", "/?q=1", 404),
    ]
    for row in rows:
        assert row["ip"] == host.ip and row["method"] == "GET" and row["bytes"] > 0
        assert before <= row["start"] <= row["end"] <= time.time()
        assert row["at"] == web.time.isoformat()
    assert [r["version"] for r in rows] == [0, None]  # a page's version; none for a 404


def test_slow_host_serves_concurrent_requests(
    model: WebModel, web: TestWeb, tmp_path: Path
) -> None:
    host = min((h for h in model.hosts if h.slow), key=lambda h: h.slow)
    paths = [p.path for p in host.pages[:4]]
    started = time.time()
    threads = [threading.Thread(target=fetch, args=(web, host.name, p)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert host.slow <= time.time() - started < 4 * host.slow  # faster than serial
    rows = logged(web, "host", host.name, len(paths))
    log = tmp_path / "slow.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = politeness_audit(log, 0.1)
    assert report.max_in_flight_per_host >= 2 and report.hosts_with_overlap == 1


def test_robots_audit_flags_disallowed_requests(
    model: WebModel, web: TestWeb, tmp_path: Path
) -> None:
    host = hosts_by(model, "star")[0]
    blocked = next(p.path for p in host.pages if model.is_disallowed(host.name, p.path, AGENT))
    error_host = hosts_by(model, "error")[0]
    fetch(web, host.name, "/robots.txt", agent="rude/1")
    fetch(web, host.name, "/", agent="rude/1")
    fetch(web, host.name, blocked, agent="rude/1")
    fetch(web, error_host.name, "/robots.txt", agent="rude/1")
    fetch(web, error_host.name, "/", agent="rude/1")
    rows = logged(web, "user_agent", "rude/1", 5)
    log = tmp_path / "rude.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert robots_audit(log, model, AGENT) == [f"{host.name}{blocked}", f"{error_host.name}/"]


def test_stop_cuts_keepalive_connections_and_joins_threads(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    model = WebModel.generate(3, hosts=4, ips=2, pages_per_host=(3, 5))
    web = TestWeb(model, tmp_path).start()
    host = model.hosts[0]
    conn = http.client.HTTPConnection(host.ip, web.port, timeout=5)
    try:
        conn.request("GET", "/", headers={"Host": host.name})
        assert conn.getresponse().read()
        assert len(set(threading.enumerate()) - before) >= 2  # acceptor + idle handler
        with pytest.raises(OSError):
            TestWeb(model, tmp_path / "second", port=web.port).start()
        started = time.time()
        web.stop()
        assert time.time() - started < 2.0
        assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("requisites", "path", "said"),
    [(False, "/", "port {port}"), (True, "/static/site.css", "page requisites (CDN site-")],
)
def test_run_serves_until_stopped(tmp_path: Path, requisites: bool, path: str, said: str) -> None:
    # with requisites (``trawl testweb --requisites``) it serves them too
    stop, out = threading.Event(), io.StringIO()
    kwargs: dict[str, Any] = {"ips": 3, "out": out, "stop": stop, "requisites": requisites}
    runner = threading.Thread(target=run, args=(5, 6, 0, tmp_path), kwargs=kwargs)
    runner.start()
    try:
        deadline = time.time() + 5
        while "access log" not in out.getvalue() and time.time() < deadline:
            time.sleep(0.01)
        seed = urlsplit((tmp_path / "seeds.txt").read_text().split()[0])
        hosts = [ln.split() for ln in (tmp_path / "hosts").read_text().splitlines()[1:]]
        ip = {name: addr for addr, name in hosts}[str(seed.hostname)]
        conn = http.client.HTTPConnection(ip, seed.port, timeout=5)
        conn.request("GET", path, headers={"Host": seed.netloc})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        stop.set()
        runner.join(5)
    assert not runner.is_alive() and said.format(port=seed.port) in out.getvalue()


# -- throttled hosts ------------------------------------------------------------------

T0 = 1_000_000.0  # an explicit clock for respond(): no test sleeps


def throttled(model: WebModel, throttle: Throttle, slow: float = 0.0) -> tuple[WebModel, HostInfo]:
    """A copy of ``model`` (with fresh limiter state) whose first "open" host is throttled."""
    plain_host = hosts_by(model, "open")[0]
    host = dataclasses.replace(plain_host, throttle=throttle, slow=slow)
    hosts = tuple(host if h.name == host.name else h for h in model.hosts)
    return WebModel(model.seed, model.agent, hosts), host


def test_rate_limiter_answers_retry_after_seconds_until_the_host_is_free(
    model: WebModel,
) -> None:
    web, host = throttled(model, Throttle("limit", 429, interval_s=2.0), slow=0.25)

    def status_at(now: float, path: str = "/") -> tuple[int, str | None]:
        resp = respond(web, host.name, path, 80, host.ip, now=now)
        return resp.status, dict(resp.headers).get("Retry-After")

    assert status_at(T0) == (200, None)  # ends at T0 + 0.25: free again at T0 + 2.25
    assert status_at(T0 + 0.5, "/robots.txt") == (429, "2")  # 1.75 s left, rounded up
    assert status_at(T0 + 2.2) == (429, "1")
    assert status_at(T0 + 2.25) == (200, None)  # pushing back did not move the free time
    assert status_at(T0 + 4.0) == (429, "1")
    early = respond(web, host.name, "/", 80, host.ip, now=T0 + 4.1)
    assert early.delay == 0.0 and b"slow down" in early.body  # no slow delay on a 429
    assert web.expected_status(host.name, "/") == 200  # ground truth is the polite answer


def test_rate_limiter_sends_an_http_date_that_never_comes_early(model: WebModel) -> None:
    web, host = throttled(model, Throttle("limit", 503, interval_s=1.5, http_date=True))
    start = T0 + 0.2
    assert respond(web, host.name, "/", 80, host.ip, now=start).status == 200
    pushed = respond(web, host.name, "/", 80, host.ip, now=start + 0.1)
    assert pushed.status == 503
    value = dict(pushed.headers)["Retry-After"]
    assert value.endswith(" GMT")
    when = parsedate_to_datetime(value).timestamp()
    assert when == T0 + 2  # free at T0 + 1.7, rounded up to the whole second
    assert respond(web, host.name, "/", 80, host.ip, now=when).status == 200


def test_flaky_host_fails_every_nth_request_whatever_the_timing(model: WebModel) -> None:
    web, host = throttled(model, Throttle("flaky", 503, every=3, retry_after_s=2))
    answers = [respond(web, host.name, "/", 80, host.ip, now=T0 + 100 * i) for i in range(7)]
    assert [r.status for r in answers] == [200, 200, 503, 200, 200, 503, 200]
    assert dict(answers[2].headers)["Retry-After"] == "2"
    dated, host = throttled(model, Throttle("flaky", 503, every=1, retry_after_s=3, http_date=True))
    value = dict(respond(dated, host.name, "/", 80, host.ip, now=T0 + 0.5).headers)["Retry-After"]
    assert parsedate_to_datetime(value).timestamp() == T0 + 4


def test_rate_limiter_admits_one_of_many_simultaneous_requests(model: WebModel) -> None:
    web, host = throttled(model, Throttle("limit", 429, interval_s=60.0))
    barrier = threading.Barrier(16)
    statuses: list[int] = []

    def hit() -> None:
        barrier.wait()
        statuses.append(respond(web, host.name, "/", 80, host.ip, now=T0).status)

    threads = [threading.Thread(target=hit) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] + [429] * 15


def test_access_log_records_the_retry_after_sent(model: WebModel, tmp_path: Path) -> None:
    web_model, host = throttled(model, Throttle("limit", 429, interval_s=60.0))
    with TestWeb(web_model, tmp_path) as web:
        assert fetch(web, host.name, "/")[0] == 200
        status, headers, _ = fetch(web, host.name, "/")
        assert (status, headers["Retry-After"]) == (429, "60")
        rows = logged(web, "host", host.name, 2)
    assert [(r["status"], r["retry_after"]) for r in rows] == [(200, None), (429, "60")]
