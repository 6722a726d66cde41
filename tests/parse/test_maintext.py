"""Tests for trawl.parse.maintext: the article survives, the template does not.

Pages are run through ``trawl.parse.html.parse_page``, as the fetcher does, so
``main_text`` is computed from the same tree as the links and visible text.
"""

from __future__ import annotations

import lxml.html

from trawl.parse.html import parse_page
from trawl.parse.maintext import TextBlock, classify_blocks, main_text, text_blocks

HTML = "text/html; charset=utf-8"

TITLE = "Council approves the new riverside park after a long debate"
BYLINE = "By Jane Doe, city reporter"
PARAGRAPHS = [
    "The city council voted on Tuesday evening to approve the long-discussed riverside "
    "park, ending nearly three years of public hearings, design competitions and "
    "budget disputes that had divided residents of the eastern districts.",
    "Supporters said the park would finally give the neighbourhood a green space "
    "within walking distance of the new housing blocks, while opponents worried "
    "about the cost of maintaining the embankment and the loss of parking spaces.",
    "What happens next?",
    "Construction is expected to begin in the spring. The first phase covers the "
    "playground, a footpath along the water and the restoration of the old boathouse, "
    "which the historical society has asked to be turned into a small museum.",
    "The mayor called the vote a turning point for the district and promised regular "
    "updates on the progress of the works, including a public meeting before the "
    "second phase, which adds sports fields and a cycling route to the harbour.",
]


def article_html() -> str:
    paragraphs = [f"<p>{PARAGRAPHS[0]}</p>", f"<p>{PARAGRAPHS[1]}</p>"]
    paragraphs += [f"<h2>{PARAGRAPHS[2]}</h2>", f"<p>{PARAGRAPHS[3]}</p>"]
    paragraphs.append(f"<p>{PARAGRAPHS[4]}</p>")
    return f"<h1>{TITLE}</h1>\n<p class='byline'>{BYLINE}</p>\n" + "\n".join(paragraphs)


def links(n: int, label: str) -> str:
    return "".join(
        f"<li><a href='/{label}/{i}'>{label} story number {i}</a></li>" for i in range(n)
    )


COMMENT = (
    "I have lived next to the river for twenty years and I think this park is a "
    "wonderful idea, although I hope they keep the old trees along the embankment "
    "and do not turn everything into concrete like last time."
)


def modern_page() -> str:
    """An HTML5 news template: landmarks, cookie banner, share bar, sidebar, comments."""
    return f"""<!DOCTYPE html><html><head><title>{TITLE} | Daily Bugle</title>
<script>var tracking = "lots of javascript text that nobody reads";</script>
<style>.nav {{ color: red }}</style></head>
<body class="single-post has-sidebar nav-open">
<div id="cookie-consent">We use cookies to improve your experience on our website.
 By continuing to browse you agree to our use of cookies. <button>Accept</button></div>
<header class="site-header"><div class="logo">Daily Bugle</div>
 <nav><ul>{links(8, "section")}</ul></nav></header>
<div class="breadcrumbs"><a href="/">Home</a> &gt; <a href="/city">City</a></div>
<main><article>
<span class="comment-count">34 comments</span> <time>12 May 2024 10:31</time>
{article_html()}
<div class="share-buttons">Share this article on social media with your friends
 and family: <a href="#">Facebook</a> <a href="#">Twitter</a></div>
</article></main>
<aside class="sidebar"><h3>Most read</h3><ul>{links(6, "popular")}</ul>
 <form><p>Sign up for our newsletter to receive the best stories of the day in your
 inbox every morning, free of charge and without any advertising.</p>
 <input name="email"></form></aside>
<div class="ad-slot">Advertisement: the best mattresses of 2024, rated by our
 experts after sleeping on each of them for a full month, with discount codes.</div>
<section class="related-posts"><h2>Related stories</h2><ul>{links(4, "related")}</ul></section>
<section id="comments"><h2>34 comments</h2><div class="comment">{COMMENT}</div></section>
<footer><p>&copy; 2024 Daily Bugle Media Group. All rights reserved.</p>
 <ul>{links(5, "legal")}</ul></footer>
</body></html>"""


def table_page() -> str:
    """An old table layout without landmarks: ids and classes only."""
    return f"""<html><head><title>Riverside park</title></head><body>
<table width="100%"><tr><td colspan="2" id="top"><img src="logo.gif" alt="Gazette">
 <div id="topMenu">{" | ".join(f"<a href='/s{i}'>Section {i}</a>" for i in range(10))}</div>
</td></tr><tr>
<td id="leftnav" valign="top"><ul>{links(12, "archive")}</ul></td>
<td valign="top"><div class="post">
{article_html()}
</div>
<div class="sponsored-box">Sponsored: discover the new electric city car with a
 free charging station at home and five years of free servicing at any dealer.</div>
<div class="commentlist"><div>{COMMENT}</div><div>{COMMENT}</div></div>
</td><td class="right-col"><div class="widget"><b>Weather</b> 21 degrees, sunny</div></td>
</tr></table>
<div id="pagefooter">Copyright 1999-2024 The Gazette. Powered by a content system.</div>
<div style="display: none">Hidden tracking text that readers never see on the page.</div>
</body></html>"""


def print_page() -> str:
    """The print version: the article and nothing else."""
    return f"<html><body>{article_html()}</body></html>"


