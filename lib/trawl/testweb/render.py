"""Turn a model path into an HTTP response: robots.txt, HTML pages, errors.

Rendering is kept apart from the socket code so it can be reasoned about (and
tested) as a function of (model, host, path, port). hrefs are spelled
here from each link's form: absolute, scheme-relative ("//host:port/p"),
root-relative ("/p/3.html") or relative to the page's directory or to its
``<base href>`` ("../x/4.html", "5.html").

Two inputs are not the path, and both are times. Wall-clock time: a host
with a ``Throttle`` asks the model's ``RateLimiter`` first and may answer
429/503 with Retry-After (RFC 6585 4, RFC 9110 15.6.4) instead of the page,
for robots.txt too, as a rate limiter in front of a real site would. That
answer comes at once, without the host's ``slow`` delay. Logical time
(``at``, the web's clock): a page is served in the version it has then, its
text gaining a "revision N" paragraph drawn from (page, N) while its links
stay put, and sitemaps list the lastmods of then. Pages and sitemaps carry
validators, and a conditional request that matches them is answered 304
(``trawl.testweb.validators``).

In a web with page requisites (``trawl.testweb.requisites``) an ordinary
page gains their elements -- the stylesheet, favicon and script at the end
of its head, its images after its heading, spelled root-relative but the
CDN's banner -- and nothing else changes in it; the requisites themselves
(``trawl.testweb.requisite_files``) are served timeless, Last-Modified the
epoch, with validators like pages.
"""

from __future__ import annotations

import html
import posixpath
import random
import time
from dataclasses import dataclass, replace
from datetime import datetime

from trawl.testweb.changes import CHANGES_LABEL, EPOCH
from trawl.testweb.generate import VOCAB
from trawl.testweb.model import WebModel, make_url
from trawl.testweb.records import HostInfo, Link, Page
from trawl.testweb.requisite_files import requisite_file
from trawl.testweb.requisites import Element, page_elements
from trawl.testweb.sitemap_files import sitemap_file
from trawl.testweb.templates import article_html
from trawl.testweb.validators import http_date, not_modified, strong_etag

