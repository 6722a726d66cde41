"""Tests for trawl.testweb.estate: an operator's sites under one registered domain.

The site tree is checked through ``estate.respond`` (pure, fast): its pages,
their links, their texts and what is not there. Then one ``TestWeb`` serves a
few estate hosts over loopback, as the crawler will meet them: names in the
hosts file, home pages in ``seeds.txt``, answers on kept-alive connections,
requests logged.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from tests.testweb.test_traps import Client, Page, hosts_file
from trawl.testweb import TestWeb, WebModel, estate
from trawl.testweb.estate import (
    ESTATE_DOMAIN,
    ESTATE_HOSTS,
    ESTATE_NET,
    estate_hosts,
    estate_paths,
)
from trawl.testweb.generate import loopback_ip
from trawl.testweb.hostile import HOSTILE_NET
from trawl.testweb.traps import TRAP_NET
from trawl.url.keys import registered_domain

SERVED = 3  # estate hosts of the TestWeb below


def served_page(host: str, path: str) -> Page:
    page = estate.respond(host, path)
    assert page.status == 200, (host, path, page.status)
    return Page(page.body)


def walk(host: str) -> dict[str, int]:
    """path -> link depth from ``/``, following each page's links breadth first."""
    depth, frontier = {"/": 0}, ["/"]
    while frontier:
        following = []
        for path in frontier:
            for href, _ in served_page(host, path).links:
                target = urlsplit(urljoin(f"http://{host}{path}", href))
                assert target.hostname == host, (path, href)  # no link leaves the host
                if target.path not in depth:
                    depth[target.path] = depth[path] + 1
                    following.append(target.path)
        frontier = following
    return depth


# -- the estate, pure -------------------------------------------------------------


def test_hosts_share_one_registered_domain_each_on_its_own_address() -> None:
    hosts = estate_hosts()
    assert len(hosts) == ESTATE_HOSTS == 30 and len(set(hosts)) == 30
    assert hosts[0] == "s00.estate.test" and hosts[-1] == "s29.estate.test"
    assert {registered_domain(h) for h in hosts} == {ESTATE_DOMAIN}
    addresses = estate.listen_addresses()
    assert len(set(addresses)) == 30 and all(ip_address(a) in ESTATE_NET for a in addresses)
    lines = estate.hosts_file_text().splitlines()
    assert lines[0].startswith("#") and [ln.split() for ln in lines[1:]] == [
        [a, h] for a, h in zip(addresses, hosts, strict=True)
    ]
    # clear of the hostile hosts', the traps' and (for 2,000 addresses) the model's
    assert not ESTATE_NET.overlaps(HOSTILE_NET) and not ESTATE_NET.overlaps(TRAP_NET)
    assert not any(ip_address(loopback_ip(i)) in ESTATE_NET for i in range(2000))
    assert estate_hosts(3) == hosts[:3] and estate.seed_urls(8080, 3) == [
        f"http://{h}:8080/" for h in hosts[:3]
    ]
    for size in (0, 255):
        with pytest.raises(ValueError):
            estate_hosts(size)


def test_every_host_has_the_same_hundred_pages_that_never_change() -> None:
    paths = estate_paths()
    assert len(paths) == len(set(paths)) == 100 == estate.PAGES_PER_HOST
    for host in (estate_hosts()[0], estate_hosts()[-1]):
        for path in paths:
            page = estate.respond(host, path)
            assert page.status == 200, (host, path)
            assert dict(page.headers)["Content-Type"] == "text/html; charset=utf-8"
            assert estate.respond(host, path) == page


def test_every_page_is_reachable_from_home_within_depth_two() -> None:
    for host in (estate_hosts()[0], estate_hosts()[17]):
        depth = walk(host)
        assert set(depth) == set(estate_paths())
        levels = [sum(d == n for d in depth.values()) for n in range(3)]
        assert levels == [1, 9, 90] and max(depth.values()) == 2


def test_sections_and_articles_link_as_a_site_tree() -> None:
    host = estate_hosts()[4]
    home = served_page(host, "/")
    assert home.links == [(f"/s/{k}/", f"section {k}") for k in range(1, 10)]
    section = served_page(host, "/s/3/")
    assert ("/", "home") in section.links and len(section.links) == 11
    assert section.href("article 10") == "/s/3/10.html"
    article = served_page(host, "/s/3/4.html")
    assert article.links == [("/", "home"), ("/s/3/", "section 3"), ("/s/3/5.html", "next article")]
    assert "next article" not in dict(served_page(host, "/s/3/10.html").links).values()


