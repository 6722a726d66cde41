"""Parse one fetched sitemap: sitemaps.org 0.9 urlsets and indexes, text lists, RSS/Atom.

``parse_sitemap(body, url)`` turns a sitemap's bytes into entries (pages, or child
sitemaps for an index) with their lastmod/changefreq/priority hints. It fetches nothing
and never raises on bad input: a dropped entry is counted in ``rejected``, a dropped
field in ``warnings``, a problem with the whole file goes to ``errors``.
* Streamed and capped. sitemaps.org allows 50,000 URLs (an index: 50,000 sitemaps) and
  52,428,800 bytes uncompressed per file. Both hold *while* parsing: a body starting
  with the gzip magic (RFC 1952 2.3.1; names and Content-Type are not trusted) is
  inflated in 64 KiB steps with ``decompress(data, max_length)`` as in
  ``trawl.net.coding``, never past ``max_bytes + 1`` bytes; ``iterparse`` reads it
  through a reader that ends at ``max_bytes``; parsing stops at the entry after
  ``max_urls``. Elements are cleared as they end, so memory holds the open path, not the
  tree. ``truncated`` names the limit hit; the entries before it are kept.
* Safe XML. libxml2 runs without DTD loading, network or entity substitution and with
  its default (non-huge) limits: external entities and DTDs (XXE) are never read, and
  it refuses entity-amplification ("billion laughs") documents outright. A value holding
  an entity reference or markup is read as ``MARKUP``, unusable (``markup``), not
  silently cut short.
  ``recover=True`` keeps what a malformed file still yields; its first error is reported.
* Lenient about form, as real sitemaps need: element names match by lowercased local
  name, in the root's namespace (whatever it is) or none; extension namespaces (image:,
  video:, news:, xhtml:link) are skipped. Fields are read only from direct children of
  an entry, so ``image:loc`` never passes for ``loc``.
* Strict about what reaches the frontier: each entry found is checked, its
  ``loc`` against the sitemap's location (or ``scope_url``) and its hints against
  their grammars, by ``trawl.parse.sitemap_entries``. ``strict_location=False``
  keeps entries outside the location, counted in ``warnings``.
* Our own code rather than a library: ultimate-sitemap-parser is built to fetch sitemaps
  itself (here the fetcher does that, under robots.txt and politeness), and its local
  ``sitemap_from_str`` takes decoded text, leaving the capped gunzip, the location rules
  and the value checks to us anyway; lxml is already a dependency.
"""

from __future__ import annotations

import codecs
import functools
import zlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Final, NamedTuple

import lxml.etree

from trawl.parse.sitemap_entries import (
    MARKUP,
    MAX_LOC_CHARS,
    SCHEME_PREFIX,
    EntryCollector,
    Sitemap,
    SitemapKind,
    location_bound,
)
from trawl.url.resolution import UrlError

__all__ = ["MAX_BYTES", "MAX_URLS", "parse_sitemap"]

MAX_URLS: Final = 50_000  # sitemaps.org: URLs per sitemap, and sitemaps per index
MAX_BYTES: Final = 52_428_800  # sitemaps.org: 50 MiB uncompressed

_CHUNK = 65_536
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
_PARSER_OPTIONS: Final = {
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "huge_tree": False,  # keeps libxml2's limits on text node size and nesting depth
    "recover": True,
    "remove_comments": True,
    "remove_pis": True,
    "remove_blank_text": True,
}


class _Grammar(NamedTuple):
    """One XML format: its kind, entry element, and fields by lowercased local name."""

    kind: SitemapKind
    entry: str
    fields: Mapping[str, str]
    loc_in_href: bool = False  # Atom: <link href="...">


_GRAMMARS: Final = {
    "urlset": _Grammar(
        "urlset",
        "url",
        {"loc": "loc", "lastmod": "lastmod", "changefreq": "changefreq", "priority": "priority"},
    ),
    "sitemapindex": _Grammar("index", "sitemap", {"loc": "loc", "lastmod": "lastmod"}),
    "rss": _Grammar("feed", "item", {"link": "loc", "pubdate": "lastmod"}),  # RSS 2.0
    "feed": _Grammar("feed", "entry", {"link": "loc", "updated": "lastmod"}, True),  # RFC 4287
}


