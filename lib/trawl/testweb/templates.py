"""Site templates of the test web's news hosts, and the HTML of an article page.

A near-duplicate detector meets the same article wrapped in different sites:
each with its own header, navigation menu, sidebar, "related articles" list,
ad blocks and footer, which on a short article can be as many words as the
story itself. Boilerplate is why page-level fingerprints pair unrelated
articles of one site and miss one article on two sites (Kohlschuetter et
al., "Boilerplate detection using shallow text features", WSDM 2010), so
each ``SiteTemplate`` here carries a hundred-odd words of its own, placed in
its own markup order. What differs between two variants of one article on
one site -- the publication time, the comment count, the ad, a session
token -- is drawn per page (``trawl.testweb.records.Article``); the
template only says how it is spelled ("Published 2026-03-04 10:22",
"Posted March 4, 2026 at 10:22").

The print version of an article (role "print") has almost no template: the
headline, the byline, the paragraphs and one link back.

Rendering is a pure function of the page and its hrefs (``render.href``
spells them; article pages use root-relative and absolute forms only), so
two pages that differ only in their path render to identical bytes -- how
the families' exact copies are made.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from trawl.testweb.records import Article, Page

_MONTHS = "January February March April May June July August September October November December"
MONTHS = tuple(_MONTHS.split())


@dataclass(frozen=True)
class SiteTemplate:
    """One site's dress: brand, menu, boilerplate texts and how it spells its fields.

    ``section`` is the directory its articles live in; ``title`` the
    ``<title>`` pattern (fields ``headline``, ``topic``, ``brand``);
    ``published`` and ``comments`` the patterns of the publication time
    (fields Y m d H M and ``month``) and of the comment count (``n``);
    ``ad_at`` where the ad goes: "top", "inline" (after the second
    paragraph) or "bottom"; ``sidebar_first`` puts the sidebar before the story.
    """

    brand: str
    tagline: str
    nav: tuple[str, ...]
    section: str
    title: str
    published: str
    comments: str
    related: str
    sidebar: tuple[str, ...]
    footer: str
    footer_links: tuple[str, ...]
    ad_at: str
    sidebar_first: bool


TEMPLATES = (
    SiteTemplate(
        "The Northbridge Courier",
        "Independent local journalism since 1887",
        ("Home", "News", "Business", "Sport", "Opinion", "Weather"),
        "/news/2026/",
        "{headline} | {topic} | {brand}",
        "Published {Y}-{m}-{d} {H}:{M}",
        "{n} comments",
        "Related articles",
        (
            "Get the morning briefing: the five stories you need to know, in your inbox "
            "before breakfast every weekday.",
            "Support local reporting. Subscribe from just one pound a week and read every "
            "story on any device.",
        ),
        "Copyright 2026 Courier Media Group. All rights reserved. Registered office: 12 Quay "
        "Street, Northbridge. The Courier is a member of the independent press standards body.",
        ("About us", "Contact", "Privacy policy", "Terms of use"),
        "top",
        False,
    ),
    SiteTemplate(
        "Daily Meridian",
        "News, views and the stories behind them",
        ("Front page", "World", "Money", "Science", "Culture", "Travel", "Puzzles"),
        "/story/",
        "{headline} - {brand}",
        "Posted {month} {d_}, {Y} at {H}:{M}",
        "Comments ({n})",
        "More on this story",
        (
            "Most read this week: our readers' picks from across the Meridian, updated every hour.",
            "Download the Meridian app for breaking news alerts, offline reading and the "
            "daily crossword.",
        ),
        "Daily Meridian Ltd, 40 Bank Row. Editorial complaints may be sent to the readers' "
        "editor. Reproduction without permission is prohibited. Cookie settings can be changed "
        "at any time.",
        ("Advertise", "Careers", "Cookie settings", "Accessibility"),
        "inline",
        True,
    ),
    SiteTemplate(
        "Harbourside Herald",
        "Your coast, your community, your news",
        ("Latest", "Local", "Harbour", "Schools", "Events", "Letters"),
        "/local/",
        "{brand} » {topic} » {headline}",
        "{d}.{m}.{Y} {H}:{M} UTC",
        "{n} reader comments",
        "You may also like",
        (
            "Have a story? Our newsdesk is open seven days a week. Send tips, photos and "
            "videos in confidence.",
            "Events this weekend: markets, concerts and family days out along the coast.",
        ),
        "The Harbourside Herald is published by Coastal Press Cooperative. Printed on recycled "
        "paper. Letters may be edited for length and clarity. Content licensed for personal use.",
        ("Our team", "Send a tip", "Subscriptions", "Archive"),
        "bottom",
        False,
    ),
    SiteTemplate(
        "Capital Wire",
        "Fast, accurate, first",
        ("Top stories", "Politics", "Markets", "Tech", "Health", "Video"),
        "/wire/",
        "{topic}: {headline} | {brand}",
        "Updated {d_} {month} {Y}, {H}:{M}",
        "Join the discussion: {n} comments",
        "Read next",
        (
            "Markets at a glance: indices, currencies and commodity prices, delayed by "
            "fifteen minutes.",
            "Capital Wire Pro gives professionals real-time alerts and the full archive.",
        ),
        "Capital Wire is an independent news agency. Stories are distributed to partner "
        "publications under licence. Market data supplied by third parties without warranty.",
        ("Licensing", "Press office", "Corrections", "Legal"),
        "top",
        True,
    ),
    SiteTemplate(
        "Greystone Gazette",
        "The valley's paper of record",
        ("Home", "Valley news", "Farming", "Sport", "Obituaries", "Classifieds"),
        "/articles/",
        "{headline} ~ {brand}",
        "Published on {d_} {month} {Y} at {H}:{M}",
        "{n} comments so far",
        "Elsewhere in the Gazette",
        (
            "Classifieds: jobs, homes, cars and notices from across the valley, updated daily.",
            "The Gazette photo archive holds more than a century of valley life. Browse it free.",
        ),
        "Greystone Gazette, Mill Lane, Greystone. Founded by subscribers, run for readers. "
        "Notices must be received by noon on the day before publication.",
        ("Place a notice", "Contact the editor", "Privacy", "Site map"),
        "inline",
        False,
    ),
    SiteTemplate(
        "Metro Pulse",
        "What's happening in the city right now",
        ("Now", "City", "Nightlife", "Food", "Tech", "Money", "Podcasts"),
        "/pulse/",
        "{headline} :: {brand}",
        "{H}:{M}, {d}/{m}/{Y}",
        "{n} replies",
        "Trending on Metro Pulse",
        (
            "Listen to the Pulse podcast: the city's week in thirty minutes, every Friday.",
            "Sign up for Pulse Plus and skip the ads on every page.",
        ),
        "Metro Pulse is a trading name of Pulse Digital. We use cookies to personalise "
        "content and ads. By continuing you accept our use of cookies.",
        ("Podcast", "Newsletter", "Advertise with us", "Help"),
        "bottom",
        True,
    ),
    SiteTemplate(
        "Westmere Observer",
        "Reporting the region without fear or favour",
        ("Home", "Region", "Environment", "Education", "Health", "Arts"),
        "/observer/",
        "{brand}: {headline}",
        "First published {Y}-{m}-{d}, {H}:{M}",
        "{n} comments - have your say",
        "Related coverage",
        (
            "Observer investigations are funded by our members. Join today and help us "
            "hold power to account.",
            "The regional weather: mild with scattered showers, clearing by evening.",
        ),
        "The Westmere Observer is owned by a charitable trust. Our journalism follows the "
        "editors' code of practice. Corrections are published on page two.",
        ("Membership", "Ethics policy", "Corrections", "Contact"),
        "top",
        False,
    ),
    SiteTemplate(
        "Rivington Times",
        "Serving Rivington and district",
        ("Home", "District", "Courts", "Business", "Sport", "Community", "What's on"),
        "/rt/",
        "{headline} | {topic} news | {brand}",
        "{month} {d_} {Y}, {H}:{M}",
        "{n} comments",
        "Also from the Times",
        (
            "The Rivington Times digital edition: every page of the printed paper, "
            "available from six in the morning.",
            "Community noticeboard: clubs, churches and charities share what they are up to.",
        ),
        "Rivington Times, part of District Newspapers. Registered as a newspaper. Our "
        "website uses cookies. Content may not be reproduced without written consent.",
        ("Digital edition", "Noticeboard", "Jobs", "Privacy"),
        "inline",
        True,
    ),
)

ADS = (
    "Advertisement: Save 20% on winter tyres at Kestrel Motors this month only.",
    "Advertisement: Fenwick Savings - fixed rates for two years, apply online in minutes.",
    "Sponsored: The Aldgate Park food festival returns. Book tickets now.",
    "Advertisement: Learn a language in twelve weeks with Lingo Academy evening classes.",
    "Advertisement: Greystone Garden Centre - spring bulbs, half price while stocks last.",
    "Sponsored: Compare broadband deals in your street and switch with no fee.",
    "Advertisement: Holloway Hearing - free hearing checks at your local branch.",
    "Advertisement: Tarrant Removals. Local and national, fully insured, free quotes.",
    "Sponsored: Ten holiday cottages with sea views you can still book this summer.",
    "Advertisement: Bellhaven Opticians - two pairs of glasses for the price of one.",
    "Advertisement: Ormsby Builders. Extensions, lofts and kitchens since 1974.",
    "Sponsored: Is your pension on track? Take the five-minute check.",
)


def published_text(template: SiteTemplate, article: Article) -> str:
    """The publication time spelled as ``template`` spells it."""
    at = article.published
    return template.published.format(
        Y=at.year,
        m=f"{at.month:02d}",
        d=f"{at.day:02d}",
        d_=at.day,
        H=f"{at.hour:02d}",
        M=f"{at.minute:02d}",
        month=MONTHS[at.month - 1],
    )


def _links(article: Article, hrefs: list[str], slot: str) -> list[str]:
    """``<a>`` elements of the page's links in ``slot``, in page order."""
    esc = html.escape
    return [
        f'<a href="{esc(h)}">{esc(a)}</a>'
        for s, a, h in zip(article.slots, article.anchors, hrefs, strict=True)
        if s == slot
    ]


