"""Tests for the test web's page requisites (trawl.testweb.requisites).

The web is served as it was without them -- pinned by digests of every
response of three webs, taken before requisites existed -- and with them a
page differs only by its requisite elements. What pages and stylesheets
reference is read back out of the served HTML (lxml) and CSS (a regex for
``@import`` and ``url()``) and compared with the model's ``requisites_of``;
the files are fetched over loopback HTTP as a crawler would (pinned IP,
Host header) and checked for their types and real bytes: PNG chunks and
CRCs, the WOFF2 header and its brotli stream. The robots rule is read back
with Protego, the parser the crawler uses. Last, headless Chromium renders a
page: no console message, the script ran, and every request it made is one
the model names.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import itertools
import re
import shutil
import struct
import subprocess
import time
import zlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import brotli
import lxml.html
import pytest
from protego import Protego

from trawl.testweb import EPOCH, Requisite, TestWeb, WebModel, robots_audit
from trawl.testweb import __main__ as testweb_main
from trawl.testweb.audit import read_log
from trawl.testweb.dups import publishes
from trawl.testweb.model import make_url
from trawl.testweb.records import HostInfo, Page
from trawl.testweb.render import page_html, requisite_html, respond, robots_txt
from trawl.testweb.requisites import (
    BANNER,
    FONT,
    LOGO,
    LOGO_COPY,
    PRIVATE_DIR,
    REQUISITE_KINDS,
    SECRET,
    is_ordinary,
    photo_paths,
)
from trawl.testweb.validators import http_date

SEED = 44  # 20 hosts: every robots variant, a CDN, private hosts, logo copies
SHAPE: dict[str, Any] = {"hosts": 20, "ips": 5, "pages_per_host": (5, 20)}
AGENT = "trawl/0.1 (+http://example.invalid/bot)"
PORT = 8080
TYPES = {
    "stylesheet": "text/css; charset=utf-8",
    "script": "text/javascript; charset=utf-8",
    "image": "image/png",
    "icon": "image/png",
    "font": "font/woff2",
}


def on_model() -> WebModel:
    return WebModel.generate(SEED, **SHAPE, requisites=True)


@pytest.fixture(scope="module")
def model() -> WebModel:
    return on_model()


@pytest.fixture(scope="module")
def web(model: WebModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    with TestWeb(model, tmp_path_factory.mktemp("requisites")) as served:
        yield served


def get(
    web: TestWeb, url: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """``url`` (a model URL) over loopback, to its host's pinned IP."""
    parts = urlsplit(url)
    info = web.model.host(parts.hostname or "")
    assert info is not None
    conn = http.client.HTTPConnection(info.ip, web.port, timeout=5)
    try:
        sent = {"Host": parts.netloc, "User-Agent": AGENT, **(headers or {})}
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), headers=sent)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def plain(host: HostInfo) -> bool:
    """Answers at once and never pushes back: safe to fetch many times quickly."""
    return not host.slow and host.throttle is None


def ordinary_pages(model: WebModel) -> Iterator[tuple[HostInfo, Page]]:
    for host in model.hosts:
        for page in host.pages:
            if is_ordinary(page):
                yield host, page


def richest_page(model: WebModel) -> tuple[HostInfo, Page]:
    """A page of a plain host showing a photo, the logo's copy, the banner and the secret."""
    for host, page in ordinary_pages(model):
        site = host.requisites
        assert site is not None
        shows_all = site.logo_copy and site.private and page.path in site.banners
        if plain(host) and shows_all and host.page_number(page.path) in site.photos:
            return host, page
    raise AssertionError("no page shows every kind of image")


# -- off: the web as it was ---------------------------------------------------------


def served_digest(model: WebModel) -> str:
    """A digest of every response of the web (robots.txt, sitemaps, pages), at the
    epoch and a month on, gzip bodies digested unpacked (zlib builds differ)."""
    digest = hashlib.sha256()
    for n, host in enumerate(model.hosts):
        sitemaps = host.sitemaps.files if host.sitemaps else ()
        for k, path in enumerate(["/robots.txt", *sitemaps, *(p.path for p in host.pages)]):
            for at in (EPOCH, EPOCH + timedelta(days=30)):
                now = 1e6 * (n * 1000 + k)  # far apart: a rate limiter always admits
                resp = respond(model, host.name, path, PORT, host.ip, now=now, at=at)
                packed = ("Content-Type", "application/gzip") in resp.headers
                body = gzip.decompress(resp.body) if packed else resp.body
                digest.update(
                    repr((host.name, path, resp.status, resp.headers, resp.delay)).encode()
                )
                digest.update(hashlib.sha256(body).digest())
    return digest.hexdigest()


