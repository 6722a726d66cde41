"""Near-duplicate families in the test web: one article, many URLs, and the truth about them.

Deduplication is judged by precision and recall of the pairs it reports, so
the test web publishes articles in the variants the real web has, and keeps
the answer. A *family* is one article (``trawl.testweb.prose``: 300-800
words of news copy on one topic) published as:

* the **original**, in the site template of its host
  (``trawl.testweb.templates``), at ``<section><slug>.html``;
* 1-3 **syndicated** copies on other hosts, each in a template no other
  member uses -- other menu, header, sidebar, related list, footer -- and
  with its own publication time, ad and comment count, linking back to the
  original ("Originally published by ...");
* a **print** version at ``/print/<slug>``: the bare article;
* in half the families, 2-3 **session**-id URLs of the original
  (``?sessionid=<token>``, ``?sid=``, ``?PHPSESSID=`` ...), one token per
  link, each served with its own ad rotation, comment count and token (in a
  sign-in form): the same article, not the same bytes;
* in 40%, an exact **copy**: the original's bytes at a WordPress-style
  shortlink ``/?p=<id>``.

Against them stand the **near-misses**, the negatives: 0-2 per family, other
articles on the same topic, in the same template and title pattern, on a
host of the family. A detector that fingerprints the template instead of
the article pairs them with the family; one that ignores the template does not.

Every article page is a ``Page`` carrying an ``Article`` record, from which
``WebModel`` reads the ground truth. Pages go only to hosts that let
crawlers in, answer at once and never push back (``publishes``), under paths
no robots rule of the generator touches, and are linked from their host's
homepage and another ordinary page near it (session URLs: one ordinary page
per token), so a crawl from the seeds reaches each at most two hops after
its host's homepage, and sitemaps list them like any page. They never change
(``change_rate`` 0.0), so an exact copy stays exact at every logical time.

All draws come from a ``random.Random`` keyed by ``DUPS_LABEL`` and the seed
(and one per article for its text), after the rest of the web is drawn, so
with no families the web is exactly what it was, and with families the
ordinary pages only gain links.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from trawl.testweb.prose import TOPICS, Topic, article_text, headline, person
from trawl.testweb.records import Article, HostInfo, Link, Page
from trawl.testweb.templates import ADS, TEMPLATES

DUPS_LABEL = "trawl.testweb.dups.1"
#: Syndicated copies per family (bounds), and the shares of families with
#: session-id URLs (2-3 of them) and with an exact copy.
SYNDICATED = (1, 3)
SESSION_SHARE = 0.5
SESSION_LINKS = (2, 3)
SESSION_PARAMS = ("sessionid", "sid", "PHPSESSID", "session_id", "jsessionid")
COPY_SHARE = 0.4
#: Near-misses per family, drawn uniformly from this tuple.
NEAR_MISSES = (0, 1, 1, 2)
FIRST_ID = 1001
PUBLISHED_FROM = datetime(2025, 11, 1, tzinfo=UTC)
PUBLISHED_SPAN = timedelta(days=120)
_MINUTE = timedelta(minutes=1)
#: Related articles listed per page (padded with ordinary pages to ``MIN_RELATED``).
RELATED, MIN_RELATED = 3, 2
#: Roles whose pages get links from ordinary pages (print versions are
#: reached from their article, session URLs one token per linking page).
LISTED_ROLES = ("original", "syndicated", "copy", "near-miss")


def publishes(host: HostInfo) -> bool:
    """Whether ``host`` carries articles: robots.txt lets crawlers in (no 5xx),
    it answers at once and never pushes back, so every variant can be fetched."""
    return host.robots_status < 500 and host.throttle is None and not host.slow


def slug(title: str, article_id: int) -> str:
    """ "Council approves new grid plan", 1004 -> "council-approves-new-grid-plan-1004"."""
    words = re.findall(r"[a-z0-9]+", title.lower())[:8]
    return "-".join([*words, str(article_id)])


def _comments(rng: random.Random) -> int:
    return min(999, int(rng.expovariate(1 / 25)))


@dataclass(frozen=True)
class _Story:
    """One article's text and byline, shared by its variants."""

    id: int
    topic: Topic
    headline: str
    text: str
    byline: str

    @property
    def slug(self) -> str:
        return slug(self.headline, self.id)


@dataclass(frozen=True)
class _Planned:
    """An article page before its links are known.

    ``parent`` is the original's path on the same host: the page a session
    URL or a copy repeats the links of, the page a print version links back to.
    """

    host: int
    path: str
    story: _Story
    article: Article
    parent: str = ""


