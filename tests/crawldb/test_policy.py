"""Operator policy rules without I/O: merging a change, clears, the rule in
force, what host and domain rules mean together, and validation."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from trawl.crawldb.policy import (
    HostPolicy,
    PolicyRule,
    RuleChange,
    check_rule,
    cleared,
    in_force,
    merge,
    named_target,
    normalize_target,
    outdated_domain_rules,
    parse_duration,
    parse_time,
    resolve,
    rules_for,
    split_rule_copies,
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
        ("domain", "Alice.GitHub.io", "alice.github.io"),  # a site under a private suffix
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
        ("domain", "10.0.0.1", "public suffix or an address, not a registered domain$"),
        ("domain", "www.alice.github.io", "not a registered domain .that is 'alice.github.io'"),
        ("domain", "github.io", "public suffix .* e.g. 'example.github.io'"),
        ("domain", "s3.amazonaws.com", "public suffix .* e.g. 'example.s3.amazonaws.com'"),
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


# --------------------------------------------------------------------------- private suffixes

# A rule set when every github.io site counted as the one domain github.io.
LEGACY = rule(target="github.io", scope="domain", action="block", blocked=True, set_by="bob")


def test_split_rule_copies_follow_the_sites_the_private_section_made() -> None:
    hosts = [
        "alice.github.io",
        "www.alice.github.io",  # the same site: one copy
        "github.io",  # the rule's own name: it still covers it
        "bob.github.io",  # has a rule already: none
        "example.com",  # under no legacy rule
        "x.compute-1.amazonaws.com",  # under a rule of amazonaws.com below
        "www.amazonaws.com",  # still in amazonaws.com
    ]
    amazon = replace(LEGACY, target="amazonaws.com", action="slow", blocked=False, min_delay_s=9.0)
    known = {("domain", "bob.github.io")}
    copies = split_rule_copies([LEGACY, amazon], hosts, known)
    assert [c.key for c in copies] == [
        ("domain", "alice.github.io"),
        ("host", "x.compute-1.amazonaws.com"),  # a public suffix itself: a host rule
    ]
    alice, ec2 = copies
    assert (alice.action, alice.blocked, alice.set_at, alice.set_by) == ("block", True, T0, "trawl")
    assert alice.reason == "copy of domain github.io (bob): test"
    assert (ec2.min_delay_s, ec2.blocked) == (9.0, False)
    # copied again, with the copies' keys known: nothing new
    assert split_rule_copies([LEGACY, amazon], hosts, known | {c.key for c in copies}) == []


def test_a_rule_on_a_name_that_is_no_longer_a_registered_domain_is_outdated() -> None:
    ok = rule(target="alice.github.io", scope="domain")
    host = rule(target="github.io", scope="host")
    assert outdated_domain_rules([LEGACY, ok, host, rule()]) == [LEGACY]


def test_an_outdated_domain_rule_can_be_listed_and_cleared() -> None:
    assert named_target([LEGACY], "domain", "GitHub.io") == "github.io"
    assert rules_for([LEGACY, rule()], "domain", "github.io") == [LEGACY]
    gone = cleared(LEGACY, scope="domain", target="github.io", at=T0 + timedelta(hours=1), **WHO)
    assert (gone.action, gone.target) == ("clear", "github.io")
    # without a rule on it, the name is refused as before, and no rule may be set on it
    with pytest.raises(ValueError, match="public suffix"):
        named_target([], "domain", "github.io")
    with pytest.raises(ValueError, match="public suffix"):
        merge(None, RuleChange(blocked=True), scope="domain", target="github.io", at=T0, **WHO)
