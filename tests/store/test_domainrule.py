"""Registered domains under the PSL's private section: a crawl written before
(every github.io site in one domain ``github.io``) is migrated in place when a
job opens it, and a fresh root never is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from trawl.config import load_config
from trawl.runner import JobContext, run_generate, segment_id
from trawl.store import deltars
from trawl.store.domainrule import DOMAIN_RULE_PROPERTY, DOMAIN_TABLES, migrate
from trawl.store.files import CrawlRoot
from trawl.store.policy import PolicyStore
from trawl.store.schemas import POLICY_SCHEMA
from trawl.store.tables import _ENSURED, TABLES, ensure_all, read_segment_table, table_path
from trawl.url.keys import DOMAIN_RULE, icann_registered_domain, url_fingerprint

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# host -> (address, URLs in crawldb)
HOSTS = {
    "alice.github.io": ("10.0.0.1", 2),
    "bob.github.io": ("10.0.0.2", 1),
    "dave.blogspot.com": ("10.0.0.3", 1),  # under a domain rule set before the change
    "www.example.com": ("10.0.0.4", 1),
}
LINKS = [("github.io", "example.com"), ("example.com", "github.io"), ("example.com", "example.org")]


def _rows(schema: Any, **columns: Any) -> dict[str, Any]:
    return {**dict.fromkeys(schema.fieldNames()), **columns}


def _old_table(spark: Any, root: str, name: str, rows: list[dict[str, Any]]) -> None:
    """Table ``name`` as the previous trawl wrote it: created without the
    domain rule's property, its rows with domains of the ICANN section alone."""
    schema, partitions = TABLES[name]
    deltars.ensure(CrawlRoot.of(root), name, schema, partitions, {})
    frame = spark.createDataFrame(rows, schema)
    frame.write.format("delta").mode("append").save(table_path(root, name))
    _ENSURED.discard(table_path(root, name))


def _old_crawl(spark: Any, root: str) -> None:
    crawldb, hostdb = TABLES["crawldb"][0], TABLES["hostdb"][0]
    urls = [(host, f"http://{host}/p{i}") for host, (_, n) in HOSTS.items() for i in range(n)]
    _old_table(spark, root, "crawldb", [
        _rows(crawldb, url=url, url_fp=url_fingerprint(url), host=host, host_bucket=0,
              domain=icann_registered_domain(host), status="unfetched", depth=0, score=1.0)
        for host, url in urls
    ])  # fmt: skip
    seen = AT - timedelta(hours=1)
    _old_table(spark, root, "hostdb", [
        _rows(hostdb, host=host, host_bucket=0, domain=icann_registered_domain(host), ip=ip,
              robots_fetched_at=seen, soft404_probed_at=seen)
        for host, (ip, _) in HOSTS.items()
    ])  # fmt: skip
    _old_table(spark, root, "domainlinks", [
        {"from_domain": a, "to_domain": b, "first_segment": "s0", "last_segment": "s0"}
        for a, b in LINKS
    ])  # fmt: skip
    _old_table(spark, root, "policy", [
        _rows(POLICY_SCHEMA, scope="domain", target="blogspot.com", action="block", blocked=True,
              set_by="bob", set_at=AT - timedelta(days=1), reason="asked us to stop")
    ])  # fmt: skip


def _state(root: str) -> dict[str, tuple[int, str | None]]:
    """Each domain table's version and domain rule, from its log."""
    out = {}
    for name in sorted(DOMAIN_TABLES):
        table = DeltaTable(table_path(root, name))
        out[name] = (table.version(), table.metadata().configuration.get(DOMAIN_RULE_PROPERTY))
    return out