def parse_sitemap(
    body: bytes,
    url: str,
    *,
    scope_url: str | None = None,
    strict_location: bool = True,
    max_urls: int = MAX_URLS,
    max_bytes: int = MAX_BYTES,
    now: datetime | None = None,
) -> Sitemap:
    """Parse the body (Content-Encoding undone; gzip files as they are) fetched from ``url``.

    ``scope_url`` (default ``url``) bounds the entries: its origin and, but for an index,
    the directory of its path. ``now`` is the logical time after which (plus
    FUTURE_TOLERANCE) a lastmod is dropped; None skips that check.
    """
    result = Sitemap()
    try:
        bound = location_bound(url, scope_url or url)
    except UrlError as exc:
        result.errors.append(f"bad_url: {exc}")
        return result
    if now is not None and now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    reader = _CappedReader(body, max_bytes, result)
    collector = EntryCollector(result, bound, strict_location, now, max_urls)
    head = reader.peek().removeprefix(codecs.BOM_UTF8).lstrip()
    if not head:
        result.errors.append("empty")
    elif head.startswith(b"<") or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        _parse_xml(reader, collector)
    else:
        _parse_text(reader, collector)
    if reader.hit_cap and result.truncated is None:
        result.truncated = "max_bytes"
    return result


# --------------------------------------------------------------------------- input


class _CappedReader:
    """The body as a file for ``iterparse``: gunzipped on the fly, ending at ``cap`` bytes.

    At most ``cap + 1`` bytes are ever produced; ``hit_cap`` says there were more.
    """

    def __init__(self, raw: bytes, cap: int, result: Sitemap) -> None:
        self.hit_cap = False
        self.eof = False
        self._left = cap
        self._result = result
        self._pending = b""
        gzipped = raw.startswith(_GZIP_MAGIC)
        self._chunks = self._gunzip(raw, cap + 1) if gzipped else _slices(raw, cap + 1)

    def peek(self) -> bytes:
        """The next chunk, not consumed (empty at the end)."""
        if not self._pending:
            self._pending = next(self._chunks, b"")
        return self._pending

    def read(self, size: int = _CHUNK) -> bytes:
        out = self.peek()[: size if size > 0 else None]
        self._pending = self._pending[len(out) :]
        if len(out) > self._left:
            out, self.hit_cap = out[: self._left], True
        self._left -= len(out)
        self.eof = not out
        return out

    def _gunzip(self, raw: bytes, limit: int) -> Iterator[bytes]:
        """Inflate gzip members (RFC 1952 2.2: they may be concatenated), at most
        ``limit`` bytes in all; a corrupt or cut stream keeps what came before."""
        inflater, pending, produced = zlib.decompressobj(_GZIP_WBITS), raw, 0
        while produced < limit:
            try:
                out = inflater.decompress(pending, min(_CHUNK, limit - produced))
            except zlib.error as exc:
                self._result.errors.append(f"gzip: {exc}")
                return
            produced += len(out)
            if out:
                yield out
            if inflater.eof:
                pending = inflater.unused_data
                if not pending.startswith(_GZIP_MAGIC):
                    return  # bytes after the last member are ignored, as gzip(1) does
                inflater = zlib.decompressobj(_GZIP_WBITS)
            elif not out and not inflater.unconsumed_tail:
                self._result.warnings["gzip_truncated"] += 1
                return
            else:
                pending = inflater.unconsumed_tail


def _slices(raw: bytes, limit: int) -> Iterator[bytes]:
    end = min(len(raw), limit)
    for start in range(0, end, _CHUNK):
        yield raw[start : min(start + _CHUNK, end)]


# --------------------------------------------------------------------------- formats


