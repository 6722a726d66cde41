"""Parse a fetched HTML page once, in the fetch task.

The fetcher already holds the body bytes in memory, so it parses them there and
keeps only what later stages need: the raw outlinks with their anchor text and
``rel=nofollow`` flag, the ``<base href>``, the canonical link, the robots
directives, the title, the visible text and the main text (the visible text
without the site's template, ``trawl.parse.maintext``, computed on the same tree:
near-duplicate fingerprints are taken of it). Parsing again in updatedb or an
indexer would mean shipping bodies around; this module makes one pass instead.

Design choices:

* Pure Python on lxml (libxml2), no pyspark, so it is unit-tested without a JVM.
* URLs are returned *raw* (whitespace-stripped, otherwise as written). Resolving
  them against the page URL and the base href is the caller's job, done with its
  RFC 3986 resolver; this module deliberately knows nothing about URL syntax
  beyond recognising a scheme to drop non-web links.
* The character encoding is chosen here, in Python, roughly as the WHATWG HTML
  standard does (section 13.2.3 "Determining the character encoding"): byte
  order mark, then the HTTP ``charset``, then a ``<meta>`` prescan, then UTF-8
  if the bytes are valid UTF-8, else windows-1252. The bytes are decoded with
  replacement characters and handed to lxml as UTF-8 with the encoding forced.
  Left to itself libxml2 reads undeclared UTF-8 pages as Latin-1, and fails on
  charset names Python knows but iconv does not.
* Parsing never raises: empty, malformed and binary bodies give whatever could
  be parsed (often an empty result).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lxml.etree
import lxml.html

from trawl.parse.maintext import BLOCK_TAGS, INVISIBLE_TAGS, main_text
from trawl.parse.requisites import html_requisites

__all__ = ["MAX_ANCHOR_CHARS", "MAX_TEXT_CHARS", "ParsedPage", "RawLink", "parse_page"]

MAX_ANCHOR_CHARS = 200
MAX_TEXT_CHARS = 200_000
MAX_TITLE_CHARS = 1_000

# Media types parsed as HTML. Everything else (including text/plain and XML) is not.
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# Bytes looked at when sniffing for HTML (no Content-Type) and for a <meta> charset.
# The HTML standard's prescan stops at 1024 bytes; we look a little further because
# pages often put a long comment or script before their <meta charset>.
_SNIFF_BYTES = 4096

_CHARSET_PARAM = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE
)

# WHATWG Encoding standard label mappings where Python's codec of the same name
# decodes differently from browsers (the web means windows-1252 by "iso-8859-1").
_ENCODING_OVERRIDES = {
    "iso8859_1": "cp1252",
    "ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "iso8859_9": "cp1254",
    "tis_620": "cp874",
    "iso8859_11": "cp874",
    "utf_16": "utf_16_le",
}

# An absolute reference starts with a scheme (RFC 3986 section 3.1). Only http(s)
# links, and relative references (no scheme), are kept.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_WEB_SCHEMES = frozenset({"http", "https"})
_URL_NOISE = re.compile(r"[\t\n\r]")  # the WHATWG URL parser removes these anywhere

# <link rel=...> values that name another page worth crawling.
_LINK_RELS = frozenset({"alternate", "next", "prev", "previous"})
_LINK_RELS_EXCLUDED = frozenset({"stylesheet", "icon", "shortcut", "apple-touch-icon"})

# X-Robots-Tag directives that carry a value after a colon, so "name:" before them
# is not a user-agent prefix (Google's robots meta tag documentation).
_VALUED_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
_UA_PREFIX = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*:(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class RawLink:
    """An outlink as written in the page: resolve ``href`` before use."""

    href: str
    rel_nofollow: bool = False
    anchor: str = ""


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """What the fetcher keeps of a page. All URLs are raw (unresolved).

    ``meta_noindex`` / ``meta_nofollow`` / ``meta_noarchive`` combine the page's
    ``<meta name="robots">``, ``<meta name="{agent}">`` and the ``X-Robots-Tag``
    response headers; the most restrictive directive wins. ``text`` is all the
    visible text, ``main_text`` the article without navigation, footers, ads and
    other boilerplate (``trawl.parse.maintext``), its blocks separated by newlines.
    """

    base_href: str | None = None
    links: list[RawLink] = field(default_factory=list)
    canonical: str | None = None
    meta_noindex: bool = False
    meta_nofollow: bool = False
    meta_noarchive: bool = False
    title: str | None = None
    text: str = ""
    is_html: bool = False
    main_text: str = ""
    requisites: list[str] = field(default_factory=list)  # raw; asked for only


@dataclass(slots=True)
class _Robots:
    noindex: bool = False
    nofollow: bool = False
    noarchive: bool = False

    def apply(self, directives: str) -> None:
        """Apply comma/space separated directives; unknown ones are ignored."""
        for token in re.split(r"[,\s]+", directives.lower()):
            if token in ("noindex", "none"):
                self.noindex = True
            if token in ("nofollow", "none"):
                self.nofollow = True
            if token in ("noarchive", "nocache"):
                self.noarchive = True


def parse_page(
    body: bytes,
    content_type: str | None,
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
    agent: str,
    *,
    max_links: int = 1000,
    max_text_chars: int = MAX_TEXT_CHARS,
    requisites: bool = False,
) -> ParsedPage:
    """Parse one fetched response.

    ``content_type`` is the response's Content-Type header value (parameters
    allowed). Only ``text/html`` and ``application/xhtml+xml`` are parsed; with
    no Content-Type the body is sniffed for ``<html`` / ``<!doctype html``.
    Anything else gives an empty page with ``is_html=False`` -- but its
    ``X-Robots-Tag`` directives are still applied, since a header is the only
    way to mark a PDF or an image noindex.

    ``headers`` are the response headers, as a mapping or as (name, value) pairs;
    pairs keep repeated ``X-Robots-Tag`` headers apart, which matters for
    user-agent prefixes (see :func:`_apply_x_robots_tag`). ``agent`` is our
    robots token (e.g. ``"trawl"``), matched case-insensitively.

    Links come from ``<a href>``, ``<area href>``, ``<frame src>`` and
    ``<link href>`` whose rel is alternate, next or prev (not stylesheets or
    icons), in document order, duplicates kept, at most ``max_links``. Hrefs
    are stripped of surrounding whitespace; empty and fragment-only hrefs and
    absolute hrefs with a scheme other than http/https (javascript:, mailto:,
    tel:, data:, ...) are dropped. ``rel_nofollow`` is the per-link
    ``rel="nofollow"``; the per-page one is ``meta_nofollow``. Links are
    returned even when the page says nofollow: the caller decides.

    ``requisites``: also list what the page needs to render (images,
    stylesheets, scripts, fonts, icons: ``trawl.parse.requisites``), raw.
    """
    robots = _Robots()
    for value in _header_values(headers, "x-robots-tag"):
        _apply_x_robots_tag(robots, value, agent)
    if not _is_html(body, content_type):
        return _page(robots, is_html=False)
    root = _parse_html(body, content_type)
    if root is None:
        return _page(robots, is_html=True)
    _apply_meta_robots(robots, root, agent)
    text = _visible_text(root, max_text_chars)
    return ParsedPage(
        base_href=_base_href(root),
        links=_links(root, max_links),
        canonical=_canonical(root),
        meta_noindex=robots.noindex,
        meta_nofollow=robots.nofollow,
        meta_noarchive=robots.noarchive,
        title=_title(root),
        text=text,
        is_html=True,
        main_text=main_text(root, fallback=text, limit=max_text_chars),
        requisites=html_requisites(root) if requisites else [],
    )


def _page(robots: _Robots, *, is_html: bool) -> ParsedPage:
    return ParsedPage(
        meta_noindex=robots.noindex,
        meta_nofollow=robots.nofollow,
        meta_noarchive=robots.noarchive,
        is_html=is_html,
    )


# --- content type and encoding ------------------------------------------------


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _is_html(body: bytes, content_type: str | None) -> bool:
    media_type = _media_type(content_type)
    if media_type:
        return media_type in _HTML_TYPES
    head = body[:_SNIFF_BYTES].lower()
    return b"<html" in head or b"<!doctype html" in head


def _codec(label: bytes | str | None) -> str | None:
    """Python codec name for an encoding label, with WHATWG overrides; None if unknown."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "ignore")
    try:
        name = codecs.lookup(label.strip()).name.replace("-", "_")
        # LookupError for non-text codecs (base64, rot13...); UnicodeError for codecs
        # that refuse "replace" or any input ("idna", "undefined"), which would make
        # the decoding below fail and the page come out empty.
        b"a".decode(name, "replace")
    except (LookupError, UnicodeError):
        return None
    return _ENCODING_OVERRIDES.get(name, name)


