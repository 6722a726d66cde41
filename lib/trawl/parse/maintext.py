"""A page's main text, without the site's template: what near-duplicate
fingerprints are computed from.

Real sites repeat navigation, headers, footers, sidebars, ads, "related"
lists, cookie banners and comment counts on every page. Fingerprinting the
visible text would make a site's short pages look alike (they share the
template) and keep a print version from ever meeting its original (it has
none). So the fingerprint is taken of the article alone, found in two steps:

1. **Structure.** Subtrees that are template by their markup are dropped:
   ``nav``, ``header``, ``footer``, ``aside``, ``form`` and a few more
   elements; ARIA landmark roles that are not content (``navigation``,
   ``banner``, ``contentinfo``, ``complementary``, ``search``); hidden
   elements; and elements whose ``class`` or ``id`` names them nav, menu,
   footer, sidebar, banner, ad(s), share, related, comment, cookie and the
   like. ``html``, ``body``, ``main`` and ``article``, and any element that
   holds a ``main`` or ``article``, are never dropped by name: body classes
   such as "has-sidebar" would otherwise take the whole page with them.
2. **Blocks.** The rest is cut into text blocks at block-level elements and
   each is classified as jusText does (Pomikálek, "Removing boilerplate and
   duplicate content from web corpora", PhD thesis, Masaryk University 2011;
   the ``justext`` package's defaults): a block with more than 20 % of its
   characters in links, or with a copyright sign, is *bad*; under 70
   characters it is *short* (bad if it has a link); from 200 characters
   *good*; in between *near-good*.
   Short and near-good blocks then take the class of their context (a short
   block between good ones is good, a near-good one next to bad ones only is
   bad) and headings shortly before good text become good. The good blocks,
   in document order, are the main text.

If no block is good the text of the blocks that are not bad is used (a page
of links alone has no main text, and so no fingerprint), and if step 1 left
nothing at all, the caller's ``fallback`` (the whole visible text): a short
page still gets a text, but the template is not taken for its text whenever
there is something else -- else a site's short pages would all be
near-duplicates of each other through their shared navigation.

Why not the ``justext`` package: it parses the HTML again (the fetcher has
already parsed it once, ``trawl.parse.html``) and needs a stoplist for the page's
language, which a crawl of the whole web does not know in advance. Without
stoplists the length and link density carry the decision; a long block of
boilerplate outside any marked container (a disclaimer in a plain ``div``)
therefore survives. Being the same on every page of its site, it pulls the
site's pages a little closer together and keeps a print version some bits
from its original, in proportion to its share of the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import lxml.etree

__all__ = [
    "BLOCK_TAGS",
    "INVISIBLE_TAGS",
    "TextBlock",
    "classify_blocks",
    "main_text",
    "text_blocks",
]

# Elements whose text is not shown on the page.
INVISIBLE_TAGS = frozenset(
    {"head", "title", "script", "style", "noscript", "template", "iframe", "object"}
)
# Elements that break a line when rendered: text on either side is separated.
BLOCK_TAGS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "caption", "dd", "details"),
        *("dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form"),
        *("h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol"),
        *("option", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th"),
        *("thead", "tr", "ul"),
    }
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})

# Template by element (HTML standard 4.3: nav, header, footer, aside are the
# page's navigation and chrome; forms, buttons and menus are controls).
_TEMPLATE_TAGS = frozenset(
    {"nav", "header", "footer", "aside", "form", "menu", "button", "select", "dialog", "svg"}
)
# ARIA landmark roles (WAI-ARIA 1.2, 5.3.4) that are not the page's content.
_TEMPLATE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
)
_PROTECTED_TAGS = frozenset({"html", "body", "main", "article"})
# class/id words that name template parts: whole words, and stems that may
# begin or end a word ("navbar", "topnav").
_TEMPLATE_WORDS = frozenset(
    {
        *("ad", "ads", "adbox", "adslot", "banner", "banners", "comment", "comments"),
        *("commentlist", "consent", "disqus", "gdpr", "header", "masthead", "modal"),
        *("pager", "pagination", "popup", "promo", "promos", "sharing", "toolbar"),
        *("widget", "widgets"),
    }
)
_TEMPLATE_STEMS = (
    *("advert", "breadcrumb", "cookie", "footer", "menu", "nav", "newsletter"),
    *("related", "share", "sidebar", "social", "sponsor"),
)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")

# jusText's defaults (justext.core: LENGTH_LOW_DEFAULT, LENGTH_HIGH_DEFAULT,
# MAX_LINK_DENSITY_DEFAULT, MAX_HEADING_DISTANCE_DEFAULT).
LENGTH_LOW = 70
LENGTH_HIGH = 200
MAX_LINK_DENSITY = 0.2
MAX_HEADING_DISTANCE = 200

GOOD, NEAR_GOOD, SHORT, BAD = "good", "neargood", "short", "bad"


@dataclass(frozen=True, slots=True)
class TextBlock:
    """One block of text: its whitespace-collapsed text and the characters of
    it inside links."""

    text: str
    link_chars: int = 0
    heading: bool = False

    @property
    def link_density(self) -> float:
        return self.link_chars / len(self.text) if self.text else 0.0


def main_text(root: Any, *, fallback: str = "", limit: int | None = None) -> str:
    """The main text of a parsed page, blocks separated by newlines, cut at
    ``limit`` characters.

    ``root`` is an lxml HTML document parsed without comments and processing
    instructions, as ``trawl.parse.html`` does: lxml's ``iterwalk`` does not visit
    them, so the text after one would be lost.
    """
    blocks = text_blocks(root)
    if not blocks:
        return fallback[:limit]
    classes = classify_blocks(blocks)
    chosen = [b.text for b, c in zip(blocks, classes, strict=True) if c == GOOD]
    if not chosen:  # nothing good: whatever is not plainly boilerplate
        chosen = [b.text for b in blocks if _initial_class(b) != BAD]
    return "\n".join(chosen)[:limit].rstrip()


# --- step 1: blocks outside the template ---------------------------------------


@dataclass(slots=True)
class _BlockCutter:
    """Collects text into blocks as the tree is walked."""

    blocks: list[TextBlock] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    link_parts: list[str] = field(default_factory=list)
    heading: bool = False
    links: int = 0  # depth inside <a>

    def add(self, text: str | None) -> None:
        if text:
            self.parts.append(text)
            if self.links:
                self.link_parts.append(text)

    def cut(self) -> None:
        text = " ".join("".join(self.parts).split())
        if text:
            link_chars = len(" ".join("".join(self.link_parts).split()))
            self.blocks.append(TextBlock(text, min(link_chars, len(text)), self.heading))
        self.parts.clear()
        self.link_parts.clear()
        self.heading = False


def text_blocks(root: Any) -> list[TextBlock]:
    """The text blocks of a document outside invisible and template elements."""
    body = root.find("body")
    cutter = _BlockCutter()
    walker = lxml.etree.iterwalk(root if body is None else body, events=("start", "end"))
    skipped = None  # the element whose subtree is being skipped
    for event, element in walker:
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if tag in INVISIBLE_TAGS or _is_template(element, tag):
                walker.skip_subtree()  # its "end" event still comes, for the tail
                skipped = element
                continue
            _enter(cutter, tag)
            cutter.add(element.text)
            continue
        if element is not skipped and tag == "a":
            cutter.links -= 1
        if tag in BLOCK_TAGS:
            cutter.cut()
        cutter.add(element.tail)
    cutter.cut()
    return cutter.blocks


def _enter(cutter: _BlockCutter, tag: str) -> None:
    if tag in BLOCK_TAGS:
        cutter.cut()
    if tag in _HEADINGS:
        cutter.heading = True
    elif tag == "a":
        cutter.links += 1


def _is_template(element: Any, tag: str) -> bool:
    """Is this element page template (or hidden), by its tag or attributes?"""
    if tag in _TEMPLATE_TAGS or _is_hidden(element):
        return True
    if tag in _PROTECTED_TAGS:
        return False
    role = str(element.get("role") or "").strip().lower()
    if role in _TEMPLATE_ROLES:
        return True
    names = f"{element.get('class') or ''} {element.get('id') or ''}"
    if not names.strip() or not _names_template(names):
        return False
    # A wrapper named after a sidebar may still hold the article.
    return element.find(".//article") is None and element.find(".//main") is None


def _is_hidden(element: Any) -> bool:
    if element.get("hidden") is not None or element.get("aria-hidden") == "true":
        return True
    style = str(element.get("style") or "").replace(" ", "").lower()
    return "display:none" in style or "visibility:hidden" in style


def _names_template(names: str) -> bool:
    """Do class/id values name a template part ("site-nav", "adSlot", ...)?"""
    for word in _NON_WORD.split(_CAMEL.sub(r"\1 \2", names).lower()):
        if word in _TEMPLATE_WORDS or word.startswith(_TEMPLATE_STEMS):
            return True
        if word.endswith(_TEMPLATE_STEMS):  # "topnav", "mainmenu", "pagefooter"
            return True
    return False


# --- step 2: jusText's classification --------------------------------------------


def _initial_class(block: TextBlock) -> str:
    """jusText's context-free class, with length standing in for stopwords."""
    if block.link_density > MAX_LINK_DENSITY or "\u00a9" in block.text:
        return BAD
    if len(block.text) < LENGTH_LOW:
        return BAD if block.link_chars else SHORT
    return GOOD if len(block.text) >= LENGTH_HIGH else NEAR_GOOD


