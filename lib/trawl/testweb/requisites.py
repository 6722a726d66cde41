"""Page requisites in the test web: what its pages need to render, and the truth about it.

An archiving crawl captures, besides a page, what a browser loads to show
it: stylesheets and what they import, images (every candidate of a
``srcset``), scripts, fonts, the favicon. To test one, a web with
``requisites`` (off unless asked for) gives every *ordinary* page -- a 200
page that is not an article of ``trawl.testweb.dups``, whose templates stay
as they are -- these elements (``page_elements``), all root-relative but
the banner:

* ``<link rel="stylesheet" href="/static/site.css">``; ``site.css`` begins
  with ``@import url("fonts.css")`` and has a background ``url(img/bg.png)``,
  both relative to the stylesheet (CSS Values 4, 4.5: a relative URL in a
  style sheet resolves against the sheet's URL), so a crawler must resolve
  them against /static/site.css, not against the page; ``fonts.css``
  declares an ``@font-face`` from ``/static/font.woff2`` and sets the
  headings in it (``file_references``);
* ``<link rel="icon" href="/static/favicon.png">`` and
  ``<script src="/static/app.js"></script>``, a script that only marks the
  document (``data-app-ran="1"``) and requests nothing;
* the host's logo, ``<img src="/static/logo.png">``, one URL for all its pages;
* on about half the pages (``PHOTO_SHARE``) a photo of the page's own, as
  ``<img srcset="/static/photo-N-1x.png 1x, /static/photo-N-2x.png 2x"
  src="/static/photo-N-1x.png">``, N the page's index on its host;
* on some hosts (``LOGO_COPY_SHARE``, at least one) ``/static/logo-copy.png``,
  the logo's bytes under another URL, for a content-hash deduplication;
* when the web has more than one host, one host is the *CDN*: the home page
  of every other host and a share of their other pages (``BANNER_SHARE``)
  show its ``/shared/banner.png``, by absolute URL;
* on some hosts with a 200 robots.txt (``PRIVATE_SHARE``, at least one) every
  group of robots.txt disallows ``/static/private/`` and the pages show
  ``/static/private/secret.png``: a polite crawler never requests it, and the
  robots audit flags it if one does.

Every other byte a page serves is what it served without requisites, and so
are robots.txt (but for the private rule) and the sitemaps. Requisites are
not pages: ``WebModel.reachable``, ``page_count`` and the sitemaps leave
them out, and no rule the generator draws touches ``/static/`` or
``/shared/``, so a crawl of pages fetches what it fetched before. They never
change (Last-Modified is the epoch) and are validated like pages. Their
bytes (``trawl.testweb.requisite_files``) are distinct per host and per
file -- but the logo's copy -- so the only byte-identical requisites are the
ones meant to be.

Choices are drawn after everything else from streams of their own, keyed by
``REQUISITES_LABEL``, the seed and the host (the CDN from one keyed by the
seed), each drawing the same values whatever is kept. The model answers from
``SiteRequisites`` through ``page_elements`` and ``file_references``, the
functions the renderer and the stylesheets are made from, so the ground
truth cannot drift from what is served.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from trawl.testweb.dups import publishes
from trawl.testweb.records import HostInfo, Page, RobotsGroup, SiteRequisites

REQUISITES_LABEL = "trawl.testweb.requisites.1"
#: What a requisite is to the page (its ``Requisite.kind``).
REQUISITE_KINDS = ("stylesheet", "image", "script", "font", "icon")
STYLESHEET = "/static/site.css"
IMPORTED = "/static/fonts.css"
BACKGROUND = "/static/img/bg.png"
FONT = "/static/font.woff2"
FAVICON = "/static/favicon.png"
SCRIPT = "/static/app.js"
LOGO = "/static/logo.png"
LOGO_COPY = "/static/logo-copy.png"
PRIVATE_DIR = "/static/private/"
SECRET = "/static/private/secret.png"
BANNER = "/shared/banner.png"
#: Files every host with requisites serves.
COMMON = (STYLESHEET, IMPORTED, BACKGROUND, FONT, FAVICON, SCRIPT, LOGO)
_PHOTO = re.compile(r"/static/photo-(0|[1-9][0-9]*)-([12])x\.png")
#: Shares of ordinary pages with a photo; of the CDN's neighbours' pages
#: besides the home page with its banner; of hosts with the logo's copy; of
#: hosts with a 200 robots.txt closing /static/private/.
PHOTO_SHARE = 0.5
BANNER_SHARE = 0.2
LOGO_COPY_SHARE = 0.3
PRIVATE_SHARE = 0.5


@dataclass(frozen=True)
class Reference:
    """A requisite as a page or stylesheet references it: who serves it, where, what it is."""

    host: str
    path: str
    kind: str


@dataclass(frozen=True)
class Element:
    """An element of a page that loads requisites.

    ``kind`` is the ``REQUISITE_KINDS`` entry of what it loads ("stylesheet":
    a ``<link rel=stylesheet>``, "icon": a ``<link rel=icon>``, "script", or
    "image": an ``<img>``); ``paths`` what it loads from ``host``, an image
    with a ``srcset`` its 1x then its 2x candidate; ``alt`` an image's text.
    """

    kind: str
    host: str
    paths: tuple[str, ...]
    alt: str = ""


@dataclass(frozen=True)
class Requisite:
    """The model's answer about one requisite: its absolute ``url``, its kind,
    whether robots.txt lets the model's agent fetch it, and the URL of the
    page or stylesheet that references it (``referrer``)."""

    url: str
    kind: str
    allowed: bool
    referrer: str


def photo_paths(number: int) -> tuple[str, str]:
    """The 1x and 2x candidates of the photo of page ``number``."""
    return f"/static/photo-{number}-1x.png", f"/static/photo-{number}-2x.png"


def photo_number(path: str) -> int | None:
    """N of a path ``/static/photo-N-1x.png`` or ``-2x.png`` (None for any other path)."""
    match = _PHOTO.fullmatch(path)
    return None if match is None else int(match.group(1))


def is_ordinary(page: Page) -> bool:
    """Whether ``page`` carries requisites: a 200 page that is no article."""
    return page.status == 200 and page.article is None


def page_elements(host: HostInfo, page: Page) -> tuple[Element, ...]:
    """The elements loading requisites on ``page``, in document order (none
    without requisites): head links and script, then the images."""
    site = host.requisites
    if site is None or not is_ordinary(page):
        return ()
    name = host.name
    elements = [
        Element("stylesheet", name, (STYLESHEET,)),
        Element("icon", name, (FAVICON,)),
        Element("script", name, (SCRIPT,)),
        Element("image", name, (LOGO,), f"{name} logo"),
    ]
    number = host.page_number(page.path)
    if number in site.photos:
        elements.append(Element("image", name, photo_paths(number), f"photo {number}"))
    if site.logo_copy:
        elements.append(Element("image", name, (LOGO_COPY,), f"{name} logo, again"))
    if page.path in site.banners:
        elements.append(Element("image", site.cdn, (BANNER,), "banner"))
    if site.private:
        elements.append(Element("image", name, (SECRET,), "members only"))
    return tuple(elements)


def page_references(host: HostInfo, page: Page) -> tuple[Reference, ...]:
    """What ``page`` itself references, each once, in document order."""
    refs = (Reference(e.host, p, e.kind) for e in page_elements(host, page) for p in e.paths)
    return tuple(dict.fromkeys(refs))


def file_references(host: HostInfo, path: str) -> tuple[Reference, ...]:
    """What the requisite at ``path`` references in its turn: the stylesheets'
    ``@import`` and ``url()``, resolved against the sheet (nothing for others)."""
    if host.requisites is None:
        return ()
    if path == STYLESHEET:
        return (
            Reference(host.name, IMPORTED, "stylesheet"),
            Reference(host.name, BACKGROUND, "image"),
        )
    if path == IMPORTED:
        return (Reference(host.name, FONT, "font"),)
    return ()


def direct_references(host: HostInfo | None, path: str) -> tuple[Reference, ...]:
    """What the ordinary page or the requisite at ``path`` on ``host`` references itself."""
    if host is None:
        return ()
    page = host.page(path)
    if page is not None and is_ordinary(page):
        return page_references(host, page)
    return file_references(host, path)


def requisite_closure(
    lookup: Callable[[str], HostInfo | None], host: str, path: str
) -> list[tuple[Reference, tuple[str, str]]]:
    """Everything the page or requisite at (``host``, ``path``) needs, breadth
    first, each once, with the (host, path) that referenced it first."""
    seen, queue = {(host, path)}, deque([(host, path)])
    found: list[tuple[Reference, tuple[str, str]]] = []
    while queue:
        at = queue.popleft()
        for ref in direct_references(lookup(at[0]), at[1]):
            if (ref.host, ref.path) not in seen:
                seen.add((ref.host, ref.path))
                found.append((ref, at))
                queue.append((ref.host, ref.path))
    return found


def serves(host: HostInfo, path: str) -> bool:
    """Whether ``host`` serves a requisite at ``path`` (exact path, no query)."""
    site = host.requisites
    if site is None:
        return False
    number = photo_number(path)
    return (
        path in COMMON
        or (path == LOGO_COPY and site.logo_copy)
        or (path == SECRET and site.private)
        or (path == BANNER and site.is_cdn)
        or (number is not None and number in site.photos)
    )


# -- drawing ---------------------------------------------------------------


@dataclass(frozen=True)
class _Rolls:
    """One host's draws: its two rolls, and what its pages' rolls kept
    (every roll is drawn, whatever is kept)."""

    logo_copy: float
    private: float
    photos: tuple[int, ...]
    banners: tuple[str, ...]


def _rolls(seed: int, host: HostInfo, cdn: str) -> _Rolls:
    """The host's rolls; pages showing the banner: the home page, and a share of the rest."""
    rng = random.Random(f"{REQUISITES_LABEL}/{seed}/{host.name}")
    logo_copy, private = rng.random(), rng.random()
    photos: list[int] = []
    banners: list[str] = []
    for number, page in enumerate(host.pages):
        if not is_ordinary(page):
            continue
        photo_roll, banner_roll = rng.random(), rng.random()
        if photo_roll < PHOTO_SHARE:
            photos.append(number)
        if cdn and cdn != host.name and (page.path == "/" or banner_roll < BANNER_SHARE):
            banners.append(page.path)
    return _Rolls(logo_copy, private, tuple(photos), tuple(banners))


