"""The rules a fetch task applies to a host: from hostdb's hints, the config, the operator.

Decided before and between the task's requests, without asking the host
anything (``trawl.fetch.task`` applies them): which robots.txt rules are in
force -- hostdb's copy while it is fresh (RFC 9309 2.4: no longer than 24
hours); while robots.txt is unreachable, its last usable copy or else
complete disallow (2.3.1.4), and no restrictions once the outage outlasts
``robots.unreachable_fallback_s`` -- and the ``robots_decision`` a page gets
under them; whether the host is due a soft-404 probe
(``traps.soft404_reprobe_s``); the politeness gap rule, and the scheduler's
clock reading for hostdb's next allowed visit; the operator's policy
(``trawl policy``) as a task reads it, afresh on every call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from trawl.config import Config
from trawl.dedup.soft404 import ProbeAnswer
from trawl.fetch.politeness import GapRule
from trawl.fetch.visit import origin_of
from trawl.net.robots import UNREACHABLE_REASONS, RobotsRules
from trawl.store.files import CrawlRoot

# An operator's verdict on a host: None (no rule), or (why it must stop --
# "" if it need not --, minimum delay). A source gives a fresh view when called.
HostVerdict = Callable[[str, str, datetime], tuple[str, float | None] | None]
PolicySource = Callable[[], HostVerdict]


def stored_rules(item: Mapping[str, Any], cfg: Config) -> RobotsRules | None:
    """The last usable robots.txt answer hostdb keeps for this origin (a parsed
    file or an allow-all 4xx), whatever its age; None if there is none."""
    status = item.get("robots_status")
    if not item.get("robots_fetched_at") or not item.get("robots_url") or not status:
        return None
    if status in UNREACHABLE_REASONS:
        return None
    if origin_of(str(item["robots_url"])) != origin_of(str(item["url"])):
        return None
    if status == "parsed":
        body = item.get("robots_body") or ""
        return RobotsRules.parse(body, cfg.http.agent_name, max_bytes=cfg.robots.max_bytes)
    return RobotsRules.allow_all(str(status))


def cached_rules(item: Mapping[str, Any], cfg: Config, now: datetime) -> RobotsRules | None:
    """hostdb's copy if it is younger than the cache limit (RFC 9309 2.4: no
    longer than 24 hours) and no outage began since; else None (fetch it)."""
    fetched_at = item.get("robots_fetched_at")
    if not fetched_at or item.get("robots_unreachable_since"):
        return None
    if now - _utc(fetched_at) > timedelta(seconds=cfg.robots.cache_ttl_s):
        return None
    return stored_rules(item, cfg)


def rules_when_unreachable(
    item: Mapping[str, Any], fetched: RobotsRules, cfg: Config, now: datetime
) -> RobotsRules:
    """What governs a host whose robots.txt could not be fetched just now.

    RFC 9309 2.3.1.4 / 2.4: keep using a cached copy if there is one; with
    none, complete disallow -- until the outage is older than
    ``robots.unreachable_fallback_s``, then no restrictions (as Google does
    after 30 days).
    """
    stored = stored_rules(item, cfg)
    if stored is not None:
        return stored.relabelled(f"stale_copy_{fetched.reason}")
    since = item.get("robots_unreachable_since")
    if since and now - _utc(since) > timedelta(seconds=cfg.robots.unreachable_fallback_s):
        return RobotsRules.allow_all(f"unreachable_long_{fetched.reason}")
    return fetched


def allowed_decision(rules: RobotsRules) -> str:
    """robots_decision of an allowed page: plain, or under which fallback."""
    return "allowed" if rules.reason in ("parsed", "status_4xx") else f"allowed_{rules.reason}"


def denied_decision(rules: RobotsRules) -> str:
    return "robots_denied" if rules.reason == "parsed" else f"robots_denied_{rules.reason}"


def probe_due(known: ProbeAnswer | None, cfg: Config, now: datetime) -> bool:
    """Should the host be probed for soft 404s in this segment? When probes
    are on and hostdb has none, or one older than ``traps.soft404_reprobe_s``
    (timed like robots.txt freshness, on the fetch's clock)."""
    if not cfg.traps.soft404_probe:
        return False
    if known is None or known.probed_at is None:
        return True
    return now - _utc(known.probed_at) > timedelta(seconds=cfg.traps.soft404_reprobe_s)


def gap_rule(cfg: Config) -> GapRule:
    p = cfg.politeness
    return GapRule(
        p.min_delay_s, p.delay_factor, p.max_delay_s, cfg.robots.max_crawl_delay_s, p.max_backoff_s
    )


def monotonic_at(when: datetime | None, now: datetime) -> float:
    """The scheduler's clock reading for a wall-clock time from hostdb (the
    host's next allowed visit, carried over from the last cycle)."""
    if when is None:
        return 0.0
    return time.monotonic() + (_utc(when) - now).total_seconds()


def _utc(when: datetime) -> datetime:
    """Spark hands timestamps back naive (session time zone UTC): make them aware."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def policy_source(root: CrawlRoot) -> PolicySource:
    """The operator's policy table (``trawl policy``) as a fetch task reads it:
    each call re-reads it (cheaply when nothing changed) and returns a view.
    A table that cannot be read is an error, never "no rules"."""
    from trawl.crawldb.policy import resolve
    from trawl.store.policy import PolicyView

    table = PolicyView.of(root)

    def source() -> HostVerdict:
        rules = table.refresh()

        def verdict(host: str, domain: str, now: datetime) -> tuple[str, float | None] | None:
            if not rules:
                return None
            found = resolve(rules, host, domain, now)
            if found.stops(now):
                what = "blocked" if found.blocked else f"paused until {found.paused_until}"
                return f"{what} ({'; '.join(found.reasons)})", found.min_delay_s
            if found.min_delay_s is None:
                return None
            return "", found.min_delay_s

        return verdict

    return source
