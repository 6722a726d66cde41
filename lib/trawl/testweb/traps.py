"""Crawler traps for the test web: sites whose *structure* never lets a crawl end.

The hosts of ``trawl.testweb.hostile`` attack a crawler's connections; these
answer every request politely and at once (HTTP/1.1, Content-Length,
keep-alive, ``text/html; charset=utf-8``) but lay out a web that is infinite,
or as good as, in the ways real sites are: calendars with a "next month" link
in every month, faceted search where every click order is a new URL, session
ids in every link, relative links that pile up path segments, a link farm over
hundreds of subdomains, a site that answers 200 for pages it does not have,
and its sibling that redirects them all to its home page. A crawler survives
them by URL-shape rules, per-host and per-pattern caps, domain budgets and
soft-404 detection, not by content dedup alone: each trap varies its content
just enough to get past the cheap checks.
``TestWeb(..., traps=True)`` serves them next to the model's hosts.

How the traps are laid out, and why:

* Names are fixed (``TRAP_HOSTS`` maps kind -> entrance host), so tests of the
  crawler can name them; the link farm is the 500 hosts ``FARM_HOSTS``
  under the one registered domain ``FARM_DOMAIN``, all in the hosts file, as
  a wildcard DNS record would make them. ``seed_urls`` lists the entrances,
  which ``TestWeb`` appends to ``seeds.txt`` (the model's pages never link
  here; its generator is left as it is). ``BLOGROLL_HOST``, an ordinary
  one-page site served beside them and never seeded, links every entrance,
  for a crawl that should find traps by links.
* Addresses are in 127.0.10.0/24, clear of the model's 127.0.1.x and up and
  of the hostile 127.0.9.x (``TestWeb`` checks): one per trap site, and eight
  shared by the farm, so per-address politeness sees a farm as the few
  machines it usually runs on.
* Every page is a pure function of host, request target, port and the
  model's host names (the farm links out to them), except the session
  tokens, which count up (the n-th token minted by the process). So a crawl
  of the traps is repeatable and the ground truth is plain code:
  ``real_paths`` for hosts with a finite set of pages, ``SESSION_PARAMS``,
  ``FILTERS``, ``FARM_HOSTS``.
* Text comes from ``trawl.testweb.prose`` seeded by the page, so pages that
  must differ differ in words (fingerprints turn digits into ``0``: a year
  alone would not make two months differ), and pages that must look alike
  share long boilerplate in the main text, where the fingerprints look.
* ``/robots.txt`` is a 404 everywhere (RFC 9309 2.3.1.3: allow all): a trap
  that robots.txt fences off tests nothing.
"""

from __future__ import annotations

import calendar
import functools
import hashlib
import html
import ipaddress
import itertools
import random
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

from trawl.testweb import prose
from trawl.testweb.model import make_url

TRAP_NET = ipaddress.IPv4Network("127.0.10.0/24")
TRAP_HOSTS: dict[str, str] = {
    "calendar": "calendar-trap.test",
    "facets": "facets-trap.test",
    "sessions": "sessions-trap.test",
    "visits": "visits-trap.test",
    "echo": "echo-trap.test",
    "linkfarm": "w0.linkfarm.test",
    "soft404": "soft404-trap.test",
    "soft404_redirect": "soft404-redirect-trap.test",
}
#: An ordinary one-page site linking every trap's entrance (a blog's list of
#: links): a crawl seeded with it finds the traps by links, not as seeds.
#: Served with the traps, never a seed, never a trap.
BLOGROLL_HOST = "blogroll.test"
FARM_DOMAIN = "linkfarm.test"
FARM_HOSTS: tuple[str, ...] = tuple(f"w{i}.{FARM_DOMAIN}" for i in range(500))
FARM_PAGES = 100  # /p/0 .. /p/99 on every farm host, besides /
FARM_ADDRESSES = 8  # the farm's hosts share 127.0.10.16 .. 127.0.10.23
SESSION_PARAMS: dict[str, str] = {"sessions": "PHPSESSID", "visits": "vt"}
#: The shop's on/off filters as (parameter, its one value), in canonical order.
FILTERS: tuple[tuple[str, str], ...] = (
    ("color", "red"), ("size", "xl"), ("brand", "acme"), ("material", "wool"),
    ("fit", "slim"), ("sleeve", "long"), ("sale", "yes"), ("stock", "yes"),
    ("rating", "4up"), ("shipping", "free"),
)  # fmt: skip
FACET_ITEMS = ("/item/1", "/item/2", "/item/3")
CALENDAR_START = "/cal/2026/12/"
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SESSION_PATHS = ("/", *(f"/page/{i}" for i in range(1, 10)))
SOFT404_PATHS = ("/", "/about", *(f"/news/{i}" for i in range(1, 6)))
SOFT404_DEAD_LINKS = ("/news/6", "/contact", "/archive/")  # linked from /, never there
#: soft404_redirect's one real redirect (linked from /), to a page that is not home
SOFT404_MOVED: dict[str, str] = {"/about-us": "/about"}
SORRY = "Sorry, the page you asked for is not here"

