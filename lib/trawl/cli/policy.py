"""``trawl policy set/list/clear``: the operator's rules from the command line.

Separate from the other commands because it must stay light: it reads and
appends the policy table through deltalake (``trawl.store.policy``) and
never starts a JVM, so an operator's block is instant and works while a
crawl runs. The rules themselves (merging a change, what is in force) are
``trawl.crawldb.policy``'s; here they meet the arguments, the operator's
name and the clock -- an operator action happens now.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trawl.config import Config
    from trawl.crawldb.policy import PolicyRule
    from trawl.store.policy import PolicyStore


def policy_command(args: argparse.Namespace, cfg: Config) -> int:
    """Run ``trawl policy ACTION``: 0, or 1 when the table cannot be read or written."""
    from trawl.report import emit
    from trawl.store.files import CrawlRoot
    from trawl.store.policy import PolicyStore, PolicyTableError

    store = PolicyStore.of(CrawlRoot.of(args.crawl, cfg.storage))
    try:
        if args.policy_command == "list":
            rows, title = _policy_list(store, args)
        else:
            rows, title = [_policy_change(store, args).as_row()], "policy in force"
    except PolicyTableError as exc:
        print(f"trawl policy: {exc}", file=sys.stderr)
        return 1
    emit(rows, args.json, title)
    return 0


def _operator() -> str:
    import getpass

    try:
        return getpass.getuser() or "unknown"
    except (OSError, KeyError, ImportError):
        return "unknown"


def _policy_target(args: argparse.Namespace) -> tuple[str, str] | None:
    if args.host is not None:
        return ("host", args.host)
    return ("domain", args.domain) if args.domain is not None else None


def _policy_list(store: PolicyStore, args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    from trawl.crawldb.policy import in_force, outdated_domain_rules, rules_for

    every = store.rules()
    if args.history:
        rules, title = every, "policy history"
    else:
        rules, title = sorted(in_force(every).values(), key=lambda r: r.key), "policy in force"
    wanted = _policy_target(args)
    if wanted is not None:
        rules = rules_for(rules, *wanted)
    for rule in outdated_domain_rules(in_force(rules).values()):
        print(
            f"trawl policy: domain {rule.target} is not a registered domain any more (each "
            f"site under it is one, by the public suffix list's private section), so this rule "
            f"covers the host {rule.target} alone; the sites the crawl knew under it got copies "
            "of it when the crawl was migrated, later ones need their own",
            file=sys.stderr,
        )
    return [r.as_row() for r in rules], title


def _policy_change(store: PolicyStore, args: argparse.Namespace) -> PolicyRule:
    from trawl.crawldb.policy import RuleChange, parse_duration, parse_time, pause_end

    wanted = _policy_target(args)
    assert wanted is not None  # argparse requires --host or --domain here
    scope, target = wanted
    by = args.by if args.by is not None else _operator()
    now = datetime.now(UTC)  # an operator action happens now
    if args.policy_command == "clear":
        return store.clear(scope, target, set_by=by, reason=args.reason, at=now)
    if args.policy_command == "budget":
        change = RuleChange(None, None, None, args.pages)
        return store.set(scope, target, change, set_by=by, reason=args.reason, at=now)
    pause = parse_time(args.pause_until) if args.pause_until is not None else None
    if args.pause_for is not None:
        pause = pause_end(now, parse_duration(args.pause_for))
    change = RuleChange(args.blocked, args.min_delay, pause, args.max_pages)
    return store.set(scope, target, change, set_by=by, reason=args.reason, at=now)
