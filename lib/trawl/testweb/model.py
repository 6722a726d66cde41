"""``WebModel``: the synthetic web as data, and the ground truth about it.

The model is what the test web serves and what audits compare a crawl
against: which hosts exist and where they live, what each path returns, what
robots.txt forbids for a given agent, and which pages a perfect polite
crawler would reach from the seeds. It is port-agnostic (the port is chosen
when the server binds), so every method that builds a URL takes the port.

Statuses, links and robots rules are timeless: a throttled host's 429/503
depends on when a request arrives, not on its path, so ``expected_status``
gives the answer a polite crawler gets. Content is not: a 200 page changes at
its own rate, and ``version_at`` / ``last_change_at`` say which version the
web serves at a logical time (``trawl.testweb.changes``); the link graph
never changes, so ``reachable`` holds at every time. With ``dup_families``
the web also publishes near-duplicate families (``trawl.testweb.dups``), and
the model answers which URLs are one article, which are byte-identical and
which merely look alike, so a deduplication can be scored, and of what kind
each true pair and each near-miss is, so the score can be split by kind.
With ``requisites`` pages need stylesheets, images, a script and a font
(``trawl.testweb.requisites``), and the model says what each page needs,
whether robots.txt lets the agent fetch it and which files are one file's
bytes, so an archiving crawl can be checked for capturing each requisite
once and fetching none that robots.txt forbids.
Two pieces of live state ride along outside equality: the ``RateLimiter``
the server consults for throttled hosts, and the ``ChangeHistory`` of
change instants drawn so far (a cache: the instants follow from the seed).
"""

from __future__ import annotations

import hashlib
import itertools
from collections import defaultdict, deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from urllib.parse import urlsplit

from trawl.testweb.changes import (
    DEFAULT_RATES,
    ChangeHistory,
    ChangeRates,
    epoch_seconds,
    from_epoch_seconds,
)
from trawl.testweb.generate import (
    DELAY_SHARE,
    SITEMAP_SHARE,
    THROTTLE_SHARE,
    Extras,
    generate_hosts,
)
from trawl.testweb.limiter import RateLimiter
from trawl.testweb.records import ARTICLE_ROLES, Article, HostInfo, Page
from trawl.testweb.requisite_files import requisite_file
from trawl.testweb.requisites import Requisite, requisite_closure, serves

DEFAULT_AGENT = "trawl"
#: Kinds of true duplicate pairs, by what sets the two pages apart, in order
#: of precedence: a pair with an "edited" member is "edited" (the texts
#: differ), else with a print version "print" (template gone), else with a
#: session-id URL "session" (same template, own token, ad and comment count),
#: else with a syndicated copy "retemplated" (same text, other template);
#: what is left is an original and its byte-identical copy, "exact".
PAIR_KINDS = ("edited", "print", "session", "retemplated", "exact")
_PAIR_KIND_OF_ROLE = {
    "edited": "edited",
    "print": "print",
    "session": "session",
    "syndicated": "retemplated",
}
#: Kinds of near-misses: another article on the family's topic in its
#: template ("topic"), or one that also shares a paragraph of the site's
#: boilerplate with the family's text ("boilerplate").
NEAR_MISS_KINDS = ("topic", "boilerplate")


def pair_kind(role_a: str, role_b: str) -> str:
    """The ``PAIR_KINDS`` entry of a true pair whose pages have these roles."""
    kinds = {_PAIR_KIND_OF_ROLE.get(role_a), _PAIR_KIND_OF_ROLE.get(role_b)}
    return next((kind for kind in PAIR_KINDS if kind in kinds), "exact")


def make_url(host: str, path: str, port: int) -> str:
    """``http://host:port/path``; port 80 is left out as a browser would."""
    netloc = host if port == 80 else f"{host}:{port}"
    return f"http://{netloc}{path}"


