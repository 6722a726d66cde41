"""Operator control: per-host and per-domain rules, their validation and meaning.

An operator blocks, slows, pauses or budgets a host (or a whole registered
domain) with ``trawl policy set``, giving a reason. Every change is a new
row, never an update or a delete, so the rows say who changed what, when and
why. The rule in force for a ``(scope, target)`` is its row with the latest
``set_at``; a row with action ``clear`` means no rule any more. Because of
that, ``set`` writes a *full* row: the rule in force merged with the fields
given (``--block`` then ``--min-delay 5`` keeps the block), and its
``set_at`` is the wall clock but never at or before the row it replaces
(+1 µs then), so "latest" is never a tie for one target.

``action`` names what the row changed, one rule for every row: ``clear``
for a clear; else the one thing given (``block``, ``unblock``, ``slow`` for
a minimum delay, ``pause``, ``budget`` for a page cap), or ``set`` when one
command gave several.

A host's effective policy (:func:`resolve`) combines its own rule with its
registered domain's rule and keeps the most restrictive of each field
(blocked if either is, the larger minimum delay, the smaller page cap, the
later pause): neither rule can loosen the other.

Domain rules follow :func:`trawl.url.keys.registered_domain`, whose suffixes
include the Public Suffix List's private section: ``alice.github.io`` is a
registered domain, ``github.io`` a public suffix that no domain rule may
name. A rule set on such a name before that (when every github.io site was
one domain ``github.io``) stays in force for that name alone; the migration
(``trawl.store.domainrule``) copies it onto the sites the crawl knew under
it (:func:`split_rule_copies`), :func:`outdated_domain_rules` finds it for
``trawl policy list`` to warn about, and a clear still takes it.

Pure logic, no I/O: the rows live in the ``policy`` Delta table, which
``trawl.store.policy`` reads and appends to; the operator commands, fetch
tasks and tests all share these rules without touching a table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from trawl.url.keys import host_of, icann_registered_domain, registered_domain

SCOPES = ("host", "domain")
CLEAR = "clear"
ACTIONS = ("block", "unblock", "slow", "pause", "budget", "set", CLEAR)
MAX_PAGES = 2**31 - 1  # max_pages_per_cycle is an int32 column
TICK = timedelta(microseconds=1)  # the table's timestamp precision

RuleKey = tuple[str, str]  # (scope, target)


@dataclass(frozen=True)
class PolicyRule:
    """One row of the policy table."""

    scope: str
    target: str
    action: str
    blocked: bool | None
    min_delay_s: float | None
    paused_until: datetime | None
    max_pages_per_cycle: int | None
    set_by: str
    set_at: datetime
    reason: str

    @property
    def key(self) -> RuleKey:
        return (self.scope, self.target)

    def as_row(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class RuleChange:
    """What one ``trawl policy set`` changes; ``None`` keeps the rule in force."""

    blocked: bool | None = None
    min_delay_s: float | None = None
    paused_until: datetime | None = None
    max_pages_per_cycle: int | None = None

    def action(self) -> str:
        given = [
            name
            for name, value in (
                ("block" if self.blocked else "unblock", self.blocked),
                ("slow", self.min_delay_s),
                ("pause", self.paused_until),
                ("budget", self.max_pages_per_cycle),
            )
            if value is not None
        ]
        if not given:
            raise ValueError(
                "nothing to set: give --block, --unblock, --min-delay, "
                "--pause-until/--pause-for or --max-pages"
            )
        return given[0] if len(given) == 1 else "set"


# --------------------------------------------------------------------------- validation

_NOT_IN_A_NAME = re.compile(r"[\s/:?#@%\\\[\]]")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def normalize_target(scope: str, text: str, *, registered: bool = True) -> str:
    """The canonical host or registered domain (lower case, IDNA A-labels).
    ``registered=False``: a domain need only be a well-formed name (the
    target of a rule already in force, which a clear may name)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be 'host' or 'domain', got {scope!r}")
    raw = text.strip()
    ipv6 = scope == "host" and raw.startswith("[") and raw.endswith("]")
    if not raw or (_NOT_IN_A_NAME.search(raw) and not ipv6):
        raise ValueError(f"{scope} wants a bare name (no scheme, port or path), got {text!r}")
    try:
        name = host_of(f"http://{raw}/")  # RFC 3986 host rules, UTS #46 + IDNA A-labels
    except ValueError:
        raise ValueError(f"not a valid {scope} name: {text!r}") from None
    if scope == "domain" and registered:
        _check_registered(name, text)
    return name


def _check_registered(name: str, text: str) -> None:
    """A domain rule applies to hosts whose registered domain it is, so anything
    else (a subdomain, a public suffix, an IP) would be a rule that never applies."""
    if registered_domain(name) != name:
        raise ValueError(
            f"{text!r} is not a registered domain (that is {registered_domain(name)!r}); "
            "use --host for one host"
        )
    site = registered_domain(f"example.{name}")
    if site != name:
        suffix = site.endswith(f".{name}")  # else an address: names under it are not sites
        under = f" (each name under it is one, e.g. {site!r})" if suffix else ""
        raise ValueError(
            f"{text!r} is a public suffix or an address, not a registered domain{under}"
        )