@pytest.mark.parametrize(
    ("seed", "shape", "digest"),
    [
        (SEED, SHAPE, "25d52d5f0e8b02cc494c3200f6e723d7126efd5f10321ab147b6d108b6ecc917"),
        (
            SEED,
            {**SHAPE, "dup_families": 6},
            "71130aaf76939e407bbbd9809fb5f022aaac21c68bd2d631f8b54095850458f5",
        ),
        (
            3,
            {"hosts": 16, "ips": 4, "pages_per_host": (5, 20)},
            "7d4b53075f2f402417f8020f967338ad1fdccabd3502f3476d524f0b31583981",
        ),
    ],
)
def test_without_requisites_every_byte_is_served_as_before(
    seed: int, shape: dict[str, Any], digest: str
) -> None:
    """The digests were taken with the test web as it was before requisites."""
    off = WebModel.generate(seed, **shape, requisites=False)
    assert off == WebModel.generate(seed, **shape)
    assert all(h.requisites is None for h in off.hosts)
    assert served_digest(off) == digest
    host = off.hosts[0]
    assert respond(off, host.name, "/static/site.css", PORT, host.ip).status == 404


def test_with_requisites_pages_differ_only_by_their_elements(model: WebModel) -> None:
    off = WebModel.generate(SEED, **SHAPE)
    on_pages = [(h, p) for h in model.hosts for p in h.pages]
    assert [(h.name, p) for h, p in on_pages] == [(h.name, p) for h in off.hosts for p in h.pages]
    for (host, page), bare in zip(on_pages, (h for h in off.hosts for _ in h.pages), strict=True):
        served = page_html(host, page, PORT)
        head, images = requisite_html(host, page, PORT)
        assert bool(head) == is_ordinary(page) == bool(images)
        assert served.replace(head, "", 1).replace(images, "", 1) == page_html(bare, page, PORT)
    assert model.page_count == off.page_count
    seeds = off.seed_urls(3)
    assert model.reachable(seeds) == off.reachable(seeds)
    assert model.reachable(seeds, sitemaps=True) == off.reachable(seeds, sitemaps=True)
    for host, bare in zip(model.hosts, off.hosts, strict=True):
        assert model.sitemap_paths(host.name) == off.sitemap_paths(bare.name)
        closing = (
            {f"Disallow: {PRIVATE_DIR}"} if host.requisites and host.requisites.private else set()
        )
        on_lines, off_lines = robots_txt(host).splitlines(), robots_txt(bare).splitlines()
        assert [ln for ln in on_lines if ln not in closing] == [
            ln for ln in off_lines if ln != "Disallow:" or not closing
        ]


# -- what pages reference ----------------------------------------------------------

_CSS_REF = re.compile(r"""@import\s+url\(\s*["']?([^"')]+)|url\(\s*["']?([^"')]+)""")


def html_references(body: bytes, url: str) -> list[tuple[str, str]]:
    """(absolute URL, kind) of each requisite the HTML names, in document order."""
    doc = lxml.html.fromstring(body)
    base = urljoin(url, (doc.xpath("//base/@href") or [url])[0])
    found: list[tuple[str, str]] = []
    for element in doc.iter("link", "script", "img"):
        rel = element.get("rel", "")
        if element.tag == "link":
            found.append((urljoin(base, element.get("href")), "icon" if rel == "icon" else rel))
        elif element.tag == "script":
            found.append((urljoin(base, element.get("src")), "script"))
        else:
            candidates = [c.split()[0] for c in element.get("srcset", "").split(",") if c.strip()]
            for src in [element.get("src"), *candidates]:
                found.append((urljoin(base, src), "image"))
    return found


def css_references(body: bytes, url: str) -> list[str]:
    """Absolute URLs of a stylesheet's ``@import`` and ``url()``, resolved against it."""
    return [urljoin(url, a or b) for a, b in _CSS_REF.findall(body.decode())]


