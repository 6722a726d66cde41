"""Tests for trawl.parse.requisites: what a page and a stylesheet need to render."""

from __future__ import annotations

import lxml.html
import pytest

from trawl.parse.html import parse_page
from trawl.parse.requisites import css_requisites, html_requisites, srcset_urls


def refs(html: str) -> list[str]:
    return html_requisites(lxml.html.document_fromstring(html))


def test_every_kind_of_requisite_in_document_order() -> None:
    page = """<!doctype html><html><head>
    <link rel="stylesheet" href="/s/site.css">
    <link rel="icon" href="/favicon.png"><link rel="apple-touch-icon" href="/touch.png">
    <link rel="preload" as="font" href="/f.woff2" crossorigin>
    <link rel="alternate" href="/feed.xml"><link rel="canonical" href="/x">
    <script src="/app.js"></script>
    <style>@import "print.css"; body { background: url('bg.png') }</style>
    </head><body>
    <img src="logo.png" srcset="logo-2x.png 2x, logo-3x.png 3x">
    <picture><source srcset="a.webp 1x, b.webp 2x" type="image/webp"><img src="a.jpg"></picture>
    <video poster="poster.jpg" src="clip.mp4"><track src="subs.vtt"></video>
    <input type="image" src="go.png"><input type="text" src="not-me.png">
    <div style="background-image: url(&quot;tile.gif&quot;)">x</div>
    <object data="movie.swf"></object><embed src="thing.svg">
    <a href="/page.html">a page is no requisite</a>
    </body></html>"""
    assert refs(page) == [
        "/s/site.css", "/favicon.png", "/touch.png", "/f.woff2", "/app.js",
        "print.css", "bg.png", "logo.png", "logo-2x.png", "logo-3x.png",
        "a.webp", "b.webp", "a.jpg", "poster.jpg", "clip.mp4", "subs.vtt", "go.png",
        "tile.gif", "movie.swf", "thing.svg",
    ]  # fmt: skip


def test_data_and_script_urls_fragments_and_repeats_are_dropped() -> None:
    page = """<html><body><img src="data:image/png;base64,AAAA"><img src="javascript:x()">
    <img src="#frag"><img src=" logo.png "><img src="logo.png"><img src="">
    <img src="blob:https://x/1"></body></html>"""
    assert refs(page) == ["logo.png"]


def test_parse_page_lists_requisites_only_when_asked() -> None:
    body = b"<html><head><link rel=stylesheet href=a.css></head><body><a href=b>b</a></body></html>"
    assert parse_page(body, "text/html", [], "trawl").requisites == []
    page = parse_page(body, "text/html", [], "trawl", requisites=True)
    assert page.requisites == ["a.css"]
    assert [link.href for link in page.links] == ["b"]  # a stylesheet is no outlink


@pytest.mark.parametrize(
    ("srcset", "urls"),
    [
        ("a.png 1x, b.png 2x", ["a.png", "b.png"]),
        ("a.png", ["a.png"]),
        ("  a.png 100w,b.png 200w  ", ["a.png", "b.png"]),
        # a URL may hold commas; one ending in a comma ends its candidate
        ("img,1.png 1x, img,2.png 2x", ["img,1.png", "img,2.png"]),
        ("a.png,b.png 2x", ["a.png,b.png"]),
        ("a.png, b.png", ["a.png", "b.png"]),
        # descriptors with parentheses (future-compatible syntax) are skipped whole
        ("a.png (x, y) 1x, b.png 2x", ["a.png", "b.png"]),
        ("", []),
        (",,, ,", []),
    ],
)
def test_srcset_follows_the_html_parsing_rules(srcset: str, urls: list[str]) -> None:
    assert srcset_urls(srcset) == urls


def test_css_imports_urls_and_escapes() -> None:
    css = r"""
    @charset "utf-8";
    @import "base.css";
    @import url('theme.css') screen;
    /* url(commented-out.png) @import "nope.css"; */
    body { background: url(img/bg.png) no-repeat, url( "dots.svg" ); }
    @font-face { src: url(/f/x.woff2) format("woff2"), url('/f/x.woff') format("woff"); }
    .a { background: url(data:image/png;base64,AAAA); }
    .b { background: url(esc\).png); cursor: url("a\2F b.cur"), auto; }
    .c { background: URL(upper.png) }
    """
    assert css_requisites(css) == [
        "base.css", "theme.css", "img/bg.png", "dots.svg", "/f/x.woff2", "/f/x.woff",
        "esc).png", "a/b.cur", "upper.png",
    ]  # fmt: skip


def test_broken_css_gives_what_it_can_and_never_raises() -> None:
    assert css_requisites("body { background: url(unclosed.png") == []
    assert css_requisites("/* never closed url(a.png)") == []
    assert css_requisites("@import 'a.css") == []
    assert css_requisites("a { background: url('ok.png') } b { c: url(") == ["ok.png"]
    assert css_requisites("\x00\xff url(\\110000.png)") == ["\ufffd.png"]