@dataclass(frozen=True)
class WebModel:
    """A generated web: ``hosts`` in index order plus the parameters that made it.

    ``limiter`` is the serving state of throttled hosts and ``changes`` the
    change instants drawn so far (neither compared: two models from one seed
    are equal however much traffic they have seen).
    """

    seed: int
    agent: str
    hosts: tuple[HostInfo, ...]
    limiter: RateLimiter = field(default_factory=RateLimiter, compare=False, repr=False)
    changes: ChangeHistory = field(default_factory=ChangeHistory, compare=False, repr=False)

    @cached_property
    def _index(self) -> dict[str, HostInfo]:
        return {h.name: h for h in self.hosts}

    @classmethod
    def generate(
        cls,
        seed: int,
        hosts: int = 300,
        ips: int = 60,
        pages_per_host: tuple[int, int] = (5, 40),
        agent: str = DEFAULT_AGENT,
        *,
        throttled: float = THROTTLE_SHARE,
        crawl_delays: float = DELAY_SHARE,
        sitemaps: float = SITEMAP_SHARE,
        change_rates: ChangeRates | None = DEFAULT_RATES,
        dup_families: int = 0,
        requisites: bool = False,
    ) -> WebModel:
        """Build the web for ``seed``; identical arguments give an identical model.

        ``throttled`` is the share of hosts with a ``Throttle`` and
        ``crawl_delays`` the share given a Crawl-delay of 1-5 s (rarely much
        more); ``sitemaps`` the share of hosts with a 200 robots.txt that
        publish sitemaps; ``change_rates`` how often pages change (None: never).
        All four are drawn apart from the rest of the web, so changing them
        leaves hosts, pages and links as they were (but for the pages only
        sitemaps list). ``dup_families`` adds that many near-duplicate
        families with their near-misses (``trawl.testweb.dups``); 0 leaves
        the web as it was, more only adds article pages and links to them.
        ``requisites`` gives ordinary pages what a browser loads to show them
        (``trawl.testweb.requisites``); off, the web is what it was.
        """
        extras = Extras(throttled, crawl_delays)
        drawn = generate_hosts(
            seed,
            hosts,
            ips,
            pages_per_host,
            agent,
            extras,
            sitemaps,
            change_rates,
            dup_families,
            requisites,
        )
        return cls(seed, agent, drawn)

    # -- lookups -----------------------------------------------------------

    def host(self, name: str) -> HostInfo | None:
        """The host called ``name`` (case-insensitive, port stripped), or None."""
        return self._index.get(name.lower().split(":", 1)[0])

    @property
    def ips(self) -> list[str]:
        """Distinct IPs in use, in first-use order (one listening socket each)."""
        return list(dict.fromkeys(h.ip for h in self.hosts))

    @property
    def page_count(self) -> int:
        """Number of paths with content or a status, robots.txt excluded."""
        return sum(len(h.pages) for h in self.hosts)

    def hosts_file_text(self) -> str:
        """hosts(5) lines "IP name" resolving every host to its pinned loopback IP."""
        lines = ["# trawl testweb: synthetic hosts pinned to loopback addresses"]
        lines += [f"{h.ip} {h.name}" for h in self.hosts]
        return "\n".join(lines) + "\n"

    def seed_urls(self, n: int = 3, port: int = 80) -> list[str]:
        """Homepages of the ``n`` most popular hosts with a usable robots.txt.

        The first is the root of the host tree, so every host is reachable
        from it alone.
        """
        ranked = sorted((h for h in self.hosts if h.robots != "error"), key=lambda h: -h.popularity)
        return [make_url(h.name, "/", port) for h in ranked[:n]]

    # -- ground truth ------------------------------------------------------

    def is_disallowed(self, host: str, path: str, agent: str | None = None) -> bool:
        """Whether ``agent`` (default: the model's) may not fetch ``path`` on ``host``.

        Rules are plain prefixes; a 5xx robots.txt disallows everything and a
        404 allows everything (RFC 9309). Unknown hosts allow everything.
        """
        info = self.host(host)
        return info is not None and info.is_disallowed(path, agent or self.agent)

    def expected_status(self, host: str, path: str) -> int:
        """The status the server answers for ``path`` on ``host`` (404 if unknown).

        This is the answer when the host is not pushing back: a throttled
        host may answer 429/503 instead, depending on timing (``Throttle``).
        """
        info = self.host(host)
        if info is None:
            return 404
        if path == "/robots.txt":
            return info.robots_status
        if info.sitemaps is not None and path in info.sitemaps.files:
            return 200
        if serves(info, path):
            return 200
        page = info.page(path)
        return 404 if page is None else page.status

    def page_links(self, host: str, path: str, port: int) -> list[tuple[str, bool]]:
        """(absolute URL without fragment, nofollow) for every link on a page, in page order."""
        info = self.host(host)
        page = None if info is None else info.page(path)
        if page is None or page.status != 200:
            return []
        return [(make_url(link.host, link.path, port), link.nofollow) for link in page.links]

    def reachable(
        self,
        seeds: list[str],
        agent: str | None = None,
        *,
        sitemaps: bool = False,
        max_hops: int | None = None,
    ) -> set[tuple[str, str]]:
        """(host, path) pairs a perfect polite crawler fetches starting at ``seeds``.

        Follows links without ``rel=nofollow`` on 200 pages and 301 targets,
        never fetching what robots.txt disallows (robots.txt itself is left
        out). Unknown hosts are skipped. With ``sitemaps`` the crawler also
        reads the sitemaps robots.txt names on every host it fetches from, so
        the pages only sitemaps list are reached too (the sitemap files are
        left out, like robots.txt). ``max_hops`` bounds the link hops from the
        seeds (a crawl's cycles less one; a redirect is followed in the same
        hop, as the fetcher follows it in the same task).
        """
        agent = agent or self.agent
        queue = deque((urlsplit(u).hostname or "", urlsplit(u).path or "/", 0) for u in seeds)
        seen: set[tuple[str, str]] = set()
        fetched: set[tuple[str, str]] = set()
        read_sitemaps: set[str] = set()
        while queue:
            *key_parts, hops = queue.popleft()
            key = (key_parts[0], key_parts[1])
            if key in seen:
                continue
            seen.add(key)
            info = self.host(key[0])
            if info is None or info.is_disallowed(key[1], agent):
                continue
            if sitemaps and info.name not in read_sitemaps:
                read_sitemaps.add(info.name)
                queue.extend((info.name, path, hops + 1) for path in self.sitemap_paths(info.name))
            fetched.add(key)
            page = info.page(key[1])
            if page is None:
                continue
            if page.redirect_to is not None:
                queue.appendleft((info.name, page.redirect_to, hops))  # same hop: next
            elif page.status == 200 and (max_hops is None or hops < max_hops):
                queue.extend(
                    (link.host, link.path, hops + 1) for link in page.links if not link.nofollow
                )
        return fetched

    # -- sitemaps ----------------------------------------------------------

    def sitemap_urls(self, host: str, port: int) -> list[str]:
        """Absolute URLs of the sitemap files ``host`` publishes, as robots.txt lists them."""
        info = self.host(host)
        if info is None or info.sitemaps is None:
            return []
        return [make_url(info.name, path, port) for path in info.sitemaps.files]

    def sitemap_paths(self, host: str) -> tuple[str, ...]:
        """Paths the sitemaps of ``host`` list, in order (empty without sitemaps).

        Every 200 page that no robots group but badbot's disallows, including
        the pages only the sitemaps lead to.
        """
        info = self.host(host)
        if info is None or info.sitemaps is None:
            return ()
        return info.open_paths

    def sitemap_only_pages(self) -> set[tuple[str, str]]:
        """(host, path) of the pages listed in sitemaps that no link points at."""
        return {
            (h.name, path) for h in self.hosts for path in (h.sitemaps.hidden if h.sitemaps else ())
        }

    # -- change over logical time ------------------------------------------

    def change_rate(self, host: str, path: str) -> float:
        """Mean changes per day of the page (0.0 for one that never changes, or not a 200)."""
        return self._page(host, path)[1].change_rate

    def version_at(self, host: str, path: str, at: datetime) -> int:
        """Number of changes of the page from the epoch up to ``at`` (aware), inclusive."""
        name, page = self._page(host, path)
        return self.changes.version(self.seed, name, path, page.change_rate, epoch_seconds(at))[0]

    def last_change_at(self, host: str, path: str, at: datetime) -> datetime:
        """When the version served at ``at`` appeared (the epoch for version 0)."""
        name, page = self._page(host, path)
        t_s = epoch_seconds(at)
        last = self.changes.version(self.seed, name, path, page.change_rate, t_s)[1]
        return from_epoch_seconds(last)

    def change_times(self, host: str, path: str, until: datetime) -> list[datetime]:
        """Every change of the page from the epoch up to ``until``, in order."""
        name, page = self._page(host, path)
        t_s = epoch_seconds(until)
        instants = self.changes.changes_until(self.seed, name, path, page.change_rate, t_s)
        return [from_epoch_seconds(s) for s in instants]

    def _page(self, host: str, path: str) -> tuple[str, Page]:
        """(the host's own name, the page); KeyError if either is unknown."""
        info = self.host(host)
        page = None if info is None else info.page(path)
        if info is None or page is None:
            raise KeyError(f"no page {path} on {host}")
        return info.name, page

    # -- near-duplicate families -------------------------------------------

    def _articles(self) -> Iterator[tuple[HostInfo, Page, Article]]:
        """Every article page with its host, in model order."""
        for host in self.hosts:
            for page in host.pages:
                if page.article is not None:
                    yield host, page, page.article

    def duplicate_families(self, port: int = 80) -> dict[str, list[str]]:
        """Family id ("dup-000") -> absolute URLs of every member, the original first.

        Members are the pages that serve the family's article: the original,
        its syndicated copies, its print version, its session-id URLs, its
        exact copy and its edited copies, in that order of roles (then in
        model order). Near-misses are not members (``near_miss_pages``).
        """
        return {
            family: [url for url, _ in members]
            for family, members in self._family_members(port).items()
        }

    def _family_members(self, port: int) -> dict[str, list[tuple[str, str]]]:
        """Family id -> (URL, role) of every member, ordered as ``duplicate_families``."""
        members: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
        for host, page, article in self._articles():
            if article.family:
                rank, url = ARTICLE_ROLES.index(article.role), make_url(host.name, page.path, port)
                members[article.family].append((rank, url, article.role))
        return {
            family: [(url, role) for _, url, role in sorted(found, key=lambda m: m[0])]
            for family, found in sorted(members.items())
        }

    def exact_copies(self, port: int = 80) -> list[list[str]]:
        """Groups of family members that serve byte-identical bodies (an original
        and its copies), each group's original first."""
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for host, page, article in self._articles():
            if article.family:
                key = (host.name, article.copy_of or page.path)
                groups[key].append(make_url(host.name, page.path, port))
        return [urls for urls in groups.values() if len(urls) > 1]

    def near_miss_kinds(self, port: int = 80) -> dict[str, str]:
        """URL of each near-miss -> its ``NEAR_MISS_KINDS`` entry: "boilerplate"
        if its text carries a paragraph of the site that a member of its family
        carries too, else "topic"."""
        return {
            make_url(host.name, page.path, port): "boilerplate" if article.boilerplate else "topic"
            for host, page, article in self._articles()
            if article.role == "near-miss"
        }

    def near_miss_pages(self, port: int = 80) -> dict[str, str]:
        """URL of each near-miss -> the family whose template, topic and title
        pattern it shares (it duplicates nothing: every pair with it is a negative)."""
        return {
            make_url(host.name, page.path, port): article.resembles
            for host, page, article in self._articles()
            if article.role == "near-miss"
        }

    def duplicate_pairs(self, port: int = 80) -> set[tuple[str, str]]:
        """Every unordered pair of members of one family, as (lesser URL, greater URL):
        the positives a pairwise duplicate detector should report."""
        return {
            (a, b)
            for urls in self.duplicate_families(port).values()
            for a in urls
            for b in urls
            if a < b
        }

    def duplicate_pair_kinds(self, port: int = 80) -> dict[tuple[str, str], str]:
        """Each pair of ``duplicate_pairs`` -> its ``PAIR_KINDS`` entry, from the
        roles of its two pages (``pair_kind``: edited > print > session >
        retemplated > exact)."""
        kinds: dict[tuple[str, str], str] = {}
        for members in self._family_members(port).values():
            for (a, role_a), (b, role_b) in itertools.combinations(members, 2):
                kinds[(min(a, b), max(a, b))] = pair_kind(role_a, role_b)
        return kinds

    # -- page requisites ---------------------------------------------------

    @property
    def cdn_host(self) -> str | None:
        """The host whose ``/shared/banner.png`` other hosts' pages show (None:
        no requisites, or a one-host web)."""
        return next((h.name for h in self.hosts if h.requisites and h.requisites.is_cdn), None)

    def requisites_of(self, url: str, port: int, agent: str | None = None) -> list[Requisite]:
        """What the page (or stylesheet) at ``url`` needs to render, each URL once.

        The page's own references in document order, then, breadth first,
        what they reference in turn (the stylesheets' ``@import`` and
        ``url()``), each with the URL that referenced it first and whether
        robots.txt lets ``agent`` (default: the model's) fetch it. Empty for
        anything but an ordinary 200 page or a stylesheet of a web with requisites.
        """
        parts = urlsplit(url)
        info = self.host(parts.hostname or "")
        if info is None:
            return []
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return [
            Requisite(
                make_url(ref.host, ref.path, port),
                ref.kind,
                not self.is_disallowed(ref.host, ref.path, agent),
                make_url(*referrer, port),
            )
            for ref, referrer in requisite_closure(self.host, info.name, path)
        ]

    def all_requisites(
        self, port: int, pages: Collection[tuple[str, str]] | None = None, agent: str | None = None
    ) -> list[Requisite]:
        """Every requisite of the web's pages, each URL once (as first met, in model order).

        ``pages`` limits it to those of the given (host, path) pages -- pass
        ``reachable(seeds)`` for what a crawl from ``seeds`` meets; without
        it, every ordinary page counts, whether a crawler may fetch it or not.
        """
        found: dict[str, Requisite] = {}
        for host in self.hosts:
            for page in host.pages:
                if pages is None or (host.name, page.path) in pages:
                    url = make_url(host.name, page.path, port)
                    for requisite in self.requisites_of(url, port, agent):
                        found.setdefault(requisite.url, requisite)
        return list(found.values())

    def identical_requisites(self, port: int) -> list[list[str]]:
        """Groups of requisite URLs serving byte-identical bodies (each logo and
        its copy), in model order; read off the bodies themselves."""
        groups: dict[bytes, list[str]] = defaultdict(list)
        for requisite in self.all_requisites(port):
            parts = urlsplit(requisite.url)
            info = self.host(parts.hostname or "")
            served = None if info is None else requisite_file(info, parts.path)
            if served is not None:
                groups[hashlib.sha256(served.body).digest()].append(requisite.url)
        return [urls for urls in groups.values() if len(urls) > 1]