HTML_TYPE = "text/html; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Response:
    """What the handler sends: status, headers, body, and a delay before sending.

    ``version`` is the version of the page served (or, for a 304, the one the
    client holds); None for anything but a page.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    delay: float = 0.0
    version: int | None = None


@dataclass(frozen=True)
class Conditions:
    """The conditional request fields, as received (None: absent or unusable)."""

    if_none_match: str | None = None
    if_modified_since: str | None = None


def href(link: Link, page: Page, port: int) -> str:
    """The href text for ``link`` as it appears on ``page``."""
    if link.form == "absolute":
        text = make_url(link.host, link.path, port)
    elif link.form == "scheme-relative":
        text = make_url(link.host, link.path, port).removeprefix("http:")
    elif link.form == "root" or link.path == "/":
        text = link.path
    else:
        text = posixpath.relpath(link.path, page.directory)
    return f"{text}#{link.fragment}" if link.fragment else text


def robots_txt(host: HostInfo, port: int = 80) -> str:
    """The robots.txt body of a host whose robots status is 200.

    A host with sitemaps ends it with one ``Sitemap:`` line (absolute URL)
    per file, outside any group (RFC 9309 2.2.4).
    """
    lines = [f"# robots.txt for {host.name} (trawl testweb, variant {host.robots})"]
    for group in host.groups:
        lines += ["", f"User-agent: {group.agent}"]
        lines += [f"Disallow: {prefix}" for prefix in group.disallow] or ["Disallow:"]
        if host.crawl_delay is not None and group.agent != "badbot":
            lines.append(f"Crawl-delay: {host.crawl_delay:g}")
    if host.sitemaps is not None:
        lines.append("")
        lines += [f"Sitemap: {make_url(host.name, p, port)}" for p in host.sitemaps.files]
    return "\n".join(lines) + "\n"


def revision_text(seed: int, host: str, path: str, version: int) -> str:
    """The paragraph version ``version`` (> 0) of a page adds: a pure function of its inputs."""
    rng = random.Random(f"{CHANGES_LABEL}/text/{seed}/{host}{path}/{version}")
    words = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(5, 12)))
    return f"revision {version}: {words}"


def element_html(element: Element, host: HostInfo, port: int) -> str:
    """One element loading requisites, its URLs root-relative on ``host`` and absolute elsewhere."""
    srcs = [
        html.escape(path if element.host == host.name else make_url(element.host, path, port))
        for path in element.paths
    ]
    if element.kind == "stylesheet":
        return f'<link rel="stylesheet" href="{srcs[0]}">'
    if element.kind == "icon":
        return f'<link rel="icon" href="{srcs[0]}">'
    if element.kind == "script":
        return f'<script src="{srcs[0]}"></script>'
    srcset = f' srcset="{srcs[0]} 1x, {srcs[1]} 2x"' if len(srcs) == 2 else ""
    return f'<img{srcset} src="{srcs[0]}" alt="{html.escape(element.alt)}">'


def requisite_html(host: HostInfo, page: Page, port: int) -> tuple[str, str]:
    """The page's requisite elements: (for the end of the head, a paragraph of
    images for the body); ("", "") for a page without requisites."""
    elements = page_elements(host, page)
    if not elements:
        return "", ""
    head = "".join(element_html(e, host, port) for e in elements if e.kind != "image")
    images = " ".join(element_html(e, host, port) for e in elements if e.kind == "image")
    return head, f"<p class='images'>{images}</p>\n"


def page_html(host: HostInfo, page: Page, port: int, revision: str = "") -> str:
    """A small, valid HTML document with a title, some words and the page's links.

    ``revision`` (empty for version 0) is a paragraph after the words. A
    page of a near-duplicate family is dressed in its site template instead
    (``trawl.testweb.templates``). In a web with requisites the head ends in
    their links and script, and the images follow the heading.
    """
    if page.article is not None:
        hrefs = [href(link, page, port) for link in page.links]
        return article_html(page, page.article, hrefs, revision)
    esc = html.escape
    head = [f"<meta charset='utf-8'><title>{esc(page.title)}</title>"]
    if page.base is not None:
        base = make_url(host.name, page.base, port) if page.base_absolute else page.base
        head.append(f'<base href="{esc(base)}">')
    requisite_head, images = requisite_html(host, page, port)
    head.append(requisite_head)
    items = []
    for n, link in enumerate(page.links):
        rel = ' rel="nofollow"' if link.nofollow else ""
        items.append(f'<li><a href="{esc(href(link, page, port))}"{rel}>link {n}</a></li>')
    return (
        "<!DOCTYPE html>\n<html lang='en'><head>"
        + "".join(head)
        + f"</head>\n<body><h1>{esc(page.title)}</h1>\n{images}<p>{esc(page.text)}</p>\n"
        + (f"<p class='revision'>{esc(revision)}</p>\n" if revision else "")
        + "<ul>\n"
        + "\n".join(items)
        + "\n</ul></body></html>\n"
    )


def _error(status: int, message: str, delay: float = 0.0) -> Response:
    body = f"<!DOCTYPE html><html><head><title>{status}</title></head><body>{message}</body></html>"
    return Response(status, (("Content-Type", HTML_TYPE),), body.encode(), delay)


def respond(
    model: WebModel,
    host_name: str,
    path: str,
    port: int,
    local_ip: str,
    now: float | None = None,
    *,
    at: datetime | None = None,
    conditions: Conditions = Conditions(),
) -> Response:
    """The response for ``path`` on ``host_name`` arriving on ``local_ip`` at ``now``.

    Unknown hosts get 404; a known host reached on an IP other than its pinned
    one gets 421 Misdirected Request (a DNS/hosts-file bug in the client). A
    throttled host pushing back gets its throttle's status and Retry-After.
    ``now`` (wall clock, for throttles) defaults to ``time.time()``; ``at``
    (logical time, for content) to the epoch. A page or sitemap whose
    validators match ``conditions`` is answered 304, and so is a requisite.
    """
    host = model.host(host_name)
    if host is None:
        return _error(404, f"unknown host {html.escape(host_name)}")
    if host.ip != local_ip:
        return _error(421, f"{host.name} is not served on {local_ip}")
    if host.throttle is not None:
        retry_after = model.limiter.push_back(host, time.time() if now is None else now)
        if retry_after is not None:
            slow_down = _error(host.throttle.status, "too many requests: slow down")
            return Response(
                slow_down.status, (*slow_down.headers, ("Retry-After", retry_after)), slow_down.body
            )
    at = EPOCH if at is None else at
    if path == "/robots.txt":
        if host.robots_status != 200:
            return _error(host.robots_status, "robots.txt unavailable", host.slow)
        body = robots_txt(host, port).encode()
        return Response(200, (("Content-Type", TEXT_TYPE),), body, host.slow)
    sitemap = sitemap_file(model, host, path, port, at)
    if sitemap is not None:
        found = Response(200, (("Content-Type", sitemap.content_type),), sitemap.body, host.slow)
        return _validated(found, sitemap.last_modified, conditions)
    requisite = requisite_file(host, path)
    if requisite is not None:
        found = Response(
            200, (("Content-Type", requisite.content_type),), requisite.body, host.slow
        )
        return _validated(found, EPOCH, conditions)  # requisites never change
    page = host.page(path)
    if page is None or page.status in (404, 410):
        return _error(404 if page is None else page.status, "not found", host.slow)
    if page.status >= 500:
        return _error(page.status, "internal error", host.slow)
    if page.redirect_to is not None:
        location = make_url(host.name, page.redirect_to, port)
        moved = _error(301, f"moved to {html.escape(location)}", host.slow)
        return Response(301, (*moved.headers, ("Location", location)), moved.body, host.slow)
    return _page_response(model, host, page, port, at, conditions)


def _page_response(
    model: WebModel, host: HostInfo, page: Page, port: int, at: datetime, conditions: Conditions
) -> Response:
    """A 200 page in its version at ``at`` (or 304), with its validators."""
    version = model.version_at(host.name, page.path, at)
    revision = revision_text(model.seed, host.name, page.path, version) if version else ""
    body = page_html(host, page, port, revision).encode()
    found = Response(200, (("Content-Type", HTML_TYPE),), body, host.slow, version)
    return _validated(found, model.last_change_at(host.name, page.path, at), conditions)


def _validated(found: Response, last_modified: datetime, conditions: Conditions) -> Response:
    """``found`` with ETag and Last-Modified, or the 304 a matching condition gets.

    RFC 9110 15.4.5: a 304 carries the validators a 200 would and no content.
    """
    validators = (("ETag", strong_etag(found.body)), ("Last-Modified", http_date(last_modified)))
    if not_modified(
        validators[0][1], last_modified, conditions.if_none_match, conditions.if_modified_since
    ):
        return Response(304, validators, b"", found.delay, found.version)
    return replace(found, headers=(*found.headers, *validators))