def _is_domain_target(name: str) -> bool:
    """Whether a domain rule may name ``name`` (it is a registered domain)."""
    try:
        _check_registered(name, name)
    except ValueError:
        return False
    return True


def parse_time(text: str) -> datetime:
    """ISO 8601 time, in UTC; a time without zone is UTC."""
    try:
        value = datetime.fromisoformat(text.strip())
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"pause-until wants ISO 8601 time, got {text!r}") from None


def parse_duration(text: str) -> timedelta:
    """``"30m"``, ``"2h"``, ``"1d"``, ``"1h30m"``, ``"45s"``: a positive duration."""
    spec = text.strip().lower()
    parts = _DURATION_PART.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise ValueError(f"pause-for wants a duration like 30m, 2h or 1d, got {text!r}")
    seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    try:
        duration = timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"pause-for duration too long: {text!r}") from None
    if duration <= timedelta(0):
        raise ValueError(f"pause-for must be positive, got {text!r}")
    return duration


def pause_end(at: datetime, duration: timedelta) -> datetime:
    try:
        return (at + duration).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"pause of {duration} from {at.isoformat()} is too long") from None


def check_rule(rule: PolicyRule) -> PolicyRule:
    """Raise ValueError unless ``rule`` is a row ``trawl policy`` may write
    (a clear may name any rule's target, see :func:`outdated_domain_rules`)."""
    registered = rule.action != CLEAR
    if normalize_target(rule.scope, rule.target, registered=registered) != rule.target:
        raise ValueError(f"{rule.scope} {rule.target!r} is not in canonical form")
    if rule.action not in ACTIONS:
        raise ValueError(f"unknown policy action {rule.action!r}")
    for name, value in (("set_by", rule.set_by), ("reason", rule.reason)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"a policy change needs a non-empty {name.replace('_', ' ')}")
    for name, when in (("set_at", rule.set_at), ("paused_until", rule.paused_until)):
        if when is not None and when.tzinfo is None:
            raise ValueError(f"{name} must be timezone-aware")
    if rule.action == CLEAR:
        fields_ = (rule.blocked, rule.min_delay_s, rule.paused_until, rule.max_pages_per_cycle)
        if any(v is not None for v in fields_):
            raise ValueError("a clear row carries no rule fields")
        return rule
    if not isinstance(rule.blocked, bool):
        raise ValueError("a policy rule says whether the target is blocked")
    d = rule.min_delay_s
    if d is not None and (isinstance(d, bool) or not math.isfinite(d) or d <= 0):
        raise ValueError(f"min delay must be a positive number of seconds, got {d!r}")
    n = rule.max_pages_per_cycle
    if n is not None and (isinstance(n, bool) or not 0 <= n <= MAX_PAGES):
        raise ValueError(f"max pages must be an integer in [0, {MAX_PAGES}], got {n!r}")
    return rule


# --------------------------------------------------------------------------- semantics


def _stamp(at: datetime, previous: PolicyRule | None) -> datetime:
    """``at`` in UTC, moved just after the row it replaces if the clock says otherwise."""
    at = at.astimezone(UTC)
    return max(at, previous.set_at + TICK) if previous is not None else at


def merge(
    previous: PolicyRule | None,
    change: RuleChange,
    *,
    scope: str,
    target: str,
    set_by: str,
    reason: str,
    at: datetime,
) -> PolicyRule:
    """The full row a ``set`` appends: the rule in force with ``change`` applied."""
    if previous is not None and previous.key != (scope, target):
        raise ValueError(f"previous rule is for {previous.key}, not {(scope, target)}")
    base = previous if previous is not None and previous.action != CLEAR else None

    def keep(new: Any, old: Any) -> Any:
        return new if new is not None else old

    rule = PolicyRule(
        scope=scope,
        target=target,
        action=change.action(),
        blocked=bool(keep(change.blocked, base.blocked if base else False)),
        min_delay_s=keep(change.min_delay_s, base.min_delay_s if base else None),
        paused_until=keep(change.paused_until, base.paused_until if base else None),
        max_pages_per_cycle=keep(
            change.max_pages_per_cycle, base.max_pages_per_cycle if base else None
        ),
        set_by=set_by.strip(),
        set_at=_stamp(at, previous),
        reason=reason.strip(),
    )
    return check_rule(rule)


def cleared(
    previous: PolicyRule | None, *, scope: str, target: str, set_by: str, reason: str, at: datetime
) -> PolicyRule:
    """The row a ``clear`` appends; clearing what is not in force is an error."""
    if previous is None or previous.action == CLEAR:
        raise ValueError(f"no policy in force for {scope} {target}")
    rule = PolicyRule(
        scope, target, CLEAR, None, None, None, None, set_by.strip(), _stamp(at, previous),
        reason.strip(),
    )  # fmt: skip
    return check_rule(rule)