_CLOCK = itertools.count(0.0, 1e6)  # for respond(): far apart, a rate limiter always admits


def served(model: WebModel, url: str) -> bytes:
    """The body ``respond`` gives for ``url``, which must be a 200."""
    parts = urlsplit(url)
    info = model.host(parts.hostname or "")
    assert info is not None
    resp = respond(model, info.name, parts.path or "/", PORT, info.ip, now=next(_CLOCK))
    assert resp.status == 200, url
    return resp.body


def test_requisites_of_is_what_the_html_and_css_reference(model: WebModel) -> None:
    kinds = dict.fromkeys(REQUISITE_KINDS, 0)
    for host, page in ordinary_pages(model):
        url = make_url(host.name, page.path, PORT)
        model_truth = model.requisites_of(url, PORT)
        direct = [r for r in model_truth if r.referrer == url]
        in_html = html_references(served(model, url), url)
        assert [(r.url, r.kind) for r in direct] == list(dict.fromkeys(in_html))
        stylesheets = [r.url for r in model_truth if r.kind == "stylesheet"]
        for sheet in stylesheets:
            from_css = [r.url for r in model_truth if r.referrer == sheet]
            assert from_css == css_references(served(model, sheet), sheet)
            assert sheet.endswith(".css")
        for requisite in model_truth:
            kinds[requisite.kind] += 1
            assert requisite.allowed == (not model.is_disallowed(*split(requisite.url)))
    assert all(kinds.values()), kinds


def split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.path


def test_every_ordinary_page_has_the_common_requisites_and_some_their_own(
    model: WebModel,
) -> None:
    photos = 0
    for host, page in ordinary_pages(model):
        urls = {r.url for r in model.requisites_of(make_url(host.name, page.path, PORT), PORT)}
        common = {"/static/site.css", "/static/fonts.css", "/static/img/bg.png", FONT}
        common |= {"/static/favicon.png", "/static/app.js", LOGO}
        assert {make_url(host.name, p, PORT) for p in common} <= urls
        photos += make_url(host.name, photo_paths(host.page_number(page.path))[1], PORT) in urls
    assert 0 < photos < sum(1 for _ in ordinary_pages(model))
    article = WebModel.generate(SEED, **SHAPE, dup_families=3, requisites=True)
    articles = [(h, p) for h in article.hosts for p in h.pages if p.article is not None]
    assert articles and not any(
        article.requisites_of(make_url(h.name, p.path, PORT), PORT) for h, p in articles
    )


def test_the_cdn_serves_the_banner_other_hosts_show(model: WebModel) -> None:
    cdn = model.host(model.cdn_host or "")
    assert cdn is not None and publishes(cdn)
    banner = make_url(cdn.name, BANNER, PORT)
    for host in model.hosts:
        home = {r.url for r in model.requisites_of(make_url(host.name, "/", PORT), PORT)}
        assert (banner in home) == (host.name != cdn.name)
        if host.name != cdn.name:
            assert f'src="{banner}"'.encode() in served(model, make_url(host.name, "/", PORT))
            assert model.expected_status(host.name, BANNER) == 404
    assert model.expected_status(cdn.name, BANNER) == 200
    alone = WebModel.generate(SEED, hosts=1, ips=1, requisites=True)
    assert alone.cdn_host is None and alone.all_requisites(PORT)
    assert not any(BANNER in r.url for r in alone.all_requisites(PORT))


def test_all_requisites_names_each_url_once(model: WebModel) -> None:
    everything = model.all_requisites(PORT)
    urls = [r.url for r in everything]
    assert len(urls) == len(set(urls))
    pages = {(h.name, p.path) for h, p in ordinary_pages(model)}
    assert {
        r.url for h, p in pages for r in model.requisites_of(make_url(h, p, PORT), PORT)
    } == set(urls)
    reached = model.reachable(model.seed_urls(3))
    met = model.all_requisites(PORT, pages=reached)
    assert 0 < len(met) < len(everything)
    assert {r.url for r in met} == {
        r.url for h, p in reached for r in model.requisites_of(make_url(h, p, PORT), PORT)
    }
    assert not any(model.expected_status(*split(r.url)) != 200 for r in everything)
    assert all(isinstance(r, Requisite) for r in met)


