"""``trawl policy set/list/clear`` round trips through ``trawl.cli.main``:
output, exit codes, one-line errors, and no JVM."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trawl.cli import main
from trawl.store.policy import POLICY_ARROW_SCHEMA

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


def test_cli_budget_sets_a_domains_pages_and_keeps_the_rest(policy: Cli) -> None:
    policy("set --domain example.com --min-delay 5 --reason slower")
    out = policy("budget --domain example.com --pages 400 --reason ours --json")[1]
    (row,) = json_rows(out)
    assert (row["scope"], row["target"], row["max_pages_per_cycle"], row["min_delay_s"]) == (
        "domain",
        "example.com",
        400,
        5.0,
    )
    assert row["reason"] == "ours"


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
        ("budget --domain example.com --pages -1", "max pages must be"),
        ("set --host a.example.com --pause-for soon", "pause-for wants a duration"),
        ("set --host a.example.com --pause-until soon", "pause-until wants ISO"),
        ("set --host a.example.com --block --reason ' '", "non-empty reason"),
        ("set --host a.example.com --block --by ''", "non-empty set by"),
        ("clear --host a.example.com", "no policy in force for host a.example.com"),
        ("list --domain co.uk", "public suffix"),
        (
            "set --domain github.io --block",
            "public suffix or an address, not a registered"
            " domain (each name under it is one, e.g. 'example.github.io')",
        ),
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
        "budget --domain example.com --reason r",  # no --pages
    ],
)
def test_cli_argument_errors(policy: Cli, capsys: pytest.CaptureFixture[str], args: str) -> None:
    with pytest.raises(SystemExit) as exc:
        policy(args)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_cli_broken_table_is_exit_2_and_one_line(policy: Cli, crawl: str) -> None:
    """A commit that is not JSON is found before the command reads the
    table (``trawl.store.deltalog``): exit 2, naming the table, the entry
    and the fix."""
    log = Path(crawl, "policy", "_delta_log")
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("garbage\n")
    code, out, err = policy("list")
    assert code == 2 and out == ""
    assert err.startswith("trawl: ") and "policy" in err and "00000000000000000000.json" in err
    assert "Traceback" not in err and err.count("\n") <= 6  # the damage and the fix


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


def test_cli_list_warns_of_a_domain_rule_from_before_the_private_section(
    policy: Cli, crawl: str
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    row = {
        "scope": "domain", "target": "github.io", "action": "block", "blocked": True,
        "min_delay_s": None, "paused_until": None, "max_pages_per_cycle": None, "set_by": "bob",
        "set_at": datetime(2026, 1, 1, tzinfo=UTC), "reason": "every github.io site",
    }  # fmt: skip
    write_deltalake(f"{crawl}/policy", pa.Table.from_pylist([row], POLICY_ARROW_SCHEMA))
    assert policy("set --domain alice.github.io --min-delay 2 --reason r")[0] == 0

    code, out, err = policy("list --json")
    assert code == 0
    assert [r["target"] for r in json_rows(out)] == ["alice.github.io", "github.io"]
    assert err.count("\n") == 1
    assert "domain github.io is not a registered domain any more" in err
    code, out, err = policy("list --domain github.io --json")
    assert (code, [r["target"] for r in json_rows(out)]) == (0, ["github.io"])
    code, out, err = policy("clear --domain github.io --reason 'per site now' --json")
    assert (code, json_rows(out)[0]["action"], err) == (0, "clear", "")
    assert policy("list --json")[2] == ""


def test_cli_unreadable_table_is_exit_1_and_one_line(policy: Cli, crawl: str) -> None:
    """A log whose entries are whole JSON but no Delta table (no protocol,
    no schema) passes the up-front check; reading it fails in one line."""
    log = Path(crawl, "policy", "_delta_log")
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text('{"commitInfo": {}}\n')
    code, out, err = policy("list")
    assert code == 1 and out == ""
    assert err.startswith("trawl policy: cannot read the policy table at")
    assert err.count("\n") == 1