def _chosen(rolls: dict[str, float], share: float) -> set[str]:
    """Hosts whose roll is under ``share``; if none is, the one with the lowest roll."""
    chosen = {name for name, roll in rolls.items() if roll < share}
    return chosen or ({min(rolls, key=rolls.__getitem__)} if rolls else set())


def _cdn(seed: int, hosts: tuple[HostInfo, ...]) -> str:
    """The host serving the banner: one that lets crawlers in, answers at once
    and never pushes back ("" for a one-host web, or when no host does)."""
    eligible = [host.name for host in hosts if publishes(host)]
    if len(hosts) < 2 or not eligible:
        return ""
    return random.Random(f"{REQUISITES_LABEL}/{seed}/cdn").choice(eligible)


def _close_private(groups: tuple[RobotsGroup, ...]) -> tuple[RobotsGroup, ...]:
    """Every group disallows ``PRIVATE_DIR`` too (badbot's already disallows "/"):
    closed for all agents, whichever group an agent falls in (RFC 9309 2.2.1)."""
    return tuple(
        group
        if group.agent == "badbot"
        else replace(group, disallow=(*group.disallow, PRIVATE_DIR))
        for group in groups
    )


def add_requisites(seed: int, hosts: tuple[HostInfo, ...], on: bool) -> tuple[HostInfo, ...]:
    """``hosts`` with requisites (``on``), or as they are (module docstring)."""
    if not on:
        return hosts
    cdn = _cdn(seed, hosts)
    rolls = {host.name: _rolls(seed, host, cdn) for host in hosts}
    copies = _chosen({name: r.logo_copy for name, r in rolls.items()}, LOGO_COPY_SHARE)
    closed = {h.name: rolls[h.name].private for h in hosts if h.robots_status == 200}
    private = _chosen(closed, PRIVATE_SHARE)
    finished = []
    for host in hosts:
        r = rolls[host.name]
        site = SiteRequisites(
            r.photos, r.banners, cdn, host.name in copies, host.name in private, host.name == cdn
        )
        groups = _close_private(host.groups) if site.private else host.groups
        finished.append(replace(host, groups=groups, requisites=site))
    return tuple(finished)
