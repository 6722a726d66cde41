"""Fuzz trawl.net.robots: any bytes give a decision, the same one every time,
and a group for another agent never changes ours.

Bodies are robots.txt-shaped (user-agent, allow, disallow, crawl-delay and
sitemap lines with Google's typos and colon-less forms, comments, wildcards,
``$``, percent-escapes, non-ASCII, every line end, byte order marks) or
arbitrary bytes; agents are product tokens, invalid tokens and arbitrary text.
"""

from __future__ import annotations

import math
import pickle

from hypothesis import example
from hypothesis import strategies as st

from tests.fuzz.properties import fuzz
from trawl.net.robots import RobotsRules, path_params_query, rules_for_fetch

AGENT = "trawl"

RULE_PATHS = st.one_of(
    st.sampled_from(["/", "/a", "/a/b", "/*", "/a$", "/$", "*", "", "/%E9", "/%e8", "/%62"]),
    st.sampled_from(["/ツ", "/robots.txt", "/a?b", "/*a*a*a*a*a*b", "/a/*/c$", "/\u2028x"]),
    st.text(max_size=8),
)
AGENTS = st.one_of(
    st.sampled_from(["*", AGENT, "TRAWL", "trawl/1.0", "trawlbot", "other", "* x", "Foo Bar", ""]),
    st.from_regex(r"[A-Za-z_-]{1,8}", fullmatch=True),
    st.text(max_size=6),
)
KEYS = st.sampled_from([
    "user-agent", "User-Agent", "useragent", "user agent", "allow", "Disallow", "dissallow",
    "disalow", "crawl-delay", "Crawl-delay", "sitemap", "site-map", "foo", "", " ",
])  # fmt: skip
DELAYS = st.one_of(
    st.sampled_from(["1", "0.5", "-1", "inf", "nan", "1e400", "0x10", ""]),
    st.floats(allow_nan=False).map(str),
)
LINES = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", KEYS, st.one_of(RULE_PATHS, AGENTS, DELAYS)),
    st.builds(lambda k, v: f"{k} {v}", KEYS, RULE_PATHS),  # Google: no colon, two words
    st.builds(lambda k, v: f"  {k}  :{v}  # note", KEYS, RULE_PATHS),
    st.sampled_from(["#", "# comment", "", "   ", ":", "a: b: c"]),
    st.text(max_size=12),
)
LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def robots_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(LINES, LINE_ENDS), max_size=16))
    body = "".join(line + end for line, end in lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]  # cut anywhere, mid-line too
    return draw(st.sampled_from([b"", b"", b"\xef\xbb\xbf", b"\xef\xbb", b"\xff"])) + body


BODIES = st.one_of(robots_files(), st.binary(max_size=300))
URLS = st.lists(
    st.one_of(RULE_PATHS, st.sampled_from(["http://x/a/b?c#d", "//x/a", "x/a", "#a"])),
    min_size=1,
    max_size=6,
)


def decisions(rules: RobotsRules, urls: list[str]) -> tuple[list[bool], float | None]:
    """What the rules decide for each URL, and the crawl delay."""
    return [rules.allowed(url) for url in urls], rules.crawl_delay()


@fuzz(BODIES, st.one_of(st.just(AGENT), AGENTS), URLS, max_examples=300)
@example(b"user-agent: *\ndisallow: /\n", AGENT, ["/robots.txt", "/a"])
@example(b"\xef\xbb\xbfuser-agent:trawl\ndisallow:/*a*a*a*a*a*b$", AGENT, ["/" + "a" * 500])
def test_any_bytes_give_a_decision(body: bytes, agent: str, urls: list[str]) -> None:
    rules = RobotsRules.parse(body, agent)
    allowed, delay = decisions(rules, urls)
    assert all(isinstance(a, bool) for a in allowed)
    assert all(isinstance(rules.matches(url), bool) for url in urls)
    assert delay is None or (delay >= 0 and math.isfinite(delay))
    assert all(isinstance(s, str) and s for s in rules.sitemaps())
    assert rules.allowed("/robots.txt")  # RFC 9309 2.2.2: always allowed
    assert all(path_params_query(url).startswith("/") for url in urls)


@fuzz(BODIES, AGENTS, URLS, max_examples=200)
def test_a_decision_is_deterministic(body: bytes, agent: str, urls: list[str]) -> None:
    rules = RobotsRules.parse(body, agent)
    again = RobotsRules.parse(body, agent)
    shipped = pickle.loads(pickle.dumps(rules))  # as Spark ships it to an executor
    for other in (again, shipped):
        assert decisions(other, urls) == decisions(rules, urls)
        assert other.sitemaps() == rules.sitemaps()


OTHER_AGENTS = st.lists(
    st.one_of(
        st.from_regex(r"[A-Za-z_-]{1,10}", fullmatch=True),
        st.sampled_from(["trawlbot", "trawl-news", "trawl_x", "Googlebot", "xtrawl"]),
    ).filter(lambda name: name.lower() != AGENT),
    min_size=1,
    max_size=3,
)
GROUP_LINES = st.lists(
    st.one_of(
        st.builds(lambda k, v: f"{k}: {v}", st.sampled_from(["allow", "disallow"]), RULE_PATHS),
        st.builds(lambda v: f"crawl-delay: {v}", DELAYS),
        st.sampled_from(["# comment", "", "foo: bar"]),
    ),
    min_size=1,
    max_size=5,
)


@fuzz(BODIES, OTHER_AGENTS, GROUP_LINES, URLS, max_examples=300)
@example(b"user-agent: *\ndisallow: /a\n", ["other"], ["disallow: /", "crawl-delay: 9"], ["/b"])
@example(b"user-agent: trawl", ["other"], ["disallow: /"], ["/"])
def test_a_group_for_another_agent_changes_nothing(
    body: bytes, others: list[str], group: list[str], urls: list[str]
) -> None:
    # "disallow:" (empty: disallows nothing) first ends whatever group the body
    # left open: after a bare "user-agent: trawl" line a following
    # "user-agent: other" would join trawl's group (RFC 9309 2.1), so the
    # appended rules would rightly be ours too.
    closed = body + b"\ndisallow:\n"
    appended = "".join(f"user-agent: {name}\n" for name in others) + "\n".join(group) + "\n"
    before = RobotsRules.parse(closed, AGENT)
    after = RobotsRules.parse(closed + appended.encode("utf-8", "surrogatepass"), AGENT)
    assert decisions(after, urls) == decisions(before, urls)


@fuzz(
    st.one_of(st.none(), st.integers(-1, 1_000)),
    st.one_of(st.none(), BODIES),
    st.integers(0, 8),
    URLS,
    max_examples=200,
)
def test_every_fetch_outcome_gives_rules(
    status: int | None, body: bytes | None, redirects: int, urls: list[str]
) -> None:
    rules = rules_for_fetch(status, body, AGENT, redirects)
    allowed, _ = decisions(rules, urls)
    if redirects > 5 or (status is not None and 300 <= status < 500 and status != 429):
        assert all(allowed) and not rules.unreachable  # RFC 9309 2.3.1.2-3: unavailable
    elif status is None or status == 429 or not 200 <= status < 300:
        assert not any(allowed) and rules.unreachable  # 2.3.1.4: unreachable
    else:
        assert rules.reason == "parsed"
