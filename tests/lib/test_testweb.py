"""Tests for trawl.testweb: the model, the loopback server and the audits.

Real HTTP over loopback: requests go to the host's pinned 127.0.1.x address
with an explicit Host header, as a crawler using the written hosts file would.
One small web (20 hosts on 5 IPs) is served for the whole module.
"""

from __future__ import annotations

import http.client
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from trawl.testweb import TestWeb, WebModel, politeness_audit, robots_audit, run
from trawl.testweb.audit import read_log
from trawl.testweb.records import HostInfo

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


def hosts_by(model: WebModel, robots: str) -> list[HostInfo]:
    return [h for h in model.hosts if h.robots == robots and not h.slow]


def page_with(host: HostInfo, status: int) -> str:
    return next(p.path for p in host.pages if p.status == status)


def logged(web: TestWeb, key: str, value: str, count: int) -> list[dict[str, Any]]:
    """Log rows with row[key] == value, waiting for ``count`` of them.

    The server writes a row just after the response's last byte, so a client
    can read the log a moment before its own request appears there.
    """
    deadline = time.time() + 3
    while True:
        rows = [r for r in read_log(web.access_log) if r[key] == value]
        if len(rows) >= count or time.time() > deadline:
            return rows
        time.sleep(0.005)


def write_log(path: Path, rows: list[tuple[str, float, float]]) -> Path:
    lines = [
        json.dumps({"host": h, "ip": "127.0.1.1", "path": "/", "start": s, "end": e})
        for h, s, e in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


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
    delayed = next(h for h in model.hosts if h.crawl_delay and not h.slow)
    assert (
        f"Crawl-delay: {delayed.crawl_delay:g}"
        in fetch(web, delayed.name, "/robots.txt")[2].decode()
    )


def test_links_use_every_form_and_resolve_to_model_targets(model: WebModel, web: TestWeb) -> None:
    hrefs: list[str] = []
    bases = 0
    for host in [h for h in model.hosts if not h.slow][:8]:
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
    fast = [h for h in model.hosts if not h.slow]
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


def test_run_serves_until_stopped(tmp_path: Path) -> None:
    stop, out = threading.Event(), io.StringIO()
    kwargs: dict[str, Any] = {"ips": 3, "out": out, "stop": stop}
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
        conn.request("GET", "/", headers={"Host": seed.netloc})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        stop.set()
        runner.join(5)
    assert not runner.is_alive() and f"port {seed.port}" in out.getvalue()


# -- politeness audit on crafted logs -----------------------------------------------


def test_politeness_audit_detects_overlap_and_short_gap(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "bad.jsonl",
        [
            ("a.test", 0.0, 1.0),
            ("a.test", 0.5, 1.2),  # overlaps the first request
            ("a.test", 1.3, 1.4),  # only 0.1 s after the latest end
            ("b.test", 0.6, 0.8),
        ],
    )
    report = politeness_audit(log, 0.5)
    assert report.requests == 4 and report.hosts == 2 and report.ips == 1
    assert report.max_in_flight_per_host == 2 and report.hosts_with_overlap == 1
    assert report.max_in_flight_per_ip == 3
    assert report.min_gap_s == pytest.approx(-0.5)
    assert report.gaps_below_min == 2
    assert report.as_dict()["gaps_below_min"] == 2


def test_politeness_audit_is_clean_on_a_polite_log(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "good.jsonl",
        [("a.test", 0.0, 0.3), ("a.test", 1.298, 1.5), ("b.test", 0.0, 0.1), ("b.test", 1.1, 1.2)],
    )
    report = politeness_audit(log, 1.0)
    assert report.max_in_flight_per_host == 1 and report.hosts_with_overlap == 0
    assert report.gaps_below_min == 0 and report.min_gap_s == pytest.approx(0.998)
    assert report.crawl_delay_violations == 0


def test_politeness_audit_checks_crawl_delay_with_model(model: WebModel, tmp_path: Path) -> None:
    host = next(h for h in model.hosts if h.crawl_delay)
    delay = float(host.crawl_delay or 0)
    log = write_log(
        tmp_path / "d.jsonl", [(host.name, 0.0, 0.1), (host.name, 0.1 + delay / 2, 9.0)]
    )
    assert politeness_audit(log, 0.1, model=model).crawl_delay_violations == 1
    assert politeness_audit(log, 0.1).crawl_delay_violations == 0