_FARM_INDEX = {name: i for i, name in enumerate(FARM_HOSTS)}
_SITE_HOSTS = {name: kind for kind, name in TRAP_HOSTS.items() if kind != "linkfarm"}
_KINDS = _SITE_HOSTS | dict.fromkeys(FARM_HOSTS, "linkfarm")
#: 127.0.10.1 .. .7 one per trap site, then the farm round-robin on 127.0.10.16 .. .23
_ADDRESSES = {name: str(TRAP_NET[1 + i]) for i, name in enumerate(_SITE_HOSTS)}
_ADDRESSES |= {n: str(TRAP_NET[16 + i % FARM_ADDRESSES]) for i, n in enumerate(FARM_HOSTS)}
_ADDRESSES[BLOGROLL_HOST] = str(TRAP_NET[9])
_FILTER_VALUES = dict(FILTERS)
_FARM_PATHS = frozenset(f"/p/{n}" for n in range(FARM_PAGES))
_TOKEN_LENGTH = {"sessions": 26, "visits": 16}  # PHP's default id is 26 characters


class TrapPage(NamedTuple):
    """One answer: status, header fields (Content-Length left to the server), body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass(frozen=True)
class _Request:
    kind: str
    host: str
    path: str
    query: str
    port: int
    model_hosts: Sequence[str]  # names the link farm spams


Link = tuple[str, str]  # (href, anchor text)
HTML = (("Content-Type", "text/html; charset=utf-8"),)


# -- ground truth ---------------------------------------------------------------


def is_trap(host: str) -> bool:
    """Whether ``host`` (lower case, no port) is one of the trap hosts."""
    return host in _KINDS


def serves(host: str) -> bool:
    """Whether ``host`` is served by this module: a trap host or ``BLOGROLL_HOST``."""
    return host in _KINDS or host == BLOGROLL_HOST


def kind_of(host: str) -> str:
    """The trap kind of ``host`` (a key of ``TRAP_HOSTS``); KeyError if none."""
    return _KINDS[host]


def real_paths(kind: str) -> frozenset[str]:
    """The pages of a trap host with a finite set of them, one spelling each.

    sessions, visits: the paths, without the token; soft404 and
    soft404_redirect: the pages that exist (answered 200; on the latter,
    ``SOFT404_MOVED`` redirect to one of them, any other path to ``/``);
    facets: home, items and each of the 2**10 filter sets spelled in
    ``FILTERS`` order; linkfarm: the pages of any one farm host. calendar
    and echo have no such set (ValueError).
    """
    if kind in SESSION_PARAMS:
        return frozenset(SESSION_PATHS)
    if kind in ("soft404", "soft404_redirect"):
        return frozenset(SOFT404_PATHS)
    if kind == "facets":
        sets = range(2 ** len(FILTERS))  # bit i: filter i is on
        searches = {
            _search_url([n for i, (n, _) in enumerate(FILTERS) if s >> i & 1]) for s in sets
        }
        return frozenset({"/", *FACET_ITEMS, *searches})
    if kind == "linkfarm":
        return _FARM_PATHS | {"/"}
    raise ValueError(f"trap {kind!r} has no finite set of pages")


def seed_urls(port: int) -> list[str]:
    """The entrance (``/``) of every trap, in ``TRAP_HOSTS`` order."""
    return [make_url(name, "/", port) for name in TRAP_HOSTS.values()]


def listen_addresses() -> list[str]:
    """The loopback addresses the test web must listen on for the traps."""
    return list(dict.fromkeys(_ADDRESSES.values()))


def hosts_file_text() -> str:
    """hosts(5) lines pinning every trap host, the 500 farm hosts included."""
    lines = ["# trawl testweb: crawler traps"]
    lines += [f"{address} {name}" for name, address in _ADDRESSES.items()]
    return "\n".join(lines) + "\n"


# -- serving --------------------------------------------------------------------


def respond(host: str, target: str, port: int, model_hosts: Sequence[str] = ()) -> TrapPage:
    """The answer to ``GET target`` (path and query) on trap ``host``.

    ``port`` is the test web's, for absolute links; ``model_hosts`` the model's
    host names, whose home pages the link farm links to.
    """
    parts = urlsplit(target)
    path = parts.path or "/"
    if path == "/robots.txt":
        return _not_found()
    if host == BLOGROLL_HOST:
        return _blogroll(path, port)
    kind = kind_of(host)
    return _SITES[kind](_Request(kind, host, path, parts.query, port, model_hosts))


def _blogroll(path: str, port: int) -> TrapPage:
    """``BLOGROLL_HOST``: ``/`` links every trap's entrance; nothing else is there."""
    if path != "/":
        return _not_found()
    entrances = zip(TRAP_HOSTS, seed_urls(port), strict=True)
    links = [(url, f"a site about {kind}") for kind, url in entrances]
    return _page("Links", [_prose("blogroll", 3)], links)


