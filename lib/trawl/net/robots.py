"""robots.txt decisions per RFC 9309, built on protego.

What protego does for us: rule precedence and matching. It stores the
allow/disallow patterns of a group, normalises their percent-encoding together
with the URL's (non-ASCII octets encoded, ``%xx`` upper-cased, unreserved
escapes decoded; RFC 9309 2.2.2 and RFC 3986 6.2.2), sorts them so that the
longest match wins and ``allow`` wins a tie (2.2.2), and implements ``*`` and
``$`` (2.2.3). That is the part that is easy to get subtly wrong, so we keep it.

Why we do not hand protego the raw file: its line reader and group selection
differ from RFC 9309 / Google's robotstxt in ways that cannot be fixed from the
outside without classifying each line first:

* unknown lines (and ``Crawl-delay``) end protego's group, so ``user-agent: a``,
  ``foo: bar``, ``user-agent: b`` became two groups (2.2.4: other records MUST
  NOT interfere with the parsing of groups);
* it matches a group's user-agent as a substring of the caller's agent
  ("foo" matches "foo-bar") and keeps spaces ("Foo Bar"), where 2.2.1 (and
  Google) compare one product token exactly, case-insensitively;
* no UTF-8 BOM handling at the byte level (partial BOMs too), no 500 KiB
  limit (2.5), no cap on line length, and ``str.splitlines`` also breaks lines
  at characters such as U+2028 that are not line ends in robots.txt (2.2);
* it decodes escapes of invalid UTF-8 to U+FFFD, so "%E9" matched "%E8"
  (fixed by ``_shield_escapes`` on both the rules and the URL).

So this module reads the lines itself (a small tokenizer following RFC 9309 2.2
and Google's leniencies: missing colon, common typos), builds the groups, picks
the ones for our product token (or ``*``), and hands protego a one-group
robots.txt made of exactly those rules. ``Crawl-delay`` and ``Sitemap`` are
collected here too. Matching is then protego's.

Deliberate differences from Google's matcher (see tests/net/test_robots.py):
the URL is percent-encoded before matching (RFC 9309 2.2.2 MUST; Google leaves
that to its caller), and ``%xx`` escapes of unreserved characters match their
literal character (the RFC 9309 2.2.2 example table). ``matches`` is the
matcher alone, as Google's is; ``allowed`` is the crawler's decision, which
adds RFC 9309 2.2.2's "the /robots.txt URI is implicitly allowed".

The caller's agent is its product token (``http.agent_name``, which config
checks to be one), compared case-insensitively with the token each
user-agent line starts with. A caller string that is not a valid token
("Foo Bar", "trawl/0.1") matches no named group and gets ``*``, as in Google's
parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote

from protego import Protego

__all__ = [
    "MAX_REDIRECTS",
    "MAX_ROBOTS_BYTES",
    "ParseStats",
    "RobotsRules",
    "is_valid_product_token",
    "path_params_query",
    "rules_for_fetch",
]

# RFC 9309 2.5: the parsing limit MUST be at least 500 kibibytes.
MAX_ROBOTS_BYTES: Final = 500 * 1024
# Google's robotstxt ignores a line's bytes past 8 * 2083 (8 maximal URLs).
MAX_LINE_BYTES: Final = 2083 * 8 - 1
# RFC 9309 2.3.1.2: follow at least five consecutive redirects.
MAX_REDIRECTS: Final = 5

_UTF8_BOM: Final = b"\xef\xbb\xbf"
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")  # RFC 9309 2.2: NL = CR / LF / CRLF
_ASCII_WS: Final = " \t\n\r\f\v"
_TOKEN_RUN: Final = re.compile(r"[A-Za-z_-]*")  # RFC 9309 2.2 `identifier`
_PROTEGO_AGENT: Final = "trawl-selected-group"
_BEFORE_PATH: Final = re.compile(r"(?://)?(?:[^/?;]*?://)?[^/?;]*")  # [//][scheme://]authority
_ESCAPE_RUN: Final = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_SHIELD_BASE: Final = 0xF700 - 0xDC00  # surrogateescape U+DC80..DCFF -> U+F780..F7FF

_USER_AGENT_KEYS: Final = ("user-agent", "useragent", "user agent")
_DISALLOW_KEYS: Final = ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")
_SITEMAP_KEYS: Final = ("sitemap", "site-map")
_CRAWL_DELAY_KEYS: Final = frozenset({"crawl-delay", "crawl delay", "crawldelay"})


def is_valid_product_token(token: str | None) -> bool:
    """True if ``token`` is a non-empty RFC 9309 2.2.1 product token and nothing else."""
    return bool(token) and _TOKEN_RUN.fullmatch(token or "") is not None


def path_params_query(url: str) -> str:
    """Path, params and query of ``url`` (scheme, authority, fragment dropped).

    RFC 9309 2.2.2 matches rules "starting with the first octet of the path".
    Follows Google's ``GetPathParamsQuery``: the result always starts with "/"
    and an unparsable URL gives "/". A scheme-less "host/path" is accepted.
    """
    match = _BEFORE_PATH.match(url)
    prefix = match.group() if match else ""
    if "#" in prefix:
        return "/"
    path = url[len(prefix) :].partition("#")[0]
    return path if path.startswith("/") else "/" + path


@dataclass(frozen=True)
class ParseStats:
    """Counts from parsing, for logs and metrics (Google's reporting terms)."""

    lines: int = 0
    valid_directives: int = 0
    unknown_directives: int = 0
    truncated: bool = False


@dataclass
class _Group:
    """One RFC 9309 2.1 group: user-agent lines followed by rules."""

    agents: set[str] = field(default_factory=set)
    rules: list[tuple[str, str]] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)


