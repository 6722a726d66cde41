"""The fetch row of a visit: the fields every row has, and what a response and a parsed page add.

A visit comes out as one row of the segment's ``fetch`` table
(``trawl.store.schemas``). Its page fields are built here from what was fetched:
outlinks (and, with ``requisites.capture``, what the page or stylesheet
needs to render) are resolved against the page (and its ``<base href>``) and
normalised, one per target; the body gets its sha256 and the main text its
near-duplicate fingerprints (``trawl.dedup.fingerprint``; the MinHash only when
``dedup.method`` is "minhash", as it costs more).

Plain functions of the response, the parsed page and the config: the
fetcher's worker threads share them, and a test calls them without a server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from trawl.config import Config
from trawl.crawldb.status import FetchOutcome
from trawl.dedup.fingerprint import page_fingerprint
from trawl.dedup.simhash import to_signed
from trawl.net.response import HttpResponse
from trawl.parse.html import ParsedPage
from trawl.parse.requisites import css_requisites
from trawl.url.normalize import normalize
from trawl.url.resolution import UrlError, resolve

Row = dict[str, Any]

# The kinds of fetch row whose URL is a crawldb URL (the others: robots, probe).
CRAWLDB_KINDS = ("page", "requisite")
_CSS_CHARSET = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)
_CSS_AT_CHARSET = re.compile(rb'^@charset "([A-Za-z0-9_.:\-]+)";')


def item_kind(item: Mapping[str, Any]) -> str:
    """The kind of row a fetch-list item makes: a page or a page requisite."""
    return "requisite" if item.get("requisite") else "page"


def base_row(
    item: Mapping[str, Any], kind: str, url: str, ip: str | None, started: datetime
) -> Row:
    crawled = kind in CRAWLDB_KINDS
    return {
        "kind": kind,
        "url": url,
        "url_fp": item.get("url_fp") if crawled else None,
        "host": item.get("host"),
        "host_bucket": item.get("host_bucket"),
        "task": item.get("task"),
        "ip": ip,
        "depth": item.get("depth"),
        "counter_run": item.get("counter_run") if crawled else None,
        "score": item.get("score") if crawled else None,
        "is_sitemap": bool(item.get("is_sitemap")) if crawled else None,
        "linked_from": item.get("linked_from") if crawled else None,
        "fetched_at": started,
    }


def response_fields(resp: HttpResponse, outcome: FetchOutcome) -> Row:
    return {
        "outcome": outcome.value,
        "http_status": resp.status,
        "content_type": resp.header("content-type"),
        "headers": [[k, v] for k, v in resp.headers],
        "ttfb_s": resp.ttfb_s,
        "elapsed_s": resp.elapsed_s,
        "bytes": len(resp.raw_body),
        "truncated": resp.truncated,
        "etag": resp.header("etag"),
        "last_modified": resp.header("last-modified"),
        "content_sha256": hashlib.sha256(resp.body).hexdigest()
        if outcome is FetchOutcome.SUCCESS
        else None,
    }


def page_fields(url: str, page: ParsedPage, cfg: Config) -> Row:
    base = absolute(url, page.base_href, cfg) or url
    outlinks: dict[str, Row] = {}
    for link in page.links:
        target = absolute(base, link.href, cfg)
        if not target or target == url:
            continue
        nofollow = link.rel_nofollow or page.meta_nofollow
        known = outlinks.get(target)
        if known is None:
            outlinks[target] = {"url": target, "anchor": link.anchor, "nofollow": nofollow}
        elif known["nofollow"] and not nofollow:
            # rel=nofollow is a hint per link: one followable link to the
            # target is enough to follow it
            known["nofollow"] = False
    meta = [
        name
        for name, on in (
            ("noindex", page.meta_noindex),
            ("nofollow", page.meta_nofollow),
            ("noarchive", page.meta_noarchive),
        )
        if on
    ]
    fields = {
        "outlinks": list(outlinks.values()),
        "canonical": absolute(base, page.canonical, cfg),
        "robots_meta": ",".join(meta) or None,
        "title": page.title[:500] if page.title else None,
        **fingerprint_fields(page, cfg),
    }
    if cfg.requisites.capture:
        fields["requisites"] = resolved(url, base, page.requisites, cfg)
    return fields


def requisite_fields(url: str, resp: HttpResponse, cfg: Config) -> Row:
    """A fetched requisite's own requisites: a stylesheet's ``@import`` and
    ``url()`` references, resolved against it (CSS 3 Syntax 3.2: its charset
    from Content-Type, then ``@charset``, else UTF-8). Nothing else is parsed."""
    content_type = resp.header("content-type") or ""
    if content_type.split(";")[0].strip().lower() != "text/css":
        return {}
    declared = _CSS_CHARSET.search(content_type) or _CSS_AT_CHARSET.match(resp.body)
    label = declared.group(1) if declared else "utf-8"
    name = label.decode("ascii") if isinstance(label, bytes) else label
    try:
        text = resp.body.decode(name, "replace")
    except LookupError:
        text = resp.body.decode("utf-8", "replace")
    return {"requisites": resolved(url, url, css_requisites(text), cfg)}


def resolved(url: str, base: str, refs: list[str], cfg: Config) -> list[str]:
    """References resolved against ``base`` and normalised, each once, not
    ``url`` itself, at most ``requisites.max_per_page``."""
    out: dict[str, None] = {}
    limit = cfg.requisites.max_per_page
    for ref in refs:
        if len(out) >= limit:
            break
        target = absolute(base, ref, cfg)
        if target and target != url:
            out[target] = None
    return list(out)


def fingerprint_fields(page: ParsedPage, cfg: Config) -> Row:
    """Near-duplicate fingerprints of an HTML page's main text (none for
    other media types); the simhash as the int64 a LongType holds."""
    if not page.is_html:
        return {"simhash": None, "minhash": None, "text_words": None}
    fp = page_fingerprint(page.main_text, cfg.dedup)
    return {
        "simhash": None if fp.simhash is None else to_signed(fp.simhash),
        "minhash": fp.minhash,
        "text_words": fp.words,
    }


def absolute(base: str, href: str | None, cfg: Config) -> str | None:
    """Resolve (RFC 3986 5.2) and normalise; None for unusable references."""
    if not href:
        return None
    try:
        norm = cfg.normalize
        return normalize(resolve(base, href), norm.strip_params, norm.session_params)
    except UrlError:
        return None