def test_other_paths_and_robots_txt_are_404() -> None:
    host = estate_hosts()[0]
    for path in (
        "/robots.txt",
        "/s/10/",
        "/s/0/",
        "/s/01/",
        "/s/1",
        "/s/1/0.html",
        "/s/1/11.html",
        "/s/1/1.htm",
        "/index.html",
        "/?page=2",
        "/s/1/?x=1",
    ):
        assert estate.respond(host, path).status == 404, path


def test_every_page_has_its_own_text() -> None:
    texts = {
        (host, path): served_page(host, path).main
        for host in estate_hosts()
        for path in estate_paths()
    }
    assert len(texts) == 3000 and len(set(texts.values())) == 3000
    assert min(len(t.split()) for t in texts.values()) > 30  # prose, not a stub


# -- served by TestWeb --------------------------------------------------------------


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    model = WebModel.generate(1, hosts=3, ips=1, sitemaps=0.0)
    with TestWeb(model, tmp_path_factory.mktemp("estate"), n_seeds=1, estate=SERVED) as served:
        yield served


def test_testweb_serves_the_estate_over_loopback(web: TestWeb) -> None:
    pinned = hosts_file(web.hosts_file)
    hosts = estate_hosts(SERVED)
    assert [pinned[h] for h in hosts] == estate.listen_addresses(SERVED)
    assert f"s{SERVED:02d}.{ESTATE_DOMAIN}" not in pinned
    seeds = web.seeds_file.read_text().split()
    assert seeds == web.model.seed_urls(1, web.port) + estate.seed_urls(web.port, SERVED)
    client = Client(web)
    try:
        for host in hosts:
            status, headers, body = client.get(host, "/s/2/7.html")
            assert (status, body) == (200, estate.respond(host, "/s/2/7.html").body)
            assert int(headers["Content-Length"]) == len(body) and "Connection" not in headers
        assert client.get(hosts[1], "/robots.txt")[0] == 404
        status, headers, body = client.get(hosts[2], "/", method="HEAD")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
        assert client.url(seeds[-1])[0] == 200
    finally:
        client.close()


def test_testweb_logs_estate_requests_and_serves_no_more_hosts(web: TestWeb) -> None:
    path = f"/logged-{time.time_ns()}"
    conn = http.client.HTTPConnection(estate.listen_addresses(SERVED)[0], web.port, timeout=5)
    try:
        for host in (estate_hosts(SERVED)[0], f"s{SERVED:02d}.{ESTATE_DOMAIN}"):
            conn.request("GET", path, headers={"Host": f"{host}:{web.port}"})
            conn.getresponse().read()
    finally:
        conn.close()
    deadline, rows = time.time() + 3, []
    while len(rows) < 2 and time.time() < deadline:
        rows = list(map(json.loads, web.access_log.read_text().splitlines()))
        rows = [r for r in rows if r["path"] == path]
    by_host = {r["host"]: r for r in rows}
    assert by_host[estate_hosts(SERVED)[0]]["estate"] is True
    assert by_host[estate_hosts(SERVED)[0]]["status"] == 404
    # a host past the estate's size is no estate host: the model's "unknown host"
    assert "estate" not in by_host[f"s{SERVED:02d}.{ESTATE_DOMAIN}"]


def test_a_model_reaching_into_the_estate_net_is_refused(tmp_path: Path) -> None:
    model = WebModel.generate(1, hosts=3, ips=3)
    moved = dataclasses.replace(model.hosts[0], ip="127.0.11.1")
    clash = dataclasses.replace(model, hosts=(moved, *model.hosts[1:]))
    with pytest.raises(ValueError, match=r"127\.0\.11"):
        TestWeb(clash, tmp_path, estate=2).start()
    with pytest.raises(ValueError, match="estate"):
        TestWeb(model, tmp_path, estate=-1)


def test_without_an_estate_nothing_of_it_is_written(tmp_path: Path) -> None:
    with TestWeb(WebModel.generate(1, hosts=3, ips=1), tmp_path, n_seeds=2) as web:
        assert ESTATE_DOMAIN not in web.hosts_file.read_text()
        assert web.seeds_file.read_text().split() == web.model.seed_urls(2, web.port)
