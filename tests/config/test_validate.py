"""trawl.config.validate: values of the right type that a config may not have."""

from __future__ import annotations

import pytest

from trawl.config import ConfigError, load_config


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('http.agent_name="my bot"', "product token"),
        ("http.agent_name=bot2", "product token"),
        ("politeness.mode=byhost", "politeness.mode must be one of"),
        ("spark.driver_jit=c2", "spark.driver_jit must be one of"),
        ("fetch.policy_refresh_s=61", "fetch.policy_refresh_s must be in"),
        ("fetch.policy_refresh_s=0", "fetch.policy_refresh_s must be in"),
        ("fetch.follow_redirects=-1", "fetch.follow_redirects must not be negative"),
        ("http.max_idle_connections=-1", "http.max_idle_connections must not be negative"),
        ("traps.max_counter_run=-1", "max_counter_run must not be negative"),
        ("traps.max_query_sets=-1", "max_query_sets must not be negative"),
    ],
)
def test_wrong_values_raise(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override], environ={})


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
