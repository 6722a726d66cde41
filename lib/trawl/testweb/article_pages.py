"""The near-duplicate families' article pages: from the plan to pages with links.

``trawl.testweb.dups`` decides what is published where: one ``Planned``
page per URL (host, path, the ``Story`` it tells, its ``Article`` record).
A ``Publisher`` then builds each ``Page`` with the links its template
places (``Article.slots``): the site's menu and footer (drawn once per host:
a site's menu is the same on every page), up to ``RELATED`` other articles
of the host (none of the same family, padded with ordinary pages to
``MIN_RELATED``), a print link on the original and a source link on a
syndicated or edited copy. Session URLs and exact copies repeat their
original's links and a print version has only its link back, so the bytes
of an exact copy are the original's. Last, ordinary pages gain the links
that lead a crawler to the articles: each page of ``LISTED_ROLES`` is linked
from its host's homepage and from one page the homepage links to, each
session URL from one such page, so every article is at most two hops from
its host's homepage.

The publisher draws from the random stream the plan was drawn from,
continuing where the plan left it, so one seed gives one web.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass, replace

from trawl.testweb.prose import Topic
from trawl.testweb.records import Article, HostInfo, Link, Page
from trawl.testweb.templates import TEMPLATES

#: Related articles listed per page (padded with ordinary pages to ``MIN_RELATED``).
RELATED, MIN_RELATED = 3, 2
#: Roles whose pages get links from ordinary pages (print versions are
#: reached from their article, session URLs one token per linking page).
LISTED_ROLES = ("original", "syndicated", "copy", "edited", "near-miss")


def slug(title: str, article_id: int) -> str:
    """ "Council approves new grid plan", 1004 -> "council-approves-new-grid-plan-1004"."""
    words = re.findall(r"[a-z0-9]+", title.lower())[:8]
    return "-".join([*words, str(article_id)])


@dataclass(frozen=True)
class Story:
    """One article's text and byline, shared by its variants.

    ``boilerplate`` is the kind of the host's paragraph among ``paragraphs``
    ("" for none) and ``frozen`` its index, which edits leave alone.
    """

    id: int
    topic: Topic
    headline: str
    paragraphs: tuple[str, ...]
    byline: str
    boilerplate: str = ""
    frozen: int | None = None

    @property
    def slug(self) -> str:
        return slug(self.headline, self.id)

    @property
    def text(self) -> str:
        return "\n".join(self.paragraphs)


@dataclass(frozen=True)
class Planned:
    """An article page before its links are known.

    ``parent`` is the original's path on the same host: the page a session
    URL or a copy repeats the links of, the page a print version links back to.
    """

    host: int
    path: str
    story: Story
    article: Article
    parent: str = ""


class Publisher:
    """Builds the planned pages and the links ordinary pages gain.

    ``origins`` maps a story id to its original's plan (the target of a
    copy's source link); ``rng`` is the families' stream.
    """

    def __init__(
        self,
        hosts: tuple[HostInfo, ...],
        rng: random.Random,
        planned: list[Planned],
        origins: dict[int, Planned],
    ) -> None:
        self.hosts, self.rng, self.planned, self.origins = hosts, rng, planned, origins
        self.menus: dict[tuple[int, bool], list[Link]] = {}

    def linkable(self, host: int) -> list[str]:
        """Ordinary pages of ``host`` every crawler but badbot reaches by links."""
        info = self.hosts[host]
        hidden = set(info.sitemaps.hidden) if info.sitemaps else set()
        return [p for p in info.open_paths if p not in hidden and info.page(p) is not None]

    def site_links(self, host: int, labels: tuple[str, ...], home: bool) -> list[Link]:
        """One link per label to ordinary pages of ``host`` (the first to "/" if ``home``).

        Drawn once per host and kind: a site's menu is the same on every page.
        """
        key = (host, home)
        if key not in self.menus:
            self.menus[key] = self._draw_site_links(host, labels, home)
        return self.menus[key]

    def _draw_site_links(self, host: int, labels: tuple[str, ...], home: bool) -> list[Link]:
        paths = self.linkable(host)
        rest = paths[1:] or paths
        picks = self.rng.sample(rest, len(rest))
        targets = (["/"] if home else []) + [picks[n % len(picks)] for n in range(len(labels))]
        name = self.hosts[host].name
        return [Link(name, target, "root") for target in targets[: len(labels)]]

    def related(self, planned: Planned) -> list[tuple[Link, str]]:
        """Other articles of the host (not of the same story or family), else ordinary pages."""
        name = self.hosts[planned.host].name
        others = [
            p
            for p in self.planned
            if p.host == planned.host
            and p.article.role in ("original", "syndicated", "near-miss")
            and p.story.id != planned.story.id
            and (not planned.article.family or p.article.family != planned.article.family)
        ]
        picked = self.rng.sample(others, min(RELATED, len(others)))
        chosen = [(Link(name, p.path, "root"), p.story.headline) for p in picked]
        for path in self.linkable(planned.host)[1 : 1 + MIN_RELATED - len(chosen)]:
            page = self.hosts[planned.host].page(path)
            chosen.append((Link(name, path, "root"), page.title if page else path))
        return chosen

    def story_links(self, planned: Planned) -> list[tuple[Link, str, str]]:
        """(link, slot, anchor) of a page in its template: menu, related, tools, footer."""
        tpl, host = TEMPLATES[planned.article.template], planned.host
        nav = self.site_links(host, tpl.nav, home=True)
        out = [(link, "nav", label) for link, label in zip(nav, tpl.nav, strict=False)]
        out += [(link, "related", anchor) for link, anchor in self.related(planned)]
        name, role = self.hosts[host].name, planned.article.role
        if role == "original":
            print_link = Link(name, f"/print/{planned.story.slug}", "root")
            out.append((print_link, "print", "Print this article"))
        if role in ("syndicated", "edited"):
            out.append(self.source_link(planned))
        footer = self.site_links(host, tpl.footer_links, home=False)
        out += [
            (link, "footer", label) for link, label in zip(footer, tpl.footer_links, strict=True)
        ]
        return out

    def source_link(self, planned: Planned) -> tuple[Link, str, str]:
        """The link of a copy to the original: across hosts "Originally
        published by" (syndicated) or "Via" (aggregator); on the origin host
        (correction, update) to the earlier version."""
        origin = self.origins[planned.story.id]
        if origin.host == planned.host:
            link = Link(self.hosts[origin.host].name, origin.path, "root")
            return link, "source", "Earlier version of this article"
        brand = TEMPLATES[origin.article.template].brand
        link = Link(self.hosts[origin.host].name, origin.path, "absolute")
        credit = "Originally published by" if planned.article.role == "syndicated" else "Via"
        return link, "source", f"{credit} {brand}"

    def build(self, planned: Planned, built: dict[tuple[int, str], Page]) -> Page:
        """The page of ``planned``; session URLs and copies repeat the original's links."""
        story, article = planned.story, planned.article
        if article.role in ("session", "copy"):
            like = built[(planned.host, planned.parent)]
            assert like.article is not None
            dressed = replace(article, slots=like.article.slots, anchors=like.article.anchors)
            return Page(planned.path, 200, story.headline, story.text, like.links, article=dressed)
        if article.role == "print":
            back = Link(self.hosts[planned.host].name, planned.parent, "root")
            dressed = replace(article, slots=("back",), anchors=("Back to the article",))
            return Page(planned.path, 200, story.headline, story.text, (back,), article=dressed)
        links = self.story_links(planned)
        dressed = replace(
            article, slots=tuple(s for _, s, _ in links), anchors=tuple(a for _, _, a in links)
        )
        hrefs = tuple(link for link, _, _ in links)
        return Page(planned.path, 200, story.headline, story.text, hrefs, article=dressed)

    def near_home(self, host: int) -> list[str]:
        """The homepage and the ordinary pages it links to (followed, same host)."""
        info, linkable = self.hosts[host], set(self.linkable(host))
        home = info.page("/")
        near = [
            link.path
            for link in (home.links if home is not None else ())
            if link.host == info.name and not link.nofollow and link.path in linkable
        ]
        return ["/", *dict.fromkeys(path for path in near if path != "/")]

    def inbound(self) -> dict[tuple[int, str], list[Link]]:
        """Links ordinary pages gain: the homepage and one more page for each
        listed article, one page per session token, all within a hop of the
        homepage, so each article is at most two hops from its host's homepage."""
        links: dict[tuple[int, str], list[Link]] = defaultdict(list)
        for planned in self.planned:
            role, host = planned.article.role, planned.host
            if role == "print":
                continue
            sources = ["/"] if role in LISTED_ROLES else []
            sources.append(self.rng.choice(self.near_home(host)))
            for source in dict.fromkeys(sources):
                links[(host, source)].append(Link(self.hosts[host].name, planned.path, "root"))
        return links

    def publish(self) -> tuple[HostInfo, ...]:
        """Every host with its article pages appended and its ordinary pages' new links."""
        built: dict[tuple[int, str], Page] = {}
        for planned in self.planned:  # an original is planned before its variants
            built[(planned.host, planned.path)] = self.build(planned, built)
        inbound = self.inbound()
        hosts = []
        for i, host in enumerate(self.hosts):
            pages = tuple(
                replace(p, links=p.links + tuple(inbound[(i, p.path)]))
                if (i, p.path) in inbound
                else p
                for p in host.pages
            )
            new = tuple(page for (h, _), page in built.items() if h == i)
            hosts.append(replace(host, pages=pages + new) if new else host)
        return tuple(hosts)