_BOMS = (
    (codecs.BOM_UTF8, "utf_8"),
    (codecs.BOM_UTF16_BE, "utf_16_be"),
    (codecs.BOM_UTF16_LE, "utf_16_le"),
)


def _declared_codec(body: bytes, content_type: str | None) -> str | None:
    """The encoding the response declares: HTTP charset first, then <meta>."""
    match = _CHARSET_PARAM.search((content_type or "").encode("latin-1", "replace"))
    codec = _codec(match.group(1)) if match else None
    if codec is not None:
        return codec
    # <meta charset=...> or <meta http-equiv=Content-Type content="...; charset=...">
    match = _META_CHARSET.search(body[:_SNIFF_BYTES])
    codec = _codec(match.group(1)) if match else None
    if codec in ("utf_16_le", "utf_16_be"):
        return "utf_8"  # a meta tag cannot truthfully declare UTF-16
    return codec


def _decode(body: bytes, content_type: str | None) -> str:
    """Decode the body to text, choosing the encoding as the HTML standard does."""
    for bom, bom_codec in _BOMS:  # 1. a byte order mark wins
        if body.startswith(bom):
            return body[len(bom) :].decode(bom_codec, "replace")
    codec = _declared_codec(body, content_type)  # 2. HTTP charset, 3. <meta> prescan
    if codec is None:  # 4. undeclared: UTF-8 if it is valid UTF-8, else windows-1252
        codec = "utf_8" if _looks_utf8(body) else "cp1252"
    return body.decode(codec, "replace")


