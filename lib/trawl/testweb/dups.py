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
  shortlink ``/?p=<id>``;
* 0-2 **edited** copies (``EDITED``: four families in five have one or two),
  of distinct kinds (``Article.edit``, one of ``records.EDIT_KINDS``; the
  texts are made by ``trawl.testweb.edits``, which changes from one word up
  to about 10% of the sentences): a *correction* (a few words of one
  sentence, often a correction note) at ``<section><slug>-corrected.html``
  and an *update* (sentences replaced by new ones, maybe one added) at
  ``/updates/<yyyy>/<mm>/<dd>/<slug>.html``, both on the origin host in its
  template, dated later and linking to the original ("Earlier version of
  this article"); an aggregator's *trimmed* copy (the last sentences cut,
  sometimes a couple swapped) and its *extended* copy (an intro or a
  comment of a sentence or two), each on a host that carries no other member
  (left out if no such host publishes), in a template no member uses where
  one is left, linking to the original ("Via ...").

Against them stand the **near-misses**, the negatives, of two kinds. *Topic*
near-misses: 0-2 per family, other articles on the same topic, in the same
template and title pattern, on a host of the family. A detector that
fingerprints the template instead of the article pairs them with the family;
one that ignores the template does not. *Boilerplate* near-misses: in
``BOILERPLATE_SHARE`` of the families the origin host puts a paragraph of
its own inside the article text (``Article.boilerplate``: the byline's
"About the author" bio, a disclosure, a newsletter pitch;
``trawl.testweb.boilerplate``), at the start, after the second paragraph
or at the end as the host always places that kind, and 1-2 other articles
of that host on the same topic carry the same paragraph at the same place
(a bio only under the same byline). Main-text extraction keeps the
paragraph, so such a pair shares 80-100 words of text and nothing else of
its article. Every member of the family carries the paragraph too (edits
leave it alone), and so may the articles of other families on that host.

Every article page is a ``Page`` carrying an ``Article`` record, from which
``WebModel`` reads the ground truth; this module plans the pages and
``trawl.testweb.article_pages`` builds them with their links. Pages go only
to hosts that let crawlers in, answer at once and never push back
(``publishes``), under paths no robots rule of the generator touches, and
are linked from their host's homepage and another ordinary page near it
(session URLs: one ordinary page per token), so a crawl from the seeds
reaches each at most two hops after its host's homepage, and sitemaps list
them like any page. They never change (``change_rate`` 0.0), so an exact
copy stays exact at every logical time.

All draws come from a ``random.Random`` keyed by ``DUPS_LABEL`` and the seed
(and one per article for its text), after the rest of the web is drawn, so
with no families the web is exactly what it was, and with families the
ordinary pages only gain links. The edited copies and the boilerplate
paragraphs and near-misses draw from streams of their own, one per family
(which edits, where, how dressed), one per edited text and one per site
paragraph, so the members and near-misses a family had before they existed
are still drawn, on the same hosts and in the same dress.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from trawl.testweb.article_pages import Planned, Publisher, Story
from trawl.testweb.boilerplate import boilerplate_paragraph
from trawl.testweb.edits import edited_text
from trawl.testweb.prose import TOPICS, Topic, article_text, headline, person
from trawl.testweb.records import BOILERPLATE_KINDS, EDIT_KINDS, Article, HostInfo
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
#: Edited copies per family, drawn uniformly from this tuple (kinds without
#: repeats); the kinds a correction or an update is (on the origin host).
EDITED = (0, 1, 1, 2, 2)
ON_ORIGIN = ("correction", "update")
#: Share of families whose original carries a paragraph of its host, and the
#: near-misses carrying it too (drawn uniformly); where a host puts each kind.
BOILERPLATE_SHARE = 0.6
BOILERPLATE_NEAR_MISSES = (1, 1, 2)
BOILERPLATE_AT = {"bio": ("end",), "disclaimer": ("start", "end"), "newsletter": ("middle", "end")}
FIRST_ID = 1001
PUBLISHED_FROM = datetime(2025, 11, 1, tzinfo=UTC)
PUBLISHED_SPAN = timedelta(days=120)
_MINUTE = timedelta(minutes=1)


