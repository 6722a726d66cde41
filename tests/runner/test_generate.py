"""generate's word to the operator (no Spark: the rows are plain)."""

from __future__ import annotations

import pytest

from trawl.runner.generate import warn_starved


def test_a_starved_seed_domain_is_named_with_the_settings_that_fix_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        {"domain": "small.org", "due": 30, "deferred": 16, "budget": 20, "farm_hosts": []},
        {"domain": "example.org", "due": 400, "deferred": 340, "budget": 20, "farm_hosts": []},
    ]
    warn_starved(rows)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "example.org" in lines[0]  # the most deferred first
    assert "340 of 400 due URLs of example.org" in lines[0]
    assert "budget.trust_seed_domains = true" in lines[0]
    assert "trawl policy budget --domain example.org --pages N" in lines[0]


def test_a_named_host_judged_a_farm_is_named_with_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [{"domain": "farm.test", "due": 60, "deferred": 40, "budget": 20,
             "farm_hosts": ["w0.farm.test"]}]  # fmt: skip
    warn_starved(rows)
    first, second = capsys.readouterr().err.splitlines()
    assert "40 of 60 due URLs of farm.test" in first
    assert "generate: warning: w0.farm.test, named by you, link out like" in second
    assert "budget.farm_min_hosts = 0" in second