def parsed_main_text(html: str) -> str:
    return parse_page(html.encode(), HTML, [], "trawl").main_text


def test_same_article_in_two_templates_gives_the_same_main_text() -> None:
    modern, table = parsed_main_text(modern_page()), parsed_main_text(table_page())
    assert modern == table
    assert modern.split("\n") == [TITLE, BYLINE, *PARAGRAPHS]


def test_print_version_gives_the_same_main_text_as_the_full_page() -> None:
    assert parsed_main_text(print_page()) == parsed_main_text(modern_page())


def test_template_text_is_visible_but_not_main() -> None:
    page = parse_page(modern_page().encode(), HTML, [], "trawl")
    for template in ("cookies", "Most read", "newsletter", "mattresses", "Related stories"):
        assert template in page.text
        assert template not in page.main_text
    assert "twenty years" in page.text and "twenty years" not in page.main_text  # a comment
    assert "javascript" not in page.main_text


def test_link_lists_are_dropped() -> None:
    html = f"<html><body><p>{PARAGRAPHS[0]}</p><ul>{links(20, 'more')}</ul></body></html>"
    main = parsed_main_text(html)
    assert main == PARAGRAPHS[0]
    assert "story number" not in main


def test_links_inside_prose_are_kept() -> None:
    words = PARAGRAPHS[0].split()
    prose = " ".join([*words[:5], f"<a href='/c'>{words[5]}</a>", *words[6:]])
    assert parsed_main_text(f"<p>{prose}</p>") == PARAGRAPHS[0]


def test_testweb_shaped_page_keeps_title_and_text() -> None:
    # trawl.testweb pages: h1, one paragraph of words, a list of links
    words = " ".join(["meadow", "copper", "violet", "orbit"] * 15)
    html = f"<html><body><h1>host page 3: apple river</h1>\n<p>{words}</p>\n"
    html += f"<ul>{links(6, 'link')}</ul></body></html>"
    assert parsed_main_text(html) == f"host page 3: apple river\n{words}"


def test_hidden_elements_are_not_main_text() -> None:
    html = f"<p>{PARAGRAPHS[0]}</p><p hidden>{PARAGRAPHS[1]}</p>"
    html += f"<div aria-hidden='true'>{PARAGRAPHS[3]}</div>"
    assert parsed_main_text(html) == PARAGRAPHS[0]


def test_a_wrapper_named_like_a_sidebar_keeps_its_article() -> None:
    html = f"<div class='content-with-sidebar'><article><p>{PARAGRAPHS[0]}</p></article></div>"
    assert parsed_main_text(html) == PARAGRAPHS[0]
    # ... but without an article inside, the name decides
    assert parsed_main_text(f"<div class='sidebar'><p>{PARAGRAPHS[0]}</p></div><p>x</p>") == "x"


def test_camel_case_and_compound_names_are_read() -> None:
    for name in ("adSlot", "topnav", "mainMenu", "site-footer", "relatedPosts", "cookieBar"):
        html = f"<p>{PARAGRAPHS[0]}</p><div class='{name}'>{PARAGRAPHS[1]}</div>"
        assert parsed_main_text(html) == PARAGRAPHS[0], name
    for name in ("threads", "downloads", "shadow", "loading", "headline"):  # not template
        html = f"<p>{PARAGRAPHS[0]}</p><div class='{name}'>{PARAGRAPHS[1]}</div>"
        assert parsed_main_text(html) == PARAGRAPHS[0] + "\n" + PARAGRAPHS[1], name


def test_short_page_without_good_blocks_keeps_its_plain_blocks() -> None:
    html = "<h1>Contact</h1><p>Call us on weekdays.</p><ul><li><a href='/'>Home</a></li></ul>"
    assert parsed_main_text(html) == "Contact\nCall us on weekdays."


def test_everything_in_template_falls_back_to_the_visible_text() -> None:
    page = parse_page(b"<body><form><p>Only a form here</p></form></body>", HTML, [], "trawl")
    assert page.text == "Only a form here"
    assert page.main_text == page.text


def test_empty_and_non_html_pages_have_no_main_text() -> None:
    assert parse_page(b"", HTML, [], "trawl").main_text == ""
    assert parse_page(b"%PDF-1.4 text", "application/pdf", [], "trawl").main_text == ""


def test_main_text_respects_the_limit() -> None:
    root = lxml.html.document_fromstring(print_page())
    limit = len(TITLE) + 8
    assert main_text(root, limit=limit) == TITLE + "\nBy Jane"


def test_short_block_between_good_ones_is_good_and_between_bad_ones_bad() -> None:
    good, short, bad = TextBlock("g" * 250), TextBlock("s" * 20), TextBlock("l" * 100, 100)
    assert classify_blocks([good, short, good]) == ["good", "good", "good"]
    assert classify_blocks([bad, short, bad]) == ["bad", "bad", "bad"]
    near = TextBlock("n" * 100)
    assert classify_blocks([bad, near, bad]) == ["bad", "bad", "bad"]
    assert classify_blocks([bad, near, good]) == ["bad", "good", "good"]


def test_blocks_count_link_characters() -> None:
    root = lxml.html.document_fromstring("<p>see <a href='/x'>this page</a> now</p>")
    assert text_blocks(root) == [TextBlock("see this page now", len("this page"))]
