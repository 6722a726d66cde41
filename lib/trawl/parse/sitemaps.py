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
  an entity reference or markup is unusable (``markup``), not silently cut short.
  ``recover=True`` keeps what a malformed file still yields; its first error is reported.
* Lenient about form, as real sitemaps need: element names match by lowercased local
  name, in the root's namespace (whatever it is) or none; extension namespaces (image:,
  video:, news:, xhtml:link) are skipped. Fields are read only from direct children of
  an entry, so ``image:loc`` never passes for ``loc``.
* Strict about what reaches the frontier: a ``loc`` is an absolute http(s) URL shorter
  than 2,048 characters, inside the sitemap's location: same scheme, host and port (else
  ``cross_host``) and under the directory of its URL (else ``outside_path``; sitemaps.org
  "Sitemap file location"). An index's children need only the same origin ("Sitemap
  index files may only specify Sitemaps ... on the same site"). ``scope_url`` replaces
  the sitemap URL as that bound: the robots.txt URL, for a sitemap listed there, covers
  its whole host ("Sitemaps & Cross Submits"). ``strict_location=False`` keeps entries
  outside the bound, counted in ``warnings``. URLs come back normalised
  (``urlnorm.normalize`` without parameter stripping) and de-duplicated.
* Our own code rather than a library: ultimate-sitemap-parser is built to fetch sitemaps
  itself (here the fetcher does that, under robots.txt and politeness), and its local
  ``sitemap_from_str`` takes decoded text, leaving the capped gunzip, the location rules
  and the value checks to us anyway; lxml is already a dependency.