UNREACHABLE_REASONS = frozenset({"unreachable", "status_429", "status_5xx", "status_other"})
# Why a fetch task defers a host's URLs when its robots.txt stays unreachable
# (complete disallow, 2.3.1.4): they wait for a later segment.
DEFERRED_UNREACHABLE = "robots_unreachable"


class RobotsRules:
    """The robots.txt rules in force for one agent on one authority.

    ``reason`` says why: "parsed" (a 2xx body), "status_4xx", "status_3xx" or
    "too_many_redirects" (allow all), "status_429", "status_5xx",
    "status_other" or "unreachable" (disallow all), or what the caller of
    ``allow_all``/``disallow_all`` passed.
    """

    __slots__ = ("_crawl_delay", "_default", "_matcher", "_sitemaps", "agent", "reason", "stats")

    def __init__(
        self,
        reason: str,
        agent: str = "",
        *,
        default: bool = True,
        matcher: Protego | None = None,
        crawl_delay: float | None = None,
        sitemaps: Iterable[str] = (),
        stats: ParseStats | None = None,
    ) -> None:
        self.reason = reason
        self.agent = agent
        self.stats = stats or ParseStats()
        self._default = default
        self._matcher = matcher
        self._crawl_delay = crawl_delay
        self._sitemaps = list(dict.fromkeys(sitemaps))

    @property
    def source(self) -> str:
        """Alias of ``reason``."""
        return self.reason

    @property
    def unreachable(self) -> bool:
        """True for the complete disallow of RFC 9309 2.3.1.4 (robots.txt could
        not be fetched): the site is waited for, its URLs are not gone, and
        such rules are never cached."""
        return self.reason in UNREACHABLE_REASONS

    def relabelled(self, reason: str) -> RobotsRules:
        """The same rules, in force for another reason (e.g. a stale copy)."""
        return RobotsRules(
            reason,
            self.agent,
            default=self._default,
            matcher=self._matcher,
            crawl_delay=self._crawl_delay,
            sitemaps=self._sitemaps,
            stats=self.stats,
        )

    @classmethod
    def allow_all(cls, reason: str) -> RobotsRules:
        """Rules that allow every URL (e.g. robots.txt "unavailable", 2.3.1.3)."""
        return cls(reason, default=True)

    @classmethod
    def disallow_all(cls, reason: str) -> RobotsRules:
        """Rules that disallow every URL (e.g. robots.txt "unreachable", 2.3.1.4)."""
        return cls(reason, default=False)

    @classmethod
    def parse(cls, body: bytes | str, agent: str, max_bytes: int = MAX_ROBOTS_BYTES) -> RobotsRules:
        """Parse a robots.txt body for ``agent``, our product token (RFC 9309 2.2.1)."""
        raw = body.encode("utf-8", "replace") if isinstance(body, str) else bytes(body)
        lines, truncated = _split_lines(raw, max_bytes)
        token = agent.lower() if is_valid_product_token(agent) else ""
        groups: list[_Group] = []
        sitemaps: list[str] = []
        current: _Group | None = None
        in_rules = False
        valid = unknown = 0
        for line in lines:
            key_value = _key_value(line)
            if key_value is None:
                continue
            kind, value = _classify(key_value[0]), key_value[1]
            if kind is None:
                # RFC 9309 2.2.4: other records MUST NOT terminate a group.
                unknown += 1
                continue
            valid += 1
            if kind == "user-agent":
                # RFC 9309 2.1: a user-agent line after rules starts a new group;
                # consecutive user-agent lines share the group.
                if current is None or in_rules:
                    current = _Group()
                    groups.append(current)
                    in_rules = False
                current.agents.add(_group_agent(value))
            elif kind in ("allow", "disallow"):
                # RFC 9309 2.2.2: rules outside any group SHOULD be ignored.
                if current is not None:
                    current.rules.append((kind, value))
                    in_rules = True
            elif kind == "sitemap":
                # RFC 9309 2.2.4 other record; Sitemaps are not group members.
                if value:
                    sitemaps.append(value)
            elif current is not None:  # crawl-delay: non-standard, group member
                delay = _parse_delay(value)
                if delay is not None:
                    current.delays.append(delay)

        # RFC 9309 2.2.1: merge every group naming our token (case-insensitive);
        # failing that, every "*" group; failing that, no rules apply.
        chosen = [g for g in groups if token and token in g.agents]
        if not chosen:
            chosen = [g for g in groups if "*" in g.agents]
        robots = [f"user-agent: {_PROTEGO_AGENT}"]
        robots += [f"{kind}: {_protego_value(v)}" for g in chosen for kind, v in g.rules]
        delays = [d for g in chosen for d in g.delays]
        return cls(
            "parsed",
            token,
            matcher=Protego.parse("\n".join(robots)),
            # Several delays for one group: the most polite (largest) one.
            crawl_delay=max(delays) if delays else None,
            sitemaps=sitemaps,
            stats=ParseStats(len(lines), valid, unknown, truncated),
        )

    def allowed(self, url: str) -> bool:
        """May the crawler fetch ``url`` (absolute, or a path) under these rules?

        The rules' answer (``matches``), except that RFC 9309 2.2.2 makes
        "/robots.txt" always allowed when a file was parsed.
        """
        if self._matcher is not None and path_params_query(url).partition("?")[0] == "/robots.txt":
            return True
        return self.matches(url)

    def matches(self, url: str) -> bool:
        """What the rules alone say of ``url``: True = allowed (longest match,
        allow wins ties, RFC 9309 2.2.2). This is the matcher the conformance
        corpora check."""
        if self._matcher is None:
            return self._default
        path = path_params_query(url)
        # Protego drops the scheme and authority itself; giving it a fixed one
        # keeps a path starting with "//" from being read as an authority.
        url = "http://robots.invalid" + _shield_escapes(path)
        # The group's rule set, not ``Protego.can_fetch``, which always allows
        # "/robots.txt": that exemption is ``allowed``'s (protego pinned at 0.7.0).
        rule_set = self._matcher._get_matching_rule_set(_PROTEGO_AGENT)
        return rule_set is None or bool(rule_set.can_fetch(url))

    def crawl_delay(self) -> float | None:
        """Crawl-delay in seconds for our group (or ``*``), None if not given."""
        return self._crawl_delay

    def sitemaps(self) -> list[str]:
        """Sitemap URLs in file order, duplicates removed (not group-bound)."""
        return list(self._sitemaps)

    def __repr__(self) -> str:
        return f"RobotsRules(reason={self.reason!r}, agent={self.agent!r})"


