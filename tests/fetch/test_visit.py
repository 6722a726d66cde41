"""Outlinks as the fetcher records them: resolved, normalised, one per target,
nofollow per link (a target is followed if any link to it may be followed)."""

from __future__ import annotations

from trawl.config import load_config
from trawl.fetch.row import page_fields
from trawl.parse.html import parse_page

BASE = "http://a.test/dir/page.html"


def outlinks(html: str) -> dict[str, bool]:
    cfg = load_config(None, [], environ={})
    page = parse_page(html.encode(), "text/html", [], "trawl")
    return {o["url"]: o["nofollow"] for o in page_fields(BASE, page, cfg)["outlinks"]}


def test_one_followable_link_makes_the_target_followable_in_either_order() -> None:
    html = (
        '<a href="x.html" rel="nofollow">x</a><a href="/dir/x.html">x again</a>'
        '<a href="y.html">y</a><a href="y.html" rel="nofollow">y again</a>'
        '<a href="z.html" rel="nofollow">z</a><a href="z.html#top" rel="ugc nofollow">z</a>'
    )
    assert outlinks(html) == {
        "http://a.test/dir/x.html": False,
        "http://a.test/dir/y.html": False,
        "http://a.test/dir/z.html": True,
    }


def test_meta_nofollow_covers_every_link_and_self_links_are_dropped() -> None:
    html = (
        '<meta name="robots" content="nofollow">'
        '<a href="x.html">x</a><a href="page.html">me</a><a href="x.html">x</a>'
    )
    assert outlinks(html) == {"http://a.test/dir/x.html": True}
