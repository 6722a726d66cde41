"""Operator policy without Spark: rule semantics, validation, the deltalake
table, and ``trawl policy`` round trips through ``trawl.cli.main``."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from trawl.cli import main
from trawl.store.policy import (
    POLICY_ARROW_SCHEMA,
    HostPolicy,
    PolicyRule,
    PolicyStore,
    PolicyTableError,
    PolicyView,
    RuleChange,
    check_rule,
    cleared,
    in_force,
    load_in_force,
    merge,
    normalize_target,
    parse_duration,
    parse_time,
    resolve,
    rules_for,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WHO = {"set_by": "alice", "reason": "test"}


def rule(target: str = "a.example.com", scope: str = "host", **fields: Any) -> PolicyRule:
    base: dict[str, Any] = {
        "action": "set",
        "blocked": False,
        "min_delay_s": None,
        "paused_until": None,
        "max_pages_per_cycle": None,
        "set_by": "alice",
        "set_at": T0,
        "reason": "test",
    }
    return PolicyRule(scope=scope, target=target, **{**base, **fields})


def set_host(previous: PolicyRule | None, change: RuleChange, at: datetime = T0) -> PolicyRule:
    return merge(previous, change, scope="host", target="a.example.com", at=at, **WHO)


# --------------------------------------------------------------------------- merge and clear


def test_set_keeps_the_fields_it_does_not_name() -> None:
    blocked = set_host(None, RuleChange(blocked=True))
    slowed = set_host(blocked, RuleChange(min_delay_s=5.0), T0 + timedelta(minutes=1))
    assert (slowed.blocked, slowed.min_delay_s, slowed.action) == (True, 5.0, "slow")
    unblocked = set_host(slowed, RuleChange(blocked=False), T0 + timedelta(minutes=2))
    assert (unblocked.blocked, unblocked.min_delay_s, unblocked.action) == (False, 5.0, "unblock")


def test_first_rule_starts_unblocked_and_empty() -> None:
    first = set_host(None, RuleChange(max_pages_per_cycle=0))
    assert first == rule(action="budget", max_pages_per_cycle=0)


@pytest.mark.parametrize(
    ("change", "action"),
    [
        (RuleChange(blocked=True), "block"),
        (RuleChange(blocked=False), "unblock"),
        (RuleChange(min_delay_s=2.0), "slow"),
        (RuleChange(paused_until=T0), "pause"),
        (RuleChange(max_pages_per_cycle=3), "budget"),
        (RuleChange(blocked=True, min_delay_s=2.0), "set"),
        (RuleChange(paused_until=T0, max_pages_per_cycle=3), "set"),
    ],
)
def test_action_names_what_the_row_changed(change: RuleChange, action: str) -> None:
    assert set_host(None, change).action == action


def test_nothing_to_set_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing to set"):
        set_host(None, RuleChange())


def test_set_after_clear_starts_from_nothing() -> None:
    blocked = set_host(None, RuleChange(blocked=True, min_delay_s=9.0))
    gone = cleared(
        blocked, scope="host", target="a.example.com", at=T0 + timedelta(seconds=1), **WHO
    )
    assert gone.action == "clear"
    assert (gone.blocked, gone.min_delay_s, gone.paused_until, gone.max_pages_per_cycle) == (
        None,
        None,
        None,
        None,
    )
    again = set_host(gone, RuleChange(max_pages_per_cycle=4), T0 + timedelta(seconds=2))
    assert (again.blocked, again.min_delay_s, again.max_pages_per_cycle) == (False, None, 4)


def test_clearing_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"no policy in force for host a\.example\.com"):
        cleared(None, scope="host", target="a.example.com", at=T0, **WHO)
    gone = cleared(rule(), scope="host", target="a.example.com", at=T0, **WHO)
    with pytest.raises(ValueError, match="no policy in force"):
        cleared(gone, scope="host", target="a.example.com", at=T0, **WHO)


def test_set_at_moves_past_the_row_it_replaces() -> None:
    """A slow clock must not leave the older row in force."""
    future = rule(set_at=T0 + timedelta(hours=1), blocked=True)
    after = set_host(future, RuleChange(min_delay_s=1.0), at=T0)
    assert after.set_at == future.set_at + timedelta(microseconds=1)
    assert in_force([future, after])[("host", "a.example.com")] is after


def test_set_at_is_utc() -> None:
    at = datetime(2026, 11, 30, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert set_host(None, RuleChange(blocked=True), at).set_at == T0
    assert set_host(None, RuleChange(blocked=True), at).set_at.utcoffset() == timedelta(0)


def test_merge_refuses_a_previous_rule_of_another_target() -> None:
    with pytest.raises(ValueError, match="previous rule is for"):
        set_host(rule(target="b.example.com"), RuleChange(blocked=True))


def test_in_force_is_the_latest_row_per_target_without_clears() -> None:
    a1 = rule(blocked=True)
    a2 = rule(set_at=T0 + timedelta(seconds=1), min_delay_s=3.0)
    b1 = rule(target="b.example.com", blocked=True)
    b2 = replace(b1, action="clear", blocked=None, set_at=T0 + timedelta(seconds=1))
    d1 = rule(scope="domain", target="a.example.com", max_pages_per_cycle=1)
    assert in_force([a2, b2, a1, b1, d1]) == {
        ("host", "a.example.com"): a2,
        ("domain", "a.example.com"): d1,
    }


def test_in_force_tie_goes_to_the_later_row() -> None:
    first, second = rule(blocked=True), rule(blocked=False)
    assert in_force([first, second])[("host", "a.example.com")] is second


# --------------------------------------------------------------------------- resolve


def rules_of(*rules: PolicyRule) -> dict[tuple[str, str], PolicyRule]:
    return in_force(rules)


def test_resolve_without_rules_restricts_nothing() -> None:
    policy = resolve({}, "a.example.com", "example.com", T0)
    assert policy == HostPolicy()
    assert not policy.stops(T0)


def test_resolve_takes_the_most_restrictive_of_host_and_domain() -> None:
    host = rule(min_delay_s=2.0, max_pages_per_cycle=50, paused_until=T0 + timedelta(hours=1))
    domain = rule(
        scope="domain",
        target="example.com",
        blocked=True,
        min_delay_s=10.0,
        max_pages_per_cycle=5,
        paused_until=T0 + timedelta(hours=3),
        reason="abuse report",
        set_by="bob",
    )
    policy = resolve(rules_of(host, domain), "a.example.com", "example.com", T0)
    assert policy == HostPolicy(
        blocked=True,
        paused_until=T0 + timedelta(hours=3),
        min_delay_s=10.0,
        max_pages_per_cycle=5,
        reasons=("host a.example.com: test (alice)", "domain example.com: abuse report (bob)"),
    )


@pytest.mark.parametrize(
    ("host_fields", "domain_fields", "expected"),
    [
        ({"blocked": True}, {}, {"blocked": True}),
        ({}, {"blocked": True}, {"blocked": True}),
        ({"min_delay_s": 7.0}, {"min_delay_s": 3.0}, {"min_delay_s": 7.0}),
        ({"max_pages_per_cycle": 2}, {"max_pages_per_cycle": 9}, {"max_pages_per_cycle": 2}),
        ({"max_pages_per_cycle": 0}, {}, {"max_pages_per_cycle": 0}),
        ({}, {"min_delay_s": 3.0}, {"min_delay_s": 3.0}),
    ],
)
def test_resolve_field_by_field(
    host_fields: dict[str, Any], domain_fields: dict[str, Any], expected: dict[str, Any]
) -> None:
    host = rule(**host_fields)
    domain = rule(scope="domain", target="example.com", **domain_fields)
    policy = resolve(rules_of(host, domain), "a.example.com", "example.com", T0)
    got = {name: getattr(policy, name) for name in expected}
    assert got == expected
    others = {"blocked": False, "min_delay_s": None, "max_pages_per_cycle": None}
    assert {k: getattr(policy, k) for k in others if k not in expected} == {
        k: v for k, v in others.items() if k not in expected
    }


def test_resolve_ignores_other_hosts_and_domains() -> None:
    other = rule(target="b.example.com", blocked=True)
    other_domain = rule(scope="domain", target="example.org", blocked=True)
    assert (
        resolve(rules_of(other, other_domain), "a.example.com", "example.com", T0) == HostPolicy()
    )


def test_a_pause_stops_until_it_ends() -> None:
    until = T0 + timedelta(hours=2)
    policy = resolve(rules_of(rule(paused_until=until)), "a.example.com", "example.com", T0)
    assert policy.paused_until == until
    assert policy.stops(T0)
    assert policy.stops(until - timedelta(microseconds=1))
    assert not policy.stops(until)


def test_an_ended_pause_no_longer_counts() -> None:
    ended = rule(paused_until=T0 - timedelta(minutes=1))
    policy = resolve(rules_of(ended), "a.example.com", "example.com", T0)
    assert policy == HostPolicy()


def test_a_block_stops_at_any_time() -> None:
    policy = resolve(rules_of(rule(blocked=True)), "a.example.com", "example.com", T0)
    assert policy.stops(T0) and policy.stops(T0 + timedelta(days=3650))


def test_rules_for_a_host_include_its_domain() -> None:
    rules = [
        rule(target="a.example.com"),
        rule(scope="domain", target="example.com"),
        rule(target="b.example.com"),
        rule(scope="domain", target="example.org"),
    ]
    got = rules_for(rules, "host", "A.Example.com")
    assert [r.key for r in got] == [("host", "a.example.com"), ("domain", "example.com")]
    assert [r.key for r in rules_for(rules, "domain", "example.com")] == [("domain", "example.com")]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("scope", "text", "name"),
    [
        ("host", "WWW.Example.COM", "www.example.com"),
        ("host", " www.example.com. ", "www.example.com"),
        ("host", "bücher.de", "xn--bcher-kva.de"),
        ("host", "10.0.0.1", "10.0.0.1"),
        ("host", "[::1]", "[::1]"),
        ("host", "localhost", "localhost"),
        ("domain", "Example.CO.UK", "example.co.uk"),
        ("domain", "bücher.de", "xn--bcher-kva.de"),
        ("domain", "site-7.test", "site-7.test"),
    ],
)
def test_targets_are_normalised(scope: str, text: str, name: str) -> None:
    assert normalize_target(scope, text) == name


@pytest.mark.parametrize(
    ("scope", "text", "message"),
    [
        ("host", "http://a.example.com/", "bare name"),
        ("host", "a.example.com:8080", "bare name"),
        ("host", "a.example.com/path", "bare name"),
        ("host", "user@a.example.com", "bare name"),
        ("host", "", "bare name"),
        ("host", "a..example.com", "not a valid host"),
        ("host", "-a.example.com", "not a valid host"),
        ("domain", "www.example.com", "not a registered domain .that is 'example.com'"),
        ("domain", "co.uk", "public suffix"),
        ("domain", "com", "public suffix"),
        ("domain", "10.0.0.1", "public suffix or an address"),
        ("site", "a.example.com", "scope must be"),
    ],
)
def test_bad_targets_are_refused(scope: str, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_target(scope, text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "2", "h", "2x", "-1h", "0m", "2 h", "1e3s", "9" * 12 + "d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="pause-for"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("2026-11-30T12:00:00", T0),
        ("2026-11-30T12:00:00Z", T0),
        ("2026-11-30T14:00:00+02:00", T0),
        ("2026-11-30 12:00", T0),
    ],
)
def test_pause_times_are_utc(text: str, when: datetime) -> None:
    got = parse_time(text)
    assert got == when and got.utcoffset() == timedelta(0)


def test_bad_pause_time() -> None:
    with pytest.raises(ValueError, match="pause-until wants ISO 8601"):
        parse_time("tomorrow")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"min_delay_s": 0.0}, "min delay must be a positive"),
        ({"min_delay_s": -1.0}, "min delay must be a positive"),
        ({"min_delay_s": math.inf}, "min delay must be a positive"),
        ({"min_delay_s": math.nan}, "min delay must be a positive"),
        ({"max_pages_per_cycle": -1}, "max pages must be"),
        ({"max_pages_per_cycle": 2**31}, "max pages must be"),
        ({"reason": "  "}, "non-empty reason"),
        ({"set_by": ""}, "non-empty set by"),
        ({"set_at": datetime(2026, 1, 1)}, "set_at must be timezone-aware"),
        ({"paused_until": datetime(2026, 1, 1)}, "paused_until must be timezone-aware"),
        ({"action": "nuke"}, "unknown policy action"),
        ({"action": "clear", "blocked": None, "min_delay_s": 1.0}, "carries no rule fields"),
        ({"blocked": None}, "whether the target is blocked"),
        ({"target": "A.example.com"}, "canonical form"),
    ],
)
def test_check_rule_refuses(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_rule(rule(**fields))


def test_check_rule_accepts_a_full_rule() -> None:
    full = rule(blocked=True, min_delay_s=0.5, paused_until=T0, max_pages_per_cycle=0)
    assert check_rule(full) is full


# --------------------------------------------------------------------------- the Delta table


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


# --------------------------------------------------------------------------- the CLI

Cli = Callable[[str], tuple[int, str, str]]


@pytest.fixture
def crawl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr("getpass.getuser", lambda: "carol")
    return str(tmp_path / "crawl")


@pytest.fixture
def policy(crawl: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``policy("set --host h --block --reason r")`` -> (exit code, stdout, stderr)."""

    def run(args: str) -> tuple[int, str, str]:
        code = main(["policy", *shlex.split(args), "--crawl", crawl])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def json_rows(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_cli_set_prints_the_rule_in_force(policy: Cli) -> None:
    code, out, err = policy("set --host A.Example.com --block --reason hammered --json")
    assert (code, err) == (0, "")
    (row,) = json_rows(out)
    assert (row["scope"], row["target"], row["action"], row["blocked"]) == (
        "host",
        "a.example.com",
        "block",
        True,
    )
    assert (row["set_by"], row["reason"]) == ("carol", "hammered")
    set_at = datetime.fromisoformat(row["set_at"])
    assert set_at.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - set_at) < timedelta(minutes=1)
    code, out, _ = policy("set --host a.example.com --min-delay 5 --reason 'go slow' --by dave")
    assert code == 0
    title, header, _, line = out.strip().splitlines()
    assert title == "policy in force"
    assert header.split() == [f.name for f in POLICY_ARROW_SCHEMA]
    assert line.split()[:5] == ["host", "a.example.com", "slow", "True", "5"]
    assert "dave" in line and line.endswith("go slow")