def _looks_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        # A body cut off by the fetch size limit may end inside a character.
        return err.reason == "unexpected end of data" and err.start >= len(body) - 3
    return True


def _parse_html(body: bytes, content_type: str | None) -> Any | None:
    """Parse with lxml's forgiving HTML parser; None if nothing could be parsed."""
    try:
        # NUL is dropped, as the HTML standard's "in body" insertion mode does.
        text = _decode(body, content_type).replace("\x00", "")
        # huge_tree lifts libxml2's nesting limit from 256 to 2048 levels: sloppy pages
        # (hundreds of unclosed <font> or <div>) are cut off at the limit otherwise.
        # It also lifts the 10 MB text-node limit, harmless as fetch bodies are capped.
        parser = lxml.html.HTMLParser(
            encoding="utf-8", remove_comments=True, remove_pis=True, huge_tree=True
        )
        return lxml.html.document_fromstring(text.encode("utf-8", "replace"), parser=parser)
    except (lxml.etree.LxmlError, ValueError, LookupError):
        return None  # e.g. ParserError("Document is empty")


# --- robots directives --------------------------------------------------------


def _header_values(
    headers: Mapping[str, str] | Sequence[tuple[str, str]], name: str
) -> Iterator[str]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    for key, value in items:
        if key.strip().lower() == name:
            yield value


