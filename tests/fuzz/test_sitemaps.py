"""Fuzz trawl.parse.sitemaps and sitemap_entries: any bytes give a ``Sitemap``
(problems in ``errors``, ``warnings`` and ``rejected``, never an exception),
in bounded time, and only checked entries reach it.

Bodies are sitemap-shaped XML (urlsets, indexes, RSS, Atom, with good and bad
values, deep nesting, huge attributes, entity expansion and external entities,
cut anywhere), gzip of those (cut, bit-flipped, concatenated, trailing junk,
garbage after the magic), text sitemaps and arbitrary bytes.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

from hypothesis import example
from hypothesis import strategies as st

from tests.fuzz.properties import fuzz
from trawl.parse.sitemap_entries import CHANGEFREQ_SECONDS, FUTURE_TOLERANCE
from trawl.parse.sitemaps import parse_sitemap
from trawl.url.normalize import normalize

SITEMAP = "https://example.com/dir/sitemap.xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
NOW = datetime(2025, 1, 1, tzinfo=UTC)
KINDS = {"urlset", "index", "text", "feed", "unknown"}
# Where a strict sitemap's entries must lie: under its directory (an index: its origin).
SCOPES = {
    SITEMAP: "https://example.com/dir/",
    "https://example.com/sitemap.xml": "https://example.com/",
}

LAUGHS = (
    '<!DOCTYPE urlset [<!ENTITY l0 "lol">'
    + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    + "]>"
)
PROLOGUES = st.sampled_from(
    [
        "",
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<?xml version="1.0" encoding="bogus"?>',
        '<?xml version="1.0" encoding="UTF-16"?>',
        LAUGHS,
        '<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>',
        '<!DOCTYPE urlset SYSTEM "http://127.0.0.1:9/evil.dtd">',
    ]
)
VALUES = st.one_of(
    st.sampled_from(["https://example.com/dir/a", "http://example.com/dir/b", "https://o.test/"]),
    st.sampled_from(["https://example.com/dir/../x", "/relative", "https://example.com/dir/%zz"]),
    st.sampled_from(["2024-01-01", "2024", "2024-13", "2024-05-06T07:08:09+02:00", "9999-12-31"]),
    st.sampled_from(["0001-01-01T00:00:00+23:59", "Tue, 10 Jun 2003 04:00:00 GMT", "daily"]),
    st.sampled_from(["0.5", "1.0", "1e3", "nan", "-0", ".5", "&amp;", "&l9;", "&xxe;"]),
    st.sampled_from(["<![CDATA[https://example.com/dir/c]]>", " https://example.com/dir/d "]),
    st.sampled_from(["<b>x</b>", "never", "\x00", "https://example.com/dir/" + "a" * 2_100]),
    st.text(max_size=20),
)
FIELD_NAMES = ["loc", "lastmod", "changefreq", "priority", "link", "pubDate", "updated"]
FIELDS = st.builds(
    lambda name, value: f"<{name}>{value}</{name}>",
    st.sampled_from([*FIELD_NAMES, "image:loc", "LOC", "xhtml:link"]),
    VALUES,
)
ATOM_LINKS = st.builds(
    lambda rel, href: f'<link rel="{rel}" href="{href}"/>',
    st.sampled_from(["alternate", "self", "", "ALTERNATE "]),
    VALUES,
)
ENTRIES = st.builds(
    lambda name, fields: f"<{name}>{''.join(fields)}</{name}>",
    st.sampled_from(["url", "sitemap", "item", "entry", "URL"]),
    st.lists(st.one_of(FIELDS, ATOM_LINKS), max_size=4),
)
ROOTS = st.sampled_from(
    [
        f'<urlset xmlns="{NS}">',
        "<urlset>",
        f'<sitemapindex xmlns="{NS}">',
        "<rss><channel>",
        '<feed xmlns="http://www.w3.org/2005/Atom">',
        "<html>",
        '<urlset xmlns="urn:other">',
    ]
)


@st.composite
def xml_documents(draw: st.DrawFn) -> bytes:
    root = draw(ROOTS)
    name = root[1:].split()[0].rstrip(">")
    depth = draw(st.sampled_from([0, 0, 10, 300, 3_000]))  # libxml2's limit is 256 levels
    text = draw(PROLOGUES) + root + "<x>" * depth + "".join(draw(st.lists(ENTRIES, max_size=6)))
    text += "</x>" * draw(st.integers(0, depth)) + f"</{name}>"
    attribute = draw(st.sampled_from([0, 0, 1_000, 200_000]))
    if attribute:
        text = text.replace("<url>", f'<url a="{"A" * attribute}">', 1)
    body = text.encode(draw(st.sampled_from(["utf-8", "utf-16"])), "surrogatepass")
    return body[: draw(st.integers(0, len(body)))] if draw(st.booleans()) else body


@st.composite
def gzip_files(draw: st.DrawFn) -> bytes:
    packed = gzip.compress(draw(st.one_of(xml_documents(), st.binary(max_size=100))), mtime=0)
    damage = draw(st.sampled_from(["none", "cut", "flip", "twice", "junk", "garbage"]))
    if damage == "cut":
        return packed[: draw(st.integers(0, len(packed)))]
    if damage == "flip":
        at = draw(st.integers(0, len(packed) - 1))
        return packed[:at] + bytes([packed[at] ^ 1 << draw(st.integers(0, 7))]) + packed[at + 1 :]
    if damage == "twice":
        return packed + packed
    if damage == "junk":
        return packed + draw(st.binary(min_size=1, max_size=20))
    if damage == "garbage":
        return b"\x1f\x8b" + draw(st.binary(max_size=100))
    return packed


TEXT_SITEMAPS = st.lists(VALUES, max_size=10).map(
    lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")
)
BODIES = st.one_of(xml_documents(), gzip_files(), TEXT_SITEMAPS, st.binary(max_size=300))


@fuzz(
    BODIES,
    st.one_of(st.just(SITEMAP), st.just("https://example.com/sitemap.xml"), st.text(max_size=20)),
    st.sampled_from([1, 3, 50_000]),
    st.sampled_from([100, 10_000, 52_428_800]),
    st.booleans(),
    max_examples=200,
    deadline_ms=5_000,
)
@example(LAUGHS.encode() + f'<urlset xmlns="{NS}"><url><loc>&l9;</loc></url></urlset>'.encode(),
         SITEMAP, 50_000, 52_428_800, True)  # fmt: skip
def test_any_bytes_give_a_sitemap(
    body: bytes, url: str, max_urls: int, max_bytes: int, strict: bool
) -> None:
    result = parse_sitemap(
        body, url, max_urls=max_urls, max_bytes=max_bytes, strict_location=strict, now=NOW
    )
    assert result.kind in KINDS
    assert result.truncated in (None, "max_urls", "max_bytes")
    assert len(result.entries) <= max_urls
    urls = [entry.url for entry in result.entries]
    index = result.kind == "index"
    assert len(set(urls)) == len(urls)
    for entry in result.entries:
        assert normalize(entry.url, ()) == entry.url  # normalised, and so http(s) with a host
        assert "root:" not in entry.url  # never an external entity's text (XXE)
        if strict and url in SCOPES:  # sitemaps.org "Sitemap file location"
            assert entry.url.startswith("https://example.com/" if index else SCOPES[url])
        assert entry.priority is None or 0 <= entry.priority <= 1
        assert entry.changefreq is None or entry.changefreq in CHANGEFREQ_SECONDS
        if entry.lastmod is not None:
            assert entry.lastmod.utcoffset() is not None and not entry.lastmod.utcoffset()
            assert entry.lastmod <= NOW + FUTURE_TOLERANCE
    assert all(isinstance(error, str) for error in result.errors)


@fuzz(xml_documents(), max_examples=100, deadline_ms=5_000)
def test_a_gzipped_sitemap_reads_as_the_plain_one(body: bytes) -> None:
    plain = parse_sitemap(body, SITEMAP, now=NOW)
    assert parse_sitemap(gzip.compress(body, mtime=0), SITEMAP, now=NOW) == plain
