"""Plain records of the synthetic web: robots groups, links, pages and hosts.

They are frozen dataclasses so a generated ``WebModel`` compares by value (two
models from one seed are equal) and nothing can change the ground truth while
the server is running. URLs are not stored: the port is only known once the
server is bound, so links keep a target (host, path) and an href *form*, and
the renderer builds the href text at serve time. A ``Throttle`` describes how a
host pushes back on a fast crawler; its live state (when the host is free
again) is the server's, kept in ``trawl.testweb.limiter``. A page's
``change_rate`` is all the model keeps of how it changes: the change instants
follow from it and the seed (``trawl.testweb.changes``). A ``SitemapSet`` says
which sitemap files a host publishes; their entries follow from its pages. An
``Article`` marks a page of a near-duplicate family (``trawl.testweb.dups``)
and says how it is dressed; the model's duplicate ground truth is read off
these records, so it cannot drift from what is served. ``SiteRequisites``
says, for a web with page requisites (``trawl.testweb.requisites``), which
of a host's pages show which images; the requisites' ground truth is read
off it the same way.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

#: href forms a link can take; the renderer turns (form, target) into text.
LINK_FORMS = ("absolute", "scheme-relative", "root", "relative")
#: robots.txt variants: 404, 5xx (fetch nothing else), allow-all, rules for
#: ``*`` only, rules for ``*`` plus a different group for the crawler's agent.
ROBOTS_VARIANTS = ("none", "error", "open", "star", "agent")
#: throttle kinds: a rate limiter, or a server that fails a fixed share of requests.
THROTTLE_KINDS = ("limit", "flaky")
#: sitemap layouts: one urlset, or an index over a gzipped urlset and a text list.
SITEMAP_LAYOUTS = ("urlset", "index")
URLSET_PATH = "/sitemap.xml"
INDEX_PATH = "/sitemap_index.xml"
#: the children of an index: the first half of the pages, gzipped XML; the rest, text.
CHILD_PATHS = ("/sitemaps/1.xml.gz", "/sitemaps/2.txt")
#: roles of an article page: first publication, copy on another host in its
#: template, print version, session-id URL of the original, byte-identical
#: copy at another URL, a copy whose text was edited (``EDIT_KINDS``), and an
#: unrelated article dressed like a family's.
ARTICLE_ROLES = ("original", "syndicated", "print", "session", "copy", "edited", "near-miss")
#: how an "edited" page's text differs from the original's
#: (``trawl.testweb.edits``): a correction or an update on the origin host,
#: an aggregator's copy with its end trimmed or with a comment added.
EDIT_KINDS = ("correction", "update", "trimmed", "extended")
#: paragraphs a site repeats inside the text of several articles
#: (``trawl.testweb.boilerplate``): an author's bio, a
#: disclosure, a newsletter pitch.
BOILERPLATE_KINDS = ("bio", "disclaimer", "newsletter")
#: what each link of an article page is, so the template can place it.
ARTICLE_SLOTS = ("nav", "related", "footer", "print", "source", "back")


@dataclass(frozen=True)
class RobotsGroup:
    """One ``User-agent:`` group: the agent token and its Disallow prefixes."""

    agent: str
    disallow: tuple[str, ...]

    def blocks(self, path: str) -> bool:
        """Simple prefix match, the unambiguous subset of RFC 9309."""
        return any(path.startswith(prefix) for prefix in self.disallow)


@dataclass(frozen=True)
class Link:
    """An ``<a href>`` on a page: target, how the href is spelled, rel, #fragment."""

    host: str
    path: str
    form: str
    nofollow: bool = False
    fragment: str = ""


@dataclass(frozen=True)
class Article:
    """How a page presents an article of the near-duplicate families.

    ``family`` is the family id ("" for a near-miss, which names the family it
    imitates in ``resembles``); ``role`` one of ``ARTICLE_ROLES``;
    ``template`` the host's site template (``trawl.testweb.templates``) and
    ``topic`` the beat its title names. ``published``, ``comments`` and
    ``ad`` (an index into the ad blocks, -1 for none) differ between the
    variants of one article. ``slots`` and ``anchors`` say, for each link of
    the page in order, where the template puts it and its anchor text.
    ``session`` is the "name=token" a session-id variant carries; ``copy_of``
    the path of the page a "copy" repeats byte for byte; ``edit`` the
    ``EDIT_KINDS`` entry of an "edited" page; ``boilerplate`` the
    ``BOILERPLATE_KINDS`` entry of the site's paragraph the text carries (""
    for none), which makes a near-miss a boilerplate-sharing one.
    """

    family: str
    role: str
    template: int
    topic: str
    byline: str
    published: datetime
    comments: int
    ad: int
    slots: tuple[str, ...] = ()
    anchors: tuple[str, ...] = ()
    session: str = ""
    copy_of: str = ""
    resembles: str = ""
    edit: str = ""
    boilerplate: str = ""


@dataclass(frozen=True)
class Page:
    """One path on a host with its status and (for 200 pages) its content.

    ``base`` is a directory path ("/docs/") the page declares in ``<base href>``
    (relative links are then spelled relative to it), ``base_absolute`` says
    whether that href carries scheme and host; ``redirect_to`` is the same-host
    target of a 301; ``change_rate`` the mean number of changes per day of a
    200 page (0.0: it never changes); ``article`` is set on the pages of the
    near-duplicate families (their ``text`` is the article, one paragraph a
    line, and their ``title`` its headline).
    """

    path: str
    status: int
    title: str
    text: str
    links: tuple[Link, ...] = ()
    base: str | None = None
    base_absolute: bool = True
    redirect_to: str | None = None
    change_rate: float = 0.0
    article: Article | None = None

    @property
    def directory(self) -> str:
        """The directory relative links resolve against (the base if any)."""
        if self.base is not None:
            return self.base
        return posixpath.dirname(self.path).rstrip("/") + "/"


