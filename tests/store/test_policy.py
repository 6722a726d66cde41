"""The policy table through deltalake, without Spark: round trips, its schema,
a missing or broken table, and the view a fetch task re-reads."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.crawldb.test_policy import T0, WHO, rule
from trawl.crawldb.policy import RuleChange
from trawl.store.domainrule import DOMAIN_RULE_PROPERTY
from trawl.store.policy import (
    POLICY_ARROW_SCHEMA,
    PolicyStore,
    PolicyTableError,
    PolicyView,
    load_in_force,
)
from trawl.url.keys import DOMAIN_RULE


def test_store_round_trip(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path)
    assert store.rules() == [] and store.in_force() == {}
    first = store.set("host", "A.Example.com", RuleChange(blocked=True), at=T0, **WHO)
    second = store.set("host", "a.example.com", RuleChange(min_delay_s=4.0), at=T0, **WHO)
    domain = store.set("domain", "example.com", RuleChange(max_pages_per_cycle=3), at=T0, **WHO)
    assert second.set_at == T0 + timedelta(microseconds=1)  # same clock reading: still later
    assert (second.blocked, second.min_delay_s) == (True, 4.0)
    assert store.rules() == [domain, first, second]  # by set_at, then (scope, target)
    assert store.in_force() == {
        ("host", "a.example.com"): second,
        ("domain", "example.com"): domain,
    }
    gone = store.clear("host", "a.example.com", at=T0, **WHO)
    assert store.rules()[-1] == gone
    assert store.in_force() == {("domain", "example.com"): domain}
    assert load_in_force(tmp_path) == store.in_force()


def test_table_has_the_policy_schema(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    PolicyStore(tmp_path).set("host", "a.example.com", RuleChange(blocked=True), at=T0, **WHO)
    table = DeltaTable(str(tmp_path / "policy"))
    assert pa.schema(table.schema().to_arrow()) == POLICY_ARROW_SCHEMA
    assert (table.protocol().min_reader_version, table.protocol().min_writer_version) == (1, 2)
    # its domain targets follow the current rule: no job will migrate it
    assert table.metadata().configuration == {DOMAIN_RULE_PROPERTY: DOMAIN_RULE}


def test_a_domain_rule_from_before_the_private_section_can_be_cleared(tmp_path: Path) -> None:
    """A rule on github.io, set when it was the registered domain of every
    github.io site: no rule may name it now, but the one in force is cleared."""
    legacy = rule(target="github.io", scope="domain", action="block", blocked=True)
    write_deltalake(
        str(tmp_path / "policy"), pa.Table.from_pylist([legacy.as_row()], POLICY_ARROW_SCHEMA)
    )
    store = PolicyStore(tmp_path)
    with pytest.raises(ValueError, match="public suffix"):
        store.set("domain", "github.io", RuleChange(min_delay_s=3.0), at=T0, **WHO)
    gone = store.clear("domain", "GitHub.io", at=T0 + timedelta(hours=1), **WHO)
    assert (gone.scope, gone.target, gone.action) == ("domain", "github.io", "clear")
    assert store.in_force() == {}


def test_store_refuses_invalid_rows_before_writing(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path)
    with pytest.raises(ValueError, match="non-empty reason"):
        store.append(rule(reason=""))
    with pytest.raises(ValueError, match="nothing to set"):
        store.set("host", "a.example.com", RuleChange(), at=T0, **WHO)
    assert not (tmp_path / "policy").exists()


def test_missing_table_means_no_rules(tmp_path: Path) -> None:
    assert load_in_force(tmp_path / "nowhere") == {}
    (tmp_path / "policy" / "_delta_log").mkdir(parents=True)  # created, nothing committed
    assert load_in_force(tmp_path) == {}


def test_a_broken_table_is_an_error_not_an_empty_policy(tmp_path: Path) -> None:
    log = tmp_path / "policy" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("garbage\n")
    with pytest.raises(PolicyTableError, match="cannot read the policy table at") as exc:
        load_in_force(tmp_path)
    assert "\n" not in str(exc.value)


def test_a_row_without_scope_is_an_error(tmp_path: Path) -> None:
    row = {**rule().as_row(), "scope": None}
    write_deltalake(str(tmp_path / "policy"), pa.Table.from_pylist([row], POLICY_ARROW_SCHEMA))
    with pytest.raises(PolicyTableError, match="a row trawl cannot use"):
        load_in_force(tmp_path)


def test_view_sees_new_rules_and_reuses_an_unchanged_read(tmp_path: Path) -> None:
    view = PolicyView(tmp_path)
    assert dict(view.refresh()) == {}
    store = PolicyStore(tmp_path)
    block = store.set("host", "a.example.com", RuleChange(blocked=True), at=T0, **WHO)
    seen = view.refresh()
    assert dict(seen) == {("host", "a.example.com"): block}
    assert view.refresh() is seen  # same table version: no re-read
    store.clear("host", "a.example.com", at=T0, **WHO)
    assert dict(view.refresh()) == {}


def test_view_raises_on_a_broken_table(tmp_path: Path) -> None:
    view = PolicyView(tmp_path)
    PolicyStore(tmp_path).set("host", "a.example.com", RuleChange(blocked=True), at=T0, **WHO)
    view.refresh()
    for data in (tmp_path / "policy").glob("*.parquet"):
        data.unlink()
    PolicyStore(tmp_path).append(rule(target="b.example.com", blocked=True))  # reads no data
    with pytest.raises(PolicyTableError, match="cannot read"):
        view.refresh()
