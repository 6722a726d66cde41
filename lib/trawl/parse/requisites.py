"""Page requisites: what a page needs to render, as written in its HTML and CSS.

With ``requisites.capture`` (the archive preset) the fetcher also captures
the images, stylesheets, scripts, fonts and icons a page uses, so that a
replay tool shows the page as it was (Heritrix's "embeds", E hops). This
module finds them; the fetch task decides which to request
(``trawl.fetch.follow``).

From HTML (``html_requisites``, on the tree ``trawl.parse.html`` parsed):

- ``<img src>``, ``<img srcset>``, ``<source src|srcset>`` (``picture``,
  ``video``, ``audio``), ``<video poster>``, ``<audio|video|track|embed src>``,
  ``<input type=image src>``, ``<object data>``;
- ``<link href>`` whose rel is stylesheet, icon (``shortcut icon``,
  ``apple-touch-icon``, ``mask-icon``), preload or modulepreload (what the
  page asks the browser to fetch early; ``imagesrcset`` too);
- ``<script src>``;
- ``url()`` and ``@import`` in ``<style>`` blocks and ``style`` attributes.

From CSS (``css_requisites``): ``@import`` (string or ``url()``) and every
``url()``: background images, fonts (``@font-face src``), cursors.

Like outlinks, references come back raw (whitespace trimmed, CSS escapes
undone), to be resolved against the page's base URL (or the stylesheet's own
URL) by the caller; ``data:``, ``blob:``, ``javascript:`` and fragment-only
references are dropped, and each reference is given once, in document order.
Parsing never raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["css_requisites", "html_requisites", "srcset_urls"]

# <link rel> tokens whose href the page needs to render.
_LINK_RELS = frozenset(
    {"stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon",
     "preload", "modulepreload"}
)  # fmt: skip
# Element -> attributes holding one URL of something the page shows or runs.
_URL_ATTRS: dict[str, tuple[str, ...]] = {
    "img": ("src",),
    "source": ("src",),
    "video": ("poster", "src"),
    "audio": ("src",),
    "track": ("src",),
    "embed": ("src",),
    "script": ("src",),
    "object": ("data",),
}
_SRCSET_ATTRS: dict[str, tuple[str, ...]] = {
    "img": ("srcset",),
    "source": ("srcset",),
    "link": ("imagesrcset",),
}
_SKIPPED_SCHEMES = re.compile(r"^\s*(data|blob|javascript|about|mailto|tel):", re.IGNORECASE)

# CSS (CSS Syntax Level 3, simplified to what references need): comments,
# @import "x" / @import url(x), url(x) quoted or not.
_CSS_COMMENT = re.compile(r"/\*.*?(\*/|$)", re.DOTALL)
_CSS_IMPORT = re.compile(r"""@import\s+(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""", re.I)
_CSS_URL = re.compile(
    r"""url\(\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'"""
    r"""|((?:[^"'()\s\\]|\\.)*))\s*\)""",
    re.IGNORECASE,
)
_CSS_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6}\s?|.)", re.DOTALL)


def _unescape(text: str) -> str:
    """CSS escapes undone (4.3.7): ``\\2F`` is ``/``, ``\\)`` is ``)``."""

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        hexdigits = body.strip()
        if re.fullmatch(r"[0-9a-fA-F]{1,6}", hexdigits):
            code = int(hexdigits, 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
        return "" if body == "\n" else body

    return _CSS_ESCAPE.sub(one, text)


def _usable(ref: str) -> bool:
    return bool(ref) and not ref.startswith("#") and not _SKIPPED_SCHEMES.match(ref)


def _once(refs: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for ref in refs:
        ref = ref.strip()
        if _usable(ref) and ref not in seen:
            seen[ref] = None
    return list(seen)


def css_requisites(css: str) -> list[str]:
    """The references of a stylesheet (or a ``style`` attribute's or block's
    text): ``@import`` targets and ``url()`` values, raw, each once."""
    return _once(_css_refs(css))


def _css_refs(css: str) -> Iterator[str]:
    text = _CSS_COMMENT.sub(" ", css)
    for match in _CSS_IMPORT.finditer(text):
        yield _unescape(match.group(1) if match.group(1) is not None else match.group(2))
    for match in _CSS_URL.finditer(text):
        value = next(g for g in match.groups() if g is not None)
        yield _unescape(value)


def srcset_urls(srcset: str) -> list[str]:
    """The URLs of a ``srcset`` attribute (HTML 4.8.4.3.10, "parse a srcset
    attribute"): candidates are separated by commas, a URL runs to the next
    whitespace, and a URL ending in commas ends its candidate there."""
    urls: list[str] = []
    pos, n = 0, len(srcset)
    while pos < n:
        while pos < n and (srcset[pos].isspace() or srcset[pos] == ","):
            pos += 1
        start = pos
        while pos < n and not srcset[pos].isspace():
            pos += 1
        url = srcset[start:pos]
        if url.endswith(","):
            url = url.rstrip(",")
        else:  # the descriptors run to the next comma outside parentheses
            depth = 0
            while pos < n and (srcset[pos] != "," or depth):
                depth += {"(": 1, ")": -1}.get(srcset[pos], 0)
                pos += 1
        if url:
            urls.append(url)
    return urls


def _attr(element: Any, name: str) -> str | None:
    value = element.get(name)
    return value if isinstance(value, str) else None


def html_requisites(root: Any) -> list[str]:
    """The requisites of a parsed page (an lxml HTML tree), raw, in document
    order, each once (see the module docstring for which)."""
    return _once(_html_refs(root))


def _html_refs(root: Any) -> Iterator[str]:
    for element in root.iter():
        tag = element.tag
        if not isinstance(tag, str):
            continue  # comments, processing instructions
        if tag == "link":
            rels = set((_attr(element, "rel") or "").lower().split())
            if rels & _LINK_RELS:
                yield _attr(element, "href") or ""
        elif tag == "input":
            if (_attr(element, "type") or "").lower() == "image":
                yield _attr(element, "src") or ""
        elif tag == "style":
            yield from _css_refs(element.text or "")
        for name in _URL_ATTRS.get(tag, ()):
            yield _attr(element, name) or ""
        for name in _SRCSET_ATTRS.get(tag, ()):
            yield from srcset_urls(_attr(element, name) or "")
        style = _attr(element, "style")
        if style and "url(" in style.lower():
            yield from _css_refs(style)