def test_cli_list_history_and_clear(policy: Cli) -> None:
    assert policy("set --host a.example.com --block --reason r1")[0] == 0
    assert policy("set --domain example.com --pause-for 2h --reason r2")[0] == 0
    assert policy("set --host b.example.org --min-delay 3 --reason r3")[0] == 0

    rows = json_rows(policy("list --json")[1])
    assert [(r["scope"], r["target"]) for r in rows] == [
        ("domain", "example.com"),
        ("host", "a.example.com"),
        ("host", "b.example.org"),
    ]
    pause = datetime.fromisoformat(rows[0]["paused_until"]) - datetime.fromisoformat(
        rows[0]["set_at"]
    )
    assert pause == timedelta(hours=2)

    rows = json_rows(policy("list --host a.example.com --json")[1])
    assert [r["target"] for r in rows] == ["example.com", "a.example.com"]

    code, out, _ = policy("clear --host a.example.com --reason 'ok now' --json")
    assert code == 0
    (row,) = json_rows(out)
    assert (row["action"], row["blocked"], row["reason"]) == ("clear", None, "ok now")
    assert [r["target"] for r in json_rows(policy("list --json")[1])] == [
        "example.com",
        "b.example.org",
    ]

    history = json_rows(policy("list --history --json")[1])
    assert [(r["target"], r["action"], r["reason"]) for r in history] == [
        ("a.example.com", "block", "r1"),
        ("example.com", "pause", "r2"),
        ("b.example.org", "slow", "r3"),
        ("a.example.com", "clear", "ok now"),
    ]
    out = policy("list --host a.example.com --history")[1]
    assert out.splitlines()[1] == "policy history"
    assert len(out.strip().splitlines()) == 3 + 3  # title, header, rule, 3 rows


