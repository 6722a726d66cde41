"""Fuzz trawl.parse.html and trawl.parse.maintext: any bytes, Content-Type and
headers give a ``ParsedPage`` within its limits, in bounded time; a charset
label never hides a page that reads the same in it; block classes are good
or bad.

Bodies are HTML-shaped (links of every kind, robots metas, base and canonical,
template landmarks, hidden elements, entities good and bad, comments, CDATA,
markup nested thousands deep, hrefs of hundreds of kilobytes, in several
encodings) or arbitrary bytes.
"""

from __future__ import annotations

import codecs
import encodings.aliases
import re

import lxml.html
from hypothesis import example
from hypothesis import strategies as st

from tests.fuzz.properties import fuzz
from trawl.parse.html import MAX_ANCHOR_CHARS, MAX_TITLE_CHARS, parse_page
from trawl.parse.maintext import TextBlock, classify_blocks, main_text, text_blocks
from trawl.parse.requisites import css_requisites, srcset_urls

SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")  # RFC 3986 3.1

TAGS = st.sampled_from([
    "a", "area", "link", "frame", "base", "meta", "title", "head", "body", "html", "div", "p",
    "nav", "footer", "aside", "main", "article", "script", "style", "template", "iframe", "h1",
    "h2", "li", "table", "td", "br", "img", "svg", "math", "select", "font", "noscript",
    "source", "video", "object", "embed", "input",
])  # fmt: skip
ATTRIBUTE_NAMES = st.sampled_from([
    "href", "src", "rel", "name", "content", "class", "id", "role", "hidden", "style", "alt",
    "title", "charset", "http-equiv", "aria-hidden", "srcset", "poster", "data",
])  # fmt: skip
ATTRIBUTE_VALUES = st.one_of(
    st.sampled_from(["nofollow", "canonical", "alternate next", "stylesheet", "robots", "trawl"]),
    st.sampled_from(["noindex, nofollow", "none", "display:none", "site-nav", "adSlot", "true"]),
    st.sampled_from(["javascript:x", "http://a/", "#x", "  /y  ", "mailto:a", "\n/z\t", "HTTPS:b"]),
    st.sampled_from(["text/html; charset=utf-16", "utf-8", "bogus", "idna", "undefined"]),
    st.text(max_size=10),
)
TEXTS = st.one_of(
    st.sampled_from(["&amp;", "&#0;", "&#xD800;", "&#x110000;", "&nbsp;", "&lol;", "\u00a9 2024"]),
    st.sampled_from(["<!-- c -->", "<![CDATA[x]]>", "<?pi x?>", "</p>", "<", "&"]),
    st.text(max_size=40),
)


@st.composite
def elements(draw: st.DrawFn, depth: int = 0) -> str:
    tag = draw(TAGS)
    attributes = draw(st.lists(st.tuples(ATTRIBUTE_NAMES, ATTRIBUTE_VALUES), max_size=3))
    inner = "".join(draw(st.lists(TEXTS, max_size=3)))
    if depth < 3 and draw(st.booleans()):
        inner += "".join(draw(st.lists(elements(depth + 1), max_size=3)))
    spelled = " ".join(f'{name}="{value}"' for name, value in attributes)
    return f"<{tag} {spelled}>{inner}" + (f"</{tag}>" if draw(st.booleans()) else "")


@st.composite
def html_documents(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(["", "<!DOCTYPE html>", '<!DOCTYPE html [<!ENTITY x "xx">]>']))
    text += "".join(draw(st.lists(elements(), max_size=5)))
    depth = draw(st.sampled_from([0, 0, 300, 5_000]))  # libxml2 stops at 2,048 (huge_tree)
    text += "<div><font>" * depth + "deep" + "</font></div>" * draw(st.integers(0, depth))
    href = draw(st.sampled_from([0, 0, 1_000, 300_000]))
    if href:
        text += f'<a href="/{"h" * href}" title="{"t" * href}">{"x" * href}</a>'
    encoding = draw(st.sampled_from(["utf-8", "utf-16", "cp1252", "utf-8-sig", "shift_jis"]))
    return text.encode(encoding, "replace")


CONTENT_TYPES = st.one_of(
    st.none(),
    st.sampled_from(["text/html", "application/xhtml+xml", "text/plain", "TEXT/HTML; charset=X"]),
    st.sampled_from(["text/html; charset=utf-16", 'text/html;charset="x"', "text/html; charset="]),
    st.text(max_size=20),
)
ROBOTS_HEADERS = st.one_of(
    st.sampled_from(["noindex", "trawl: nofollow", "other: noindex", "unavailable_after: x"]),
    st.text(max_size=20),
)
HEADERS = st.one_of(
    st.dictionaries(st.sampled_from(["X-Robots-Tag", "x-robots-tag", "Link"]), ROBOTS_HEADERS),
    st.lists(st.tuples(st.sampled_from(["X-Robots-Tag", " x-robots-tag "]), ROBOTS_HEADERS)),
)