def _list(items: list[str], css: str) -> str:
    return f"<ul class='{css}'>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _story(page: Page, article: Article, hrefs: list[str], ad: str) -> str:
    """The article element: headline, byline and time, paragraphs, counts and links."""
    tpl, esc = TEMPLATES[article.template], html.escape
    paragraphs = [f"<p>{esc(p)}</p>" for p in page.text.split("\n")]
    if tpl.ad_at == "inline":
        paragraphs.insert(min(2, len(paragraphs)), ad)
    extra = _links(article, hrefs, "print") + _links(article, hrefs, "source")
    return (
        f"<article><h1>{esc(page.title)}</h1>\n"
        f"<p class='byline'>By {esc(article.byline)} &middot; "
        f"<time>{esc(published_text(tpl, article))}</time></p>\n"
        + "\n".join(paragraphs)
        + f"\n<p class='comments'>{esc(tpl.comments.format(n=article.comments))}</p>\n"
        + "".join(f"<p class='tools'>{e}</p>" for e in extra)
        + "</article>\n"
    )


def _sidebar(article: Article, hrefs: list[str]) -> str:
    tpl, esc = TEMPLATES[article.template], html.escape
    blurbs = "".join(f"<p>{esc(b)}</p>" for b in tpl.sidebar)
    related = _list(_links(article, hrefs, "related"), "related")
    return f"<aside><h2>{esc(tpl.related)}</h2>{related}{blurbs}</aside>\n"