class _Press:
    """Scratch state while families are drawn: hosts, their templates, planned pages."""

    def __init__(self, seed: int, hosts: tuple[HostInfo, ...]) -> None:
        self.seed, self.hosts = seed, hosts
        self.rng = random.Random(f"{DUPS_LABEL}/{seed}")
        self.eligible = [i for i, h in enumerate(hosts) if publishes(h)]
        if not self.eligible:
            raise ValueError("no host can carry articles (all fail robots.txt or push back)")
        self.templates = {i: self.rng.randrange(len(TEMPLATES)) for i in self.eligible}
        self.planned: list[_Planned] = []
        self.origins: dict[int, _Planned] = {}
        self.menus: dict[tuple[int, bool], list[Link]] = {}
        self.next_id = FIRST_ID

    # -- phase 1: what is published where --------------------------------

    def story(self, topic: Topic) -> _Story:
        """A new article on ``topic``, its text drawn from its own stream."""
        article_id, self.next_id = self.next_id, self.next_id + 1
        rng = random.Random(f"{DUPS_LABEL}/story/{self.seed}/{article_id}")
        title = headline(rng, topic)
        return _Story(article_id, topic, title, "\n".join(article_text(rng, topic)), person(rng))

    def dress(self, host: int, story: _Story, family: str, role: str) -> Article:
        """A fresh publication time, comment count and ad for ``story`` on ``host``."""
        rng = self.rng
        published = PUBLISHED_FROM + timedelta(minutes=rng.randrange(PUBLISHED_SPAN // _MINUTE))
        tpl = self.templates[host]
        topic = story.topic.label
        ad = rng.randrange(len(ADS))
        return Article(family, role, tpl, topic, story.byline, published, _comments(rng), ad)

    def place(self, host: int, story: _Story, article: Article) -> _Planned:
        path = f"{TEMPLATES[article.template].section}{story.slug}.html"
        planned = _Planned(host, path, story, article)
        self.planned.append(planned)
        return planned

    def family(self, k: int) -> None:
        """Family ``dup-<k>``: the original, its variants and its near-misses."""
        rng, family = self.rng, f"dup-{k:03d}"
        topic = rng.choice(TOPICS)
        story, origin = self.story(topic), rng.choice(self.eligible)
        original = self.place(origin, story, self.dress(origin, story, family, "original"))
        self.origins[story.id] = original
        hosts = [origin, *self.syndicate(original)]
        print_version = replace(original.article, role="print", ad=-1)
        self.planned.append(
            _Planned(origin, f"/print/{story.slug}", story, print_version, original.path)
        )
        if rng.random() < SESSION_SHARE:
            self.sessions(original)
        if rng.random() < COPY_SHARE:
            copy = replace(original.article, role="copy", copy_of=original.path)
            self.planned.append(_Planned(origin, f"/?p={story.id}", story, copy, original.path))
        for _ in range(rng.choice(NEAR_MISSES)):
            self.near_miss(family, topic, rng.choice(hosts))

    def syndicate(self, original: _Planned) -> list[int]:
        """Copies on other hosts, each in a template no member of the family uses yet."""
        rng, used = self.rng, {self.templates[original.host]}
        wanted = rng.randint(*SYNDICATED)
        others = [i for i in self.eligible if i != original.host]
        rng.shuffle(others)
        chosen: list[int] = []
        for host in others:
            if len(chosen) < wanted and self.templates[host] not in used:
                used.add(self.templates[host])
                chosen.append(host)
        for host in chosen:
            dress = self.dress(host, original.story, original.article.family, "syndicated")
            later = original.article.published + timedelta(minutes=rng.randint(20, 2880))
            self.place(host, original.story, replace(dress, published=later))
        return chosen

    def sessions(self, original: _Planned) -> None:
        """Session-id URLs of the original: one token each, own ad and comment count."""
        rng = self.rng
        name = rng.choice(SESSION_PARAMS)
        for _ in range(rng.randint(*SESSION_LINKS)):
            session = f"{name}={rng.getrandbits(64):016x}"
            comments = original.article.comments + rng.randint(0, 3)
            article = replace(original.article, role="session", session=session, comments=comments)
            article = replace(article, ad=rng.randrange(len(ADS)))
            path = f"{original.path}?{session}"
            self.planned.append(
                _Planned(original.host, path, original.story, article, original.path)
            )

    def near_miss(self, family: str, topic: Topic, host: int) -> None:
        story = self.story(topic)
        dress = self.dress(host, story, "", "near-miss")
        self.place(host, story, replace(dress, resembles=family))

    # -- phase 2: links and pages ----------------------------------------

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

    def related(self, planned: _Planned) -> list[tuple[Link, str]]:
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

    def story_links(self, planned: _Planned) -> list[tuple[Link, str, str]]:
        """(link, slot, anchor) of a page in its template: menu, related, tools, footer."""
        tpl, host = TEMPLATES[planned.article.template], planned.host
        nav = self.site_links(host, tpl.nav, home=True)
        out = [(link, "nav", label) for link, label in zip(nav, tpl.nav, strict=False)]
        out += [(link, "related", anchor) for link, anchor in self.related(planned)]
        name, role = self.hosts[host].name, planned.article.role
        if role == "original":
            print_link = Link(name, f"/print/{planned.story.slug}", "root")
            out.append((print_link, "print", "Print this article"))
        if role == "syndicated":
            origin = self.origins[planned.story.id]
            source = Link(self.hosts[origin.host].name, origin.path, "absolute")
            brand = TEMPLATES[origin.article.template].brand
            out.append((source, "source", f"Originally published by {brand}"))
        footer = self.site_links(host, tpl.footer_links, home=False)
        out += [
            (link, "footer", label) for link, label in zip(footer, tpl.footer_links, strict=True)
        ]
        return out

    def build(self, planned: _Planned, built: dict[tuple[int, str], Page]) -> Page:
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

    def finish(self) -> tuple[HostInfo, ...]:
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


def add_families(seed: int, hosts: tuple[HostInfo, ...], families: int) -> tuple[HostInfo, ...]:
    """``hosts`` with ``families`` near-duplicate families and their near-misses added.

    With ``families`` 0 the hosts are returned as they are.
    """
    if families <= 0:
        return hosts
    press = _Press(seed, hosts)
    for k in range(families):
        press.family(k)
    return press.finish()