def test_cli_list_of_an_empty_crawl(policy: Cli, crawl: str) -> None:
    assert policy("list") == (0, "\npolicy in force\n(no rows)\n", "")
    assert policy("list --json") == (0, "", "")
    assert not Path(crawl).exists()  # reading creates nothing


def test_cli_pause_until_and_unblock(policy: Cli) -> None:
    policy("set --host a.example.com --block --reason x")
    out = policy(
        "set --host a.example.com --unblock --pause-until 2030-01-01T08:00 --reason y --json"
    )[1]
    (row,) = json_rows(out)
    assert (row["action"], row["blocked"], row["paused_until"]) == (
        "set",
        False,
        "2030-01-01T08:00:00+00:00",
    )


def test_cli_user_name_falls_back_to_unknown(policy: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user() -> str:
        raise OSError("no user")

    monkeypatch.setattr("getpass.getuser", no_user)
    out = policy("set --host a.example.com --block --reason x --json")[1]
    assert json_rows(out)[0]["set_by"] == "unknown"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("set --host http://a.example.com/ --block", "bare name"),
        ("set --domain www.example.com --block", "not a registered domain"),
        ("set --host a.example.com", "nothing to set"),
        ("set --host a.example.com --min-delay 0", "min delay must be a positive"),
        ("set --host a.example.com --min-delay nan", "min delay must be a positive"),
        ("set --host a.example.com --max-pages -1", "max pages must be"),
        ("set --host a.example.com --pause-for soon", "pause-for wants a duration"),
        ("set --host a.example.com --pause-until soon", "pause-until wants ISO"),
        ("set --host a.example.com --block --reason ' '", "non-empty reason"),
        ("set --host a.example.com --block --by ''", "non-empty set by"),
        ("clear --host a.example.com", "no policy in force for host a.example.com"),
        ("list --domain co.uk", "public suffix"),
    ],
)
def test_cli_bad_input_is_exit_2_and_one_line(
    policy: Cli, crawl: str, args: str, message: str
) -> None:
    reason = "" if args.startswith("list") or "--reason" in args else " --reason r"
    code, out, err = policy(args + reason)
    assert code == 2 and out == ""
    assert err.startswith("trawl: ") and message in err and err.count("\n") == 1
    assert not Path(crawl, "policy").exists()


