"""Tests for trawl.parse.html: one-pass extraction of links, robots directives and text."""

from __future__ import annotations

import pytest

from trawl.parse.html import MAX_ANCHOR_CHARS, ParsedPage, RawLink, parse_page

AGENT = "trawl"
HTML = "text/html"


def page(body: str | bytes, content_type: str | None = HTML, headers=(), **kw) -> ParsedPage:
    data = body.encode("utf-8") if isinstance(body, str) else body
    return parse_page(data, content_type, list(headers), AGENT, **kw)


def hrefs(p: ParsedPage) -> list[str]:
    return [link.href for link in p.links]


# --- base, canonical, links ------------------------------------------------------


def test_base_href_is_first_base_with_href_raw_and_stripped() -> None:
    p = page('<head><base target="_top"><base href=" ../up/ "><base href="/second/"></head>')
    assert p.base_href == "../up/"


def test_no_base_href() -> None:
    assert page("<p>x</p>").base_href is None


def test_canonical_is_raw_href_of_link_rel_canonical() -> None:
    p = page('<head><link rel="Canonical" href=" /the-one?a=1 "></head>')
    assert p.canonical == "/the-one?a=1"
    assert page('<link rel="alternate" href="/x">').canonical is None


def test_links_from_a_area_frame_and_link_rel_alternate_next_prev_in_order() -> None:
    p = page(
        """<head>
        <link rel="stylesheet" href="/s.css"><link rel="icon" href="/i.ico">
        <link rel="alternate stylesheet" href="/alt.css">
        <link rel="alternate" hreflang="de" href="/de/"><link rel="next" href="?page=2">
        <link rel="prev" href="?page=0"><link rel="preload" href="/font.woff">
        </head><body>
        <a href="/one">One</a><map><area href="/two" alt="Two"></map>
        <a name="anchor-without-href">x</a>
        </body>"""
    )
    assert hrefs(p) == ["/de/", "?page=2", "?page=0", "/one", "/two"]
    frames = page('<frameset><frame src="left.html"><frame src="right.html"></frameset>')
    assert hrefs(frames) == ["left.html", "right.html"]


@pytest.mark.parametrize(
    "href",
    [
        "",
        "   ",
        "#",
        "#section",
        "javascript:void(0)",
        " JavaScript:go()",
        "java\nscript:alert(1)",
        "mailto:someone@example.com",
        "tel:+15551234",
        "data:text/html,hi",
        "ftp://example.com/file",
    ],
)
def test_non_web_empty_and_fragment_only_hrefs_are_dropped(href: str) -> None:
    assert page(f'<a href="{href}">x</a><a href="/kept">k</a>').links == [
        RawLink("/kept", False, "k")
    ]


@pytest.mark.parametrize(
    "href", ["/path", "rel/path", "?q=1", "//other.example/x", "HTTPS://a.example/", "page#frag"]
)
def test_relative_and_http_hrefs_are_kept_raw(href: str) -> None:
    assert hrefs(page(f'<a href="{href}">x</a>')) == [href]


def test_href_whitespace_is_stripped_but_nothing_else_changes() -> None:
    assert hrefs(page('<a href="\n  /a b/%7e?x=1&amp;y=2  \t">x</a>')) == ["/a b/%7e?x=1&y=2"]


def test_rel_nofollow_per_link() -> None:
    p = page(
        '<a href="/f">f</a><a href="/n" rel="NoFollow">n</a>'
        '<a href="/u" rel="ugc nofollow">u</a><a href="/s" rel="sponsored">s</a>'
    )
    assert [(link.href, link.rel_nofollow) for link in p.links] == [
        ("/f", False),
        ("/n", True),
        ("/u", True),
        ("/s", False),
    ]
    assert not p.meta_nofollow


def test_anchor_text_collapsed_truncated_and_image_alt() -> None:
    long_text = "word " * 100
    p = page(
        f'<a href="/1">  Hello\n <b>bold</b>\tworld </a><a href="/2">{long_text}</a>'
        '<a href="/3"><img src="i.png" alt="Logo"></a><a href="/4"></a>'
    )
    anchors = [link.anchor for link in p.links]
    assert anchors[0] == "Hello bold world"
    assert len(anchors[1]) <= MAX_ANCHOR_CHARS
    assert anchors[1].startswith("word word")
    assert anchors[2:] == ["Logo", ""]


def test_max_links_caps_the_number_of_links() -> None:
    body = "".join(f'<a href="/p{i}">{i}</a>' for i in range(50))
    assert hrefs(page(body, max_links=10)) == [f"/p{i}" for i in range(10)]
    assert len(page(body).links) == 50
    assert page(body, max_links=0).links == []


def test_default_link_cap_is_1000() -> None:
    body = '<a href="/x">x</a>' * 1500
    assert len(page(body).links) == 1000


