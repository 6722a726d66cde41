"""An operator's estate for the test web: many hosts of one registered domain
that nobody outside links to.

A company, a university or a newspaper group runs dozens of sites under one
registered domain (``news.example.org``, ``sport.example.org``, ...), and an
operator who crawls them seeds each one. Nothing else on the web links there,
so a crawler that budgets a registered domain by its inbound links (IRLbot's
STAR, ``trawl.crawldb.budgets``) gives the whole estate the budget of an
unknown domain, a few pages a segment, unless the hosts the operator named are
a budget group of their own (``budget.seed_host_pages``). These hosts are the
test of that: ``TestWeb(..., estate=n)`` serves the first ``n`` of them next to
the model's hosts.

How the estate is laid out, and why:

* Hosts are ``s00.estate.test``, ``s01.estate.test``, ... (``estate_hosts``),
  all under ``ESTATE_DOMAIN``: ``.test`` is no public suffix, so the
  registered domain is the last two labels (``trawl.url.keys.registered_domain``).
* Every host has the same ``PAGES_PER_HOST`` pages (``estate_paths``), a
  plain site tree of depth 2: ``/`` links to ``SECTIONS`` section pages
  ``/s/<k>/``, each section to its ``ARTICLES`` articles ``/s/<k>/<j>.html``
  and back home, each article home, to its section and to the next article
  of the section. So a crawl needs three rounds of link discovery to see it
  all, and the widest round (a host's articles) is well within a politeness
  window at a small delay. Any other path is a 404, ``/robots.txt`` too
  (RFC 9309 2.3.1.3: allow all).
* Each host has its own loopback address in ``ESTATE_NET`` (127.0.11.0/24),
  clear of the model's 127.0.1.x and up, the hostile 127.0.9.x and the traps'
  127.0.10.x (``TestWeb`` checks): separate sites, each on its own politeness
  clock, so a crawl of the estate is limited by budgets and depth, not by a
  shared address.
* Pages never change and are a pure function of host and path; their text
  comes from ``trawl.testweb.prose`` seeded by both, so no two pages share
  their main text (the fingerprints look in ``main``; links are in ``nav``).
  Answers are plain keep-alive HTML (``text/html; charset=utf-8``), with no
  validators: a revisit is a full 200.
"""

from __future__ import annotations

import functools
import html
import ipaddress
import random
from collections.abc import Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from trawl.testweb import prose
from trawl.testweb.model import make_url

ESTATE_DOMAIN = "estate.test"
ESTATE_NET = ipaddress.IPv4Network("127.0.11.0/24")
ESTATE_HOSTS = 30  # the hosts of issue 27's test
MAX_HOSTS = ESTATE_NET.num_addresses - 2  # one address each, .1 to .254
SECTIONS = 9
ARTICLES = 10  # per section
PAGES_PER_HOST = 1 + SECTIONS + SECTIONS * ARTICLES

Link = tuple[str, str]  # (href, anchor text)
HTML = (("Content-Type", "text/html; charset=utf-8"),)