def classify_blocks(blocks: Sequence[TextBlock]) -> list[str]:
    """Final class of each block: ``good`` or ``bad`` (justext.core
    ``revise_paragraph_classification``)."""
    classes = [_initial_class(b) for b in blocks]
    _promote_headings(blocks, classes, SHORT, NEAR_GOOD)
    _settle_short(classes)
    for i, cls in enumerate(classes):
        if cls == NEAR_GOOD:
            around = (_neighbour(classes, i, -1, True), _neighbour(classes, i, 1, True))
            classes[i] = BAD if around == (BAD, BAD) else GOOD
    initial = [_initial_class(b) for b in blocks]
    bad_headings = [i for i, c in enumerate(classes) if c == BAD and initial[i] != BAD]
    _promote_headings(blocks, classes, BAD, GOOD, only=bad_headings)
    return classes


def _settle_short(classes: list[str]) -> None:
    """A short block is good between good blocks, bad between bad ones; between
    a good and a bad one it is good only next to a near-good block."""
    settled: dict[int, str] = {}
    for i, cls in enumerate(classes):
        if cls != SHORT:
            continue
        before, after = _neighbour(classes, i, -1, True), _neighbour(classes, i, 1, True)
        if before == after:
            settled[i] = before
        elif (before == BAD and _neighbour(classes, i, -1, False) == NEAR_GOOD) or (
            after == BAD and _neighbour(classes, i, 1, False) == NEAR_GOOD
        ):
            settled[i] = GOOD
        else:
            settled[i] = BAD
    for i, cls in settled.items():
        classes[i] = cls


def _neighbour(classes: Sequence[str], i: int, step: int, skip_near_good: bool) -> str:
    """Class of the nearest block before (step -1) or after (step 1) that is not
    short (nor near-good, if asked); the document's edges count as bad."""
    skipped = {SHORT, NEAR_GOOD} if skip_near_good else {SHORT}
    j = i + step
    while 0 <= j < len(classes):
        if classes[j] not in skipped:
            return classes[j]
        j += step
    return BAD


def _promote_headings(
    blocks: Sequence[TextBlock],
    classes: list[str],
    when: str,
    to: str,
    only: Sequence[int] | None = None,
) -> None:
    """Headings of class ``when`` with a good block within MAX_HEADING_DISTANCE
    characters after them become ``to``."""
    for i in range(len(blocks)) if only is None else only:
        if not blocks[i].heading or classes[i] != when:
            continue
        distance = 0
        for j in range(i + 1, len(blocks)):
            if distance > MAX_HEADING_DISTANCE:
                break
            if classes[j] == GOOD:
                classes[i] = to
                break
            distance += len(blocks[j].text)
