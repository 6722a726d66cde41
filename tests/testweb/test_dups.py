"""Near-duplicate families in the test web: what is served, and the ground truth.

One small web (seed 44: 20 hosts on 5 IPs, six families with syndicated
copies, print versions, session-id URLs, exact copies, edited copies and
near-misses of both kinds) is served for the module. Requests go over real
HTTP to the host's pinned loopback address with a Host header, as a crawler
using the written hosts file would, and pages are read with a small HTML
parser that sorts their text into the article and the template around it.
The edits and the near-misses' shared paragraphs are also checked on a
larger web (40 families) that is generated but not served.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import itertools
import math
import re
from collections import Counter, deque
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest

from trawl import config
from trawl.parse.html import parse_page
from trawl.testweb import EPOCH, TestWeb, WebModel
from trawl.testweb.__main__ import DUP_FAMILIES
from trawl.testweb.dups import ON_ORIGIN, SESSION_PARAMS, add_families
from trawl.testweb.model import PAIR_KINDS, make_url
from trawl.testweb.prose import MAX_WORDS, MIN_WORDS, sentences
from trawl.testweb.records import EDIT_KINDS, Article, HostInfo, Page
from trawl.testweb.render import respond

SEED = 44
FAMILIES = 6
AGENT = "trawl/0.1 (+http://example.invalid/bot)"


def dups_model(seed: int = SEED, families: int = FAMILIES) -> WebModel:
    return WebModel.generate(seed, hosts=20, ips=5, pages_per_host=(5, 20), dup_families=families)


@pytest.fixture(scope="module")
def model() -> WebModel:
    return dups_model()


@pytest.fixture(scope="module")
def big() -> WebModel:
    """40 families on 60 hosts: enough for every kind of edit and near-miss."""
    return WebModel.generate(SEED, hosts=60, ips=15, pages_per_host=(5, 20), dup_families=40)


@pytest.fixture(scope="module")
def web(model: WebModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    with TestWeb(model, tmp_path_factory.mktemp("dupweb")) as served:
        yield served


def split(url: str) -> tuple[str, str]:
    """(host, path with query) of a model URL."""
    parts = urlsplit(url)
    return str(parts.hostname), parts.path + (f"?{parts.query}" if parts.query else "")


def fetch(web: TestWeb, url: str) -> tuple[int, dict[str, str], bytes]:
    host, path = split(url)
    info = web.model.host(host)
    assert info is not None
    conn = http.client.HTTPConnection(info.ip, web.port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{web.port}", "User-Agent": AGENT})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


class Dressing(HTMLParser):
    """A page's text sorted into the article (class-less ``<p>`` of the story)
    and everything else, plus the fields variants differ in."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []
        self.article: list[str] = []
        self.other: list[str] = []
        self.fields: dict[str, str] = {}
        self.hidden: dict[str, str] = {}
        self.print_layout = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden":
            self.hidden[str(a["name"])] = str(a["value"])
        elif tag not in ("meta", "input", "br"):
            self.stack.append((tag, a.get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        text = data.strip()
        if not text or not self.stack:
            return
        tag, css = self.stack[-1]
        in_story = any(t == "article" for t, _ in self.stack) or self.print_layout
        if tag == "p" and not css and in_story and len(text.split()) > 3:
            self.article.append(text)
        else:
            self.other.append(text)
        if tag in ("time", "title") or css in ("comments", "ad", "brand"):
            self.fields[tag if tag in ("time", "title") else css] = text


def dressing(body: bytes) -> Dressing:
    parser = Dressing()
    parser.print_layout = b"<article>" not in body
    parser.feed(body.decode())
    return parser


def article_of(model: WebModel, url: str) -> tuple[HostInfo, Page, Article]:
    host, path = split(url)
    info = model.host(host)
    page = None if info is None else info.page(path)
    assert info is not None and page is not None and page.article is not None
    return info, page, page.article


def role(model: WebModel, url: str) -> str:
    return article_of(model, url)[2].role


def edit(model: WebModel, url: str) -> str:
    return article_of(model, url)[2].edit


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def jaccard(a: AbstractSet[object], b: AbstractSet[object]) -> float:
    return len(a & b) / len(a | b)


def shared_paragraphs(model: WebModel) -> set[str]:
    """Paragraphs in the texts of more than one article (a family, or a
    near-miss): the paragraphs sites repeat under several articles."""
    owners: dict[str, set[str]] = {}
    for host in model.hosts:
        for page in host.pages:
            if page.article is not None:
                owner = page.article.family or host.name + page.path
                for paragraph in page.text.split("\n"):
                    owners.setdefault(paragraph, set()).add(owner)
    return {paragraph for paragraph, found in owners.items() if len(found) > 1}


def prose(page: Page, shared: set[str]) -> str:
    """The article's own text: ``page.text`` without the shared paragraphs."""
    return "\n".join(p for p in page.text.split("\n") if p not in shared)


def served_digest(model: WebModel) -> str:
    """SHA-256 over every response of the web (status, headers, body) at two
    logical times, requested in a fixed order on an explicit clock."""
    digest, now = hashlib.sha256(), 1e6
    for host in model.hosts:
        sitemaps = host.sitemaps.files if host.sitemaps else ()
        for path in ["/robots.txt", *sitemaps, *(p.path for p in host.pages)]:
            for at in (EPOCH, EPOCH + timedelta(days=30)):
                now += 1000.0
                r = respond(model, host.name, path, 8080, host.ip, now, at=at)
                digest.update(f"{host.name}{path} {r.status} {r.headers}\n".encode())
                digest.update(r.body)
    return digest.hexdigest()


# -- the web without families ------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"seed": SEED, "hosts": 20, "ips": 5, "pages_per_host": (5, 20)},
            "b60571c512ac7cf9cb8302120e61c4ba4e583e8a36186fade4fca976165e253a",
        ),
        ({"seed": 1}, "85a8034a3c28dc0b2b0a8919832f706acb6a28ff8bd970415ee70dda17bedeb1"),
    ],
)
def test_default_parameters_serve_the_web_as_before(
    kwargs: dict[str, object], expected: str
) -> None:
    """Digests recorded before families existed (the second is the default web
    the benchmarks and the demo serve): re-pin only for a deliberate change."""
    model = WebModel.generate(**kwargs)  # type: ignore[arg-type]
    assert model == WebModel.generate(**kwargs, dup_families=0)  # type: ignore[arg-type]
    assert not any(p.article for h in model.hosts for p in h.pages)
    assert not model.duplicate_families() and not model.near_miss_pages()
    assert served_digest(model) == expected


