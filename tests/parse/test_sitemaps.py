"""parse_sitemap: the sitemaps.org formats, their limits, hostile XML, and value checks."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trawl.parse.sitemap_entries import Sitemap, SitemapEntry
from trawl.parse.sitemaps import MAX_BYTES, MAX_URLS, parse_sitemap

SITEMAP = "https://example.com/dir/sitemap.xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def urlset(*entries: str, root: str = f'<urlset xmlns="{NS}">') -> bytes:
    name = root[1:].split()[0].rstrip(">")
    return (root + "".join(entries) + f"</{name}>").encode()


def url(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def urls(result: Sitemap) -> list[str]:
    return [entry.url for entry in result.entries]


# --------------------------------------------------------------------------- formats


def test_urlset_with_all_fields() -> None:
    body = urlset(
        url(
            " https://Example.com:443/dir/a?q=1 ",
            "<lastmod>2024-05-06T07:08:09+02:00</lastmod>"
            "<changefreq>Weekly</changefreq><priority>0.8</priority>",
        ),
        url("https://example.com/dir/b"),
    )
    result = parse_sitemap(b'<?xml version="1.0" encoding="UTF-8"?>\n' + body, SITEMAP, now=NOW)
    assert result == Sitemap(
        kind="urlset",
        entries=[
            SitemapEntry(
                "https://example.com/dir/a?q=1",
                datetime(2024, 5, 6, 5, 8, 9, tzinfo=UTC),
                "weekly",
                0.8,
            ),
            SitemapEntry("https://example.com/dir/b", None, None, None),
        ],
    )


def test_sitemap_index_lists_child_sitemaps_of_the_same_host() -> None:
    body = (
        f'<sitemapindex xmlns="{NS}">'
        "<sitemap><loc>https://example.com/dir/s1.xml.gz</loc><lastmod>2024-01-02</lastmod></sitemap>"
        "<sitemap><loc>https://example.com/elsewhere/s2.xml</loc></sitemap>"  # same site: fine
        "<sitemap><loc>https://other.example/s3.xml</loc></sitemap>"
        "</sitemapindex>"
    ).encode()
    result = parse_sitemap(body, SITEMAP)
    assert result.kind == "index"
    assert result.entries == [
        SitemapEntry("https://example.com/dir/s1.xml.gz", datetime(2024, 1, 2, tzinfo=UTC)),
        SitemapEntry("https://example.com/elsewhere/s2.xml"),
    ]
    assert result.rejected == {"cross_host": 1}


def test_text_sitemap() -> None:
    body = (
        b"\xef\xbb\xbfhttps://example.com/dir/a\r\n\n  https://example.com/dir/b  \n"
        b"ftp://example.com/dir/c\nhttps://example.com/dir/a\nhttps://example.com/dir/d"
    )
    result = parse_sitemap(body, SITEMAP)
    assert result.kind == "text"
    assert urls(result) == [
        "https://example.com/dir/a",
        "https://example.com/dir/b",
        "https://example.com/dir/d",
    ]
    assert result.rejected == {"bad_scheme": 1, "duplicate": 1}
    assert result.errors == []


def test_text_sitemap_rejects_lines_that_are_not_utf8() -> None:
    result = parse_sitemap(
        b"https://example.com/dir/caf\xe9\nhttps://example.com/dir/ok\n", SITEMAP
    )
    assert urls(result) == ["https://example.com/dir/ok"]
    assert result.rejected == {"bad_encoding": 1}


def test_feeds_as_sitemaps() -> None:
    rss = (
        b'<rss version="2.0"><channel><link>https://example.com/</link>'
        b"<item><link>https://example.com/dir/post</link>"
        b"<pubDate>Mon, 06 May 2024 07:08:09 +0200</pubDate></item></channel></rss>"
    )
    atom = (
        b'<feed xmlns="http://www.w3.org/2005/Atom"><link rel="self" href="https://example.com/"/>'
        b'<entry><link rel="self" href="https://example.com/dir/self"/>'
        b'<link href="https://example.com/dir/entry"/><updated>2024-05-06T07:08:09Z</updated>'
        b"</entry></feed>"
    )
    when = datetime(2024, 5, 6, 5, 8, 9, tzinfo=UTC)
    assert parse_sitemap(rss, SITEMAP) == Sitemap(
        "feed", [SitemapEntry("https://example.com/dir/post", when)]
    )
    result = parse_sitemap(atom, SITEMAP)
    assert result.kind == "feed"
    assert result.entries == [SitemapEntry("https://example.com/dir/entry", when.replace(hour=7))]


@pytest.mark.parametrize(
    "body",
    [
        urlset(url("https://example.com/dir/a"), url("https://example.com/dir/b")),
        f'<sitemapindex xmlns="{NS}"><sitemap><loc>https://example.com/dir/a</loc></sitemap>'
        "<sitemap><loc>https://example.com/dir/b</loc></sitemap></sitemapindex>".encode(),
        b"https://example.com/dir/a\nhttps://example.com/dir/b\n",
    ],
    ids=["urlset", "index", "text"],
)
def test_gzip_is_detected_by_its_magic_bytes(body: bytes) -> None:
    plain = parse_sitemap(body, SITEMAP)
    assert urls(plain) == ["https://example.com/dir/a", "https://example.com/dir/b"]
    assert parse_sitemap(gzip.compress(body), SITEMAP) == plain  # the name says .xml
    assert parse_sitemap(body, SITEMAP + ".gz") == plain  # the name says .gz
    members = gzip.compress(body[:20]) + gzip.compress(body[20:])  # RFC 1952 2.2
    assert parse_sitemap(members, SITEMAP) == plain


def test_corrupt_or_cut_gzip_keeps_what_came_before() -> None:
    body = urlset(*(url(f"https://example.com/dir/p{i}") for i in range(2000)))
    packed = zlib.compress(body, 9, wbits=31)
    cut = parse_sitemap(packed[: len(packed) // 2], SITEMAP)
    assert cut.warnings["gzip_truncated"] == 1
    assert 0 < len(cut.entries) < 2000
    assert urls(cut) == [f"https://example.com/dir/p{i}" for i in range(len(cut.entries))]
    corrupt = parse_sitemap(packed[:10] + b"\xff" * 100, SITEMAP)
    assert corrupt.entries == []
    assert corrupt.errors[0].startswith("gzip: ")


# --------------------------------------------------------------------------- namespaces


@pytest.mark.parametrize(
    ("root", "nonstandard"),
    [
        (f'<urlset xmlns="{NS}">', False),
        ('<urlset xmlns="https://www.sitemaps.org/schemas/sitemap/0.9">', True),
        ('<urlset xmlns="http://www.google.com/schemas/sitemap/0.84">', True),
        ("<urlset>", True),
        (f'<URLSET xmlns="{NS}">', False),
        (f'<sm:urlset xmlns:sm="{NS}">', False),
    ],
)
def test_namespace_variants(root: str, nonstandard: bool) -> None:
    prefix = "sm:" if root.startswith("<sm:") else ""
    entry = (
        f"<{prefix}Url><{prefix}LOC>https://example.com/dir/a</{prefix}LOC>"
        f"<{prefix}ChangeFreq>DAILY</{prefix}ChangeFreq></{prefix}Url>"
    )
    result = parse_sitemap(urlset(entry, root=root), SITEMAP)
    assert result.kind == "urlset"
    assert result.entries == [SitemapEntry("https://example.com/dir/a", changefreq="daily")]
    assert result.warnings == ({"nonstandard_namespace": 1} if nonstandard else {})


def test_extension_namespaces_are_skipped() -> None:
    body = (
        f'<urlset xmlns="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
        ' xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"'
        ' xmlns:xhtml="http://www.w3.org/1999/xhtml">'
        "<url><loc>https://example.com/dir/a</loc>"
        '<xhtml:link rel="alternate" hreflang="de" href="https://example.com/dir/de"/>'
        "<image:image><image:loc>https://example.com/dir/a.png</image:loc></image:image>"
        "<news:news><news:publication_date>2024-01-01</news:publication_date></news:news>"
        "</url>"
        "<url><image:loc>https://example.com/dir/only-image.png</image:loc>"
        "<news:lastmod>2024-01-01</news:lastmod></url>"
        "</urlset>"
    ).encode()
    result = parse_sitemap(body, SITEMAP)
    assert result.entries == [SitemapEntry("https://example.com/dir/a")]
    assert result.rejected == {"empty": 1}  # image:loc never passes for loc
    assert result.errors == [] and result.warnings == {}


# --------------------------------------------------------------------------- limits


def test_a_sitemap_of_50001_urls_keeps_the_first_50000() -> None:
    body = urlset(*(f"<url><loc>https://example.com/dir/{i}</loc></url>" for i in range(50_001)))
    result = parse_sitemap(body, SITEMAP)
    assert MAX_URLS == 50_000
    assert result.truncated == "max_urls"
    assert len(result.entries) == 50_000
    assert result.entries[-1].url == "https://example.com/dir/49999"


def test_smaller_max_urls_counts_every_listed_entry() -> None:
    body = urlset(
        url("https://example.com/dir/a"),
        url("/dir/relative"),  # invalid, but listed: it counts
        url("https://example.com/dir/b"),
        url("https://example.com/dir/c"),
    )
    result = parse_sitemap(body, SITEMAP, max_urls=3)
    assert result.truncated == "max_urls"
    assert urls(result) == ["https://example.com/dir/a", "https://example.com/dir/b"]
    assert result.rejected == {"relative": 1}
    exact = parse_sitemap(body, SITEMAP, max_urls=4)
    assert exact.truncated is None and len(exact.entries) == 3
    text = parse_sitemap(
        b"https://example.com/dir/a\nhttps://example.com/dir/b\n", SITEMAP, max_urls=1
    )
    assert (urls(text), text.truncated) == (["https://example.com/dir/a"], "max_urls")


def test_gzip_bomb_is_cut_at_50_mib_without_inflating_it_all() -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = urlset(url("https://example.com/dir/first"))[: -len(b"</urlset>")]
    parts = [packer.compress(head)]
    spaces = b" " * (1 << 20)
    parts += [packer.compress(spaces) for _ in range(60)]  # 60 MiB of whitespace
    parts += [packer.compress(url("https://example.com/dir/last").encode() + b"</urlset>")]
    bomb = b"".join(parts) + packer.flush()
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        result = parse_sitemap(bomb, SITEMAP)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert MAX_BYTES == 52_428_800
    assert result.truncated == "max_bytes"
    assert urls(result) == ["https://example.com/dir/first"]  # "last" lies past the cap
    assert peak < 2_000_000  # a few 64 KiB chunks, not 50 MiB of inflated bytes


def test_max_bytes_keeps_whole_entries_before_the_cut() -> None:
    record = "<url><loc>https://example.com/dir/page-{:06d}</loc></url>"
    body = urlset(*(record.format(i) for i in range(1000)), root="<urlset>")
    start, size = len("<urlset>"), len(record.format(0))
    for packed in (body, gzip.compress(body)):
        # The cut leaves ".../dir/page-0" of entry 500: a valid URL, but not the one listed.
        cut = parse_sitemap(packed, SITEMAP, max_bytes=start + 500 * size + 40)
        assert cut.truncated == "max_bytes"
        assert urls(cut) == [f"https://example.com/dir/page-{i:06d}" for i in range(500)]
        assert cut.errors == [] and cut.rejected == {}
    assert parse_sitemap(body, SITEMAP, max_bytes=len(body)).truncated is None
    text = b"https://example.com/dir/a\nhttps://example.com/dir/bbbbbbbb\n"
    cut_text = parse_sitemap(text, SITEMAP, max_bytes=54)  # leaves ".../dir/bbbb"
    assert (urls(cut_text), cut_text.truncated) == (["https://example.com/dir/a"], "max_bytes")
    assert cut_text.rejected == {}


# --------------------------------------------------------------------------- hostile XML


def test_xxe_external_entities_are_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-MARKER-42")
    for target in ("file:///etc/passwd", secret.as_uri()):
        body = (
            f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "{target}">]>'
            f'<urlset xmlns="{NS}"><url><loc>https://example.com/dir/&xxe;</loc></url>'
            "<url><loc>https://example.com/dir/ok</loc><lastmod>&xxe;</lastmod></url></urlset>"
        ).encode()
        result = parse_sitemap(body, SITEMAP)
        assert "SECRET-MARKER" not in repr(result) and "root:" not in repr(result)
        assert urls(result) == ["https://example.com/dir/ok"]
        assert result.rejected == {"markup": 1}  # not silently shortened to ".../dir/"


def test_external_dtd_and_parameter_entities_are_not_loaded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-MARKER-42")
    dtd = tmp_path / "evil.dtd"
    dtd.write_text(f'<!ENTITY leak SYSTEM "{secret.as_uri()}"><!ENTITY inner "INNER-MARKER">')
    doctypes = [
        f'<!DOCTYPE urlset SYSTEM "{dtd.as_uri()}">',
        f'<!DOCTYPE urlset [<!ENTITY % p SYSTEM "{dtd.as_uri()}"> %p;]>',
        '<!DOCTYPE urlset SYSTEM "http://127.0.0.1:9/evil.dtd">',
    ]
    for doctype in doctypes:
        body = (
            f'{doctype}<urlset xmlns="{NS}"><url><loc>https://example.com/dir/&leak;&inner;</loc>'
            "</url><url><loc>https://example.com/dir/ok</loc></url></urlset>"
        ).encode()
        result = parse_sitemap(body, SITEMAP)
        assert "MARKER" not in repr(result)
        assert urls(result) == ["https://example.com/dir/ok"]


def test_billion_laughs_is_refused() -> None:
    entities = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'
        for i in range(1, 10)
    )
    for root, entry in [
        (f'<urlset xmlns="{NS}">', "<url><loc>https://example.com/dir/&lol9;</loc></url>"),
        ('<feed xmlns="http://www.w3.org/2005/Atom">', '<entry><link href="&lol9;"/></entry>'),
    ]:
        name = "urlset" if "urlset" in root else "feed"
        body = f"<!DOCTYPE {name} [{entities}]>{root}{entry}</{name}>".encode()
        result = parse_sitemap(body, SITEMAP)
        assert result.entries == []
        assert len(repr(result)) < 1_000  # 10^9 "lol"s never expanded
        assert result.errors  # libxml2: "Maximum entity amplification factor exceeded"


@pytest.mark.parametrize(
    ("body", "kind", "entries", "error"),
    [
        (b"", "unknown", [], "empty"),
        (b"  \n\t ", "unknown", [], "empty"),
        (b"Service Unavailable\n", "unknown", [], "not_a_sitemap"),
        (b"\x00\x01\x02binary\xff", "unknown", [], "not_a_sitemap"),
        (b"<<<<>>>>", "unknown", [], "xml: "),
        (b'<?xml version="1.0"?>', "unknown", [], "xml: "),
        (b"<foo><bar/></foo>", "unknown", [], "not_a_sitemap: root element <foo>"),
        (
            b"<!DOCTYPE html><html><head><title>404</title></head>"
            b"<body><p>Not found<br></body></html>",
            "unknown",
            [],
            "not_a_sitemap: root element <html>",
        ),
        (
            urlset(url("https://example.com/dir/a"))[:-9] + b"<url><loc>https://example.com/dir/b",
            "urlset",
            ["https://example.com/dir/a", "https://example.com/dir/b"],
            "xml: ",
        ),
        (
            urlset(
                url("https://example.com/dir/a"),
                "garbage & < more",
                url("https://example.com/dir/c"),
            ),
            "urlset",
            ["https://example.com/dir/a"],
            "xml: ",
        ),
    ],
)
def test_malformed_input_never_raises(
    body: bytes, kind: str, entries: list[str], error: str
) -> None:
    result = parse_sitemap(body, SITEMAP)
    assert (result.kind, urls(result)) == (kind, entries)
    assert result.errors and result.errors[0].startswith(error)


def test_unclosed_tags_recover_every_complete_entry() -> None:
    body = (
        b"<urlset><url><loc>https://example.com/dir/a</loc>"  # <url> never closed
        b"<url><loc>https://example.com/dir/b</url>"  # </loc> missing
        b"<url><loc>https://example.com/dir/c</loc></url></urlset>"
    )
    result = parse_sitemap(body, SITEMAP)
    assert sorted(urls(result)) == [f"https://example.com/dir/{c}" for c in "abc"]
    assert result.errors[0].startswith("xml: ")


def test_declared_encodings_are_honoured() -> None:
    latin1 = b'<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>https://example.com/dir/caf\xe9</loc></url></urlset>'
    utf16 = '<?xml version="1.0" encoding="UTF-16"?><urlset><url><loc>https://example.com/dir/caf\xe9</loc></url></urlset>'
    for body in (latin1, utf16.encode("utf-16")):
        assert urls(parse_sitemap(body, SITEMAP)) == ["https://example.com/dir/caf%C3%A9"]