def _page(
    title: str,
    paragraphs: Sequence[str],
    links: Sequence[Link],
    extra: tuple[tuple[str, str], ...] = (),
) -> TrapPage:
    """An HTML page: the text in ``main`` (where fingerprints look), links in ``nav``."""
    text = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
    doc = _TEMPLATE.format(title=html.escape(title), text=text, links=items)
    return TrapPage(200, HTML + extra, doc.encode())


def _redirect(status: int, location: str) -> TrapPage:
    """A redirect to ``location`` (a path: RFC 9110 10.2.2 allows a relative
    reference), with the short HTML body servers send along."""
    doc = _TEMPLATE.format(title="Moved", text="", links=f'<li><a href="{location}">here</a></li>')
    return TrapPage(status, (*HTML, ("Location", location)), doc.encode())


def _not_found() -> TrapPage:
    doc = _TEMPLATE.format(title="Not found", text="", links="")
    return TrapPage(404, HTML, doc.encode())


_TEMPLATE = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head><body>'
    "<main><h1>{title}</h1>{text}</main><nav><ul>{links}</ul></nav></body></html>\n"
)


@functools.lru_cache(maxsize=4096)  # the calendar alone has millions of seeds
def _prose(seed: str, sentences: int) -> str:
    """``sentences`` sentences of news copy, a pure function of ``seed``."""
    rng = random.Random(seed)
    topic = rng.choice(prose.TOPICS)
    return " ".join(prose.sentence(rng, topic) for _ in range(sentences))


# -- calendar: a "next month" link in every month, from year 1 to 9999 -------------

_CALENDAR_PAGE = re.compile(r"/cal/([0-9]{4})/([0-9]{2})/(?:([0-9]{2})/)?")
_FIRST_MONTH, _LAST_MONTH = 1 * 12, 9999 * 12 + 11  # year * 12 + month - 1


def _month_url(index: int) -> str:
    return f"/cal/{index // 12:04d}/{index % 12 + 1:02d}/"