def test_families_only_add_pages_and_links_to_ordinary_pages(model: WebModel) -> None:
    bare = dups_model(families=0)
    gained = 0
    for host, before in zip(model.hosts, bare.hosts, strict=True):
        ordinary = [p for p in host.pages if p.article is None]
        assert len(ordinary) == len(before.pages)
        assert all(p.article is not None for p in host.pages[len(before.pages) :])
        for page, old in zip(ordinary, before.pages, strict=True):
            assert page.links[: len(old.links)] == old.links
            assert dataclasses.replace(page, links=old.links) == old
            gained += len(page.links) - len(old.links)
        assert dataclasses.replace(host, pages=before.pages) == before
    assert gained >= len(model.duplicate_families()) + len(model.near_miss_pages())


def test_generation_is_deterministic_for_a_seed(model: WebModel) -> None:
    again = dups_model()
    assert again == model
    assert again.duplicate_families(8080) == model.duplicate_families(8080)
    assert again.exact_copies() == model.exact_copies()
    other = dups_model(SEED + 1)
    assert other.duplicate_families() != model.duplicate_families()


def test_no_host_to_publish_on_is_an_error(model: WebModel) -> None:
    failing = tuple(dataclasses.replace(h, robots_status=503) for h in model.hosts)
    with pytest.raises(ValueError, match="no host can carry articles"):
        add_families(SEED, failing, 1)
    assert add_families(SEED, failing, 0) == failing