class EstatePage(NamedTuple):
    """One answer: status, header fields (Content-Length left to the server), body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


# -- ground truth ---------------------------------------------------------------


@functools.cache
def estate_hosts(n: int = ESTATE_HOSTS) -> tuple[str, ...]:
    """The first ``n`` hosts of the estate, in address order."""
    if not 1 <= n <= MAX_HOSTS:
        raise ValueError(f"the estate has 1 to {MAX_HOSTS} hosts, not {n}")
    return tuple(f"s{i:02d}.{ESTATE_DOMAIN}" for i in range(n))


@functools.cache
def estate_paths() -> tuple[str, ...]:
    """Every page of an estate host: home, the sections, then their articles."""
    sections = [_section(k) for k in range(1, SECTIONS + 1)]
    articles = [_article(k, j) for k in range(1, SECTIONS + 1) for j in range(1, ARTICLES + 1)]
    return ("/", *sections, *articles)


def is_estate(host: str, n: int = ESTATE_HOSTS) -> bool:
    """Whether ``host`` (lower case, no port) is one of the first ``n`` estate hosts."""
    return host in _host_set(n)


def seed_urls(port: int, n: int = ESTATE_HOSTS) -> list[str]:
    """The home page of each of the first ``n`` hosts: what the operator seeds."""
    return [make_url(name, "/", port) for name in estate_hosts(n)]


def listen_addresses(n: int = ESTATE_HOSTS) -> list[str]:
    """The loopback addresses the test web must listen on for ``n`` hosts."""
    return [str(ESTATE_NET[1 + i]) for i in range(len(estate_hosts(n)))]


def hosts_file_text(n: int = ESTATE_HOSTS) -> str:
    """hosts(5) lines pinning each of the first ``n`` hosts to its own address."""
    lines = ["# trawl testweb: an operator's estate"]
    lines += [f"{a} {h}" for a, h in zip(listen_addresses(n), estate_hosts(n), strict=True)]
    return "\n".join(lines) + "\n"


@functools.cache
def _host_set(n: int) -> frozenset[str]:
    return frozenset(estate_hosts(n))


# -- serving --------------------------------------------------------------------


def respond(host: str, target: str) -> EstatePage:
    """The answer to ``GET target`` (path and query) on estate ``host``.

    A query is not part of any page: a target with one is a 404, as for any
    path the site does not have.
    """
    parts = urlsplit(target)
    path = parts.path or "/"
    if parts.query or path not in _PATH_SET:
        return _not_found(host)
    if path == "/":
        return _home(host)
    section, _, article = path[len("/s/") :].partition("/")
    if not article:
        return _section_page(host, int(section))
    return _article_page(host, int(section), int(article.removesuffix(".html")))


def _section(k: int) -> str:
    return f"/s/{k}/"


def _article(k: int, j: int) -> str:
    return f"/s/{k}/{j}.html"


def _home(host: str) -> EstatePage:
    links = [(_section(k), f"section {k}") for k in range(1, SECTIONS + 1)]
    return _page(host, "Home", [_prose(host, "/", 4)], links)


def _section_page(host: str, k: int) -> EstatePage:
    links = [("/", "home")]
    links += [(_article(k, j), f"article {j}") for j in range(1, ARTICLES + 1)]
    return _page(host, f"Section {k}", [_prose(host, _section(k), 4)], links)


def _article_page(host: str, k: int, j: int) -> EstatePage:
    links = [("/", "home"), (_section(k), f"section {k}")]
    if j < ARTICLES:
        links.append((_article(k, j + 1), "next article"))
    text = [_prose(host, _article(k, j), 5), _prose(host, f"{_article(k, j)} more", 5)]
    return _page(host, f"Section {k}, article {j}", text, links)


def _prose(host: str, path: str, sentences: int) -> str:
    """``sentences`` sentences of news copy, a pure function of host and path
    (a str seed hashes with SHA-512: the same in every process)."""
    rng = random.Random(f"estate {host}{path}")
    topic = rng.choice(prose.TOPICS)
    return " ".join(prose.sentence(rng, topic) for _ in range(sentences))


def _page(host: str, title: str, paragraphs: Sequence[str], links: Sequence[Link]) -> EstatePage:
    """An HTML page: the text in ``main`` (where fingerprints look), links in ``nav``."""
    text = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
    doc = _TEMPLATE.format(site=html.escape(host), title=html.escape(title), text=text, links=items)
    return EstatePage(200, HTML, doc.encode())


def _not_found(host: str) -> EstatePage:
    doc = _TEMPLATE.format(site=html.escape(host), title="Not found", text="", links="")
    return EstatePage(404, HTML, doc.encode())


_PATH_SET = frozenset(estate_paths())
_TEMPLATE = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title} | {site}</title></head>'
    "<body><main><h1>{title}</h1>{text}</main><nav><ul>{links}</ul></nav></body></html>\n"
)
