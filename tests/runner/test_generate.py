"""generate's word to the operator (no Spark: the rows are plain)."""

from __future__ import annotations

import pytest

from trawl.runner.generate import warn_starved


def test_a_starved_seed_domain_is_named_with_the_settings_that_fix_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        {"domain": "small.org", "due": 30, "deferred": 16, "budget": 20},
        {"domain": "example.org", "due": 400, "deferred": 340, "budget": 20},
    ]
    warn_starved(rows)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "example.org" in lines[0]  # the most deferred first
    assert "340 of 400 due URLs of example.org" in lines[0]
    assert "budget.trust_seed_domains = true" in lines[0]
    assert "trawl policy budget --domain example.org --pages N" in lines[0]