@pytest.mark.parametrize(
    "args",
    [
        "set --host a.example.com --block",  # no --reason
        "set --host a --domain b --block --reason r",
        "set --host a --block --unblock --reason r",
        "set --host a --pause-for 1h --pause-until 2030-01-01 --reason r",
        "set --block --reason r",
        "clear --reason r",
        "set --host a --max-pages 1.5 --reason r",
        "block --host a --reason r",
    ],
)
def test_cli_argument_errors(policy: Cli, capsys: pytest.CaptureFixture[str], args: str) -> None:
    with pytest.raises(SystemExit) as exc:
        policy(args)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_cli_broken_table_is_exit_1_and_one_line(policy: Cli, crawl: str) -> None:
    log = Path(crawl, "policy", "_delta_log")
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("garbage\n")
    code, out, err = policy("list")
    assert code == 1 and out == ""
    assert err.startswith("trawl policy: cannot read the policy table at")
    assert err.count("\n") == 1


def test_cli_policy_never_loads_spark(tmp_path: Path) -> None:
    crawl = str(tmp_path)
    script = f"""
import sys
from trawl.cli import main
set_ = ["policy", "set", "--crawl", {crawl!r}, "--host", "a.example.com", "--block"]
assert main([*set_, "--reason", "r", "--json"]) == 0
assert main(["policy", "list", "--crawl", {crawl!r}, "--json"]) == 0
jvm_side = ("pyspark", "py4j", "delta")
print("loaded", sorted(m for m in sys.modules if m.split(".")[0] in jvm_side))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    *rows, loaded = done.stdout.splitlines()
    assert loaded == "loaded []"
    assert [json.loads(row)["target"] for row in rows] == ["a.example.com", "a.example.com"]