def _apply_x_robots_tag(robots: _Robots, value: str, agent: str) -> None:
    """Apply one X-Robots-Tag header value (Google's robots meta tag documentation).

    A value may start with a user-agent and a colon ("googlebot: noindex"); such
    directives apply only if the user-agent is ours. Within one value, a
    user-agent prefix covers the comma-separated directives after it up to the
    next prefix, so headers folded into one comma-joined value are read sensibly;
    each header value starts unprefixed (applying to every crawler).
    """
    scope: str | None = None
    for part in value.split(","):
        match = _UA_PREFIX.match(part)
        if match and match.group(1).lower() not in _VALUED_DIRECTIVES:
            scope, part = match.group(1).lower(), match.group(2)
        if scope is None or scope == agent.strip().lower():
            robots.apply(part)


def _apply_meta_robots(robots: _Robots, root: Any, agent: str) -> None:
    names = {"robots", agent.strip().lower()}
    for meta in root.iter("meta"):
        if (_attr(meta, "name") or "").strip().lower() in names:
            robots.apply(_attr(meta, "content") or "")


# --- links --------------------------------------------------------------------


def _attr(element: Any, name: str) -> str | None:
    """An attribute value (lxml elements are untyped here)."""
    value = element.get(name)
    return value if isinstance(value, str) else None


def _rel_tokens(element: Any) -> set[str]:
    return set((_attr(element, "rel") or "").lower().split())


def _base_href(root: Any) -> str | None:
    # HTML standard 4.2.3: the first base element with an href attribute counts.
    for base in root.iter("base"):
        href = _attr(base, "href")
        if href is not None:
            return href.strip() or None
    return None


def _canonical(root: Any) -> str | None:
    for link in root.iter("link"):
        href = (_attr(link, "href") or "").strip()
        if href and "canonical" in _rel_tokens(link):
            return href
    return None


def _is_followable(href: str) -> bool:
    if not href or href.startswith("#"):
        return False
    match = _SCHEME.match(_URL_NOISE.sub("", href))
    return match is None or match.group(1).lower() in _WEB_SCHEMES


def _link_href(element: Any) -> str | None:
    """The element's outlink href, or None if it is not an outlink element."""
    tag = element.tag
    if tag in ("a", "area"):
        return _attr(element, "href")
    if tag == "frame":
        return _attr(element, "src")
    rels = _rel_tokens(element)
    if rels & _LINK_RELS and not rels & _LINK_RELS_EXCLUDED:
        return _attr(element, "href")
    return None


def _anchor(element: Any) -> str:
    if element.tag == "a":
        text = element.text_content()
        if not text.strip():  # an image link: its alt text is the anchor
            text = next((_attr(img, "alt") or "" for img in element.iter("img")), "")
    else:
        text = _attr(element, "alt") or _attr(element, "title") or ""
    return _collapse(text, MAX_ANCHOR_CHARS)


def _links(root: Any, max_links: int) -> list[RawLink]:
    links: list[RawLink] = []
    if max_links <= 0:
        return links
    for element in root.iter("a", "area", "link", "frame"):
        href = _link_href(element)
        if href is None or not _is_followable(href.strip()):
            continue
        nofollow = "nofollow" in _rel_tokens(element)
        links.append(RawLink(href.strip(), nofollow, _anchor(element)))
        if len(links) >= max_links:
            break
    return links


# --- title and text -----------------------------------------------------------


def _collapse(text: str, limit: int) -> str:
    return " ".join(text.split())[:limit].rstrip()


def _title(root: Any) -> str | None:
    title = root.find("head/title")
    if title is None:
        title = root.find(".//title")
    if title is None:
        return None
    return _collapse(title.text_content(), MAX_TITLE_CHARS) or None


def _visible_text(root: Any, limit: int) -> str:
    """Text a reader would see: no head, script, style, noscript; blocks separated."""
    parts: list[str] = []
    hidden = 0  # depth inside an invisible element
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if hidden or tag in INVISIBLE_TAGS:
                hidden += 1
                continue
            if tag in BLOCK_TAGS:
                parts.append(" ")
            parts.append(element.text or "")
        else:
            if hidden:
                hidden -= 1
                if hidden:
                    continue  # the tail is still inside the invisible element
            elif tag in BLOCK_TAGS:
                parts.append(" ")
            parts.append(element.tail or "")
    return _collapse("".join(parts), limit)