def _parse_text(reader: _CappedReader, collector: EntryCollector) -> None:
    """Google's text sitemap: one absolute URL per line, UTF-8; blank lines skipped.

    A body whose first line is no URL (an error page, JSON, binary) is no sitemap. A
    line cut by ``max_bytes`` is dropped; of an overlong line only a bounded prefix is
    kept, which is then rejected as ``too_long``.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")("replace")  # drops a BOM
    carry = ""
    while True:
        chunk = reader.read()
        lines = (carry + decoder.decode(chunk, final=not chunk)).split("\n")
        if chunk:
            carry = lines.pop()[: MAX_LOC_CHARS * 2]
        elif reader.hit_cap:
            lines.pop()
        for line in filter(None, map(str.strip, lines)):
            if collector.result.kind == "unknown":
                if not SCHEME_PREFIX.match(line):
                    collector.result.errors.append("not_a_sitemap: neither XML nor URL lines")
                    return
                collector.result.kind = "text"
            if not collector.offer({"loc": line}):
                return
        if not chunk:
            return


def _parse_xml(reader: _CappedReader, collector: EntryCollector) -> None:
    """Walk the document with ``iterparse`` and report libxml2's first error."""
    events = lxml.etree.iterparse(reader, events=("start", "end"), **_PARSER_OPTIONS)
    walk = _XmlWalk(collector)
    try:
        for event, element in events:
            if reader.eof and reader.hit_cap:
                break  # recover mode closing the elements that the byte cap cut off
            if not (walk.start(element) if event == "start" else walk.end(element)):
                break
    except (lxml.etree.LxmlError, ValueError, LookupError) as exc:  # "Document is empty"
        collector.result.errors.append(f"xml: {exc}")
        return
    refused = [
        e
        for e in events.error_log
        if e.type_name == "ERR_RESOURCE_LIMIT" and "entity" in e.message.lower()
    ]
    if refused:
        # A billion laughs and the like: libxml2 2.14 stops expanding at its
        # amplification limit but, in recover mode, still hands over the
        # elements around the refused entity with their text cut short.
        # Nothing read from such a document is trusted.
        collector.result.entries.clear()
        collector.result.errors.append(f"xml: {refused[0].message}, line {refused[0].line}")
        return
    errors = events.error_log.filter_from_errors()
    if errors and not reader.hit_cap:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        collector.result.errors.append(f"xml: {errors[0].message}, line {errors[0].line}{more}")


class _XmlWalk:
    """Reads entries from start/end events and prunes each element once it has ended.

    A field is read when it ends, from a direct child of the innermost open entry;
    entries that recovery from unclosed tags nests in each other are read one by one.
    """

    def __init__(self, collector: EntryCollector) -> None:
        self.collector = collector
        self.grammar = _GRAMMARS["urlset"]
        self.namespaces: frozenset[str] = frozenset()
        self.depth = 0
        self.open: list[tuple[int, dict[str, str]]] = []  # (depth, fields) of open entries

    def start(self, element: lxml.etree._Element) -> bool:
        self.depth += 1
        namespace, name = _split_tag(element.tag)
        if self.depth == 1:
            return self._root(namespace, name)
        if name == self.grammar.entry and namespace in self.namespaces:
            self.open.append((self.depth, {}))
        return True

    def end(self, element: lxml.etree._Element) -> bool:
        namespace, name = _split_tag(element.tag)
        going_on = True
        if self.open and self.depth == self.open[-1][0] + 1 and namespace in self.namespaces:
            self._field(element, name, self.open[-1][1])
        elif self.open and self.depth == self.open[-1][0]:
            going_on = self.collector.offer(self.open.pop()[1])
        self.depth -= 1
        element.clear(keep_tail=False)  # the usual iterparse pruning: memory stays flat
        parent = element.getparent()
        while parent is not None and element.getprevious() is not None:
            del parent[0]
        return going_on

    def _root(self, namespace: str, name: str) -> bool:
        result = self.collector.result
        grammar = _GRAMMARS.get(name)
        if grammar is None:
            result.errors.append(f"not_a_sitemap: root element <{name}>")
            return False
        self.grammar, result.kind = grammar, grammar.kind
        self.namespaces = frozenset({namespace, ""})
        self.collector.index = grammar.kind == "index"
        if grammar.kind in ("urlset", "index") and namespace != _SITEMAP_NS:
            result.warnings["nonstandard_namespace"] += 1
        return True

    def _field(self, element: lxml.etree._Element, name: str, fields: dict[str, str]) -> None:
        key = self.grammar.fields.get(name)
        if key is None or key in fields:
            return  # not a field of this format, or a repeated one: the first counts
        if key == "loc" and self.grammar.loc_in_href:  # RFC 4287 4.2.7.2: rel defaults
            if (element.get("rel") or "alternate").strip().lower() != "alternate":
                return
            value = element.get("href")
        else:
            value = MARKUP if len(element) else element.text
        if value is not None:
            fields[key] = value


@functools.lru_cache(maxsize=256)
def _split_tag(tag: object) -> tuple[str, str]:
    """(namespace, lowercased local name) of a tag in Clark notation."""
    if not isinstance(tag, str):
        return "", ""
    if tag.startswith("{"):
        namespace, _, local = tag[1:].partition("}")
        return namespace, local.lower()
    return "", tag.lower()
