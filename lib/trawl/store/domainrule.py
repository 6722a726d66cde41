"""The rule behind the registered domains a crawl table holds, and the
migration in place when a table was written under the previous one.

Four tables under the crawl root hold registered domains
(:func:`trawl.url.keys.registered_domain`): crawldb and hostdb (``domain``,
computed from the row's ``host``), ``domainlinks`` (``from_domain``,
``to_domain``: pairs, without hosts) and ``policy`` (the targets of
``domain`` rules, which an operator chose). Since registered domains follow
the Public Suffix List's private section too (``alice.github.io`` and
``bob.github.io`` are two sites, no longer one ``github.io``), each of them
records the rule its values follow as the table property
``trawl.domain_rule`` (:data:`DOMAIN_RULE_PROPERTY`, value
:data:`trawl.url.keys.DOMAIN_RULE`). trawl sets it when it creates the table
(``trawl.store.tables.ensure_table``, and ``trawl.store.policy.PolicyStore``
for a policy table the operator's first command makes), so a fresh root
never migrates. A table without it was written by an older trawl under the
ICANN section alone, and the first time a job opens it
(``ensure_table``, which every read, write and MERGE goes through, so
``inject``, ``generate``, ``updatedb`` and the rest all see migrated rows)
it is migrated in place and then marked:

- **crawldb, hostdb**: the domain is recomputed from ``host`` over the
  table's distinct (host bucket, host, domain) and only the rows whose value
  changes are MERGEd (matched on bucket, host and old domain, so a file with
  nothing to change is not rewritten; a row without a domain, which trawl
  never writes, is left as it is). An old crawl with no host under a private
  suffix gets the property and no commit. Budgets, caps and domain rules
  then see the new sites from the same cycle on.
- **domainlinks**: a pair has no hosts, so one that names a domain the new
  rule splits (:func:`~trawl.url.keys.domains_with_private_suffixes`:
  ``github.io``, ``blogspot.com``, ``amazonaws.com`` for its ``s3``
  buckets) cannot be re-attributed: ``github.io -> example.com`` was *some*
  github.io site, and which one was not recorded. Those pairs are deleted;
  every other pair names domains both rules agree on and stays. updatedb
  gathers the deleted links again, with the right sites, as it refetches the
  pages that hold them. Until then budgets err low, never high: a domain
  loses the in-links it had from split domains, and a site under a private
  suffix starts at ``budget.min_pages``, as any site nothing is known to
  link to. Not rebuilt from the segments' outlinks: segments may have been
  removed, and replaying updatedb's choice of followed links (the filters,
  trap rules and caps in force then) outside updatedb would be a second copy
  of it that drifts from the first.
- **policy**: an operator's rule on a split domain (block ``github.io``)
  was meant for every host under it, and now covers fewer (the host
  ``github.io`` alone; for ``amazonaws.com``, not its ``s3`` buckets). The
  table is an append-only audit trail, so the rule stays as it is; for each
  host crawldb knows under it whose registered domain is now another, the
  rule is copied onto that domain (``trawl.crawldb.policy.split_rule_copies``),
  so nothing the operator stopped starts being fetched at the upgrade. Sites
  found later under the suffix are not covered: ``trawl policy list`` warns
  about such a rule, and ``trawl policy clear`` still takes it. A page cap
  becomes per site, as domain budgets now are.

Each step is safe to re-run: run again, it finds nothing left to change,
and the property is set only after its commit, so a job that dies between
the two does the (empty) step again. The policy copy reads crawldb's hosts,
not its domains, so it is right whether crawldb was migrated first or not.
A table marked with a rule this trawl does not know (a newer trawl wrote
it) is refused rather than migrated backwards. The migration runs in
whichever command opens the table first after the upgrade, best a job of
the cycle, which holds the crawl's lease (``stats``, ``sql`` and ``export``
do not take it).

Not migrated: a segment's fetch list is written once and never changed; one
generated before the upgrade and fetched after carries the old domains,
which that one fetch uses for domain rules and claims. And the rule names
the PSL's sections, not its snapshot: a tldextract upgrade whose bundled
list moves a suffix is not detected.

No pyspark import at module level: ``trawl.store.policy`` (which runs
without a JVM) takes the property from here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import UTC
from functools import reduce
from typing import TYPE_CHECKING

from trawl.crawldb.policy import PolicyRule, in_force, split_rule_copies
from trawl.url.keys import DOMAIN_RULE, domains_with_private_suffixes, registered_domain

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = [
    "DOMAIN_RULE_PROPERTY",
    "DOMAIN_TABLES",
    "domain_rule_properties",
    "migrate",
    "needs_migration",
]

DOMAIN_RULE_PROPERTY = "trawl.domain_rule"
# The crawl tables that hold registered domains.
DOMAIN_TABLES = frozenset({"crawldb", "hostdb", "domainlinks", "policy"})


def domain_rule_properties(name: str) -> dict[str, str]:
    """The property table ``name`` is created with ({} if it holds no domains)."""
    return {DOMAIN_RULE_PROPERTY: DOMAIN_RULE} if name in DOMAIN_TABLES else {}


def needs_migration(name: str, properties: Mapping[str, str]) -> bool:
    """Whether table ``name``, with these properties, was written under the
    previous rule; ValueError for a rule this trawl does not know."""
    if name not in DOMAIN_TABLES:
        return False
    rule = properties.get(DOMAIN_RULE_PROPERTY)
    if rule is None:
        return True
    if rule != DOMAIN_RULE:
        raise ValueError(
            f"the {name} table holds registered domains under the rule {rule!r}, "
            f"and this trawl knows {DOMAIN_RULE!r} only: was it written by a newer trawl?"
        )
    return False


def migrate(spark: SparkSession, name: str, path: str, crawldb: str) -> int:
    """Migrate table ``name`` at ``path`` to the current rule (see the module
    docstring); the rows changed, deleted or appended. ``crawldb``: the
    crawldb's path, whose hosts the policy copies are made for. The caller
    sets the property afterwards."""
    if name in ("crawldb", "hostdb"):
        done = _recompute(spark, path)
    elif name == "domainlinks":
        done = _drop_split_pairs(spark, path)
    elif name == "policy":
        done = _copy_split_rules(spark, path, crawldb)
    else:
        raise ValueError(f"table {name} holds no registered domains")
    if done:
        what = {"domainlinks": "pairs deleted", "policy": "rules copied"}.get(name, "rows updated")
        print(
            f"[trawl] {name}: registered domains now follow the public suffix list's "
            f"private section ({done} {what})",
            file=sys.stderr,
            flush=True,
        )
    return done


def _domain_of(host: str | None) -> str | None:
    return None if host is None else registered_domain(host)


def _recompute(spark: SparkSession, path: str) -> int:
    """MERGE the new domain into the rows of crawldb or hostdb whose value changes."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    # a row without a domain was written under no rule: left as it is
    rows = spark.read.format("delta").load(path).filter("host IS NOT NULL AND domain IS NOT NULL")
    new_domain = F.udf(_domain_of, "string", useArrow=True)
    changed = (
        rows.select("host_bucket", "host", F.col("domain").alias("old"))
        .distinct()
        .withColumn("domain", new_domain("host"))
        .filter(~F.col("domain").eqNullSafe(F.col("old")))
        .localCheckpoint(eager=True)  # computed once: counted, then the MERGE's source
    )
    if changed.isEmpty():
        return 0
    metrics = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(
            changed.alias("s"),
            "t.host_bucket <=> s.host_bucket AND t.host = s.host AND t.domain = s.old",
        )
        .whenMatchedUpdate(set={"domain": "s.domain"})
        .execute()
        .first()
    )
    return int(metrics["num_updated_rows"]) if metrics is not None else 0


