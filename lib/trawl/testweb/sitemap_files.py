"""The sitemap files a test-web host publishes, rendered as of a logical time.

A host with a ``SitemapSet`` lists every 200 page any crawler but badbot may
fetch (``HostInfo.open_paths``, which includes the pages only the sitemaps
lead to), so a crawler that follows its sitemaps never hits an error page or
a robots.txt rule through them. Each entry carries the hints of sitemaps.org
0.9: ``lastmod``, the page's last change as of the logical time, as a W3C
Datetime with seconds; ``changefreq``, the bucket of the page's mean change
interval (``trawl.testweb.changes.changefreq``); and ``priority``, falling
with the depth of the path.

Layouts (``SitemapSet.layout``):

* "urlset": one ``/sitemap.xml``;
* "index": ``/sitemap_index.xml`` naming two children, ``/sitemaps/1.xml.gz``
  (the first half of the pages, a gzipped urlset: the file itself is gzip,
  served as application/gzip without Content-Encoding, as on the real web)
  and ``/sitemaps/2.txt`` (the rest, one URL per line, no hints). Each index
  entry's lastmod is the newest of its child's pages.

The children sit under ``/sitemaps/``, so by the sitemaps.org location rule
their own URL would only cover that directory; robots.txt names every file
of the host, and a sitemap named there may list any URL of the host
("Sitemaps & Cross Submits"). Gzip output is written with mtime 0, so a
file's bytes, and so its ETag, depend only on its entries.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from trawl.testweb.changes import changefreq
from trawl.testweb.model import WebModel, make_url
from trawl.testweb.records import CHILD_PATHS, INDEX_PATH, URLSET_PATH, HostInfo

SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
XML_TYPE = "application/xml; charset=utf-8"
GZIP_TYPE = "application/gzip"
TEXT_TYPE = "text/plain; charset=utf-8"
_XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'


@dataclass(frozen=True)
class SitemapFile:
    """A rendered sitemap: its bytes, Content-Type, and newest lastmod it lists."""

    body: bytes
    content_type: str
    last_modified: datetime


@dataclass(frozen=True)
class _Entry:
    url: str
    lastmod: datetime
    changefreq: str
    priority: float


def w3c_datetime(at: datetime) -> str:
    """``at`` as a W3C Datetime with seconds in UTC ("2026-01-01T00:00:00+00:00")."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def priority(path: str) -> float:
    """1.0 for the homepage, 0.2 less per directory level, never below 0.1."""
    return round(max(0.1, 1.2 - 0.2 * path.count("/")), 1)


def sitemap_file(
    model: WebModel, host: HostInfo, path: str, port: int, at: datetime
) -> SitemapFile | None:
    """The sitemap file at ``path`` on ``host`` as of ``at``, or None if it has none there."""
    if host.sitemaps is None or path not in host.sitemaps.files:
        return None
    entries = [_entry(model, host, p, port, at) for p in model.sitemap_paths(host.name)]
    if path == URLSET_PATH:
        return SitemapFile(_urlset(entries), XML_TYPE, _newest(entries))
    half = (len(entries) + 1) // 2
    parts = (entries[:half], entries[half:])
    if path == INDEX_PATH:
        children = [
            (make_url(host.name, p, port), _newest(e))
            for p, e in zip(CHILD_PATHS, parts, strict=True)
        ]
        return SitemapFile(_index(children), XML_TYPE, _newest(entries))
    if path == CHILD_PATHS[0]:
        return SitemapFile(gzip.compress(_urlset(parts[0]), mtime=0), GZIP_TYPE, _newest(parts[0]))
    return SitemapFile(_text(parts[1]), TEXT_TYPE, _newest(parts[1]))


def _entry(model: WebModel, host: HostInfo, path: str, port: int, at: datetime) -> _Entry:
    rate = model.change_rate(host.name, path)
    lastmod = model.last_change_at(host.name, path, at)
    return _Entry(make_url(host.name, path, port), lastmod, changefreq(rate), priority(path))


def _newest(entries: list[_Entry]) -> datetime:
    return max(e.lastmod for e in entries)


def _urlset(entries: list[_Entry]) -> bytes:
    rows = [
        f"<url><loc>{escape(e.url)}</loc><lastmod>{w3c_datetime(e.lastmod)}</lastmod>"
        f"<changefreq>{e.changefreq}</changefreq><priority>{e.priority:.1f}</priority></url>"
        for e in entries
    ]
    body = f'<urlset xmlns="{SITEMAP_NS}">\n' + "\n".join(rows) + "\n</urlset>\n"
    return (_XML_HEAD + body).encode()


def _index(children: list[tuple[str, datetime]]) -> bytes:
    rows = [
        f"<sitemap><loc>{escape(url)}</loc><lastmod>{w3c_datetime(lastmod)}</lastmod></sitemap>"
        for url, lastmod in children
    ]
    body = f'<sitemapindex xmlns="{SITEMAP_NS}">\n' + "\n".join(rows) + "\n</sitemapindex>\n"
    return (_XML_HEAD + body).encode()


def _text(entries: list[_Entry]) -> bytes:
    return "".join(f"{e.url}\n" for e in entries).encode()