# --- robots directives -----------------------------------------------------------


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ('<meta name="robots" content="noindex">', (True, False, False)),
        ('<meta name="robots" content="nofollow">', (False, True, False)),
        ('<meta name="ROBOTS" content="NoIndex, NoFollow">', (True, True, False)),
        ('<meta name="robots" content="noindex nofollow">', (True, True, False)),
        ('<meta name="robots" content="none">', (True, True, False)),
        ('<meta name="robots" content="noarchive">', (False, False, True)),
        ('<meta name="robots" content="index, follow, all">', (False, False, False)),
        ('<meta name="robots" content="max-snippet:20">', (False, False, False)),
        ('<meta name="trawl" content="noindex">', (True, False, False)),
        ('<meta name="Trawl" content="none">', (True, True, False)),
        ('<meta name="googlebot" content="noindex, nofollow">', (False, False, False)),
        ('<meta name="description" content="noindex">', (False, False, False)),
        (
            '<meta name="robots" content="noarchive"><meta name="trawl" content="nofollow">',
            (False, True, True),
        ),
        (
            '<meta name="robots" content="noindex"><meta name="robots" content="index">',
            (True, False, False),
        ),
    ],
)
def test_meta_robots(meta: str, expected: tuple[bool, bool, bool]) -> None:
    p = page(f"<html><head>{meta}</head><body><a href='/x'>x</a></body></html>")
    assert (p.meta_noindex, p.meta_nofollow, p.meta_noarchive) == expected
    assert hrefs(p) == ["/x"]  # links are returned anyway; the caller decides


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noindex"], (True, False, False)),
        (["NOFOLLOW"], (False, True, False)),
        (["none"], (True, True, False)),
        (["noindex, noarchive"], (True, False, True)),
        (["googlebot: noindex"], (False, False, False)),
        (["trawl: noindex"], (True, False, False)),
        (["TRAWL: none"], (True, True, False)),
        (["googlebot: noindex", "nofollow"], (False, True, False)),
        (["googlebot: noindex, nofollow", "trawl: noarchive"], (False, False, True)),
        # Folded into one value: each prefix scopes the directives that follow it.
        (["googlebot: noindex, nofollow, trawl: noarchive"], (False, False, True)),
        (["noarchive, googlebot: noindex"], (False, False, True)),
        # "unavailable_after:" is a directive with a value, not a user-agent.
        (["unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"], (True, False, False)),
        (["max-snippet: 10, nofollow"], (False, True, False)),
    ],
)
def test_x_robots_tag(values: list[str], expected: tuple[bool, bool, bool]) -> None:
    headers = [("Content-Type", "text/html")] + [("X-Robots-Tag", v) for v in values]
    p = page("<p>hi</p>", headers=headers)
    assert (p.meta_noindex, p.meta_nofollow, p.meta_noarchive) == expected


def test_x_robots_tag_from_a_mapping_and_combined_with_meta() -> None:
    p = parse_page(
        b'<meta name="robots" content="nofollow"><p>x</p>',
        HTML,
        {"x-robots-tag": "noarchive", "Content-Type": HTML},
        AGENT,
    )
    assert (p.meta_noindex, p.meta_nofollow, p.meta_noarchive) == (False, True, True)


def test_x_robots_tag_applies_to_non_html() -> None:
    p = page(b"%PDF-1.7 ...", "application/pdf", headers=[("X-Robots-Tag", "noindex")])
    assert p == ParsedPage(meta_noindex=True, is_html=False)


# --- content types and encodings -------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["application/pdf", "image/png", "text/plain", "application/xml", "text/css", "html"],
)
def test_non_html_content_type_gives_empty_page(content_type: str) -> None:
    p = page('<html><title>t</title><a href="/x">x</a></html>', content_type)
    assert p == ParsedPage(is_html=False)


@pytest.mark.parametrize(
    "content_type", ["text/html", "TEXT/HTML; charset=UTF-8", "application/xhtml+xml"]
)
def test_html_content_types_are_parsed(content_type: str) -> None:
    p = page('<html><title>t</title><a href="/x">x</a></html>', content_type)
    assert p.is_html
    assert p.title == "t"
    assert hrefs(p) == ["/x"]


def test_missing_content_type_is_sniffed() -> None:
    assert page("<!DOCTYPE html><p>x", None).is_html
    assert page("  <HTML><body>x</body></HTML>", "").is_html
    assert not page("just some text", None).is_html
    assert not page(b"\x89PNG\r\n\x1a\n\x00\x00", None).is_html


def test_latin1_page_with_meta_charset() -> None:
    body = (
        '<html><head><meta charset="ISO-8859-1"><title>Caf\u00e9</title></head>'
        "<body><p>\u00c0 la carte \u201cquoted\u201d</p>"
        '<a href="/men\u00fc">Men\u00fc</a></body></html>'
    ).encode("cp1252")
    p = page(body, "text/html")
    assert p.title == "Café"
    # ISO-8859-1 is read as windows-1252, as browsers do (WHATWG Encoding).
    assert p.text == "À la carte “quoted” Menü"
    assert p.links == [RawLink("/menü", False, "Menü")]


