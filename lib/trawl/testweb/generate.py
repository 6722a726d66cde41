"""Deterministic generation of the synthetic web from one seed.

Everything is drawn from a single ``random.Random(seed)`` in a fixed order, so
one seed always yields the same hosts, pages, links and robots rules. The
shape is chosen to exercise a crawler the way the real web does:

* page counts per host follow a clipped Pareto law (many small hosts, a few
  big ones) and hosts share a handful of loopback IPs (virtual hosting);
* within a host every page hangs off a random recursive tree rooted at "/"
  whose edges go only through fetchable pages (200, not robots-disallowed),
  so the whole host is discoverable from its homepage; extra links (some
  ``rel=nofollow``) point anywhere on the host, including error pages;
* across hosts a random recursive tree of homepage links makes every host
  reachable from the root seed, and extra links pick targets by a Zipf
  popularity weight, giving a power-law in-degree;
* robots variants put Disallow rules on directories that the tree links to,
  so a crawler that ignores robots.txt would request them.

The *extras* -- throttled hosts (a rate limiter answering 429 or 503 with
Retry-After, or a server failing every 4th-6th request with 503) and a
Crawl-delay of 1-5 s, rarely 10-45 s -- come from a second generator seeded
with ``EXTRAS_LABEL`` and the seed. It draws the same values for every host
whatever the shares are and keeps those whose roll is under the share, so
the main draws (hosts, pages, links, robots rules) are what they were before
the extras existed, and raising a share only adds hosts to the extras. The
label's suffix was picked so that the small webs the test suite pins (seed
34 with 12 hosts, seed 3 with 16 and with 4, seed 5 with 4 and with 6) get
no extras and keep the properties their tests state.

Two more streams were added later, the same way: each page's change rate
(``trawl.testweb.changes``, keyed by seed, host and path) and each host's
sitemaps, drawn from a ``random.Random`` keyed by ``SITEMAPS_LABEL``, seed
and host name. A share of hosts with a 200 robots.txt publish sitemaps
listing every page any crawler but badbot may fetch; on some of them
(``HIDDEN_SHARE``) one extra 200 page is listed that nothing links to, so a
crawl can only find it through the sitemap. Hosts listing at least
``SITEMAP_INDEX_MIN`` pages use an index. ``SITEMAPS_LABEL``'s suffix was
picked so that the webs the crawler's tests pin (seed 34 with 12 and with 6
hosts, seed 3 with 16, seed 5 with 4) publish no sitemaps at all -- the
crawler follows robots.txt ``Sitemap:`` lines, so they would change what
those crawls fetch -- and the other pinned webs (seed 3 with 4 hosts, 5 with
6, 44 with 20) list no hidden page: their pages are those drawn before.

Then come the near-duplicate families (``trawl.testweb.dups``), off unless
asked for: their own stream adds article pages to some hosts and links to
them from ordinary pages, after everything above is drawn. Last, and off
unless asked for too, the page requisites (``trawl.testweb.requisites``):
their streams say which images each ordinary page shows; they add no page
and no link, and change robots.txt only on hosts closing /static/private/,
a prefix no page has.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from trawl.testweb.changes import DEFAULT_RATES, ChangeRates, draw_rate
from trawl.testweb.dups import add_families
from trawl.testweb.records import HostInfo, Link, Page, RobotsGroup, SitemapSet, Throttle
from trawl.testweb.requisites import add_requisites

DIRS = ("p", "x", "a/b", "docs", "news/2024")
STAR_RULES = ("/private/", "/cgi-bin/")
AGENT_RULES = ("/tmp/", "/drafts/")
_VOCAB_TEXT = (
    "apple river stone cloud maple harbor lantern meadow copper violet orbit canyon "
    "falcon willow ember glacier pepper summit thistle marble cedar delta fjord "
    "quartz saffron tundra velvet zephyr bramble cobalt dune fable garnet hazel "
    "indigo juniper kelp lagoon mosaic nectar onyx prairie quill russet sable "
    "tamarind umber vellum wharf yarrow zinnia acorn basil cinder drift"
)
VOCAB = tuple(_VOCAB_TEXT.split(" "))
#: Default shares of hosts with a throttle, and with an extra Crawl-delay.
THROTTLE_SHARE = 0.03
DELAY_SHARE = 0.03
#: Crawl-delays of the extras; LONG ones ask more than crawlers usually grant.
EXTRA_DELAYS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
LONG_DELAYS = (10.0, 20.0, 45.0)
LONG_DELAY_SHARE = 0.125
#: (kind, status) of a throttle and how often each is drawn.
THROTTLES = (("limit", 429), ("limit", 503), ("flaky", 503))
THROTTLE_WEIGHTS = (45, 25, 30)
EXTRAS_LABEL = "trawl.testweb.extras.3"
#: Default share of hosts with a 200 robots.txt that publish sitemaps, the
#: share of those listing a page nothing links to, and the page count from
#: which a host splits its sitemap behind an index.
SITEMAP_SHARE = 0.3
HIDDEN_SHARE = 0.3
SITEMAP_INDEX_MIN = 12
SITEMAPS_LABEL = "trawl.testweb.sitemaps.128171"


@dataclass(frozen=True)
class Extras:
    """Shares of hosts that get a throttle and an extra Crawl-delay."""

    throttled: float = THROTTLE_SHARE
    crawl_delays: float = DELAY_SHARE


def loopback_ip(index: int) -> str:
    """The ``index``-th address of 127.0.1.1, 127.0.1.2, ... (254 per /24)."""
    return f"127.0.{1 + index // 254}.{1 + index % 254}"


def host_name(index: int) -> str:
    """``site-0007.test``: the reserved ``.test`` TLD can never leak to real DNS."""
    return f"site-{index:04d}.test"


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))


def _page_count(rng: random.Random, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(lo * rng.paretovariate(1.2))))


def _robots(
    rng: random.Random, agent: str
) -> tuple[str, int, tuple[RobotsGroup, ...], float | None]:
    variant = rng.choices(("none", "error", "open", "star", "agent"), (25, 4, 21, 30, 20))[0]
    if variant == "none":
        return variant, 404, (), None
    if variant == "error":
        return variant, rng.choice((500, 503)), (), None
    delay = float(rng.choice((1, 2))) if rng.random() < 0.06 else None
    groups = [RobotsGroup("badbot", ("/",))]
    if variant == "open":
        groups.append(RobotsGroup("*", ()))
    else:
        star = ("/private/",) if rng.random() < 0.6 else STAR_RULES
        groups.append(RobotsGroup("*", star))
    if variant == "agent":
        groups.append(RobotsGroup(agent, (rng.choice(AGENT_RULES),)))
    return variant, 200, tuple(groups), delay


def _page_dirs(rng: random.Random, n: int, groups: tuple[RobotsGroup, ...]) -> list[str]:
    """Directory of each page (index 0 is "/"), with every disallowed dir used."""
    dirs = ["/"] + [f"/{rng.choice(DIRS)}/" for _ in range(n - 1)]
    rules = [p for g in groups if g.agent != "badbot" for p in g.disallow]
    free = list(range(1, n))
    rng.shuffle(free)
    for rule in rules:
        for _ in range(rng.randint(1, 2)):
            if free:
                dirs[free.pop()] = rule
    return dirs


def _statuses(rng: random.Random, n: int) -> list[int]:
    out = [200]
    for _ in range(n - 1):
        r = rng.random()
        out.append(
            404 if r < 0.04 else 410 if r < 0.06 else 500 if r < 0.08 else 301 if r < 0.12 else 200
        )
    return out


def _intra_form(rng: random.Random, target: str) -> str:
    if target == "/":
        return rng.choice(("absolute", "root"))
    return rng.choices(("absolute", "root", "relative"), (25, 35, 40))[0]


def _fragment(rng: random.Random) -> str:
    return f"sec-{rng.randint(1, 9)}" if rng.random() < 0.05 else ""


class _HostDraft:
    """Mutable scratch state for one host while links are being added."""

    def __init__(
        self, rng: random.Random, index: int, ip: str, agent: str, sizes: tuple[int, int]
    ) -> None:
        self.name = host_name(index)
        self.ip = ip
        self.robots, self.robots_status, self.groups, self.crawl_delay = _robots(rng, agent)
        self.slow = round(rng.uniform(0.2, 1.0), 2) if rng.random() < 0.03 else 0.0
        n = _page_count(rng, *sizes)
        dirs = _page_dirs(rng, n, self.groups)
        self.paths = ["/"] + [f"{dirs[i]}{i}.html" for i in range(1, n)]
        self.status = _statuses(rng, n)
        blocked = {p for g in self.groups if g.agent != "badbot" for p in g.disallow}
        self.open = [
            i
            for i in range(n)
            if self.status[i] == 200 and not any(self.paths[i].startswith(b) for b in blocked)
        ]
        self.links: list[list[Link]] = [[] for _ in range(n)]
        self.redirect: dict[int, str] = {}
        self.popularity = 0.0
        self.throttle: Throttle | None = None

    def add(self, i: int, link: Link) -> None:
        self.links[i].append(link)


def _intra_links(rng: random.Random, d: _HostDraft) -> None:
    n = len(d.paths)
    for i in range(1, n):
        parents = [j for j in d.open if j < i]
        parent = rng.choice(parents)
        d.add(parent, Link(d.name, d.paths[i], _intra_form(rng, d.paths[i]), False, _fragment(rng)))
        if d.status[i] == 301:
            d.redirect[i] = d.paths[rng.choice([j for j in d.open if j != i])]
    for i in d.open:
        for _ in range(rng.randint(1, 4)):
            target = d.paths[rng.randrange(n)]
            nofollow = rng.random() < 0.1
            d.add(i, Link(d.name, target, _intra_form(rng, target), nofollow, _fragment(rng)))


def _throttle(rng: random.Random) -> Throttle:
    kind, status = rng.choices(THROTTLES, THROTTLE_WEIGHTS)[0]
    interval, every = rng.choice((1.0, 1.5, 2.0, 3.0)), rng.randint(4, 6)
    retry_after, http_date = rng.randint(1, 3), rng.random() < 0.4
    if kind == "limit":
        return Throttle(kind, status, interval_s=interval, http_date=http_date)
    return Throttle(kind, status, every=every, retry_after_s=retry_after, http_date=http_date)


def _add_extras(rng: random.Random, d: _HostDraft, extras: Extras) -> None:
    """Draw one host's extras unconditionally, keep those under their share.

    A throttle on a host whose robots.txt fails would never be seen, and a
    Crawl-delay needs a robots.txt to be served in.
    """
    throttle_roll, delay_roll = rng.random(), rng.random()
    throttle = _throttle(rng)
    long_delay = rng.random() < LONG_DELAY_SHARE
    delay = rng.choice(LONG_DELAYS if long_delay else EXTRA_DELAYS)
    if throttle_roll < extras.throttled and d.robots != "error":
        d.throttle = throttle
    if delay_roll < extras.crawl_delays and d.robots_status == 200:
        d.crawl_delay = delay


def _cross_links(rng: random.Random, drafts: list[_HostDraft]) -> None:
    order = list(range(len(drafts)))
    rng.shuffle(order)
    for rank, h in enumerate(order):
        drafts[h].popularity = round(1.0 / (rank + 1) ** 1.1, 6)
    rng.shuffle(order)
    # The root of the host tree is the most popular fetchable host: the first seed.
    roots = [h for h in order if drafts[h].robots != "error"]
    if roots:
        root = max(roots, key=lambda h: drafts[h].popularity)
        order.remove(root)
        order.insert(0, root)
    linked: list[int] = []
    for h in order:
        parents = [p for p in linked if drafts[p].robots != "error"]
        if parents:
            parent = drafts[rng.choice(parents)]
            parent.add(0, Link(drafts[h].name, "/", "absolute"))
        linked.append(h)
    weights = [d.popularity for d in drafts]
    for d in drafts:
        for i in d.open:
            for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
                t = drafts[rng.choices(range(len(drafts)), weights)[0]]
                path = "/" if rng.random() < 0.6 else rng.choice(t.paths)
                form = "absolute" if rng.random() < 0.85 else "scheme-relative"
                d.add(i, Link(t.name, path, form, rng.random() < 0.1, _fragment(rng)))


def _finish(rng: random.Random, d: _HostDraft) -> HostInfo:
    pages = []
    for i, path in enumerate(d.paths):
        links = d.links[i]
        rng.shuffle(links)
        base = None
        if i > 0 and d.status[i] == 200 and rng.random() < 0.12:
            base = f"/{rng.choice(DIRS)}/"
        title = f"{d.name} page {i}: {_words(rng, 2, 4)}"
        text = _words(rng, 20, 80)
        absolute = rng.random() < 0.7
        pages.append(
            Page(path, d.status[i], title, text, tuple(links), base, absolute, d.redirect.get(i))
        )
    return HostInfo(
        name=d.name,
        ip=d.ip,
        robots=d.robots,
        robots_status=d.robots_status,
        groups=d.groups,
        crawl_delay=d.crawl_delay,
        slow=d.slow,
        pages=tuple(pages),
        popularity=d.popularity,
        throttle=d.throttle,
    )


def _hidden_page(rng: random.Random, host: HostInfo) -> Page:
    """A 200 page linking back into the host, at a path no page has yet."""
    index = len(host.pages)
    path = f"/{rng.choice(DIRS)}/{index}.html"
    title = f"{host.name} page {index}: {_words(rng, 2, 4)}"
    text = _words(rng, 20, 80)
    targets = ["/", rng.choice(host.open_paths[1:] or host.open_paths)]
    links = tuple(Link(host.name, t, _intra_form(rng, t)) for t in targets)
    return Page(path, 200, title, text, links)


def _add_sitemaps(seed: int, host: HostInfo, share: float) -> HostInfo:
    """Give ``host`` sitemaps if its roll is under ``share`` (and robots.txt is 200).

    The host's own stream draws the same values whatever the share, so a
    larger share only adds hosts, each with the sitemaps it had.
    """
    rng = random.Random(f"{SITEMAPS_LABEL}/{seed}/{host.name}")
    roll, hidden_roll = rng.random(), rng.random()
    if roll >= share or host.robots_status != 200:
        return host
    hidden: tuple[Page, ...] = ()
    if hidden_roll < HIDDEN_SHARE:
        hidden = (_hidden_page(rng, host),)
    listed = len(host.open_paths) + len(hidden)
    layout = "index" if listed >= SITEMAP_INDEX_MIN else "urlset"
    sitemaps = SitemapSet(layout, tuple(p.path for p in hidden))
    return replace(host, pages=host.pages + hidden, sitemaps=sitemaps)


def _add_change_rates(seed: int, host: HostInfo, rates: ChangeRates) -> HostInfo:
    pages = tuple(
        replace(p, change_rate=draw_rate(seed, host.name, p.path, rates)) if p.status == 200 else p
        for p in host.pages
    )
    return replace(host, pages=pages)


def generate_hosts(
    seed: int,
    hosts: int,
    ips: int,
    pages_per_host: tuple[int, int],
    agent: str,
    extras: Extras = Extras(),
    sitemaps: float = SITEMAP_SHARE,
    change_rates: ChangeRates | None = DEFAULT_RATES,
    dup_families: int = 0,
    requisites: bool = False,
) -> tuple[HostInfo, ...]:
    """Draw the whole web; see the module docstring for its shape.

    ``sitemaps`` is the share of hosts with a 200 robots.txt that publish
    sitemaps; ``change_rates`` the distribution of page change rates (None:
    no page ever changes); ``dup_families`` the number of near-duplicate
    families (``trawl.testweb.dups``); ``requisites`` whether pages need
    stylesheets, images, a script and a font (``trawl.testweb.requisites``).
    """
    if hosts < 1 or ips < 1 or not 2 <= pages_per_host[0] <= pages_per_host[1]:
        raise ValueError("need hosts >= 1, ips >= 1 and 2 <= min pages <= max pages")
    rng = random.Random(seed)
    ip_weights = [1.0 / (k + 1) ** 0.7 for k in range(ips)]
    drafts = []
    for index in range(hosts):
        ip = loopback_ip(rng.choices(range(ips), ip_weights)[0])
        drafts.append(_HostDraft(rng, index, ip, agent, pages_per_host))
    for d in drafts:
        _intra_links(rng, d)
    _cross_links(rng, drafts)
    extra_rng = random.Random(f"{EXTRAS_LABEL}/{seed}")
    for d in drafts:
        _add_extras(extra_rng, d, extras)
    finished = [_add_sitemaps(seed, _finish(rng, d), sitemaps) for d in drafts]
    if change_rates is not None:
        finished = [_add_change_rates(seed, h, change_rates) for h in finished]
    with_families = add_families(seed, tuple(finished), dup_families)
    return add_requisites(seed, with_families, requisites)
