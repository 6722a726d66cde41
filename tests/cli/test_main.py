"""``trawl.cli.main`` without Spark: config errors and missing inputs as clear errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from trawl.cli import main


def test_bad_config_override_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--set", "fetch.nope=1"]) == 2
    assert "unknown config key fetch.nope" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "environ", "message"),
    [
        (["--set", "fetch.time_limit_s=abc"], {}, "fetch.time_limit_s must be a number, got 'abc'"),
        (["--set", "fetch.tasks=true"], {}, "fetch.tasks must be an integer, got True"),
        (["--set", "politeness.min_delay_s=-1"], {}, "politeness.min_delay_s must not be negative"),
        ([], {"TRAWL__ROBOTS__CACHE_TTL_S": "172800"}, "robots.cache_ttl_s must be in [0, 86400]"),
        (["--config", "{file}"], {}, "unknown config key fetch.taks (did you mean fetch.tasks?)"),
    ],
)
def test_a_wrong_config_value_is_one_line_naming_the_key(
    tmp_path: Path, options: list[str], environ: dict[str, str], message: str
) -> None:
    """What a user sees from the real command: one line on stderr, exit 2,
    no stack trace, whichever source the value came from."""
    import os
    import subprocess
    import sys

    config = tmp_path / "trawl.toml"
    config.write_text("[fetch]\ntaks = 3\n", encoding="utf-8")
    argv = [o.replace("{file}", str(config)) for o in options]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAWL__")}
    run = subprocess.run(
        [sys.executable, "-m", "trawl.cli", "stats", "--crawl", str(tmp_path / "c"), *argv],
        capture_output=True, text=True, timeout=120, env={**env, **environ},
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith(f"trawl: config error: {message}"), run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stdout == ""


def test_missing_seed_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trawl.config import Config
    from trawl.runner import JobContext, run_inject

    ctx = JobContext(None, Config(), str(tmp_path), "s1", datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(FileNotFoundError, match="seed file not found"):
        run_inject(ctx, [str(tmp_path / "nope.txt")])


def test_after_delta_rs_touched_an_object_store_the_command_skips_teardown(
    s3_server: str, bucket: str, tmp_path: Path
) -> None:
    """``trawl policy`` on an s3a root (delta-rs with the store's options)
    creates the table and sets rules; delta-rs may abort the interpreter at
    exit after S3 use (its issue 2184, exit 134), so each run's code and
    output must be the command's own, three times over."""
    import subprocess
    import sys

    for n in range(3):
        run = subprocess.run(
            [sys.executable, "-m", "trawl.cli", "policy", "set", "--crawl", f"s3a://{bucket}/c",
             "--host", f"h{n}.example.com", "--block", "--reason", "test", "--json",
             "--set", f"storage.endpoint={s3_server}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert f"h{n}.example.com" in run.stdout


@pytest.mark.parametrize(
    ("out", "extra", "message"),
    [
        ("{tmp}/crawl.zip", [], "export wacz: --out wants a file name ending in .wacz, got "),
        ("{tmp}", [], "export wacz: --out wants a file name ending in .wacz, got "),
        ("{tmp}/folder.wacz", [], "is a folder; give a file name ending in .wacz"),
        ("{tmp}/a.wacz", ["--sign-key", "{tmp}/none.pem"], "--sign-key {tmp}/none.pem: "),
        ("{tmp}/a.wacz", ["--sign-key", "{tmp}/seeds.txt"], "not an unencrypted PEM private"),
    ],
)
def test_export_wacz_with_a_bad_out_is_one_line_before_spark(
    tmp_path: Path, out: str, extra: list[str], message: str
) -> None:
    """Refused before a JVM starts or the crawl is read: one line, exit 2."""
    import subprocess
    import sys

    (tmp_path / "folder.wacz").mkdir()
    (tmp_path / "seeds.txt").write_text("http://example.com/\n")
    run = subprocess.run(
        [sys.executable, "-m", "trawl.cli", "export", "wacz", "--crawl", str(tmp_path / "c"),
         "--out", out.format(tmp=tmp_path), *(e.format(tmp=tmp_path) for e in extra)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    message = message.format(tmp=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("trawl: ") and message in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert not list(tmp_path.glob("*.zip")) and not (tmp_path / "c").exists()