def rules_for_fetch(
    status: int | None, body: bytes | None, agent: str, redirects_followed: int = 0
) -> RobotsRules:
    """The rules in force after fetching /robots.txt (RFC 9309 2.3.1).

    ``status`` is the final HTTP status, None for a network error or timeout;
    ``redirects_followed`` is how many redirects led to it.
    """
    if redirects_followed > MAX_REDIRECTS:
        # RFC 9309 2.3.1.2: more than five consecutive redirects MAY be
        # treated as "unavailable" (2.3.1.3).
        return RobotsRules.allow_all("too_many_redirects")
    if status is None:
        # RFC 9309 2.3.1.4: unreachable due to network errors -> complete disallow.
        return RobotsRules.disallow_all("unreachable")
    if 200 <= status < 300:
        # RFC 9309 2.3.1.1: successful download -> follow the parseable rules
        # (2.3.1.5: parse each line, use what parses).
        return RobotsRules.parse(body or b"", agent)
    if 300 <= status < 400:
        # RFC 9309 2.3.1.2: a redirect the fetcher did not (or could not)
        # follow to a file; no robots.txt was reached, so "unavailable".
        return RobotsRules.allow_all("status_3xx")
    if status == 429:
        # 429 is in the 4xx range RFC 9309 2.3.1.3 calls "unavailable", but it
        # means the server is overloaded: like Google, treat it as a server
        # error, "unreachable" (2.3.1.4) -> complete disallow.
        return RobotsRules.disallow_all("status_429")
    if 400 <= status < 500:
        # RFC 9309 2.3.1.3: "unavailable" (incl. 401/403/404) -> MAY access anything.
        return RobotsRules.allow_all("status_4xx")
    if 500 <= status < 600:
        # RFC 9309 2.3.1.4: server error -> "unreachable" -> complete disallow.
        return RobotsRules.disallow_all("status_5xx")
    # Not a final HTTP status (1xx or out of range): nothing trustworthy was
    # fetched, so err on the side of 2.3.1.4 and disallow.
    return RobotsRules.disallow_all("status_other")


