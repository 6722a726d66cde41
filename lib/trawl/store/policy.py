"""Operator control: per-host and per-domain rules, kept as an audit trail.

An operator blocks, slows, pauses or budgets a host (or a whole registered
domain) with ``trawl policy set``, giving a reason. Every change is a new row
of the ``policy`` Delta table, never an update or a delete, so the table says
who changed what, when and why. The rule in force for a ``(scope, target)``
is its row with the latest ``set_at``; a row with action ``clear`` means no
rule any more. Because of that, ``set`` writes a *full* row: the rule in
force merged with the fields given (``--block`` then ``--min-delay 5`` keeps
the block), and its ``set_at`` is the wall clock but never at or before the
row it replaces (+1 µs then), so "latest" is never a tie for one target.

``action`` names what the row changed, one rule for every row: ``clear``
for a clear; else the one thing given (``block``, ``unblock``, ``slow`` for
a minimum delay, ``pause``, ``budget`` for a page cap), or ``set`` when one
command gave several.

A host's effective policy (:func:`resolve`) combines its own rule with its
registered domain's rule and keeps the most restrictive of each field
(blocked if either is, the larger minimum delay, the smaller page cap, the
later pause): neither rule can loosen the other.

Why deltalake (delta-rs) and not Spark: operator commands must be instant and
must not start a JVM, and running fetch tasks (plain Python on executors)
re-read the rules every ``fetch.policy_refresh_s`` seconds. The table is
created here from :data:`POLICY_ARROW_SCHEMA`, which matches
``trawl.store.schemas.POLICY_SCHEMA`` column for column (tested against Spark), so
``trawl.store.tables.ensure_table`` and Spark readers accept it, and rows Spark
writes read back here. Both writers only append (blind appends never
conflict). Object stores need delta-rs ``storage_options`` (credentials and,
for S3, a locking provider or conditional-put support for safe concurrent
commits): pass them to :class:`PolicyStore`, :class:`PolicyView` and
:func:`load_in_force`; the CLI passes none, so it supports local roots only.
No pyspark import: this runs on the driver and on executors alike.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import TableNotFoundError

from trawl.url.normalize import host_of, registered_domain

SCOPES = ("host", "domain")
CLEAR = "clear"
ACTIONS = ("block", "unblock", "slow", "pause", "budget", "set", CLEAR)
MAX_PAGES = 2**31 - 1  # max_pages_per_cycle is an int32 column
TICK = timedelta(microseconds=1)  # the table's timestamp precision

RuleKey = tuple[str, str]  # (scope, target)

_TS = pa.timestamp("us", tz="UTC")
# Column for column POLICY_SCHEMA (trawl.store.schemas), all nullable as Spark makes them.
POLICY_ARROW_SCHEMA = pa.schema(
    [
        pa.field("scope", pa.string()),
        pa.field("target", pa.string()),
        pa.field("action", pa.string()),
        pa.field("blocked", pa.bool_()),
        pa.field("min_delay_s", pa.float64()),
        pa.field("paused_until", _TS),
        pa.field("max_pages_per_cycle", pa.int32()),
        pa.field("set_by", pa.string()),
        pa.field("set_at", _TS),
        pa.field("reason", pa.string()),
    ]
)


class PolicyTableError(RuntimeError):
    """The policy table could not be read or written (the message says where and why)."""


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


def normalize_target(scope: str, text: str) -> str:
    """The canonical host or registered domain (lower case, IDNA A-labels)."""
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
    if scope == "domain":
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
    if registered_domain(f"x.{name}") != name:
        raise ValueError(f"{text!r} is a public suffix or an address, not a registered domain")


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
    """Raise ValueError unless ``rule`` is a row ``trawl policy`` may write."""
    if normalize_target(rule.scope, rule.target) != rule.target:
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
    name = normalize_target(scope, target)
    keys = {(scope, name)}
    if scope == "host":
        keys.add(("domain", registered_domain(name)))
    return [rule for rule in rules if rule.key in keys]


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


# --------------------------------------------------------------------------- the Delta table


def policy_table_uri(root: str | os.PathLike[str]) -> str:
    """``<root>/policy`` (local roots made absolute, as the CLI does)."""
    text = os.fspath(root)
    base = text if "://" in text else os.path.abspath(text)
    return f"{base.rstrip('/')}/policy"


def _absent(uri: str) -> bool:
    """True when a local table was never created. delta-rs also says "not found"
    for a folder it may not read, and that must not read as "no rules"."""
    if "://" in uri:
        return True
    try:
        return not os.listdir(os.path.join(uri, "_delta_log"))
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _failed(verb: str, uri: str, exc: BaseException) -> PolicyTableError:
    """One line: delta-rs messages may carry a Rust backtrace after the first."""
    text = str(exc).strip()
    why = text.splitlines()[0] if text else type(exc).__name__
    return PolicyTableError(f"cannot {verb} the policy table at {uri}: {why}")


def _open(uri: str, storage_options: Mapping[str, str] | None) -> DeltaTable | None:
    """The table, or None when it was never created."""
    try:
        return DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    except TableNotFoundError as exc:
        if _absent(uri):
            return None
        raise _failed("read", uri, exc) from exc
    except Exception as exc:  # delta-rs raises DeltaError, OSError and others
        raise _failed("read", uri, exc) from exc


def _rule_from_row(row: dict[str, Any], uri: str) -> PolicyRule:
    missing = [k for k in ("scope", "target", "action", "set_by", "set_at", "reason") if not row[k]]
    if missing or row["scope"] not in SCOPES:
        raise PolicyTableError(
            f"policy table at {uri} has a row trawl cannot use "
            f"(scope={row['scope']!r}, target={row['target']!r}, missing {missing})"
        )
    for name in ("set_at", "paused_until"):
        if row[name] is not None:
            row[name] = row[name].astimezone(UTC)
    return PolicyRule(**row)


def _read(table: DeltaTable, uri: str) -> list[PolicyRule]:
    # Scanned by delta-rs's own engine (DataFusion), not pyarrow.dataset: pyarrow's
    # scanner threads can outlive a short process and abort it at exit ("terminate
    # called without an active exception"; delta-rs issue 2184, arrow issue 34314).
    columns = ", ".join(f.name for f in POLICY_ARROW_SCHEMA)
    try:
        reader = QueryBuilder().register("policy", table).execute(f"SELECT {columns} FROM policy")
        rows = pa.table(reader.read_all()).to_pylist()
    except Exception as exc:
        raise _failed("read", uri, exc) from exc
    # Oldest first; rows with the same set_at (of different targets) by target.
    return sorted((_rule_from_row(row, uri) for row in rows), key=lambda r: (r.set_at, r.key))


def read_rules(
    root: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
) -> list[PolicyRule]:
    """Every row (the audit trail), oldest first; no table means no rows."""
    uri = policy_table_uri(root)
    table = _open(uri, storage_options)
    return [] if table is None else _read(table, uri)


def load_in_force(
    root: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
) -> dict[RuleKey, PolicyRule]:
    """The rules in force; raises :class:`PolicyTableError` when the table cannot
    be read (a fetch task then keeps its last good view)."""
    return in_force(read_rules(root, storage_options))


class PolicyView:
    """The rules in force for a running fetch task, re-read on :meth:`refresh`.

    Only the Delta log is read when nothing was committed since the last
    refresh, so calling it every few seconds costs one log listing. Safe to
    share between threads.
    """

    def __init__(
        self, root: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.uri = policy_table_uri(root)
        self._options = storage_options
        self._lock = threading.Lock()
        self._version: int | None = None
        self._rules: Mapping[RuleKey, PolicyRule] = MappingProxyType({})

    def refresh(self) -> Mapping[RuleKey, PolicyRule]:
        """The rules in force now; raises :class:`PolicyTableError` on a failed read."""
        with self._lock:
            table = _open(self.uri, self._options)
            version = None if table is None else table.version()
            if table is None:
                self._rules = MappingProxyType({})
            elif version != self._version:
                self._rules = MappingProxyType(in_force(_read(table, self.uri)))
            self._version = version
            return self._rules


class PolicyStore:
    """Append-only access to ``<root>/policy`` for the operator commands."""

    def __init__(
        self, root: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.root = root
        self.uri = policy_table_uri(root)
        self._options = dict(storage_options) if storage_options else None

    def rules(self) -> list[PolicyRule]:
        return read_rules(self.root, self._options)

    def in_force(self) -> dict[RuleKey, PolicyRule]:
        return in_force(self.rules())

    def append(self, rule: PolicyRule) -> PolicyRule:
        """Validate and append one row, creating the table on first use."""
        check_rule(rule)
        batch = pa.Table.from_pylist([rule.as_row()], schema=POLICY_ARROW_SCHEMA)
        absent = _open(self.uri, self._options) is None
        try:
            if absent:
                DeltaTable.create(
                    self.uri, POLICY_ARROW_SCHEMA, mode="ignore", storage_options=self._options
                )
            write_deltalake(self.uri, batch, mode="append", storage_options=self._options)
        except Exception as exc:
            raise _failed("write", self.uri, exc) from exc
        return rule

    def set(
        self, scope: str, target: str, change: RuleChange, *, set_by: str, reason: str, at: datetime
    ) -> PolicyRule:
        """Merge ``change`` into the rule in force and append the result."""
        name = normalize_target(scope, target)
        change.action()  # "nothing to set" before any I/O
        previous = latest(self.rules()).get((scope, name))
        rule = merge(
            previous, change, scope=scope, target=name, set_by=set_by, reason=reason, at=at
        )
        return self.append(rule)

    def clear(
        self, scope: str, target: str, *, set_by: str, reason: str, at: datetime
    ) -> PolicyRule:
        """Append a ``clear`` row: no policy for the target any more."""
        name = normalize_target(scope, target)
        previous = latest(self.rules()).get((scope, name))
        rule = cleared(previous, scope=scope, target=name, set_by=set_by, reason=reason, at=at)
        return self.append(rule)