def test_cli_default_is_the_config_default() -> None:
    assert DUP_FAMILIES == config.TestwebConfig().dup_families > 0


# -- ground truth --------------------------------------------------------------------


def test_ground_truth_lists_every_member_once_original_first(model: WebModel) -> None:
    families = model.duplicate_families(8080)
    assert list(families) == [f"dup-{k:03d}" for k in range(FAMILIES)]
    members = [u for urls in families.values() for u in urls]
    articles = [
        make_url(h.name, p.path, 8080)
        for h in model.hosts
        for p in h.pages
        if p.article is not None
    ]
    near = model.near_miss_pages(8080)
    assert sorted(members + list(near)) == sorted(articles)  # each page in one place
    for family, urls in families.items():
        roles = [role(model, u) for u in urls]
        assert roles[0] == "original" and roles.count("original") == 1
        assert roles.count("print") == 1 and "syndicated" in roles
        assert {article_of(model, u)[2].family for u in urls} == {family}
        away = [u for u in urls if role(model, u) == "edited" and edit(model, u) not in ON_ORIGIN]
        assert len({split(u)[0] for u in urls}) == 1 + roles.count("syndicated") + len(away)
    assert set(near.values()) <= set(families) and len(near) >= FAMILIES // 2
    assert {r for urls in families.values() for r in map(lambda u: role(model, u), urls)} == {
        "original",
        "syndicated",
        "print",
        "session",
        "copy",
        "edited",
    }


def test_pairs_and_exact_copies_follow_from_the_families(model: WebModel) -> None:
    families = model.duplicate_families()
    pairs = model.duplicate_pairs()
    assert len(pairs) == sum(math.comb(len(urls), 2) for urls in families.values())
    assert all(a < b for a, b in pairs)
    copies = model.exact_copies()
    assert copies
    for group in copies:
        family = next(urls for urls in families.values() if group[0] in urls)
        assert set(group) <= set(family) and role(model, group[0]) == "original"
        assert {role(model, u) for u in group[1:]} == {"copy"}
    near = set(model.near_miss_pages())
    assert not any(a in near or b in near for a, b in pairs)


# -- the articles -----------------------------------------------------------------


def stories(model: WebModel) -> list[Page]:
    return [
        p
        for h in model.hosts
        for p in h.pages
        if p.article is not None and p.article.role in ("original", "near-miss")
    ]


