"""The ``policy`` Delta table: the operator's rules (``trawl policy``), read and
appended without Spark.

What the rules mean -- the rows, merging a change into the rule in force, a
clear, which rule is in force and what it means for a host -- is pure logic
in :mod:`trawl.crawldb.policy`; this module only reads and writes the rows.
Every change is appended, never updated or deleted, so the table is the
audit trail. :class:`PolicyStore` is what the operator commands use,
:class:`PolicyView` what a running fetch task re-reads.

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

import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import TableNotFoundError

from trawl.crawldb.policy import (
    SCOPES,
    PolicyRule,
    RuleChange,
    RuleKey,
    check_rule,
    cleared,
    in_force,
    latest,
    merge,
    named_target,
    normalize_target,
)
from trawl.store.domainrule import domain_rule_properties
from trawl.store.files import CrawlRoot

# The rows and the change a ``set`` takes, as this table's API hands them out.
__all__ = [
    "POLICY_ARROW_SCHEMA",
    "PolicyRule",
    "PolicyStore",
    "PolicyTableError",
    "PolicyView",
    "RuleChange",
    "RuleKey",
    "load_in_force",
    "policy_table_uri",
    "read_rules",
]

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


def policy_table_uri(root: str | os.PathLike[str]) -> str:
    """``<root>/policy`` (local roots made absolute, as the CLI does)."""
    text = os.fspath(root)
    base = text if "://" in text else os.path.abspath(text)
    return f"{base.rstrip('/')}/policy"


def _absent(uri: str, absent_ok: bool) -> bool:
    """True when the table was never created. delta-rs also says "not found"
    for a folder it may not read, and that must not read as "no rules". On an
    object store "not found" is also what a wrong prefix can look like, so a
    fetch task (``absent_ok`` false) takes it for an error: a crawl's jobs
    create the table before any fetch, and a policy that cannot be read
    never reads as "nothing blocked" (fail closed)."""
    if "://" in uri:
        return absent_ok
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


# Whether this process has opened a table on an object store with delta-rs:
# its runtime may abort the interpreter at exit afterwards (delta-rs issue
# 2184: "terminate called without an active exception", exit 134), so the
# ``trawl`` command then leaves with os._exit (``trawl.cli.entry``).
REMOTE_TABLES_OPENED = threading.Event()


def _open(
    uri: str, storage_options: Mapping[str, str] | None, absent_ok: bool = True
) -> DeltaTable | None:
    """The table, or None when it was never created (see ``_absent``)."""
    if "://" in uri:
        REMOTE_TABLES_OPENED.set()
    try:
        return DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    except TableNotFoundError as exc:
        if _absent(uri, absent_ok):
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

    @classmethod
    def of(cls, root: CrawlRoot) -> PolicyView:
        """The policy table of ``root``, with its object store's settings."""
        return cls(root.delta_uri(), root.delta_options())

    def refresh(self) -> Mapping[RuleKey, PolicyRule]:
        """The rules in force now; raises :class:`PolicyTableError` on a failed read."""
        with self._lock:
            table = _open(self.uri, self._options, absent_ok=False)
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

    @classmethod
    def of(cls, root: CrawlRoot) -> PolicyStore:
        """The policy table of ``root``, with its object store's settings."""
        return cls(root.delta_uri(), root.delta_options())

    def rules(self) -> list[PolicyRule]:
        return read_rules(self.root, self._options)

    def in_force(self) -> dict[RuleKey, PolicyRule]:
        return in_force(self.rules())

    def append(self, rule: PolicyRule) -> PolicyRule:
        """Validate and append one row, creating the table on first use (marked
        with the rule its domain targets follow, ``trawl.store.domainrule``;
        delta-rs takes only ``delta.*`` properties at creation)."""
        check_rule(rule)
        batch = pa.Table.from_pylist([rule.as_row()], schema=POLICY_ARROW_SCHEMA)
        absent = _open(self.uri, self._options) is None
        try:
            if absent:
                made = DeltaTable.create(
                    self.uri, POLICY_ARROW_SCHEMA, mode="ignore", storage_options=self._options
                )
                made.alter.set_table_properties(
                    domain_rule_properties("policy"), raise_if_not_exists=False
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
        """Append a ``clear`` row: no policy for the target any more (also on a
        domain that is no longer a registered domain, see ``named_target``)."""
        rules = self.rules()
        name = named_target(rules, scope, target)
        previous = latest(rules).get((scope, name))
        rule = cleared(previous, scope=scope, target=name, set_by=set_by, reason=reason, at=at)
        return self.append(rule)