def _split(columns: Iterable[str]) -> Column:
    from pyspark.sql import functions as F

    split = sorted(domains_with_private_suffixes())
    return reduce(lambda a, b: a | b, (F.col(c).isin(split) for c in columns))


def _drop_split_pairs(spark: SparkSession, path: str) -> int:
    """Delete the domain pairs that name a domain the private section splits."""
    from delta.tables import DeltaTable

    condition = _split(("from_domain", "to_domain"))
    doomed = spark.read.format("delta").load(path).filter(condition).count()
    if doomed:
        DeltaTable.forPath(spark, path).delete(condition)
    return doomed


def _read_rules(spark: SparkSession, path: str) -> list[PolicyRule]:
    """Every row of the policy table, through Spark (any root Spark reaches)."""
    rows = spark.read.format("delta").load(path).toArrow().to_pylist()
    for row in rows:
        for column in ("set_at", "paused_until"):
            if row[column] is not None:
                row[column] = row[column].astimezone(UTC)
    return [PolicyRule(**row) for row in rows]


def _hosts_under(spark: SparkSession, crawldb: str, domains: Iterable[str]) -> list[str]:
    """crawldb's distinct hosts that are one of ``domains`` or under one."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not DeltaTable.isDeltaTable(spark, crawldb):
        return []
    host = F.col("host")
    under = reduce(lambda a, b: a | b, ((host == d) | host.endswith(f".{d}") for d in domains))
    hosts = spark.read.format("delta").load(crawldb).filter(under).select("host").distinct()
    return sorted(str(row["host"]) for row in hosts.collect())


def _copy_split_rules(spark: SparkSession, path: str, crawldb: str) -> int:
    """Append copies of the domain rules in force on split domains, onto the
    sites crawldb knows under them (one commit; none when nothing is new)."""
    from trawl.store.schemas import POLICY_SCHEMA

    rules = _read_rules(spark, path)
    split = domains_with_private_suffixes()
    legacy = [r for r in in_force(rules).values() if r.scope == "domain" and r.target in split]
    if not legacy:
        return 0
    hosts = _hosts_under(spark, crawldb, {r.target for r in legacy})
    copies = split_rule_copies(legacy, hosts, {r.key for r in rules})
    if copies:
        rows = [copy.as_row() for copy in copies]
        spark.createDataFrame(rows, POLICY_SCHEMA).write.format("delta").mode("append").save(path)
    return len(copies)
