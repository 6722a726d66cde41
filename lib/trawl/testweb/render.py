"""Turn a model path into an HTTP response: robots.txt, HTML pages, errors.

Rendering is kept apart from the socket code so it can be reasoned about (and
tested) as a function of (model, host, path, port). hrefs are spelled
here from each link's form: absolute, scheme-relative ("//host:port/p"),
root-relative ("/p/3.html") or relative to the page's directory or to its
``<base href>`` ("../x/4.html", "5.html").

The one input that is not the path is time: a host with a ``Throttle`` asks
the model's ``RateLimiter`` first and may answer 429/503 with Retry-After
(RFC 6585 4, RFC 9110 15.6.4) instead of the page, for robots.txt too, as a
rate limiter in front of a real site would. That answer comes at once,
without the host's ``slow`` delay.
"""

from __future__ import annotations

import html
import posixpath
import time
from dataclasses import dataclass

from trawl.testweb.model import WebModel, make_url
from trawl.testweb.records import HostInfo, Link, Page

HTML_TYPE = "text/html; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Response:
    """What the handler sends: status, headers, body, and a delay before sending."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    delay: float = 0.0


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


def robots_txt(host: HostInfo) -> str:
    """The robots.txt body of a host whose robots status is 200."""
    lines = [f"# robots.txt for {host.name} (trawl testweb, variant {host.robots})"]
    for group in host.groups:
        lines += ["", f"User-agent: {group.agent}"]
        lines += [f"Disallow: {prefix}" for prefix in group.disallow] or ["Disallow:"]
        if host.crawl_delay is not None and group.agent != "badbot":
            lines.append(f"Crawl-delay: {host.crawl_delay:g}")
    return "\n".join(lines) + "\n"


def page_html(host: HostInfo, page: Page, port: int) -> str:
    """A small, valid HTML document with a title, some words and the page's links."""
    esc = html.escape
    head = [f"<meta charset='utf-8'><title>{esc(page.title)}</title>"]
    if page.base is not None:
        base = make_url(host.name, page.base, port) if page.base_absolute else page.base
        head.append(f'<base href="{esc(base)}">')
    items = []
    for n, link in enumerate(page.links):
        rel = ' rel="nofollow"' if link.nofollow else ""
        items.append(f'<li><a href="{esc(href(link, page, port))}"{rel}>link {n}</a></li>')
    return (
        "<!DOCTYPE html>\n<html lang='en'><head>"
        + "".join(head)
        + f"</head>\n<body><h1>{esc(page.title)}</h1>\n<p>{esc(page.text)}</p>\n"
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
) -> Response:
    """The response for ``path`` on ``host_name`` arriving on ``local_ip`` at ``now``.

    Unknown hosts get 404; a known host reached on an IP other than its pinned
    one gets 421 Misdirected Request (a DNS/hosts-file bug in the client). A
    throttled host pushing back gets its throttle's status and Retry-After.
    ``now`` defaults to ``time.time()``.
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
    if path == "/robots.txt":
        if host.robots_status != 200:
            return _error(host.robots_status, "robots.txt unavailable", host.slow)
        body = robots_txt(host).encode()
        return Response(200, (("Content-Type", TEXT_TYPE),), body, host.slow)
    page = host.page(path)
    if page is None or page.status in (404, 410):
        return _error(404 if page is None else page.status, "not found", host.slow)
    if page.status >= 500:
        return _error(page.status, "internal error", host.slow)
    if page.redirect_to is not None:
        location = make_url(host.name, page.redirect_to, port)
        moved = _error(301, f"moved to {html.escape(location)}", host.slow)
        return Response(301, (*moved.headers, ("Location", location)), moved.body, host.slow)
    body = page_html(host, page, port).encode()
    return Response(200, (("Content-Type", HTML_TYPE),), body, host.slow)