@fuzz(
    st.one_of(html_documents(), st.binary(max_size=300)),
    CONTENT_TYPES,
    HEADERS,
    st.sampled_from(["trawl", "TRAWL ", ""]),
    st.integers(0, 50),
    st.integers(0, 5_000),
    max_examples=150,
    deadline_ms=5_000,
)
def test_any_bytes_give_a_page(
    body: bytes,
    content_type: str | None,
    headers: dict[str, str] | list[tuple[str, str]],
    agent: str,
    max_links: int,
    max_text_chars: int,
) -> None:
    page = parse_page(
        body, content_type, headers, agent, max_links=max_links, max_text_chars=max_text_chars,
        requisites=True,
    )  # fmt: skip
    if not page.is_html:
        assert page.links == [] and page.text == "" and page.main_text == ""
        assert page.requisites == []
    assert_requisites(page.requisites)
    assert len(page.links) <= max_links
    for link in page.links:
        assert link.href and link.href == link.href.strip() and not link.href.startswith("#")
        scheme = SCHEME.match(re.sub(r"[\t\n\r]", "", link.href))  # as a browser reads it
        assert scheme is None or scheme.group(1).lower() in ("http", "https")
        assert len(link.anchor) <= MAX_ANCHOR_CHARS
    assert len(page.text) <= max_text_chars and len(page.main_text) <= max_text_chars
    assert page.title is None or 0 < len(page.title) <= MAX_TITLE_CHARS


def _reads_as_ascii(label: str, body: bytes) -> bool:
    """Does ``body`` (ASCII) read the same under ``label``, or is the label one a
    browser would ignore (unknown, or a codec that cannot decode web pages)?"""
    try:
        name = codecs.lookup(label).name
        b"a".decode(name, "replace")
    except (LookupError, UnicodeError):
        return True
    return body.decode(name, "replace") == body.decode("ascii")


PYTHON_LABELS = set(encodings.aliases.aliases) | set(encodings.aliases.aliases.values())
LABELS = st.one_of(
    st.sampled_from(sorted(PYTHON_LABELS)),
    st.sampled_from(["idna", "undefined", "punycode", "x-user-defined", "unicode-1-1-utf-7"]),
    st.from_regex(r"[A-Za-z0-9_.:-]{1,12}", fullmatch=True),
)


@fuzz(LABELS, st.booleans(), max_examples=300)
@example("idna", False)  # codecs that refuse "replace" once emptied the whole page
@example("undefined", True)
def test_a_charset_label_never_hides_an_ascii_page(label: str, in_header: bool) -> None:
    meta = "" if in_header else f'<meta charset="{label}">'
    body = f"<html><head>{meta}</head><body><p>hello</p><a href='/next'>next</a></body></html>"
    content_type = f"text/html; charset={label}" if in_header else "text/html"
    if _reads_as_ascii(label, body.encode()):
        page = parse_page(body.encode(), content_type, {}, "trawl")
        assert [link.href for link in page.links] == ["/next"]
        assert page.text == "hello next"


BLOCKS = st.lists(
    st.builds(
        lambda text, links, heading: TextBlock(text, min(links, len(text)), heading),
        st.one_of(st.text(min_size=1, max_size=300), st.just("\u00a9 2024 Example")),
        st.integers(0, 300),
        st.booleans(),
    ),
    max_size=30,
)


@fuzz(BLOCKS, max_examples=200)
def test_every_block_ends_good_or_bad(blocks: list[TextBlock]) -> None:
    classes = classify_blocks(blocks)
    assert len(classes) == len(blocks)
    assert set(classes) <= {"good", "bad"}


@fuzz(html_documents(), st.one_of(st.none(), st.integers(0, 1_000)), max_examples=100)
def test_main_text_of_any_tree(body: bytes, limit: int | None) -> None:
    try:
        root = lxml.html.document_fromstring(body)
    except (lxml.etree.LxmlError, ValueError):
        return  # nothing to walk: parse_page never gets this far either
    for block in text_blocks(root):
        assert block.text and block.text == " ".join(block.text.split())
        assert 0 <= block.link_chars <= len(block.text)
    text = main_text(root, fallback="fallback", limit=limit)
    assert limit is None or len(text) <= limit


def assert_requisites(refs: list[str]) -> None:
    """Page requisites as ``trawl.parse.requisites`` gives them: each once,
    trimmed, none empty, a fragment, or a data:/javascript: URL."""
    assert len(set(refs)) == len(refs)
    for ref in refs:
        assert ref and ref == ref.strip() and not ref.startswith("#")
        assert not re.match(r"(?i)\s*(data|javascript|blob):", ref)


CSS = st.one_of(
    st.text(max_size=400),
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "url(",
                    ")",
                    "url('",
                    "')",
                    'url("',
                    '")',
                    "@import ",
                    "'",
                    '"',
                    "\\",
                    "\\)",
                    "/*",
                    "*/",
                    ";",
                    "{",
                    "}",
                    "data:image/png,x",
                    "a.png",
                    " ",
                    "\n",
                    "\\2F",
                    "\\110000",
                    "@charset",
                    "src:",
                    "format(",
                    "image-set(",
                ]
            ),
            st.text(max_size=8),
        ),
        max_size=80,
    ).map("".join),
)


@fuzz(CSS, max_examples=300, deadline_ms=5_000)
def test_any_stylesheet_gives_its_references(css: str) -> None:
    assert_requisites(css_requisites(css))


@fuzz(st.text(max_size=300), max_examples=300)
def test_any_srcset_gives_urls(srcset: str) -> None:
    urls = srcset_urls(srcset)
    assert all(url and not any(c.isspace() for c in url) for url in urls)
    assert all(not url.endswith(",") for url in urls)
