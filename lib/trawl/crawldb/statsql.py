"""``trawl stats`` as SQL text that both engines run: DuckDB over delta-rs
(``trawl.store.lake``, the default, no JVM) and Spark SQL (``--engine
spark``, ``trawl.stages.stats``).

Nutch's ``readdb -stats`` and more: URLs by status, hosts, and per segment
the fetch outcomes from the counters table, rejected links by reason and
deferred URLs by domain, and per registered domain its hosts, how many the
operator named, its STAR budget and the operator's. The queries name their
tables ``{crawldb}``, ``{counters}``, ``{rejected}``, ``{domainlinks}`` and
``{policy}``; the caller fills them in (Spark's frame arguments, or the
lake's view names).

Written in the SQL both dialects share: ``count(CASE ...)`` rather than a
``sum`` (DuckDB sums integers to HUGEINT), sums cast to BIGINT, and the one
function that differs, a sorted set of strings, filled in per dialect. The
rules match generate's (``trawl.stages.ranking``): which hosts the operator
named (``trusted_hosts``), the STAR budget (``domain_budgets``) and the
policy in force (``effective_policy``); the stats tests hold them together.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from trawl.config import Config
from trawl.crawldb.admission import NAMED_SOURCES
from trawl.crawldb.status import HAS_CONTENT

# The domains the "domains" section shows: the most URLs first.
TOP_DOMAINS = 20
DIALECTS = ("duckdb", "spark")
_SORTED_SET = {
    "duckdb": "list_sort(list_distinct(list({0})))",
    "spark": "array_sort(collect_set({0}))",
}


def _strings(values: Iterable[object]) -> str:
    return ", ".join(f"'{v}'" for v in sorted(str(v) for v in values))


def _timestamp(at: datetime) -> str:
    """``at`` as a SQL literal of UTC wall time (both sessions run in UTC)."""
    return f"TIMESTAMP '{at.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')}'"


def stats_queries(cfg: Config, at: datetime, dialect: str) -> dict[str, str]:
    """Every section of ``trawl stats`` by title, as SQL for ``dialect``."""
    if dialect not in DIALECTS:
        raise ValueError(f"no SQL dialect {dialect!r} (one of {', '.join(DIALECTS)})")
    sorted_set = _SORTED_SET[dialect]
    return {
        "totals": (
            "SELECT count(*) AS urls, count(DISTINCT host) AS hosts, "
            "count(DISTINCT domain) AS domains, CAST(sum(fetches) AS BIGINT) AS fetches "
            "FROM {crawldb}"
        ),
        "by_status": (
            "SELECT status, count(*) AS urls FROM {crawldb} GROUP BY status "
            "ORDER BY urls DESC, status"
        ),
        "segments": _segments(),
        # What was kept out of the crawl and why: links never added (filter
        # rules, normaliser errors, trap caps), and due URLs put off by their
        # domain's budget (in crawldb, until generated).
        "rejected": (
            "SELECT reason, count(*) AS urls, count(DISTINCT host) AS hosts, "
            "count(DISTINCT segment) AS segments FROM {rejected} "
            "GROUP BY reason ORDER BY urls DESC, reason"
        ),
        "deferred": (
            "SELECT deferred_reason AS reason, domain, count(*) AS urls, "
            "max(deferrals) AS most_in_a_row, min(next_fetch_at) AS next_due FROM {crawldb} "
            "WHERE deferred_reason IS NOT NULL GROUP BY deferred_reason, domain "
            "ORDER BY urls DESC, domain LIMIT 20"
        ),
        "domains": _domains(cfg, at, sorted_set),
    }


def _segments() -> str:
    def total(condition: str) -> str:
        return f"CAST(sum(CASE WHEN {condition} THEN value END) AS BIGINT)"

    columns = {
        "generated": "name = 'generate/urls'",
        "fetched": "name = 'fetch/page/success'",
        "other_outcomes": "name LIKE 'fetch/page/%' AND name <> 'fetch/page/success'",
        "internal_errors": "name LIKE 'fetch/why/%/internal'",
        "robots_denied": "name = 'robots/robots_denied'",
        "new_urls": "name = 'updatedb/new_urls'",
        "duplicates": "name = 'dedup/duplicates/marked'",
        "rejected": "name LIKE 'updatedb/rejected/%'",
        "deferred": "name = 'generate/deferred/budget'",
    }
    picked = ", ".join(f"{total(cond)} AS {name}" for name, cond in columns.items())
    return f"SELECT segment, {picked} FROM {{counters}} GROUP BY segment ORDER BY segment"


def _domains(cfg: Config, at: datetime, sorted_set: str) -> str:
    """Per registered domain (the ``TOP_DOMAINS`` with the most URLs): its
    hosts and how many the operator named (each a budget group of its own,
    ``budget.seed_host_pages`` a segment), the domains linking in, its STAR
    budget a segment (pages per distinct other domain linking to it, between
    ``budget.min_pages`` and ``budget.max_pages``; null when budgets are
    off), the operator's budget (a domain policy's page cap, which replaces
    STAR's), and its URLs: with content, due, and deferred, with why."""
    b = cfg.budget
    if b.enabled:
        star = (
            f"CAST(least({b.max_pages}, greatest({b.min_pages}, "
            f"coalesce(l.linking_domains, 0) * {b.pages_per_linking_domain})) AS INT)"
        )
    else:
        star = "CAST(NULL AS INT)"
    content = _strings(s.value for s in HAS_CONTENT)
    due = f"next_fetch_at IS NULL OR next_fetch_at <= {_timestamp(at)}"
    return f"""
WITH roots AS (
  SELECT host, domain, source FROM {{crawldb}} WHERE coalesce(depth, 0) = 0
), named AS (
  SELECT DISTINCT host, domain FROM roots WHERE source IN ({_strings(NAMED_SOURCES)})
), trusted AS (
  SELECT host FROM named
  UNION
  SELECT r.host FROM roots r JOIN (SELECT DISTINCT domain FROM named) d ON r.domain = d.domain
  WHERE r.source = 'redirect'
), hosts AS (
  SELECT h.domain, count(*) AS hosts, count(t.host) AS named_hosts
  FROM (SELECT DISTINCT domain, host FROM {{crawldb}}) h LEFT JOIN trusted t ON h.host = t.host
  GROUP BY h.domain
), urls AS (
  SELECT domain, count(*) AS urls,
    count(CASE WHEN status IN ({content}) THEN 1 END) AS with_content,
    count(CASE WHEN {due} THEN 1 END) AS due,
    count(deferred_reason) AS deferred,
    {sorted_set.format("deferred_reason")} AS deferred_why
  FROM {{crawldb}} GROUP BY domain
), linking AS (
  SELECT to_domain AS domain, count(DISTINCT from_domain) AS linking_domains
  FROM {{domainlinks}} GROUP BY to_domain
), latest AS (
  SELECT target, max_pages_per_cycle,
    row_number() OVER (PARTITION BY target ORDER BY set_at DESC) AS n
  FROM {{policy}} WHERE scope = 'domain'
)
SELECT u.domain, h.hosts, h.named_hosts, coalesce(l.linking_domains, 0) AS linking_domains,
  {star} AS star_budget, p.max_pages_per_cycle AS policy_budget,
  u.urls, u.with_content, u.due, u.deferred, u.deferred_why
FROM urls u
LEFT JOIN hosts h ON h.domain = u.domain
LEFT JOIN linking l ON l.domain = u.domain
LEFT JOIN (SELECT * FROM latest WHERE n = 1) p ON p.target = u.domain
ORDER BY u.urls DESC, u.domain
LIMIT {TOP_DOMAINS}
"""
