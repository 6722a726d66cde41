"""pywb replays what trawl archived, byte for byte.

trawl's WARCs are written for the usual replay tools (``trawl.warc.writer``), and
this test holds them to it with the real thing: trawl's own fetch task crawls
a few pages of the test web into WARC files, pywb (``wb-manager add``) copies
and indexes them with its own indexer, and a ``wayback`` server on loopback
is asked for each capture in identity mode, ``/coll/<timestamp>id_/<url>``
(the archived payload, not rewritten). The body must equal the payload of the
WARC record and what the server sent, and the status the archived one.

The pages cover what a replay tool may get wrong: an HTML page, robots.txt
(text), a gzipped sitemap (binary, served as application/gzip), a 301 and a
404, and a page served with ``Content-Encoding: gzip``, which the test web
does not do, from a small server of its own on 127.0.0.1. The WARC keeps such
a body as received, still compressed, and pywb replays it so to a client
that accepts gzip; to one that does not, it decodes it (content negotiation
on replay), which is checked too.

pywb runs from its own virtualenv, as a program (``tests.warc.pywb``), and
serves the collection only, with nothing to fetch from the live web; the
servers, still running, must see no request from it.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_datetime, iso_date_to_timestamp

from tests.fetch.test_task import config, items_for
from tests.loopback import serving
from tests.warc.pywb import get, pywb_serving
from trawl.fetch.task import run_fetch_task
from trawl.testweb import TestWeb, WebModel
from trawl.testweb.render import respond
from trawl.url.keys import host_bucket, host_of, url_fingerprint
from trawl.url.normalize import normalize

SEED = 6  # first host: robots.txt 200, a sitemap index with a gzipped child, 301s, 404s
GZIP_HTML = b"<!doctype html><title>gzip</title><p>" + b"compressed on the wire " * 40 + b"\n"
Sent = dict[str, tuple[int, bytes]]  # by URL: the status and body a server sent


@dataclass(frozen=True)
class Capture:
    """One response record: its time, HTTP status and headers, and payload as stored."""

    date: str  # WARC-Date
    status: int
    headers: dict[str, str]  # lower-cased names
    payload: bytes  # the entity body, any Content-Encoding still applied

    @property
    def timestamp(self) -> str:
        """The 14 digits pywb's index keys the capture by."""
        return str(iso_date_to_timestamp(self.date))


# --- the servers and the crawl ------------------------------------------------------------------


class _GzipPage(BaseHTTPRequestHandler):
    """``/``: an HTML page sent with Content-Encoding gzip; anything else 404."""

    server: _GzipSite
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.requests += 1
        found = self.path == "/"
        body = gzip.compress(GZIP_HTML, mtime=0) if found else b"not found\n"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        if found:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: requests are counted instead."""


class _GzipSite(ThreadingHTTPServer):
    requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


@contextmanager
def gzip_site() -> Iterator[_GzipSite]:
    """Serve ``_GzipPage`` on 127.0.0.1 while the block runs."""
    with serving(_GzipSite(("127.0.0.1", 0), _GzipPage), "gzip-site") as server:
        yield server


def chosen_paths(model: WebModel) -> list[str]:
    """Paths on the first host: a 200 page, a 301, a 404 and the gzipped sitemap."""
    host = model.hosts[0]
    # the properties the test relies on (another generator would need a new seed)
    assert host.robots_status == 200 and not (host.slow or host.crawl_delay or host.throttle)
    assert host.sitemaps is not None and host.sitemaps.layout == "index"
    allowed = [p for p in host.pages if not model.is_disallowed(host.name, p.path, "trawl")]
    pages = [next(p.path for p in allowed if p.status == status) for status in (200, 301, 404)]
    return [*pages, next(f for f in host.sitemaps.files if f.endswith(".gz"))]


def crawl(web: TestWeb, site: _GzipSite, warc_dir: Path) -> Sent:
    """Crawl the chosen pages and the gzip page with trawl's fetch task into
    ``warc_dir``; returns what the servers sent, robots.txt included."""
    host = web.model.hosts[0]
    paths = chosen_paths(web.model)
    template = items_for(web.model, web.port)[0]
    urls = [web.base_url(host.name) + path for path in paths]
    items = [_item(template, url, url.endswith(".gz")) for url in [*urls, site.url]]
    rows = list(run_fetch_task(items, config(web), "seg1", 0, str(warc_dir), 30))
    sent: Sent = {}
    for path in [*paths, "/robots.txt"]:  # the test web's answers are a function of the path
        resp = respond(web.model, host.name, path, web.port, host.ip, at=web.time)
        sent[web.base_url(host.name) + path] = (resp.status, resp.body)
    sent[site.url] = (200, gzip.compress(GZIP_HTML, mtime=0))
    fetched = {row["url"]: row["http_status"] for row in rows}
    assert {url: fetched.get(url) for url in sent} == {url: s for url, (s, _) in sent.items()}
    return sent


def _item(template: dict[str, Any], url: str, is_sitemap: bool) -> dict[str, Any]:
    """A fetchlist row for ``url``, shaped like ``items_for``'s."""
    url = normalize(url)
    host = host_of(url)
    return template | {
        "url": url,
        "url_fp": url_fingerprint(url),
        "host": host,
        "host_bucket": host_bucket(host, 8),
        "is_sitemap": is_sitemap,
    }