def publishes(host: HostInfo) -> bool:
    """Whether ``host`` carries articles: robots.txt lets crawlers in (no 5xx),
    it answers at once and never pushes back, so every variant can be fetched."""
    return host.robots_status < 500 and host.throttle is None and not host.slow


def _comments(rng: random.Random) -> int:
    return min(999, int(rng.expovariate(1 / 25)))


class _Press:
    """Scratch state while families are drawn: hosts, their templates, planned pages."""

    def __init__(self, seed: int, hosts: tuple[HostInfo, ...]) -> None:
        self.seed, self.hosts = seed, hosts
        self.rng = random.Random(f"{DUPS_LABEL}/{seed}")
        self.eligible = [i for i, h in enumerate(hosts) if publishes(h)]
        if not self.eligible:
            raise ValueError("no host can carry articles (all fail robots.txt or push back)")
        self.templates = {i: self.rng.randrange(len(TEMPLATES)) for i in self.eligible}
        self.planned: list[Planned] = []
        self.origins: dict[int, Planned] = {}
        self.next_id = FIRST_ID

    def story(self, topic: Topic) -> Story:
        """A new article on ``topic``, its text drawn from its own stream."""
        article_id, self.next_id = self.next_id, self.next_id + 1
        rng = random.Random(f"{DUPS_LABEL}/story/{self.seed}/{article_id}")
        title = headline(rng, topic)
        return Story(article_id, topic, title, article_text(rng, topic), person(rng))

    def with_boilerplate(self, host: int, story: Story, kind: str) -> Story:
        """``story`` with the ``kind`` paragraph of ``host`` where the host puts it.

        The paragraph and its place are drawn from a stream keyed by the host,
        the kind and what the paragraph belongs to (the byline of a bio, the
        topic of a newsletter, nothing more for a disclosure), so every
        article that carries it carries the same words in the same place.
        """
        name, brand = self.hosts[host].name, TEMPLATES[self.templates[host]].brand
        key = {"bio": story.byline, "newsletter": story.topic.label}.get(kind, "")
        rng = random.Random(f"{DUPS_LABEL}/boilerplate/{self.seed}/{name}/{kind}/{key}")
        text = boilerplate_paragraph(rng, kind, brand, story.byline, story.topic)
        at, prose = rng.choice(BOILERPLATE_AT[kind]), story.paragraphs
        index = {"start": 0, "middle": min(2, len(prose)), "end": len(prose)}[at]
        paragraphs = (*prose[:index], text, *prose[index:])
        return replace(story, paragraphs=paragraphs, boilerplate=kind, frozen=index)

    def dress(
        self, host: int, story: Story, family: str, role: str, rng: random.Random | None = None
    ) -> Article:
        """A fresh publication time, comment count and ad for ``story`` on ``host``
        (drawn from ``rng``, by default the main stream)."""
        rng = rng or self.rng
        published = PUBLISHED_FROM + timedelta(minutes=rng.randrange(PUBLISHED_SPAN // _MINUTE))
        tpl = self.templates[host]
        topic = story.topic.label
        ad = rng.randrange(len(ADS))
        comments = _comments(rng)
        return Article(family, role, tpl, topic, story.byline, published, comments, ad,
                       boilerplate=story.boilerplate)  # fmt: skip

    def place(self, host: int, story: Story, article: Article) -> Planned:
        path = f"{TEMPLATES[article.template].section}{story.slug}.html"
        planned = Planned(host, path, story, article)
        self.planned.append(planned)
        return planned

    def family(self, k: int) -> None:
        """Family ``dup-<k>``: the original, its variants and its near-misses.

        What came before edited copies and boilerplate is drawn from the main
        stream as it was; those two from the family's own stream (``own``).
        """
        rng, family = self.rng, f"dup-{k:03d}"
        own = random.Random(f"{DUPS_LABEL}/family/{self.seed}/{k}")
        topic = rng.choice(TOPICS)
        story, origin = self.story(topic), rng.choice(self.eligible)
        if own.random() < BOILERPLATE_SHARE:
            story = self.with_boilerplate(origin, story, own.choice(BOILERPLATE_KINDS))
        original = self.place(origin, story, self.dress(origin, story, family, "original"))
        self.origins[story.id] = original
        hosts = [origin, *self.syndicate(original)]
        print_version = replace(original.article, role="print", ad=-1)
        self.planned.append(
            Planned(origin, f"/print/{story.slug}", story, print_version, original.path)
        )
        if rng.random() < SESSION_SHARE:
            self.sessions(original)
        if rng.random() < COPY_SHARE:
            copy = replace(original.article, role="copy", copy_of=original.path)
            self.planned.append(Planned(origin, f"/?p={story.id}", story, copy, original.path))
        for _ in range(rng.choice(NEAR_MISSES)):
            self.near_miss(family, topic, rng.choice(hosts))
        for kind in own.sample(EDIT_KINDS, own.choice(EDITED)):
            self.edited(own, original, kind, hosts)
        if story.boilerplate:
            for _ in range(own.choice(BOILERPLATE_NEAR_MISSES)):
                self.boilerplate_near_miss(own, original)

    def syndicate(self, original: Planned) -> list[int]:
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

    def sessions(self, original: Planned) -> None:
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
                Planned(original.host, path, original.story, article, original.path)
            )

    def near_miss(self, family: str, topic: Topic, host: int) -> None:
        story = self.story(topic)
        dress = self.dress(host, story, "", "near-miss")
        self.place(host, story, replace(dress, resembles=family))

    def edited(self, rng: random.Random, original: Planned, kind: str, carrying: list[int]) -> None:
        """The ``kind`` copy of ``original``: on the origin host at a URL of its
        own (correction, update), else on an aggregator, a host not in
        ``carrying`` (the hosts with a member), which it joins."""
        story, origin = original.story, original.host
        host = origin if kind in ON_ORIGIN else self.aggregator(rng, carrying)
        if host is None:
            return
        text_rng = random.Random(f"{DUPS_LABEL}/edit/{self.seed}/{story.id}/{kind}")
        source = TEMPLATES[original.article.template].brand
        paragraphs = edited_text(
            text_rng, kind, story.paragraphs, story.frozen, story.topic, source
        )
        copy = replace(story, paragraphs=paragraphs, frozen=None)
        later = original.article.published + timedelta(minutes=rng.randint(20, 4320))
        dress = self.dress(host, copy, original.article.family, "edited", rng)
        article = replace(dress, published=later, edit=kind)
        if kind == "correction":
            path = original.path.removesuffix(".html") + "-corrected.html"
        elif kind == "update":
            path = f"/updates/{later:%Y/%m/%d}/{story.slug}.html"
        else:
            path = f"{TEMPLATES[article.template].section}{story.slug}.html"
        self.planned.append(Planned(host, path, copy, article))

    def aggregator(self, rng: random.Random, carrying: list[int]) -> int | None:
        """A host not in ``carrying``, in a template none of them uses if one is
        left (None: no host left); it joins ``carrying``."""
        others = [i for i in self.eligible if i not in carrying]
        used = {self.templates[i] for i in carrying}
        fresh = [i for i in others if self.templates[i] not in used]
        if not others:
            return None
        host = rng.choice(fresh or others)
        carrying.append(host)
        return host

    def boilerplate_near_miss(self, rng: random.Random, original: Planned) -> None:
        """Another article of the origin host on the family's topic carrying the
        same paragraph of the host in the same place (a bio: by the same author)."""
        kind, host = original.story.boilerplate, original.host
        story = self.story(original.story.topic)
        if kind == "bio":
            story = replace(story, byline=original.story.byline)
        story = self.with_boilerplate(host, story, kind)
        dress = self.dress(host, story, "", "near-miss", rng)
        self.place(host, story, replace(dress, resembles=original.article.family))


def add_families(seed: int, hosts: tuple[HostInfo, ...], families: int) -> tuple[HostInfo, ...]:
    """``hosts`` with ``families`` near-duplicate families and their near-misses added.

    With ``families`` 0 the hosts are returned as they are.
    """
    if families <= 0:
        return hosts
    press = _Press(seed, hosts)
    for k in range(families):
        press.family(k)
    return Publisher(hosts, press.rng, press.planned, press.origins).publish()