def test_identical_requisites_are_the_logo_and_its_copy(model: WebModel) -> None:
    copies = [h.name for h in model.hosts if h.requisites and h.requisites.logo_copy]
    assert copies and len(copies) < len(model.hosts)
    assert model.identical_requisites(PORT) == [
        [make_url(name, LOGO, PORT), make_url(name, LOGO_COPY, PORT)] for name in copies
    ]


# -- served over HTTP --------------------------------------------------------------


def png_size(body: bytes) -> tuple[int, int]:
    """Width and height of a PNG whose every chunk's CRC holds and whose pixels unpack."""
    assert body[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, []
    while at < len(body):
        (length,) = struct.unpack_from(">I", body, at)
        kind, data = body[at + 4 : at + 8], body[at + 8 : at + 8 + length]
        (crc,) = struct.unpack_from(">I", body, at + 8 + length)
        assert crc == zlib.crc32(kind + data)
        chunks.append((kind, data))
        at += 12 + length
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour = struct.unpack_from(">IIBB", chunks[0][1])
    assert (depth, colour) == (8, 2)
    assert len(zlib.decompress(chunks[1][1])) == height * (1 + 3 * width)
    return width, height


def uint_base128(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for k in range(5):
        value = value << 7 | data[at + k] & 0x7F
        if not data[at + k] & 0x80:
            return value, at + k + 1
    raise AssertionError("UIntBase128 longer than 5 bytes")


def woff2_tables(body: bytes) -> bytes:
    """The decompressed table data of a WOFF2 file (W3C WOFF 2.0, 4 and 5),
    after checking the header's lengths and its private data block."""
    signature, _, length, tables = struct.unpack_from(">4sIIH", body)
    assert signature == b"wOF2" and length == len(body)
    (compressed,) = struct.unpack_from(">I", body, 20)
    private_at, private_length = struct.unpack_from(">II", body, 40)
    at, expected = 48, 0
    for _ in range(tables):
        flags = body[at]
        at += 5 if flags & 0x3F == 0x3F else 1
        size, at = uint_base128(body, at)
        transformed = (flags >> 6 == 0) if flags & 0x3F in (10, 11) else (flags >> 6 != 0)
        if transformed:
            size, at = uint_base128(body, at)
        expected += size
    tables_data = brotli.decompress(body[at : at + compressed])
    assert len(tables_data) == expected
    assert private_at % 4 == 0 and private_at >= at + compressed
    assert body[private_at : private_at + private_length].startswith(b"trawl testweb font of ")
    return tables_data


def test_requisites_are_served_with_their_types_and_real_bytes(
    model: WebModel, web: TestWeb
) -> None:
    host, page = richest_page(model)
    requisites = model.requisites_of(make_url(host.name, page.path, web.port), web.port)
    bodies: dict[str, bytes] = {}
    for requisite in requisites:
        status, headers, body = get(web, requisite.url)
        assert status == 200 and headers["Content-Type"] == TYPES[requisite.kind], requisite
        bodies[urlsplit(requisite.url).path] = body
        if headers["Content-Type"] == "image/png":
            assert png_size(body) > (0, 0)
    number = host.page_number(page.path)
    one, two = (png_size(bodies[p]) for p in photo_paths(number))
    assert two == (2 * one[0], 2 * one[1])
    assert bodies[LOGO_COPY] == bodies[LOGO] and len(set(bodies.values())) == len(bodies) - 1
    assert "Trawl Sans".encode("utf-16-be") in woff2_tables(bodies[FONT])
    script = bodies["/static/app.js"].decode()
    assert 'document.documentElement.dataset.appRan = "1";' in script
    assert not re.search(r"fetch|XMLHttpRequest|import|src|href|open\(", script)
    assert host.name.encode() in bodies["/static/site.css"]


def test_requisites_are_timeless_and_validated_like_pages(model: WebModel, web: TestWeb) -> None:
    host, _ = richest_page(model)
    url = make_url(host.name, "/static/site.css", web.port)
    status, headers, body = get(web, url)
    assert status == 200 and headers["Last-Modified"] == http_date(EPOCH)
    assert get(web, url, {"If-None-Match": headers["ETag"]})[:1] == (304,)
    assert get(web, url, {"If-Modified-Since": headers["Last-Modified"]})[:1] == (304,)
    assert get(web, url, method="HEAD")[1]["Content-Length"] == str(len(body))
    web.set_time(EPOCH + timedelta(days=400))
    try:
        later_status, later, later_body = get(web, url)
    finally:
        web.set_time(EPOCH)
    assert (later_status, later_body) == (status, body)
    assert (later["ETag"], later["Last-Modified"]) == (headers["ETag"], headers["Last-Modified"])
    time.sleep(0.1)  # the log row is written just after the last byte
    logged = [r for r in read_log(web.access_log) if r["path"] == "/static/site.css"]
    assert len(logged) >= 4 and {r["version"] for r in logged} == {None}


def test_the_private_image_is_disallowed_by_the_served_robots_txt(
    model: WebModel, web: TestWeb
) -> None:
    private = [h for h in model.hosts if h.requisites and h.requisites.private]
    assert private and all(h.robots_status == 200 for h in private)
    for host in private:
        status, _, text = get(web, make_url(host.name, "/robots.txt", web.port))
        rules = Protego.parse(text.decode())
        secret, logo = (make_url(host.name, p, web.port) for p in (SECRET, LOGO))
        for agent in (AGENT, "otherbot/2.0", "*"):
            assert status == 200 and not rules.can_fetch(secret, agent)
        assert rules.can_fetch(logo, AGENT)
        home = model.requisites_of(make_url(host.name, "/", web.port), web.port)
        assert [r.allowed for r in home if r.url == secret] == [False]
    shown = {split(r.url)[0] for r in model.all_requisites(web.port) if r.url.endswith(SECRET)}
    assert shown == {h.name for h in private} != {h.name for h in model.hosts}
    # a crawler that fetches it anyway is caught by the robots audit
    target = make_url(private[0].name, SECRET, web.port)
    assert get(web, target)[0] == 200
    time.sleep(0.1)  # the log row is written just after the last byte
    assert f"{private[0].name}{SECRET}" in robots_audit(web.access_log, model, AGENT)


def test_the_command_line_passes_requisites_on(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(testweb_main, "run", lambda *args, **kwargs: calls.append(kwargs))
    testweb_main.main(["--hosts", "4"])
    testweb_main.main(["--hosts", "4", "--requisites"])
    assert [c["requisites"] for c in calls] == [False, True]


# -- in a browser ------------------------------------------------------------------


def test_a_browser_renders_a_page_quietly_and_asks_only_for_its_requisites(
    model: WebModel, web: TestWeb, tmp_path: Path
) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no chromium binary: run `bash scripts/setup.sh` (it installs chromium)")
    host, page = richest_page(model)
    url = make_url(host.name, page.path, web.port)
    rules = [f"MAP {h.name} {h.ip}" for h in model.hosts] + ["MAP * ~NOTFOUND"]
    shown = subprocess.run(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
         f"--host-resolver-rules={', '.join(rules)}", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    console = [ln for ln in shown.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert console == []  # a font it cannot decode would log a warning here
    assert 'data-app-ran="1"' in shown.stdout
    time.sleep(0.1)  # the last log row is written just after the last byte
    asked = [r for r in read_log(web.access_log) if "HeadlessChrome" in r["user_agent"]]
    assert asked and all(r["status"] == 200 for r in asked)
    requested = {make_url(r["host"], r["path"], web.port) for r in asked}
    named = {r.url for r in model.requisites_of(url, web.port)}
    assert requested - {url} <= named
    two_x = make_url(host.name, photo_paths(host.page_number(page.path))[1], web.port)
    favicon = make_url(host.name, "/static/favicon.png", web.port)
    assert named - requested <= {two_x, favicon}  # at 1 dppx the 1x candidate is enough
    assert make_url(model.cdn_host or "", BANNER, web.port) in requested


def test_requisites_do_not_move_the_webs_other_streams() -> None:
    """Hosts keep everything but their robots groups (on private hosts) and requisites."""
    off, on = WebModel.generate(SEED, **SHAPE), on_model()
    for bare, host in zip(off.hosts, on.hosts, strict=True):
        assert replace(host, requisites=None, groups=bare.groups) == bare
        if not (host.requisites and host.requisites.private):
            assert host.groups == bare.groups