def _calendar_site(req: _Request) -> TrapPage:
    if req.path == "/":
        return _page(
            "Events calendar", [_prose("calendar", 3)], [(CALENDAR_START, "December 2026")]
        )
    match = _CALENDAR_PAGE.fullmatch(req.path)
    if match is None:
        return _not_found()
    year, month = int(match[1]), int(match[2])
    index = year * 12 + month - 1
    if not (1 <= month <= 12 and _FIRST_MONTH <= index <= _LAST_MONTH):
        return _not_found()
    first_weekday, days = calendar.monthrange(year, month)
    name = f"{MONTHS[month - 1]} {year}"
    if match[3] is None:
        links = [
            (_month_url(i), label)
            for i, label in ((index - 1, "previous month"), (index + 1, "next month"))
            if _FIRST_MONTH <= i <= _LAST_MONTH
        ]
        links += [(f"{req.path}{d:02d}/", f"{d} {MONTHS[month - 1]}") for d in (1, 8, 15, 22)]
        begins = WEEKDAYS[first_weekday]
        about = f"Events in {name}. The month begins on a {begins} and has {days} days."
        return _page(f"{name}: events", [about, _prose(f"calendar {index}", 3)], links)
    day = int(match[3])
    if not 1 <= day <= days:
        return _not_found()
    weekday = WEEKDAYS[(first_weekday + day - 1) % 7]
    title = f"{weekday} {day} {name}"
    return _page(
        title,
        [f"Events on {title}.", _prose(f"calendar {index} {day}", 2)],
        [(_month_url(index), name)],
    )


# -- facets: ten on/off filters, each set of them spelled in every click order ----


def _search_url(names: Sequence[str]) -> str:
    query = "&".join(f"{name}={_FILTER_VALUES[name]}" for name in names)
    return f"/search?{query}" if query else "/search"