def test_meta_http_equiv_charset() -> None:
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
        "<p>\u041f\u0440\u0438\u0432\u0435\u0442</p>"
    ).encode("cp1251")
    assert page(body).text == "Привет"


def test_http_charset_wins_over_meta() -> None:
    body = '<meta charset="iso-8859-1"><p>\u00e9t\u00e9</p>'.encode()
    assert page(body, "text/html; charset=utf-8").text == "été"
    assert page(body, "text/html").text == "Ã©tÃ©"  # the page lied; we believe it


def test_undeclared_utf8_is_detected() -> None:
    assert page("<p>na\u00efve \u65e5\u672c</p>").text == "naïve 日本"


def test_undeclared_non_utf8_falls_back_to_windows_1252() -> None:
    assert page("<p>na\u00efve \u2013 ok</p>".encode("cp1252")).text == "naïve – ok"


def test_utf8_cut_inside_a_character_is_still_utf8() -> None:
    body = "<p>\u00e9\u00e9 \u65e5".encode()[:-1]
    assert page(body).text.startswith("éé")


def test_byte_order_mark_wins() -> None:
    assert page("\ufeff<p>\u00e9</p>".encode("utf-16-le"), "text/html; charset=latin1").text == "é"
    assert page("\ufeff<p>\u00e9</p>".encode()).text == "é"


def test_unknown_or_non_text_charset_is_ignored() -> None:
    assert page("<p>\u00e9</p>".encode(), "text/html; charset=bogus").text == "é"
    assert page("<p>\u00e9</p>".encode(), "text/html; charset=base64").text == "é"


# --- robustness ----------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"   \n\t ", b"\x00", b"\xef\xbb\xbf"])
def test_empty_body(body: bytes) -> None:
    p = page(body, HTML)
    assert p == ParsedPage(is_html=True)


def test_binary_body_never_raises() -> None:
    garbage = bytes(range(256)) * 64 + b'<a href="/found">f</a>' + bytes(range(255, -1, -1))
    p = page(garbage, HTML)
    assert p.is_html
    assert "/found" in hrefs(p)


def test_malformed_html() -> None:
    p = page(
        "<html><head><title>Broken</title><body><p>one<p>two<div><a href=/x>unclosed"
        "<a href='/y'>next</b></i></html></html><<<>>>&bogus; &amp"
    )
    assert p.is_html
    assert hrefs(p) == ["/x", "/y"]
    assert p.title == "Broken"
    assert p.text.startswith("one two unclosednext")


def test_unterminated_title_swallows_rest_but_does_not_raise() -> None:
    p = page("<title>no end <a href='/x'>x</a>")
    assert p.title is not None
    assert p.title.startswith("no end")


def test_deeply_nested_html() -> None:
    # Sloppy pages nest hundreds of unclosed tags; libxml2 stops at 256 by default.
    p = page("<font>" * 1000 + "<a href='/deep'>deep</a>")
    assert p.text == "deep"
    assert hrefs(p) == ["/deep"]


def test_absurdly_deep_html_is_cut_off_without_raising() -> None:
    p = page("<a href='/first'>first</a>" + "<div>" * 20_000 + "<a href='/deep'>deep</a>")
    assert hrefs(p) == ["/first"]


# --- title and text --------------------------------------------------------------


def test_title_collapsed_and_missing() -> None:
    assert page("<title>\n  A \t title </title>").title == "A title"
    assert page("<title>   </title>").title is None
    assert page("<p>x</p>").title is None


def test_script_style_noscript_and_head_are_not_text() -> None:
    p = page(
        """<html><head><title>Title</title><style>body { color: red }</style>
        <script>var secret = 1;</script></head>
        <body><h1>Head line</h1><script type="text/javascript">document.write("x")</script>
        <p>Para <em>graph</em></p><style>.y{}</style><noscript>enable js</noscript>
        <!-- a comment --><template><p>tpl</p></template>after</body></html>"""
    )
    assert p.text == "Head line Para graph after"
    assert p.title == "Title"


def test_text_keeps_tail_after_hidden_element_and_separates_blocks() -> None:
    p = page("<p>a<script>x</script>b</p><div>c</div>d<br>e<td>f</td><span>g</span>h")
    assert p.text == "ab c d e f gh"


def test_text_whitespace_collapsed_and_entities_decoded() -> None:
    assert page("<p>  one\n\n two&nbsp;&nbsp;three &lt;4&gt; </p>").text == "one two three <4>"


def test_text_is_truncated() -> None:
    p = page("<p>" + "abcd " * 100_000 + "</p>")
    assert len(p.text) <= 200_000
    assert p.text.startswith("abcd abcd")
    assert len(page("<p>" + "x" * 1000 + "</p>", max_text_chars=10).text) == 10