def latest(rules: Iterable[PolicyRule]) -> dict[RuleKey, PolicyRule]:
    """Latest row per (scope, target) by set_at, clears included (later in the list wins a tie)."""
    newest: dict[RuleKey, PolicyRule] = {}
    for rule in rules:
        seen = newest.get(rule.key)
        if seen is None or rule.set_at >= seen.set_at:
            newest[rule.key] = rule
    return newest


def in_force(rules: Iterable[PolicyRule]) -> dict[RuleKey, PolicyRule]:
    """The rule in force per (scope, target): its latest row, unless that is a clear."""
    return {key: rule for key, rule in latest(rules).items() if rule.action != CLEAR}


def rules_for(rules: Iterable[PolicyRule], scope: str, target: str) -> list[PolicyRule]:
    """The rows about one target; for a host, also its registered domain's rows
    (the rules :func:`resolve` combines for it)."""
    rules = list(rules)
    name = named_target(rules, scope, target)
    keys = {(scope, name)}
    if scope == "host":
        keys.add(("domain", registered_domain(name)))
    return [rule for rule in rules if rule.key in keys]


def named_target(rules: Iterable[PolicyRule], scope: str, text: str) -> str:
    """:func:`normalize_target`, except that a domain which is no longer a
    registered domain is taken when ``rules`` have rows for it (a rule set
    before domains followed the PSL's private section), so it can be listed
    and cleared."""
    try:
        return normalize_target(scope, text)
    except ValueError:
        name = normalize_target(scope, text, registered=False)
        if any(rule.key == (scope, name) for rule in rules):
            return name
        raise


def outdated_domain_rules(rules: Iterable[PolicyRule]) -> list[PolicyRule]:
    """The domain rules whose target is not a registered domain any more: set
    on ``github.io`` when every github.io site counted as that one domain,
    they now cover the host ``github.io`` alone."""
    return [r for r in rules if r.scope == "domain" and not _is_domain_target(r.target)]


def split_rule_copies(
    legacy: Iterable[PolicyRule], hosts: Iterable[str], known: Collection[RuleKey]
) -> list[PolicyRule]:
    """Copies of ``legacy`` (domain rules in force, set when registered domains
    followed the PSL's ICANN section alone) for the sites among ``hosts``
    that the private section has made registered domains of their own: a
    block of ``github.io`` becomes one of ``alice.github.io`` too. A copy is
    a domain rule, or a host rule for a host that is itself a public suffix
    (``x.compute-1.amazonaws.com``); it keeps the original's fields and
    ``set_at`` (no clock: the rule was set then), is written by ``trawl`` and
    says whose rule it copies. A target in ``known`` (it has rows: the
    operator's, or an earlier copy) gets none, so copying again adds nothing."""
    by_target = {rule.target: rule for rule in legacy if rule.scope == "domain"}
    copies: dict[RuleKey, PolicyRule] = {}
    for host in hosts:
        rule = by_target.get(icann_registered_domain(host))
        site = registered_domain(host)
        if rule is None or site == rule.target:
            continue
        key = ("domain", site) if _is_domain_target(site) else ("host", host)
        if key in known or key in copies:
            continue
        why = f"copy of domain {rule.target} ({rule.set_by}): {rule.reason}"
        copy = replace(rule, scope=key[0], target=key[1], set_by="trawl", reason=why)
        try:
            copies[key] = check_rule(copy)
        except ValueError:  # a host no rule can name
            continue
    return sorted(copies.values(), key=lambda r: r.key)


@dataclass(frozen=True)
class HostPolicy:
    """What the operator's rules mean for one host (no rule: no restriction)."""

    blocked: bool = False
    paused_until: datetime | None = None
    min_delay_s: float | None = None
    max_pages_per_cycle: int | None = None
    reasons: tuple[str, ...] = ()

    def stops(self, at: datetime) -> bool:
        """True when no request may go to the host at ``at``."""
        return self.blocked or (self.paused_until is not None and at < self.paused_until)


def resolve(
    rules_in_force: Mapping[RuleKey, PolicyRule], host: str, domain: str, at: datetime
) -> HostPolicy:
    """The host's rule and its registered domain's rule, the most restrictive of
    each field; a pause that has ended by ``at`` no longer counts."""
    rules = [
        rule
        for rule in (rules_in_force.get(("host", host)), rules_in_force.get(("domain", domain)))
        if rule is not None and rule.action != CLEAR
    ]
    pauses = [r.paused_until for r in rules if r.paused_until is not None and r.paused_until > at]
    delays = [r.min_delay_s for r in rules if r.min_delay_s is not None]
    caps = [r.max_pages_per_cycle for r in rules if r.max_pages_per_cycle is not None]
    restricting = [
        r
        for r in rules
        if r.blocked
        or (r.paused_until is not None and r.paused_until > at)
        or r.min_delay_s is not None
        or r.max_pages_per_cycle is not None
    ]
    return HostPolicy(
        blocked=any(bool(r.blocked) for r in rules),
        paused_until=max(pauses, default=None),
        min_delay_s=max(delays, default=None),
        max_pages_per_cycle=min(caps, default=None),
        reasons=tuple(f"{r.scope} {r.target}: {r.reason} ({r.set_by})" for r in restricting),
    )