def _session_form(article: Article) -> str:
    """A sign-in form carrying the session token (a form, not a link: crawlers skip it)."""
    if not article.session:
        return ""
    name, token = (html.escape(part) for part in article.session.split("=", 1))
    return (
        f"<form action='/login' method='post'><input type='hidden' name='{name}' "
        f"value='{token}'><button>Sign in</button></form>\n"
    )


def article_html(page: Page, article: Article, hrefs: list[str], revision: str = "") -> str:
    """An article page in its host's template (or bare, for the print version).

    ``hrefs`` are the spelled hrefs of ``page.links``; ``revision`` (empty
    for version 0) a paragraph after the story.
    """
    if article.role == "print":
        return print_html(page, article, hrefs)
    tpl, esc = TEMPLATES[article.template], html.escape
    ad = f"<div class='ad'>{esc(ADS[article.ad])}</div>\n" if article.ad >= 0 else ""
    story = _story(page, article, hrefs, ad) + (
        f"<p class='revision'>{esc(revision)}</p>\n" if revision else ""
    )
    parts = (
        [_sidebar(article, hrefs), story]
        if tpl.sidebar_first
        else [story, _sidebar(article, hrefs)]
    )
    title = tpl.title.format(headline=page.title, topic=article.topic, brand=tpl.brand)
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{esc(title)}"
        f"</title></head>\n<body>\n<header><p class='brand'>{esc(tpl.brand)}</p>"
        f"<p class='tagline'>{esc(tpl.tagline)}</p>\n<nav>"
        + _list(_links(article, hrefs, "nav"), "menu")
        + "</nav></header>\n"
        + (ad if tpl.ad_at == "top" else "")
        + "<main>\n"
        + "".join(parts)
        + "</main>\n"
        + (ad if tpl.ad_at == "bottom" else "")
        + f"<footer><p>{esc(tpl.footer)}</p>"
        + _list(_links(article, hrefs, "footer"), "footer-links")
        + "</footer>\n"
        + _session_form(article)
        + "</body></html>\n"
    )


def print_html(page: Page, article: Article, hrefs: list[str]) -> str:
    """The print version: headline, byline, paragraphs and a link back; no template."""
    esc = html.escape
    paragraphs = "\n".join(f"<p>{esc(p)}</p>" for p in page.text.split("\n"))
    back = "".join(f"<p>{a}</p>" for a in _links(article, hrefs, "back"))
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>"
        f"{esc(page.title)}</title></head>\n<body>\n<h1>{esc(page.title)}</h1>\n"
        f"<p>By {esc(article.byline)}</p>\n{paragraphs}\n{back}\n</body></html>\n"
    )