def test_articles_are_news_length_text_drawn_zipf_like(model: WebModel) -> None:
    shared = shared_paragraphs(model)
    texts = [prose(p, shared) for p in stories(model)]
    assert len(texts) >= FAMILIES + 3
    assert all(MIN_WORDS <= len(t.split()) <= MAX_WORDS for t in texts)
    counts = Counter(w for t in texts for w in words(t))
    freqs = [n for _, n in counts.most_common(200)]
    xs = [math.log(rank) for rank in range(1, len(freqs) + 1)]
    ys = [math.log(n) for n in freqs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    assert -1.3 < slope < -0.6  # rank-frequency on log-log: Zipf's law has slope -1
    assert len(counts) > 400


def test_articles_differ_in_text_not_only_in_word_order(model: WebModel) -> None:
    shared = shared_paragraphs(model)
    texts = [prose(p, shared) for p in stories(model)]
    for a, b in itertools.combinations(texts, 2):
        assert jaccard(set(shingles(a)), set(shingles(b))) < 0.1
        assert jaccard(set(words(a)), set(words(b))) < 0.7  # a permutation would be 1.0


# -- served variants ---------------------------------------------------------------


def test_every_article_page_is_served_as_html(model: WebModel, web: TestWeb) -> None:
    urls = [u for urls in model.duplicate_families(web.port).values() for u in urls]
    for url in [*urls, *model.near_miss_pages(web.port)]:
        status, headers, body = fetch(web, url)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert body.startswith(b"<!DOCTYPE html>")


def test_variants_carry_one_article_in_different_dress(model: WebModel, web: TestWeb) -> None:
    for urls in model.duplicate_families(web.port).values():
        variants = [u for u in urls if role(model, u) in ("original", "syndicated")]
        served = {u: dressing(fetch(web, u)[2]) for u in variants}
        original = served[urls[0]]
        assert len(" ".join(original.article).split()) >= MIN_WORDS
        for page in served.values():
            assert page.article == original.article  # the same paragraphs, in order
        brands = [p.fields["brand"] for p in served.values()]
        assert len(set(brands)) == len(brands)  # one template per host
        times = [p.fields["time"] for p in served.values()]
        assert len(set(times)) == len(times)
        dress = {(p.fields["comments"], p.fields["ad"]) for p in served.values()}
        assert len(dress) > 1
        boiler = [set(words(" ".join(p.other))) for p in served.values()]
        for a, b in itertools.combinations(boiler, 2):
            assert jaccard(a, b) < 0.8  # menus, sidebars and footers differ


def test_print_version_is_the_article_and_little_else(model: WebModel, web: TestWeb) -> None:
    for urls in model.duplicate_families(web.port).values():
        printed = next(u for u in urls if role(model, u) == "print")
        assert split(printed)[1].startswith("/print/")
        original, bare = (dressing(fetch(web, u)[2]) for u in (urls[0], printed))
        assert bare.article == original.article
        assert len(" ".join(bare.other).split()) <= 40  # title, headline, byline, link back
        assert len(" ".join(original.other).split()) >= 100
        assert "ad" not in bare.fields and "comments" not in bare.fields


def test_session_urls_serve_the_article_with_their_own_token(model: WebModel, web: TestWeb) -> None:
    seen = 0
    for urls in model.duplicate_families(web.port).values():
        original = dressing(fetch(web, urls[0])[2])
        bodies = {fetch(web, urls[0])[2]}
        for url in (u for u in urls if role(model, u) == "session"):
            name, token = urlsplit(url).query.split("=")
            body = fetch(web, url)[2]
            page = dressing(body)
            assert page.article == original.article
            assert page.hidden == {name: token} and name in SESSION_PARAMS
            assert split(url)[1].split("?")[0] == split(urls[0])[1]
            bodies.add(body)
            seen += 1
        assert len(bodies) == 1 + sum(role(model, u) == "session" for u in urls)
    assert seen >= 2


def test_each_session_token_is_linked_from_one_ordinary_page(model: WebModel) -> None:
    families = model.duplicate_families().values()
    sessions = {u for urls in families for u in urls if role(model, u) == "session"}
    linking: Counter[str] = Counter()
    for host in model.hosts:
        for page in host.pages:
            for url, _ in model.page_links(host.name, page.path, 80):
                if url in sessions:
                    assert page.article is None
                    linking[url] += 1
    assert sessions and set(linking) == sessions and set(linking.values()) == {1}


def test_exact_copies_are_byte_identical_and_the_only_ones(model: WebModel, web: TestWeb) -> None:
    by_body: dict[bytes, list[str]] = {}
    for url in (u for urls in model.duplicate_families(web.port).values() for u in urls):
        by_body.setdefault(fetch(web, url)[2], []).append(url)
    identical = sorted(sorted(g) for g in by_body.values() if len(g) > 1)
    assert identical == sorted(sorted(g) for g in model.exact_copies(web.port))
    copy = model.exact_copies(web.port)[0][1]
    assert urlsplit(copy).query.startswith("p=")


def test_exact_copies_stay_identical_at_every_logical_time(model: WebModel) -> None:
    for group in model.exact_copies():
        for at in (EPOCH, EPOCH + timedelta(days=400)):
            bodies = set()
            for url in group:
                host, path = split(url)
                info = model.host(host)
                assert info is not None
                response = respond(model, host, path, 80, info.ip, 0.0, at=at)
                assert response.version == 0
                bodies.add(response.body)
            assert len(bodies) == 1


def test_near_misses_share_the_template_not_the_text(model: WebModel, web: TestWeb) -> None:
    families = model.duplicate_families(web.port)
    for url, family in model.near_miss_pages(web.port).items():
        host, _, near = article_of(model, url)
        twin = next(
            u for u in families[family] if split(u)[0] == host.name and role(model, u) != "print"
        )
        _, _, member = article_of(model, twin)
        assert (near.template, near.topic) == (member.template, member.topic)
        a, b = dressing(fetch(web, url)[2]), dressing(fetch(web, twin)[2])
        assert a.fields["brand"] == b.fields["brand"]
        pattern = [
            page.fields["title"].replace(article_of(model, u)[1].title, "{headline}")
            for page, u in ((a, url), (b, twin))
        ]
        assert pattern[0] == pattern[1] != a.fields["title"]  # one title pattern, two headlines
        own = [[p for p in x.article if p not in y.article] for x, y in ((a, b), (b, a))]
        assert len(own[0]) >= len(a.article) - 1  # at most a paragraph of the site's in common
        assert jaccard(shingles(" ".join(own[0])), shingles(" ".join(own[1]))) < 0.1
        template_words = set(words(" ".join(a.other))) & set(words(" ".join(b.other)))
        assert len(template_words) >= 60  # what a template fingerprint would pair them on


# -- edited copies --------------------------------------------------------------------


def sentence_list(text: str) -> list[str]:
    return [s for paragraph in text.split("\n") for s in sentences(paragraph)]


def edited_pages(model: WebModel) -> list[tuple[str, Page, Page]]:
    """(url, edited page, its family's original) for every edited copy."""
    families = model.duplicate_families()
    out = []
    for urls in families.values():
        original = article_of(model, urls[0])[1]
        out += [(u, article_of(model, u)[1], original) for u in urls if role(model, u) == "edited"]
    return out


def test_edited_copies_change_a_word_to_a_tenth_of_the_sentences(big: WebModel) -> None:
    """Counted in sentences of the original's own prose (its site's shared
    paragraph left out): a replaced sentence is one removed and one added, so
    the sentences an edit touched are the larger of the two counts."""
    shared = shared_paragraphs(big)
    shares = []
    for _, page, original in edited_pages(big):
        before, after = Counter(sentence_list(original.text)), Counter(sentence_list(page.text))
        removed, added = sum((before - after).values()), sum((after - before).values())
        n = len(sentence_list(prose(original, shared)))
        touched = max(removed, added)
        assert 1 <= touched <= max(1, round(0.1 * n)), (page.path, touched, n)
        assert words(page.text) != words(original.text)  # at least a word
        assert page.title == original.title and page.article is not None
        shares.append(touched / n)
    assert len(shares) >= 30 and max(shares) > 0.07 and min(shares) < 0.04  # the whole range


def changed_words(a: str, b: str) -> int:
    """Positions at which two sentences of one length differ (-1: lengths differ)."""
    x, y = a.split(), b.split()
    return sum(p != q for p, q in zip(x, y, strict=True)) if len(x) == len(y) else -1


def test_each_kind_of_edit_changes_what_it_says(big: WebModel) -> None:
    shared = shared_paragraphs(big)
    kinds: Counter[str] = Counter()
    for _, page, original in edited_pages(big):
        assert page.article is not None
        kind = page.article.edit
        kinds[kind] += 1
        before, after = sentence_list(original.text), sentence_list(page.text)
        removed = [s for s in before if s not in after]
        added = [s for s in after if s not in before]
        if kind == "correction":  # a few words of one sentence, maybe a note
            assert len(removed) == 1 and 1 <= len(added) <= 2
            assert 1 <= changed_words(removed[0], added[0]) <= 3
            assert all(re.search(r"misstated|correct", note) for note in added[1:])
        elif kind == "update":  # sentences replaced, maybe one added
            assert removed and len(added) - len(removed) in (0, 1)
        elif kind == "trimmed":  # the end of the prose cut, maybe a couple swapped
            own = sentence_list(prose(original, shared))
            tail = next(n for n in range(len(own)) if own[-1 - n] not in removed)
            assert tail >= 1 and len(removed) - tail <= len(added) <= min(2, len(removed) - 1)
        else:  # extended: an intro or a comment, nothing removed
            assert kind == "extended" and not removed and 1 <= len(added) <= 2
            assert after[: len(added)] == added or after[-len(added) :] == added
    assert set(kinds) == set(EDIT_KINDS) and min(kinds.values()) >= 5


def test_most_families_have_edited_copies_where_the_web_puts_them(big: WebModel) -> None:
    families = big.duplicate_families()
    with_edits = 0
    for urls in families.values():
        origin = article_of(big, urls[0])
        edited = [u for u in urls if role(big, u) == "edited"]
        with_edits += bool(edited)
        others = {split(u)[0] for u in urls if u not in edited}
        for url in edited:
            host, page, article = article_of(big, url)
            if article.edit in ON_ORIGIN:  # the origin's site, a URL of its own
                assert host == origin[0] and article.template == origin[2].template
                assert page.path.endswith("-corrected.html") == (article.edit == "correction")
                assert page.path.startswith("/updates/") == (article.edit == "update")
            else:  # an aggregator: a host with no other member of the family
                assert host.name not in others
            assert article.published > origin[2].published
            source = page.links[article.slots.index("source")]
            assert (source.host, source.path) == (origin[0].name, origin[1].path)
    assert with_edits >= 0.6 * len(families)


# -- near-misses that share a paragraph ------------------------------------------------


def test_boilerplate_near_misses_share_one_paragraph_not_the_article(big: WebModel) -> None:
    families = big.duplicate_families()
    kinds = big.near_miss_kinds()
    assert Counter(kinds.values())["boilerplate"] >= 10 and "topic" in kinds.values()
    for url, family in big.near_miss_pages().items():
        host, page, near = article_of(big, url)
        origin, original, article = article_of(big, families[family][0])
        common = set(page.text.split("\n")) & set(original.text.split("\n"))
        if kinds[url] == "topic":
            assert not common and not near.boilerplate
            continue
        assert len(common) == 1 and near.boilerplate == article.boilerplate
        (paragraph,) = common
        assert 75 <= len(paragraph.split()) <= 100
        assert host == origin and (near.template, near.topic) == (article.template, article.topic)
        if near.boilerplate == "bio":
            assert near.byline == article.byline and paragraph.startswith("About the author")
        assert page.text.split("\n").index(paragraph) in (
            0,
            2,
            len(page.text.split("\n")) - 1,
        )  # start, after the second paragraph, end
        assert jaccard(shingles(page.text, 3), shingles(original.text, 3)) < 0.2
        own = [prose(p, common) for p in (page, original)]
        assert jaccard(shingles(own[0], 3), shingles(own[1], 3)) < 0.05
        for member in families[family]:  # every member carries it, edited or not
            assert paragraph in article_of(big, member)[1].text.split("\n")


def test_a_shared_paragraph_is_main_text_of_both_pages(model: WebModel, web: TestWeb) -> None:
    families = model.duplicate_families(web.port)
    checked = 0
    for url, kind in model.near_miss_kinds(web.port).items():
        if kind != "boilerplate":
            continue
        original = families[model.near_miss_pages(web.port)[url]][0]
        texts = []
        for u in (url, original):
            body = fetch(web, u)[2]
            texts.append(parse_page(body, "text/html", {}, AGENT).main_text.split("\n"))
            assert dressing(body).article == article_of(model, u)[1].text.split("\n")
        assert len(set(texts[0]) & set(texts[1])) == 1
        checked += 1
    assert checked >= 2


# -- kinds of true pairs -----------------------------------------------------------


def test_pair_kinds_cover_the_pairs_by_precedence(big: WebModel) -> None:
    kinds = big.duplicate_pair_kinds(8080)
    assert set(kinds) == big.duplicate_pairs(8080)
    assert set(kinds.values()) == set(PAIR_KINDS)
    for (a, b), kind in kinds.items():
        roles = {role(big, a), role(big, b)}
        if "edited" in roles:
            assert kind == "edited"
        elif "print" in roles:
            assert kind == "print"
        elif "session" in roles:
            assert kind == "session"
        elif "syndicated" in roles:
            assert kind == "retemplated"
        else:
            assert roles == {"original", "copy"} and kind == "exact"
    exact = {
        (min(a, b), max(a, b))
        for group in big.exact_copies(8080)
        for a, b in itertools.combinations(group, 2)
    }
    assert exact == {pair for pair, kind in kinds.items() if kind == "exact"}


def test_edits_and_shared_paragraphs_are_drawn_from_the_seed(big: WebModel) -> None:
    again = WebModel.generate(SEED, hosts=60, ips=15, pages_per_host=(5, 20), dup_families=40)
    assert again == big
    assert again.duplicate_pair_kinds() == big.duplicate_pair_kinds()
    assert again.near_miss_kinds() == big.near_miss_kinds()
    other = WebModel.generate(SEED + 1, hosts=60, ips=15, pages_per_host=(5, 20), dup_families=40)
    assert other.duplicate_pair_kinds() != big.duplicate_pair_kinds()
    texts = [{p.text for _, p, _ in edited_pages(m)} for m in (big, other)]
    assert not texts[0] & texts[1]


# -- reachability, robots and sitemaps ----------------------------------------------


def hops(model: WebModel, seeds: list[str]) -> dict[str, int]:
    """Breadth-first link distance of every reachable URL from ``seeds``."""
    depth = dict.fromkeys(seeds, 0)
    queue = deque(seeds)
    while queue:
        url = queue.popleft()
        host, path = split(url)
        if model.is_disallowed(host, path):
            continue
        for target, nofollow in model.page_links(host, path, 80):
            if not nofollow and target not in depth:
                depth[target] = depth[url] + 1
                queue.append(target)
    return depth


def test_every_article_page_is_reached_from_the_seeds(model: WebModel) -> None:
    seeds = model.seed_urls(1)
    depth = hops(model, seeds)
    articles = [u for urls in model.duplicate_families().values() for u in urls]
    articles += list(model.near_miss_pages())
    reached = model.reachable(seeds)
    for url in articles:
        host, path = split(url)
        assert (host, path) in reached
        assert depth[url] <= depth[make_url(host, "/", 80)] + 2  # from the homepage or its article


def test_article_pages_respect_robots_and_are_in_sitemaps(model: WebModel) -> None:
    articles = [u for urls in model.duplicate_families().values() for u in urls]
    articles += list(model.near_miss_pages())
    with_sitemaps = 0
    for url in articles:
        host, path = split(url)
        assert model.expected_status(host, path) == 200
        assert not model.is_disallowed(host, path)
        info = model.host(host)
        assert info is not None and info.throttle is None and not info.slow
        if info.sitemaps is not None:
            assert path in model.sitemap_paths(host)
            with_sitemaps += 1
    assert with_sitemaps > 0


def test_sitemaps_served_list_the_article_pages(model: WebModel, web: TestWeb) -> None:
    host = next(
        h
        for h in model.hosts
        if h.sitemaps is not None
        and h.sitemaps.layout == "urlset"
        and any(p.article for p in h.pages)
    )
    status, _, body = fetch(web, make_url(host.name, "/sitemap.xml", web.port))
    listed = set(re.findall(r"<loc>([^<]+)</loc>", body.decode()))
    wanted = {make_url(host.name, p.path, web.port) for p in host.pages if p.article}
    assert status == 200 and wanted and wanted <= {u.replace("&amp;", "&") for u in listed}