def _split_lines(raw: bytes, max_bytes: int) -> tuple[list[str], bool]:
    """Decode ``raw`` into lines, applying the size limits."""
    truncated = len(raw) > max_bytes
    if truncated:
        # RFC 9309 2.5: parse (at least) the first max_bytes. A line cut in two
        # could change meaning ("Allow: /abc" -> "Allow: /a"), so drop it.
        complete = raw[max_bytes : max_bytes + 1] in (b"\r", b"\n")
        raw = raw[:max_bytes]
        if not complete:
            raw = raw[: max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1]
    # A UTF-8 byte order mark, or the start of one, is skipped (as Google does).
    skip = 0
    while skip < len(_UTF8_BOM) and raw[skip : skip + 1] == _UTF8_BOM[skip : skip + 1]:
        skip += 1
    parts = _LINE_END.split(raw[skip:])
    if len(parts) > 1 and not parts[-1]:
        parts.pop()  # the file ends with a line end, not an empty last line
    # RFC 9309 2.3: UTF-8; invalid sequences are replaced, not fatal (2.3.1.5).
    return [p[:MAX_LINE_BYTES].decode("utf-8", "replace") for p in parts], truncated


def _key_value(line: str) -> tuple[str, str] | None:
    """Split a line into key and value (RFC 9309 2.2), or None if it has none."""
    line = line.partition("#")[0].strip(_ASCII_WS)  # "#" starts a comment (2.2.3)
    key, sep, value = line.partition(":")
    if not sep:
        # Google's leniency: "key value" without a colon, if exactly two words.
        words = re.split(r"[ \t]+", line)
        if len(words) != 2:
            return None
        key, value = words
    key = key.strip(_ASCII_WS)
    return (key, value.strip(_ASCII_WS)) if key else None


def _classify(key: str) -> str | None:
    """The record a key names, accepting typos as Google does (RFC 9309 2.2.4)."""
    lower = key.lower()
    if lower.startswith(_USER_AGENT_KEYS):
        return "user-agent"
    if lower.startswith("allow"):
        return "allow"
    if lower.startswith(_DISALLOW_KEYS):
        return "disallow"
    if lower.startswith(_SITEMAP_KEYS):
        return "sitemap"
    if lower in _CRAWL_DELAY_KEYS:
        return "crawl-delay"
    return None


def _group_agent(value: str) -> str:
    """The product token a user-agent line names, lower-cased (RFC 9309 2.2.1).

    "*" (also "* anything", as Google reads it) is the catch-all; otherwise the
    leading token, so "FooBot/1.0" and "Foo Bar" name "foobot" and "foo".
    """
    if value[:1] == "*" and (len(value) == 1 or value[1] in _ASCII_WS):
        return "*"
    match = _TOKEN_RUN.match(value)
    return match.group().lower() if match else ""


def _parse_delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if 0 <= delay < float("inf") else None


def _protego_value(value: str) -> str:
    """Escape what protego's line reader would mangle (equivalent for matching).

    ``str.splitlines`` breaks at U+2028, U+0085, ... and ``str.strip`` eats
    Unicode spaces; protego percent-encodes such characters anyway.
    """
    value = _shield_escapes(value)
    if value.isascii() and value.isprintable():
        return value
    return "".join(quote(ch, safe="") if not ch.isprintable() else ch for ch in value)


def _shield_escapes(text: str) -> str:
    """Keep escapes of invalid UTF-8 distinct inside protego.

    Protego decodes ``%xx`` runs as UTF-8 with errors replaced, so ``%E9`` and
    ``%E8`` (Latin-1 query strings) would both become U+FFFD and match each
    other. Such bytes become private-use characters instead (U+F780..F7FF,
    which protego then percent-encodes like any other), identically for URL
    and rule; valid escapes are kept, upper-cased (RFC 3986 6.2.2.1).
    """
    if "%" not in text:
        return text

    def shield(run: re.Match[str]) -> str:
        decoded = bytes.fromhex(run.group().replace("%", "")).decode("utf-8", "surrogateescape")
        return "".join(
            chr(ord(ch) + _SHIELD_BASE)
            if "\udc80" <= ch <= "\udcff"
            else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
            for ch in decoded
        )

    return _ESCAPE_RUN.sub(shield, text)