def _clicked(query: str) -> list[str] | None:
    """The filters of a search query in click order; None if one is unknown or repeated."""
    pairs = parse_qsl(query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    if len(set(names)) < len(names) or any(_FILTER_VALUES.get(n) != v for n, v in pairs):
        return None
    return names


def _facets_site(req: _Request) -> TrapPage:
    items = [(path, f"product {path[6:]}") for path in FACET_ITEMS]
    if req.path == "/":
        return _page("The wool shop", [_prose("facets", 3)], [("/search", "all products"), *items])
    if req.path in FACET_ITEMS:
        return _page(
            f"Product {req.path[6:]}",
            [_prose(f"facets {req.path}", 4)],
            [("/", "home"), ("/search", "all products")],
        )
    clicked = _clicked(req.query) if req.path == "/search" else None
    if clicked is None:
        return _not_found()
    active = [f"{n}: {v}" for n, v in FILTERS if n in clicked]  # same set, same text
    toggles = [
        [c for c in clicked if c != n] if n in clicked else [*clicked, n] for n, _ in FILTERS
    ]
    links = [
        (_search_url(t), f"{'remove' if n in clicked else 'add'} {n}")
        for t, (n, _) in zip(toggles, FILTERS, strict=True)
    ]
    about = f"Filtered by {', '.join(active)}." if active else "All products, unfiltered."
    return _page("Search the shop", [about, _prose(f"facets {active}", 3)], [*links, ("/", "home")])


# -- sessions and visits: a fresh token in every link of every page ----------------

_minted = itertools.count(1)
_mint_lock = threading.Lock()


def _mint(kind: str) -> str:
    """The next token: a hash of how many the process has minted (not random, so a
    run is repeatable; new each response, so no two fetches see the same links)."""
    with _mint_lock:
        serial = next(_minted)
    return hashlib.sha256(f"{kind} {serial}".encode()).hexdigest()[: _TOKEN_LENGTH[kind]]


def _session_links(path: str) -> list[str]:
    if path == "/":
        return list(SESSION_PATHS[1:])
    n = int(path.rsplit("/", 1)[1])
    return ["/", *(f"/page/{m}" for m in (n - 1, n + 1) if 1 <= m <= 9)]


def _session_site(req: _Request) -> TrapPage:
    """The same page for a path whatever token came in; only the links' tokens change.

    The token is in no text, so the main text, and its fingerprint, is
    byte-identical across visits; the sessions host also sets it as a cookie,
    as PHP does alongside its URL rewriting.
    """
    if req.path not in SESSION_PATHS:
        return _not_found()
    param, token = SESSION_PARAMS[req.kind], _mint(req.kind)
    links = [(f"{p}?{param}={token}", f"page {p}") for p in _session_links(req.path)]
    cookie = (("Set-Cookie", f"{param}={token}; path=/"),) if req.kind == "sessions" else ()
    title = f"{req.kind} {req.path}"
    return _page(title, [_prose(f"{req.kind} {req.path}", 4)], links, cookie)


# -- echo: relative links that repeat path segments for ever ----------------------


def _echo_site(req: _Request) -> TrapPage:
    """Any path under /docs/ is the same manual, with the path in one line of it
    (as a CMS's breadcrumb would put it), so no two pages are byte-identical."""
    if req.path == "/":
        return _page("Echo docs", [_prose("echo", 2)], [("/docs/", "documentation")])
    if not req.path.startswith("/docs/"):
        return _not_found()
    links = [("files/", "files"), ("../docs/", "docs"), ("./images/", "images")]
    return _page("Documentation", [f"You are reading {req.path}.", _prose("echo docs", 6)], links)


# -- linkfarm: 500 subdomains linking to one another, and spam links out -----------


def _farm_site(req: _Request) -> TrapPage:
    if req.path != "/" and req.path not in _FARM_PATHS:
        return _not_found()
    rng = random.Random(f"{req.host}{req.path}")  # str seeds hash with SHA-512: stable
    own = _FARM_INDEX[req.host]
    others = [j + (j >= own) for j in rng.sample(range(len(FARM_HOSTS) - 1), 10)]
    links = [
        (make_url(FARM_HOSTS[j], f"/p/{rng.randrange(FARM_PAGES)}", req.port), "best deals")
        for j in others
    ]
    links += [(f"/p/{n}", "more deals") for n in rng.sample(range(FARM_PAGES), 5)]
    spam = rng.sample(list(req.model_hosts), min(len(req.model_hosts), rng.randint(1, 2)))
    links += [(make_url(name, "/", req.port), "partner") for name in spam]
    words = " ".join(prose.NOUNS.draw(rng) for _ in range(12))
    return _page(
        f"Cheap {words.split()[0]} deals",
        [f"Best cheap {words} online.", _prose(f"{req.host}{req.path}", 2)],
        links,
    )


# -- soft404: a 200 for every page it does not have, or a redirect home -----------

_PAPERS = {"soft404": "The Daily Trap", "soft404_redirect": "The Daily Detour"}


def _soft404_site(req: _Request) -> TrapPage:
    """Real pages have their own text. Any other path gets, on soft404, the
    "not here" page: long fixed boilerplate ("most read" stories, as news
    sites show) with the path in its first paragraph, so two such pages are
    near-duplicates; on soft404_redirect a 302 to ``/`` (its one real
    redirect, ``SOFT404_MOVED``, is a 301 elsewhere)."""
    paper = _PAPERS[req.kind]
    if req.path == "/":
        moved = tuple(SOFT404_MOVED) if req.kind == "soft404_redirect" else ()
        links = [(p, p) for p in (*SOFT404_PATHS[1:], *SOFT404_DEAD_LINKS, *moved)]
        return _page(paper, [_prose(req.kind, 4)], links)
    if req.path in SOFT404_PATHS:
        return _page(f"{paper}: {req.path}", [_prose(f"{req.kind} {req.path}", 8)], [("/", "home")])
    if req.kind == "soft404_redirect":
        target = SOFT404_MOVED.get(req.path)
        return _redirect(301, target) if target else _redirect(302, "/")
    missing = (
        f"{SORRY}. We looked for {req.path} but found nothing there; it may have moved,"
        " or the address may be mistyped."
    )
    return _page(
        "The Daily Trap", [missing, "Most read this week:", *_most_read()], [("/", "home")]
    )


@functools.cache
def _most_read() -> tuple[str, ...]:
    """Two stories, some 1000 words: a path of a few words then moves the pages'
    simhash (``trawl.dedup.fingerprint``) by a bit or two, rarely past ``dedup.max_distance``."""
    rng = random.Random("soft404 most read")
    return prose.article_text(rng, prose.TOPICS[0]) + prose.article_text(rng, prose.TOPICS[1])


_SITES: dict[str, Callable[[_Request], TrapPage]] = {
    "calendar": _calendar_site,
    "facets": _facets_site,
    "sessions": _session_site,
    "visits": _session_site,
    "echo": _echo_site,
    "linkfarm": _farm_site,
    "soft404": _soft404_site,
    "soft404_redirect": _soft404_site,
}