@dataclass(frozen=True)
class Throttle:
    """How a host answers a crawler with 429/503 + ``Retry-After``.

    ``kind`` "limit" is a rate limiter: a request arriving less than
    ``interval_s`` after the previous served response ended is answered
    ``status`` (429 or 503), with a Retry-After that points at the moment the
    host is free again (RFC 6585 4, RFC 9110 10.2.3), so a crawler that
    honours it is served next time. ``kind`` "flaky" answers ``status`` on
    every ``every``-th request whatever its timing, with Retry-After
    ``retry_after_s``. ``http_date`` sends Retry-After as an HTTP-date
    instead of delay-seconds.
    """

    kind: str
    status: int
    interval_s: float = 0.0
    every: int = 0
    retry_after_s: int = 0
    http_date: bool = False


@dataclass(frozen=True)
class SitemapSet:
    """The sitemaps a host publishes (all listed in its robots.txt).

    ``layout`` "urlset" is one ``/sitemap.xml``; "index" is
    ``/sitemap_index.xml`` pointing at ``CHILD_PATHS``. ``hidden`` are paths
    of pages that the sitemaps list and no link points at.
    """

    layout: str
    hidden: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        """Paths of the sitemap files, the one robots.txt names first."""
        return (URLSET_PATH,) if self.layout == "urlset" else (INDEX_PATH, *CHILD_PATHS)


@dataclass(frozen=True)
class SiteRequisites:
    """What a host's ordinary pages need to render (``trawl.testweb.requisites``).

    Every ordinary page links the host's stylesheet, favicon and script and
    shows its logo. ``photos`` are the numbers (indexes in ``HostInfo.pages``)
    of the pages that also show a photo of their own, in 1x and 2x;
    ``banners`` the paths of the pages that show the banner of the host
    ``cdn``; ``logo_copy`` puts the logo's bytes under a second URL on every
    page, ``private`` an image robots.txt disallows. ``is_cdn`` marks the
    host that serves the banner.
    """

    photos: tuple[int, ...] = ()
    banners: tuple[str, ...] = ()
    cdn: str = ""
    logo_copy: bool = False
    private: bool = False
    is_cdn: bool = False


@dataclass(frozen=True)
class HostInfo:
    """A virtual host: its pinned IP, robots behaviour, speed and pages.

    ``robots`` is one of ``ROBOTS_VARIANTS`` and ``robots_status`` the status
    of ``/robots.txt``; ``groups`` are the rules served when that is 200.
    ``slow`` is the delay in seconds before every response (0.0 for most
    hosts); ``popularity`` the weight other hosts used to pick it as a target;
    ``throttle`` how it pushes back on a fast crawler (None for most hosts);
    ``sitemaps`` the sitemap files it publishes (None for most hosts);
    ``requisites`` what its pages need to render (None: a web without
    requisites, whose pages are bare HTML).
    """

    name: str
    ip: str
    robots: str
    robots_status: int
    groups: tuple[RobotsGroup, ...]
    crawl_delay: float | None
    slow: float
    pages: tuple[Page, ...]
    popularity: float
    throttle: Throttle | None = None
    sitemaps: SitemapSet | None = None
    requisites: SiteRequisites | None = None

    @cached_property
    def _by_path(self) -> dict[str, Page]:
        return {page.path: page for page in self.pages}

    @cached_property
    def _numbers(self) -> dict[str, int]:
        return {page.path: n for n, page in enumerate(self.pages)}

    @cached_property
    def open_paths(self) -> tuple[str, ...]:
        """Paths of 200 pages that no group but badbot's disallows, in page order.

        What a sitemap may list: every crawler that is not banned outright may
        fetch them, whichever group it falls in.
        """
        if self.robots_status >= 500:
            return ()
        rules = [g for g in self.groups if g.agent != "badbot"]
        return tuple(
            p.path
            for p in self.pages
            if p.status == 200 and not any(g.blocks(p.path) for g in rules)
        )

    def page(self, path: str) -> Page | None:
        """The page at ``path`` (exact match, query included), or None."""
        return self._by_path.get(path)

    def page_number(self, path: str) -> int:
        """The index in ``pages`` of the page at ``path``; KeyError if there is none."""
        return self._numbers[path]

    def group_for(self, agent: str) -> RobotsGroup | None:
        """RFC 9309 group selection: the agent's own group, else ``*``, else none."""
        token = agent_token(agent)
        by_agent = {group.agent.lower(): group for group in self.groups}
        return by_agent.get(token) or by_agent.get("*")

    def crawl_delay_for(self, agent: str) -> float | None:
        """The Crawl-delay robots.txt serves to ``agent`` (every group but badbot's has it)."""
        if self.robots_status != 200 or self.crawl_delay is None:
            return None
        group = self.group_for(agent)
        return None if group is None or group.agent == "badbot" else self.crawl_delay

    def is_disallowed(self, path: str, agent: str) -> bool:
        """Whether a crawler identifying as ``agent`` must not fetch ``path``."""
        if self.robots_status >= 500:
            return True
        if self.robots_status != 200:
            return False
        group = self.group_for(agent)
        return group is not None and group.blocks(path)


def agent_token(agent: str) -> str:
    """The product token of a User-Agent string, lower-cased: "Trawl/0.1 (+x)" -> "trawl"."""
    token = agent.strip().split("/", 1)[0].split(" ", 1)[0]
    return token.lower()
