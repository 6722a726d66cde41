"""Tests for trawl.testweb.traps: the crawler traps of the test web.

Real HTTP over loopback, as for the rest of the test web: requests go to the
address the written hosts file pins the trap's name to, with a Host header,
on kept-alive connections. Each test checks the property that makes its host
a trap (and the ground truth the crawler's tests will rely on), walking the
trap by its own links where that is the point.
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import itertools
import json
import random
import statistics
import string
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from ipaddress import ip_address
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import pytest

from trawl.config import DedupConfig
from trawl.dedup.fingerprint import page_fingerprint
from trawl.dedup.simhash import hamming
from trawl.dedup.soft404 import echo_free_simhash, probe_url
from trawl.parse.html import parse_page
from trawl.testweb import TestWeb, WebModel, run, traps
from trawl.testweb.traps import (
    BLOGROLL_HOST,
    FARM_DOMAIN,
    FARM_HOSTS,
    FILTERS,
    TRAP_HOSTS,
    TRAP_NET,
)

Reply = tuple[int, dict[str, str], bytes]


class Client:
    """GETs over one kept-alive connection per address, names resolved by the hosts file."""

    def __init__(self, web: TestWeb) -> None:
        self.web = web
        self.address = hosts_file(web.hosts_file)
        self.conns: dict[str, http.client.HTTPConnection] = {}

    def get(self, host: str, path: str, method: str = "GET") -> Reply:
        ip = self.address[host]
        conn = self.conns.setdefault(ip, http.client.HTTPConnection(ip, self.web.port, timeout=5))
        conn.request(method, path, headers={"Host": f"{host}:{self.web.port}"})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()

    def url(self, url: str) -> Reply:
        parts = urlsplit(url)
        assert parts.port == self.web.port, url
        return self.get(
            str(parts.hostname), parts.path + (f"?{parts.query}" if parts.query else "")
        )

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def hosts_file(path: Path) -> dict[str, str]:
    """name -> address, from hosts(5) lines (each section has a comment line)."""
    lines = [ln.split() for ln in path.read_text().splitlines() if not ln.startswith("#")]
    return {name: address for address, name in lines}


class Page(HTMLParser):
    """The links (as written) and the text of ``main`` of one page."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (href, anchor)
        self.text: list[str] = []
        self._in_main = self._in_a = False
        self.feed(body.decode("utf-8"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append((str(dict(attrs)["href"]), ""))
            self._in_a = True
        self._in_main |= tag == "main"

    def handle_endtag(self, tag: str) -> None:
        self._in_main &= tag != "main"
        self._in_a &= tag != "a"

    def handle_data(self, data: str) -> None:
        if self._in_main:
            self.text.append(data)
        if self._in_a:
            self.links[-1] = (self.links[-1][0], self.links[-1][1] + data)

    @property
    def main(self) -> str:
        return " ".join(self.text)

    def href(self, anchor: str) -> str:
        return next(h for h, a in self.links if a == anchor)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    model = WebModel.generate(1, hosts=10, ips=3)
    with TestWeb(model, tmp_path_factory.mktemp("traps"), traps=True) as served:
        yield served


@pytest.fixture
def client(web: TestWeb) -> Iterator[Client]:
    c = Client(web)
    yield c
    c.close()


def page(client: Client, host: str, path: str) -> Page:
    status, _, body = client.get(host, path)
    assert status == 200, (host, path, status)
    return Page(body)


def base(web: TestWeb, host: str, path: str = "/") -> str:
    return f"http://{host}:{web.port}{path}"


def random_paths(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    word = lambda: "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9)))  # noqa: E731
    return ["/" + "/".join(word() for _ in range(rng.randint(1, 3))) for _ in range(n)]


# -- the catalogue, the hosts and seeds files, the log ----------------------------------


def test_catalogue_names_and_ground_truth() -> None:
    assert TRAP_HOSTS["linkfarm"] == "w0.linkfarm.test" == FARM_HOSTS[0]
    assert len(set(FARM_HOSTS)) == 500 and all(h.endswith(f".{FARM_DOMAIN}") for h in FARM_HOSTS)
    assert all(traps.kind_of(h) == "linkfarm" for h in FARM_HOSTS)
    assert {traps.kind_of(h) for h in TRAP_HOSTS.values()} == set(TRAP_HOSTS)
    assert not traps.is_trap("site-0001.test") and not traps.is_trap(FARM_DOMAIN)
    with pytest.raises(KeyError):
        traps.kind_of("calm.hostile.test")
    assert traps.SESSION_PARAMS == {"sessions": "PHPSESSID", "visits": "vt"}
    assert len(traps.real_paths("sessions")) == 10 == len(traps.real_paths("visits"))
    assert len(traps.real_paths("facets")) == 2**10 + 4  # every set once, home, three items
    assert traps.real_paths("soft404_redirect") == traps.real_paths("soft404")
    assert not set(traps.SOFT404_MOVED) & traps.real_paths("soft404_redirect")
    for endless in ("calendar", "echo"):
        with pytest.raises(ValueError):
            traps.real_paths(endless)


def test_hosts_file_pins_every_trap_and_farm_host_in_their_net(web: TestWeb) -> None:
    pinned = Client(web).address
    trap_names = [*TRAP_HOSTS.values(), *FARM_HOSTS]
    assert set(trap_names) <= set(pinned)
    assert all(ip_address(pinned[h]) in TRAP_NET for h in trap_names)
    assert len({pinned[h] for h in FARM_HOSTS}) == 8
    assert {pinned[h] for h in [*trap_names, BLOGROLL_HOST]} == set(traps.listen_addresses())
    assert not any(ip_address(ip) in TRAP_NET for ip in web.model.ips)


def test_seeds_list_the_model_seeds_then_every_entrance(web: TestWeb, client: Client) -> None:
    seeds = web.seeds_file.read_text().split()
    model_seeds = web.model.seed_urls(web.n_seeds, web.port)
    assert seeds == model_seeds + traps.seed_urls(web.port)
    entrances = seeds[len(model_seeds) :]
    assert {urlsplit(u).hostname for u in entrances} == set(TRAP_HOSTS.values())
    assert all(client.url(u)[0] == 200 for u in entrances)


def test_the_blogroll_links_every_entrance_and_is_no_trap_nor_seed(
    web: TestWeb, client: Client
) -> None:
    home = page(client, BLOGROLL_HOST, "/")
    assert [h for h, _ in home.links] == traps.seed_urls(web.port)
    assert client.get(BLOGROLL_HOST, "/other")[0] == 404
    assert not traps.is_trap(BLOGROLL_HOST) and traps.serves(BLOGROLL_HOST)
    assert not any(BLOGROLL_HOST in u for u in web.seeds_file.read_text().split())


def test_a_model_reaching_into_the_traps_net_is_refused(tmp_path: Path) -> None:
    model = WebModel.generate(1, hosts=3, ips=3)
    moved = dataclasses.replace(model.hosts[0], ip="127.0.10.1")
    clash = dataclasses.replace(model, hosts=(moved, *model.hosts[1:]))
    with pytest.raises(ValueError, match=r"127\.0\.10"):
        TestWeb(clash, tmp_path, traps=True).start()


def test_robots_txt_is_404_on_every_trap(client: Client) -> None:
    for host in [*TRAP_HOSTS.values(), FARM_HOSTS[123]]:
        assert client.get(host, "/robots.txt")[0] == 404, host


def test_answers_are_plain_keep_alive_html(web: TestWeb, client: Client) -> None:
    for host in TRAP_HOSTS.values():
        status, headers, body = client.get(host, "/")
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert int(headers["Content-Length"]) == len(body) and "Connection" not in headers
    assert len(client.conns) == len({client.address[h] for h in TRAP_HOSTS.values()})
    status, headers, body = client.get(TRAP_HOSTS["calendar"], "/", method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


def test_access_log_marks_trap_requests(web: TestWeb, client: Client) -> None:
    path = f"/logged-{time.time_ns()}"
    client.get(TRAP_HOSTS["soft404"], path)
    client.get(FARM_HOSTS[7], path)
    deadline, rows = time.time() + 3, []
    while len(rows) < 2 and time.time() < deadline:
        lines = web.access_log.read_text().splitlines()
        rows = [r for r in map(json.loads, lines) if r["path"] == path]
    assert sorted((r["host"], r["trap"], r["status"]) for r in rows) == [
        (TRAP_HOSTS["soft404"], "soft404", 200),
        (FARM_HOSTS[7], "linkfarm", 404),
    ]
    model_rows = [json.loads(ln) for ln in web.access_log.read_text().splitlines()]
    assert all("trap" not in r for r in model_rows if not traps.is_trap(r["host"]))


# -- the traps ----------------------------------------------------------------------


def test_calendar_next_month_never_ends(web: TestWeb, client: Client) -> None:
    host = TRAP_HOSTS["calendar"]
    url = urljoin(base(web, host), page(client, host, "/").href("December 2026"))
    seen: dict[str, str] = {}
    for _ in range(50):
        status, _, body = client.url(url)
        assert status == 200
        month = Page(body)
        seen[url] = month.main
        url = urljoin(url, month.href("next month"))
    assert len(seen) == 50 and len(set(seen.values())) == 50
    assert urlsplit(list(seen)[-1]).path == "/cal/2031/01/"
    assert "January 2031" in seen[list(seen)[-1]]


def test_calendar_days_link_back_and_the_range_ends(client: Client) -> None:
    host = TRAP_HOSTS["calendar"]
    month = page(client, host, "/cal/2026/02/")
    days = [h for h, _ in month.links if h.count("/") == 5]
    assert len(days) >= 3
    assert all(page(client, host, d).links == [("/cal/2026/02/", "February 2026")] for d in days)
    assert "next month" not in dict(page(client, host, "/cal/9999/12/").links).values()
    assert "previous month" not in dict(page(client, host, "/cal/0001/01/").links).values()
    for bad in (
        "/cal/10000/01/",
        "/cal/0000/12/",
        "/cal/2026/13/",
        "/cal/2026/02/29/",
        "/cal/2026/1/",
    ):
        assert client.get(host, bad)[0] == 404, bad


def test_facets_serve_every_filter_set_reached_by_clicking(client: Client) -> None:
    host = TRAP_HOSTS["facets"]
    start = page(client, host, "/").href("all products")
    texts: dict[frozenset[str], str] = {}
    queue = [start]
    while queue:
        target = queue.pop()
        shown = page(client, host, target)
        texts[frozenset(parse_qsl(urlsplit(target).query))] = shown.main
        for href, _ in shown.links:
            key = frozenset(parse_qsl(urlsplit(href).query))
            if href.startswith("/search") and key not in texts and href not in queue:
                texts[key] = ""  # claimed: one spelling of each set is fetched
                queue.append(href)
    assert len(texts) == 2**10 and len(set(texts.values())) == 2**10


def test_facets_one_set_many_spellings_same_text(client: Client) -> None:
    host = TRAP_HOSTS["facets"]
    names = ["color", "size", "sale"]
    values = dict(FILTERS)
    spellings = [
        "/search?" + "&".join(f"{n}={values[n]}" for n in p) for p in itertools.permutations(names)
    ]
    shown = [page(client, host, s) for s in spellings]
    assert len({p.main for p in shown}) == 1  # same filters, same text
    assert len({tuple(p.links) for p in shown}) == len(spellings)  # links keep the click order
    toggled = shown[0].href("add brand")
    assert toggled == spellings[0] + "&brand=acme"
    assert shown[0].href("remove size") == "/search?color=red&sale=yes"


def test_facets_unknown_filters_and_items(client: Client) -> None:
    host = TRAP_HOSTS["facets"]
    home = page(client, host, "/")
    items = [h for h, _ in home.links if h.startswith("/item/")]
    assert len(items) == 3 and len({page(client, host, i).main for i in items}) == 3
    for bad in (
        "/search?colour=red",
        "/search?color=blue",
        "/search?color=red&color=red",
        "/item/4",
        "/shop",
    ):
        assert client.get(host, bad)[0] == 404, bad


@pytest.mark.parametrize("kind", ["sessions", "visits"])
def test_every_response_mints_a_new_token_in_every_link(client: Client, kind: str) -> None:
    host, param = TRAP_HOSTS[kind], traps.SESSION_PARAMS[kind]
    bodies, tokens = [], []
    for _ in range(2):
        status, headers, body = client.get(host, "/page/3?" + f"{param}=whatever")
        shown = Page(body)
        found = {dict(parse_qsl(urlsplit(h).query)).get(param) for h, _ in shown.links}
        assert status == 200 and len(found) == 1 and None not in found
        token = str(found.pop())
        assert body.count(token.encode()) == len(shown.links)  # in the links, nowhere else
        assert (headers.get("Set-Cookie") == f"{param}={token}; path=/") == (kind == "sessions")
        bodies.append(body.replace(token.encode(), b"TOKEN"))
        tokens.append(token)
    assert tokens[0] != tokens[1] and bodies[0] == bodies[1]


@pytest.mark.parametrize("kind", ["sessions", "visits"])
def test_session_hosts_have_ten_real_paths(client: Client, kind: str) -> None:
    host, param = TRAP_HOSTS[kind], traps.SESSION_PARAMS[kind]
    urls: set[str] = set()
    queue, reached = ["/"], {"/"}
    while queue:
        for href, _ in page(client, host, queue.pop()).links:
            urls.add(href)
            path, query = urlsplit(href).path, dict(parse_qsl(urlsplit(href).query))
            assert list(query) == [param]
            if path not in reached:
                reached.add(path)
                queue.append(href)
    assert reached == traps.real_paths(kind) and len(urls) > len(reached)
    assert client.get(host, "/page/10")[0] == 404


def test_visits_fingerprints_are_identical_though_every_url_differs(client: Client) -> None:
    host = TRAP_HOSTS["visits"]
    prints = set()
    for _ in range(3):
        status, headers, body = client.get(host, "/page/5")
        assert status == 200
        parsed = parse_page(body, headers["Content-Type"], list(headers.items()), "trawl")
        prints.add(page_fingerprint(parsed.main_text, DedupConfig()).simhash)
        assert len({link.href for link in parsed.links}) == 3
    assert len(prints) == 1 and None not in prints


def test_echo_links_pile_up_segments(web: TestWeb, client: Client) -> None:
    host = TRAP_HOSTS["echo"]
    url = urljoin(base(web, host), page(client, host, "/").href("documentation"))
    for _ in range(29):
        status, _, body = client.url(url)
        assert status == 200
        url = urljoin(url, Page(body).href("files"))
    path = urlsplit(url).path
    assert path.count("/") == 31 and path.startswith("/docs/files/files/")  # 30 segments
    deep = page(client, host, path)
    resolved = {urlsplit(urljoin(url, h)).path for h, _ in deep.links}
    assert resolved == {path + "files/", path + "images/", path.rsplit("/", 2)[0] + "/docs/"}
    assert client.get(host, "/elsewhere/")[0] == 404


def test_farm_pages_link_across_the_farm_and_out(web: TestWeb, client: Client) -> None:
    host, model_homes = FARM_HOSTS[0], {f"http://{h.name}:{web.port}/" for h in web.model.hosts}
    queue = [base(web, host)]
    for fetched in range(20):
        url = queue[fetched]
        status, _, body = client.url(url)
        assert status == 200
        links = [urljoin(url, h) for h, _ in Page(body).links]
        out = [u for u in links if u in model_homes]
        farm = [u for u in links if u not in model_homes]
        assert 1 <= len(out) <= 2 and all(
            urlsplit(u).hostname.endswith(f".{FARM_DOMAIN}") for u in farm
        )
        own = urlsplit(url).hostname
        assert sum(urlsplit(u).hostname != own for u in farm) == 10
        assert sum(urlsplit(u).hostname == own for u in farm) == 5
        queue += [u for u in farm if urlsplit(u).hostname != own]
    assert len({urlsplit(u).hostname for u in queue}) > 100  # 200 links, 499 other hosts


def test_farm_pages_are_fixed_and_unknown_paths_404(client: Client) -> None:
    host = FARM_HOSTS[42]
    assert client.get(host, "/p/7") == client.get(host, "/p/7")
    assert client.get(host, "/p/7")[2] != client.get(FARM_HOSTS[43], "/p/7")[2]
    for bad in ("/p/100", "/p/07", "/p/", "/about"):
        assert client.get(host, bad)[0] == 404, bad


def test_soft404_answers_200_for_any_path_with_its_path_echoed(client: Client) -> None:
    host = TRAP_HOSTS["soft404"]
    one, two = random_paths(2, seed=5)
    first, second = client.get(host, one), client.get(host, two)
    assert first[0] == second[0] == 200 and first[2] != second[2]
    assert traps.SORRY in Page(first[2]).main
    assert first[2].replace(one.encode(), b"PATH") == second[2].replace(two.encode(), b"PATH")


def test_soft404_pages_are_near_each_other_and_far_from_real_pages(client: Client) -> None:
    host, dedup = TRAP_HOSTS["soft404"], DedupConfig()

    def simhash(path: str) -> int:
        status, headers, body = client.get(host, path)
        assert status == 200
        parsed = parse_page(body, headers["Content-Type"], list(headers.items()), "trawl")
        value = page_fingerprint(parsed.main_text, dedup).simhash
        assert value is not None
        return value

    sorry = [simhash(p) for p in random_paths(12, seed=6)]
    near = [hamming(a, b) for a, b in itertools.combinations(sorry, 2)]
    assert len(set(sorry)) > 1 and statistics.median(near) <= dedup.max_distance
    real = [simhash(p) for p in sorted(traps.real_paths("soft404"))]
    assert min(hamming(r, s) for r in real for s in sorry) > 3 * dedup.max_distance
    assert len(set(real)) == len(real)


def test_soft404_pages_without_their_path_are_one_page(web: TestWeb, client: Client) -> None:
    """What trawl.dedup.soft404 compares: the error page's text with the echo of the
    path taken out is the same for every path (the probe's too), and no real
    page comes near it."""
    host, dedup = TRAP_HOSTS["soft404"], DedupConfig()

    def echo_free(path: str) -> int | None:
        status, headers, body = client.get(host, path)
        assert status == 200
        parsed = parse_page(body, headers["Content-Type"], list(headers.items()), "trawl")
        return echo_free_simhash(parsed.main_text, base(web, host, path), dedup)

    probe = urlsplit(probe_url(base(web, host).rstrip("/"), "seg1")).path
    (sorry,) = {echo_free(p) for p in [probe, *random_paths(8, seed=7)]}
    assert sorry is not None
    real = [echo_free(p) for p in sorted(traps.real_paths("soft404"))]
    assert min(hamming(r, sorry) for r in real if r is not None) > 3 * dedup.max_distance
    assert None not in real


def test_soft404_redirect_sends_missing_pages_home(client: Client) -> None:
    host = TRAP_HOSTS["soft404_redirect"]
    for path in [*random_paths(5, seed=8), *traps.SOFT404_DEAD_LINKS]:
        status, headers, body = client.get(host, path)
        assert (status, headers["Location"]) == (302, "/"), path
        assert Page(body).links == [("/", "here")]
    for path, target in traps.SOFT404_MOVED.items():
        status, headers, _ = client.get(host, path)
        assert (status, headers["Location"]) == (301, target)
        assert target in traps.real_paths("soft404_redirect") and target != "/"
    texts = {page(client, host, p).main for p in traps.real_paths("soft404_redirect")}
    assert len(texts) == len(traps.real_paths("soft404_redirect"))
    assert not texts & {page(client, TRAP_HOSTS["soft404"], p).main for p in ("/", "/about")}
    linked = {h for h, _ in page(client, host, "/").links}
    real = traps.real_paths("soft404_redirect")
    assert linked == (real - {"/"}) | set(traps.SOFT404_DEAD_LINKS) | set(traps.SOFT404_MOVED)


def test_soft404_home_links_real_and_missing_pages(client: Client) -> None:
    host = TRAP_HOSTS["soft404"]
    linked = {h for h, _ in page(client, host, "/").links}
    real, dead = linked & traps.real_paths("soft404"), linked - traps.real_paths("soft404")
    assert real == traps.real_paths("soft404") - {"/"} and 2 <= len(dead) <= 3
    assert all(traps.SORRY not in page(client, host, p).main for p in real)
    assert all(traps.SORRY in page(client, host, p).main for p in dead)


def test_run_serves_the_traps_when_asked(tmp_path: Path) -> None:
    stop, out = threading.Event(), io.StringIO()
    kwargs: dict[str, Any] = {"ips": 3, "out": out, "stop": stop, "traps": True}
    runner = threading.Thread(target=run, args=(5, 6, 0, tmp_path), kwargs=kwargs)
    runner.start()
    try:
        deadline = time.time() + 5
        while "access log" not in out.getvalue() and time.time() < deadline:
            time.sleep(0.01)
        seeds = (tmp_path / "seeds.txt").read_text().split()
        port = urlsplit(seeds[0]).port
        assert seeds[-len(TRAP_HOSTS) :] == traps.seed_urls(int(port or 80))
        hosts = hosts_file(tmp_path / "hosts")
        conn = http.client.HTTPConnection(hosts[TRAP_HOSTS["echo"]], port, timeout=5)
        conn.request("GET", "/docs/a/b/c/", headers={"Host": f"{TRAP_HOSTS['echo']}:{port}"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        stop.set()
        runner.join(5)
    assert not runner.is_alive() and "8 crawler traps" in out.getvalue()