def test_a_crawl_from_before_the_private_section_is_migrated_by_its_next_job(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "crawl")
    _old_crawl(spark, root)
    assert {rule for _, rule in _state(root).values()} == {None}
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("".join(f"{ip} {host}\n" for host, (ip, _) in HOSTS.items()))
    cfg = load_config(
        None,
        [f"dns.hosts_file={hosts_file}", "generate.max_per_domain=1", "budget.enabled=false"],
        environ={},
    )
    ctx = JobContext(spark, cfg, root, segment_id(AT), AT)

    run_generate(ctx)

    crawldb = spark.read.format("delta").load(table_path(root, "crawldb"))
    assert {(r["host"], r["domain"]) for r in crawldb.collect()} == {
        ("alice.github.io", "alice.github.io"),
        ("bob.github.io", "bob.github.io"),
        ("dave.blogspot.com", "dave.blogspot.com"),
        ("www.example.com", "example.com"),
    }
    hostdb = spark.read.format("delta").load(table_path(root, "hostdb"))
    assert {r["host"]: r["domain"] for r in hostdb.collect()} == {
        "alice.github.io": "alice.github.io",
        "bob.github.io": "bob.github.io",
        "dave.blogspot.com": "dave.blogspot.com",
        "www.example.com": "example.com",
    }
    # pairs naming github.io cannot say which site: gone, to be gathered again
    links = spark.read.format("delta").load(table_path(root, "domainlinks"))
    assert [(r["from_domain"], r["to_domain"]) for r in links.collect()] == [LINKS[2]]
    # the block of blogspot.com is copied onto the site the crawl knows under it
    rules = PolicyStore(root).in_force()
    assert set(rules) == {("domain", "blogspot.com"), ("domain", "dave.blogspot.com")}
    copy = rules[("domain", "dave.blogspot.com")]
    assert (copy.blocked, copy.set_by, copy.set_at) == (True, "trawl", AT - timedelta(days=1))
    assert {rule for _, rule in _state(root).values()} == {DOMAIN_RULE}

    # generate saw the new sites: one URL per site (max_per_domain = 1), not
    # one for all of github.io; dave.blogspot.com blocked by its copy
    fetchlist = read_segment_table(spark, root, ctx.segment, "fetchlist").collect()
    assert sorted((r["host"], r["domain"]) for r in fetchlist) == [
        ("alice.github.io", "alice.github.io"),
        ("bob.github.io", "bob.github.io"),
        ("www.example.com", "example.com"),
    ]

    # a second run, in a new process, changes nothing; nor does the migration itself
    before = _state(root)
    for name in TABLES:
        _ENSURED.discard(table_path(root, name))
    ensure_all(spark, root, None, CrawlRoot.of(root))
    assert _state(root) == before
    for name in sorted(DOMAIN_TABLES):
        path = table_path(root, name)
        assert migrate(spark, name, path, table_path(root, "crawldb")) == 0, name
    assert _state(root) == before


def test_a_fresh_root_is_marked_at_creation_and_never_migrated(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    ensure_all(spark, root, None, CrawlRoot.of(root))
    # created, then marked: delta-rs takes only delta.* properties at creation
    assert _state(root) == {name: (1, DOMAIN_RULE) for name in DOMAIN_TABLES}
    for name in set(TABLES) - DOMAIN_TABLES:
        properties = DeltaTable(table_path(root, name)).metadata().configuration
        assert DOMAIN_RULE_PROPERTY not in properties, name


def test_a_table_marked_with_an_unknown_rule_is_refused(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "crawl")
    schema, partitions = TABLES["hostdb"]
    deltars.ensure(CrawlRoot.of(root), "hostdb", schema, partitions, {})
    DeltaTable(table_path(root, "hostdb")).alter.set_table_properties(
        {DOMAIN_RULE_PROPERTY: "some-future-rule"}, raise_if_not_exists=False
    )
    with pytest.raises(ValueError, match="some-future-rule"):
        ensure_all(spark, root, None, CrawlRoot.of(root))


def test_through_spark_alone_a_table_is_marked_and_an_old_one_migrated(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root delta-rs cannot reach: Spark creates, migrates and marks."""
    from trawl.store import tables

    monkeypatch.setattr(tables, "_files", lambda root: None)
    root = str(tmp_path / "crawl")
    hostdb = TABLES["hostdb"][0]
    _old_table(spark, root, "hostdb", [
        _rows(hostdb, host=h, host_bucket=0, domain=icann_registered_domain(h))
        for h in ("alice.github.io", "www.example.com")
    ])  # fmt: skip
    tables.ensure_table(spark, root, "hostdb")
    tables.ensure_table(spark, root, "domainlinks")  # created by Spark
    for name in ("hostdb", "domainlinks"):
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{table_path(root, name)}`").first()
        assert detail is not None and detail["properties"][DOMAIN_RULE_PROPERTY] == DOMAIN_RULE
    rows = tables.read_table(spark, root, "hostdb").collect()
    assert sorted(r["domain"] for r in rows) == ["alice.github.io", "example.com"]