def archived(warcs: list[Path]) -> dict[str, Capture]:
    """The response records of ``warcs`` by target URI (one capture each here)."""
    out: dict[str, Capture] = {}
    for warc in warcs:
        with warc.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type != "response":
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI")
                assert url not in out, f"{url} captured twice"
                out[url] = Capture(
                    record.rec_headers.get_header("WARC-Date"),
                    int(record.http_headers.get_statuscode()),
                    {k.lower(): v for k, v in record.http_headers.headers},
                    # raw_stream: the payload as stored; content_stream() would
                    # undo the Content-Encoding
                    record.raw_stream.read(),
                )
    return out


# --- the test -----------------------------------------------------------------------------------


def test_pywb_replays_trawls_warc_byte_for_byte(tmp_path: Path) -> None:
    model = WebModel.generate(SEED, hosts=2, ips=1, pages_per_host=(12, 20), sitemaps=1.0)
    with TestWeb(model, tmp_path / "web") as web, gzip_site() as site:
        sent = crawl(web, site, tmp_path / "warc")
        warcs = sorted((tmp_path / "warc").rglob("*.warc.gz"))
        captures = archived(warcs)
        # what trawl archived is what was sent, before pywb comes into it
        assert {url: (c.status, c.payload) for url, c in captures.items() if url in sent} == sent
        asked = (len(web.access_log.read_text().splitlines()), site.requests)
        with pywb_serving(tmp_path / "pywb", {"coll": warcs}) as replay:
            port = replay.port
            replayed = {url: get(port, f"/coll/{c.timestamp}id_/{url}") for url, c in
                        captures.items() if url in sent}  # fmt: skip
            gzip_url, gzip_ts = site.url, captures[site.url].timestamp
            decoded = get(port, f"/coll/{gzip_ts}id_/{gzip_url}", accept="identity")
            unarchived = get(port, f"/coll/{gzip_ts}id_/{gzip_url}never-fetched")
        # pywb went to neither server, not even for the URL it does not have
        assert unarchived[0] == 404
        assert (len(web.access_log.read_text().splitlines()), site.requests) == asked

    assert {url: (status, body) for url, (status, _, body) in replayed.items()} == sent
    for url, (_, headers, _) in replayed.items():
        capture = captures[url]
        # the capture asked for, not a neighbour (pywb answers any timestamp with the closest)
        assert headers["memento-datetime"] == http_date(capture.date), url
        for name in ("content-type", "content-encoding", "location"):  # kept as archived
            assert headers.get(name) == capture.headers.get(name), (url, name)
    assert captures[gzip_url].headers["content-encoding"] == "gzip"
    assert captures[gzip_url].payload[:2] == b"\x1f\x8b"
    assert any(c.headers["content-type"] == "application/gzip" for c in captures.values())
    # a client that does not accept gzip gets the page decoded (identity mode or not)
    status, headers, body = decoded
    assert (status, body, headers.get("content-encoding")) == (200, GZIP_HTML, None)


def http_date(warc_date: str) -> str:
    """A WARC-Date as an HTTP-date, the form of Memento-Datetime (RFC 7089 2.1.1)."""
    moment = iso_date_to_datetime(warc_date).replace(tzinfo=UTC)  # warcio's is naive UTC
    return format_datetime(moment, usegmt=True)