"""

from __future__ import annotations

import codecs
import functools
import re
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from types import MappingProxyType
from typing import Final, Literal, NamedTuple

import lxml.etree

from trawl.url import normalize as urlnorm

MAX_URLS: Final = 50_000  # sitemaps.org: URLs per sitemap, and sitemaps per index
MAX_BYTES: Final = 52_428_800  # sitemaps.org: 50 MiB uncompressed
MAX_LOC_CHARS: Final = 2_048  # sitemaps.org: a loc "must be less than 2,048 characters"
FUTURE_TOLERANCE: Final = timedelta(days=1)  # lastmods later than now + this are dropped
# Scheduling hints in seconds. "always" asks for the scheduler's minimum interval;
# "never" marks archived pages, rechecked like yearly ones rather than never.
CHANGEFREQ_SECONDS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "always": 0,
        "hourly": 3_600,
        "daily": 86_400,
        "weekly": 604_800,
        "monthly": 2_592_000,
        "yearly": 31_536_000,
        "never": 31_536_000,
    }
)

SitemapKind = Literal["urlset", "index", "text", "feed", "unknown"]

_CHUNK = 65_536
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_MARKUP = "\x00"  # stands for a value with child nodes: XML text can never hold NUL
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # RFC 3986 3.1
_WEB_SCHEMES = frozenset({"http", "https"})
_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
_YEAR_MONTH = re.compile(r"\d{4}(?:-\d\d)?")  # the W3C Datetime forms ISO parsers refuse
_PRIORITY = re.compile(r"\d+(?:\.\d*)?|\.\d+")  # no signs, exponents, "nan" or "inf"
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


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """A page (in an index: a child sitemap) with the hints the sitemap gives for it."""

    url: str
    lastmod: datetime | None = None  # aware, UTC
    changefreq: str | None = None  # a key of CHANGEFREQ_SECONDS
    priority: float | None = None  # in [0, 1]; None if absent (sitemaps.org default: 0.5)


@dataclass(slots=True)
class Sitemap:
    """What one sitemap file gave: ``entries`` in file order, and what was dropped why."""

    kind: SitemapKind = "unknown"
    entries: list[SitemapEntry] = field(default_factory=list)
    truncated: Literal["max_urls", "max_bytes"] | None = None
    errors: list[str] = field(default_factory=list)  # about the file as a whole
    warnings: Counter[str] = field(default_factory=Counter)  # reason -> count
    rejected: Counter[str] = field(default_factory=Counter)  # reason -> entries dropped


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
        scope = _scope(url, scope_url or url)
    except urlnorm.UrlError as exc:
        result.errors.append(f"bad_url: {exc}")
        return result
    if now is not None and now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    reader = _CappedReader(body, max_bytes, result)
    collector = _Collector(result, scope, strict_location, now, max_urls)
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


def _parse_text(reader: _CappedReader, collector: _Collector) -> None:
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
                if not _SCHEME.match(line):
                    collector.result.errors.append("not_a_sitemap: neither XML nor URL lines")
                    return
                collector.result.kind = "text"
            if not collector.offer({"loc": line}):
                return
        if not chunk:
            return


def _parse_xml(reader: _CappedReader, collector: _Collector) -> None:
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

    def __init__(self, collector: _Collector) -> None:
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
            value = _MARKUP if len(element) else element.text
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


# --------------------------------------------------------------------------- values


@dataclass(slots=True)
class _Collector:
    """Checks each entry the file lists and keeps the good ones in ``result``."""

    result: Sitemap
    scope: tuple[str, str]  # (origin, directory prefix), see _scope
    strict: bool
    now: datetime | None
    max_urls: int
    index: bool = False  # an index bounds its children by origin only
    seen: set[str] = field(default_factory=set)
    listed: int = 0

    def offer(self, fields: Mapping[str, str]) -> bool:
        """Take one listed entry; False once the file lists more than ``max_urls``.

        Every entry counts towards the limit, valid or not, as the file lists it.
        """
        self.listed += 1
        if self.listed > self.max_urls:
            self.result.truncated = "max_urls"
            return False
        url, reason = self._check_loc(fields.get("loc"))
        if reason is not None:
            self.result.rejected[reason] += 1
            return True
        lastmod = self._lastmod(fields.get("lastmod"))
        changefreq = self._changefreq(fields.get("changefreq"))
        priority = self._priority(fields.get("priority"))
        self.result.entries.append(SitemapEntry(url, lastmod, changefreq, priority))
        return True

    def _check_loc(self, loc: str | None) -> tuple[str, str | None]:
        """(normalised URL, None), or ("", reject reason)."""
        loc = (loc or "").strip()
        if not loc:
            return "", "empty"
        if _MARKUP in loc:
            return "", "markup"
        if "\ufffd" in loc:  # U+FFFD: bytes that were not UTF-8
            return "", "bad_encoding"
        if len(loc) >= MAX_LOC_CHARS:
            return "", "too_long"
        scheme = _SCHEME.match(loc)
        if scheme is None:  # sitemaps.org: "begin with the protocol (such as http)"
            return "", "relative"
        if scheme.group()[:-1].lower() not in _WEB_SCHEMES:
            return "", "bad_scheme"
        try:
            url = urlnorm.normalize(loc, ())
        except urlnorm.UrlError as exc:
            return "", exc.reason
        if url in self.seen:
            return "", "duplicate"
        outside = self._outside(url)
        if outside is not None:
            if self.strict:
                return "", outside
            self.result.warnings[outside] += 1
        self.seen.add(url)
        return url, None

    def _outside(self, url: str) -> str | None:
        """sitemaps.org "Sitemap file location": same origin, and under the directory."""
        origin, directory = self.scope
        if _origin(url) != origin:
            return "cross_host"
        if not self.index and not url.startswith(directory):
            return "outside_path"
        return None

    def _lastmod(self, text: str | None) -> datetime | None:
        if text is None or not text.strip():
            return None
        when = _parse_datetime(text.strip())
        if when is None:
            self.result.warnings["lastmod_invalid"] += 1
        elif self.now is not None and when > self.now + FUTURE_TOLERANCE:
            self.result.warnings["lastmod_future"] += 1
            when = None
        return when

    def _changefreq(self, text: str | None) -> str | None:
        value = (text or "").strip().lower()
        if value and value not in CHANGEFREQ_SECONDS:
            self.result.warnings["changefreq_invalid"] += 1
        return value if value in CHANGEFREQ_SECONDS else None

    def _priority(self, text: str | None) -> float | None:
        value = (text or "").strip()
        if value and _PRIORITY.fullmatch(value) and float(value) <= 1.0:
            return float(value)
        if value:
            self.result.warnings["priority_invalid"] += 1
        return None


def _scope(url: str, scope_url: str) -> tuple[str, str]:
    """(origin, directory prefix) that bound the entries; UrlError for a bad URL."""
    for candidate in (url, scope_url):
        scheme = _SCHEME.match(candidate.strip())
        if scheme is None or scheme.group()[:-1].lower() not in _WEB_SCHEMES:
            raise urlnorm.UrlError("bad_scheme", candidate)
        urlnorm.normalize(candidate, ())
    bound = urlnorm.normalize(scope_url, ())
    origin = _origin(bound)
    path = bound[len(origin) :].partition("?")[0]
    return origin, origin + path[: path.rfind("/") + 1]


def _origin(normalized: str) -> str:
    """``scheme://authority`` of a normalised URL (whose path always starts with "/")."""
    return normalized[: normalized.index("/", normalized.index("://") + 3)]


def _parse_datetime(text: str) -> datetime | None:
    """W3C Datetime (https://www.w3.org/TR/NOTE-datetime), leniently any ISO 8601 form
    Python reads, else an RFC 5322 date (RSS pubDate); as an aware UTC datetime. A
    missing zone is taken as UTC, a date alone as its first instant."""
    try:
        if _YEAR_MONTH.fullmatch(text):  # "YYYY" or "YYYY-MM"
            when = datetime(int(text[:4]), int(text[5:7] or 1), 1)
        else:
            try:
                when = datetime.fromisoformat(text.upper())
            except ValueError:
                when = parsedate_to_datetime(text)
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, TypeError, OverflowError):
        return None
