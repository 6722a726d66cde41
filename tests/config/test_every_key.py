"""Every config key refuses what it cannot use, naming itself (issue 30).

The keys are enumerated from the dataclasses of ``trawl.config.sections``, so
a key added there is covered here without anyone listing it: each gets
values of every wrong type, through ``from_dict`` (where a file, the
environment and ``--set`` all end) and through each source as a user writes
it. The ranges are a table written from conf/trawl.toml's comments, not
from the code, and a test checks that it names every number key.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest

from trawl.config import Config, ConfigError, from_dict, load_config
from trawl.config.validate import ANY_NUMBER, RANGES


def every_key() -> list[tuple[str, str, Any]]:
    """(section, key, default) for every key of every section."""
    out = []
    for section in dataclasses.fields(Config):
        defaults = getattr(Config(), section.name)
        for f in dataclasses.fields(defaults):
            out.append((section.name, f.name, getattr(defaults, f.name)))
    return out


KEYS = every_key()
NUMBER_KEYS = {
    f"{s}.{k}" for s, k, d in KEYS if isinstance(d, int | float) and not isinstance(d, bool)
}
# What each type of default is said to want, and values of every other type.
EXPECTED = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    tuple: "a list of strings",
    dict: "a table",
}
WRONG: dict[type, list[Any]] = {
    bool: [1, 0, "true", 1.0, [True], {"a": True}],
    int: ["3", "abc", True, False, 2.5, 3.0, [1], {"a": 1}],
    float: ["1.5", "fast", True, [1.0], {"a": 1.0}],
    str: [3, 1.5, True, ["a"], {"a": "b"}],
    tuple: [3, "a", True, [1], ["a", 2], [["a"]], {"a": "b"}],
    dict: [3, "a", True, ["a"]],
}
# One wrong value per type as TOML text, for --set, the environment and a file.
WRONG_TOML = {
    bool: '"yes"',
    int: '"many"',
    float: "[1.5]",
    str: "{ a = 1 }",
    tuple: "3",
    dict: "[1, 2]",
}


def names(key: str, message: str) -> bool:
    """Does ``message`` name ``key`` whole (not as part of a longer key)?"""
    return re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message) is not None


def refused(raw: dict[str, dict[str, Any]]) -> str:
    with pytest.raises(ConfigError) as info:
        from_dict(raw)
    return str(info.value)


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("section", "key", "wrong"),
    [pytest.param(s, k, w, id=f"{s}.{k}={w!r}") for s, k, d in KEYS for w in WRONG[type(d)]],
)
def test_a_value_of_a_wrong_type_is_refused_naming_the_key(
    section: str, key: str, wrong: Any
) -> None:
    want = type(getattr(getattr(Config(), section), key))
    message = refused({section: {key: wrong}})
    assert message.startswith(f"{section}.{key} must be {EXPECTED[want]}, got "), message
    assert "\n" not in message and len(message) < 200


@pytest.mark.parametrize(("section", "key", "default"), KEYS, ids=[f"{s}.{k}" for s, k, _ in KEYS])
def test_every_source_refuses_a_wrong_type_naming_the_key(
    tmp_path: Path, section: str, key: str, default: Any
) -> None:
    text = WRONG_TOML[type(default)]
    path = tmp_path / "trawl.toml"
    path.write_text(f"[{section}]\n{key} = {text}\n", encoding="utf-8")
    environ = {f"TRAWL__{section.upper()}__{key.upper()}": text}
    sources: list[tuple[Path | None, list[str], dict[str, str]]] = [
        (None, [f"{section}.{key}={text}"], {}),  # --set
        (None, [], environ),
        (path, [], {}),
    ]
    for file, overrides, env in sources:
        with pytest.raises(ConfigError) as info:
            load_config(file, overrides, environ=env)
        assert str(info.value).startswith(f"{section}.{key} must be "), str(info.value)


@pytest.mark.parametrize("key", sorted(NUMBER_KEYS))
def test_bool_is_not_an_integer_nor_a_number(key: str) -> None:
    section, name = key.split(".")
    for flag in (True, False):
        assert names(key, refused({section: {name: flag}}))
        with pytest.raises(ConfigError, match=re.escape(key)):
            load_config(None, [f"{key}={str(flag).lower()}"], environ={})


FLOAT_KEYS = sorted(f"{s}.{k}" for s, k, d in KEYS if isinstance(d, float))


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_an_integer_is_a_number(key: str) -> None:
    section, name = key.split(".")
    default = getattr(getattr(Config(), section), name)
    accepted = []
    for whole in dict.fromkeys([int(default), 0, 1]):  # one of them is in range
        try:
            value = getattr(getattr(from_dict({section: {name: whole}}), section), name)
        except ConfigError:
            continue
        assert type(value) is float and value == whole
        accepted.append(whole)
    assert accepted, f"no integer accepted for {key}"


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_a_number_must_be_finite(key: str) -> None:
    section, name = key.split(".")
    for value in (math.nan, math.inf, -math.inf):
        assert names(key, refused({section: {name: value}}))
    with pytest.raises(ConfigError, match=re.escape(key)):
        load_config(None, [f"{key}=nan"], environ={})


def test_a_table_inside_spark_conf_is_refused_naming_the_spark_key() -> None:
    message = refused({"spark": {"conf": {"spark": {"executor": {"memory": "4g"}}}}})
    assert message.startswith("spark.conf.spark must be a string, number or boolean")
    assert '"spark.executor.memory"' in message  # how to write it
    with pytest.raises(ConfigError, match=r"spark\.conf\.x must be"):
        load_config(None, ["spark.conf.x=[1]"], environ={})


# --------------------------------------------------------------------------- unknown names


@pytest.mark.parametrize(("section", "key", "default"), KEYS, ids=[f"{s}.{k}" for s, k, _ in KEYS])
def test_a_misspelt_key_is_refused_with_the_key_it_may_mean(
    section: str, key: str, default: Any
) -> None:
    typo = key[:-1] + ("x" if key[-1] != "x" else "y")
    message = refused({section: {typo: default}})
    assert message.startswith(f"unknown config key {section}.{typo} ")
    assert f"did you mean {section}.{key}?" in message


def test_an_unknown_key_with_no_near_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, ["dns.zzzzzz=1"], environ={})
    assert str(info.value) == "unknown config key dns.zzzzzz (known: hosts_file, cache_ttl_s)"


@pytest.mark.parametrize("section", [f.name for f in dataclasses.fields(Config)])
def test_a_misspelt_section_is_refused_with_the_section_it_may_mean(section: str) -> None:
    typo = section + "s"
    message = refused({typo: {}})
    assert message.startswith(f"unknown config section [{typo}] (did you mean [{section}]?")


@pytest.mark.parametrize("section", [f.name for f in dataclasses.fields(Config)])
def test_a_section_that_is_not_a_table_is_refused(section: str) -> None:
    assert refused({section: 3}).startswith(f"[{section}] must be a table")  # type: ignore[dict-item]


# --------------------------------------------------------------------------- ranges

# Values out of range for every number key (conf/trawl.toml says what each
# key means), the others at their defaults: negative timeouts, delays and
# counts, shares outside their interval, a min above its max.
OUT_OF_RANGE: dict[str, list[float]] = {
    "crawl.host_buckets": [0, -1],
    "crawl.lease_ttl_s": [9.5, 0, -600],
    "crawl.lease_wait_s": [-1],
    "crawl.vacuum_keep_segments": [0, -1],
    "spark.shuffle_partitions": [0, -8],
    "http.connect_timeout_s": [0, -5],
    "http.read_timeout_s": [0, -1],
    "http.total_timeout_s": [0, -30],
    "http.max_content_bytes": [0, -1],
    "http.max_decompressed_bytes": [0, -1, 1_000_000],  # below max_content_bytes
    "http.min_transfer_rate_bps": [-1],
    "http.transfer_rate_window_s": [0, -10],
    "http.max_idle_connections": [-1],
    "dns.cache_ttl_s": [-1],
    "fetch.tasks": [0, -2],
    "fetch.threads_per_task": [0, -16],
    "fetch.time_limit_s": [0, -900],
    "fetch.max_outlinks_per_page": [-1],
    "fetch.follow_redirects": [-1],
    "fetch.follow_depth": [-1],
    "fetch.policy_refresh_s": [0, -30, 60.5, 3600],
    "fetch.progress_interval_s": [0, -5],
    "fetch.progress_log_s": [0, -30],
    "politeness.min_delay_s": [-1, 61],  # above max_delay_s
    "politeness.delay_factor": [-1],
    "politeness.max_delay_s": [-1, 0.5],  # below min_delay_s
    "politeness.max_backoff_s": [-1, 0.5],
    "politeness.max_failures": [0, -1],
    "politeness.failure_pause_s": [-1],
    "robots.max_crawl_delay_s": [-1],
    "robots.cache_ttl_s": [-1, 86_401],  # RFC 9309 2.4
    "robots.max_bytes": [0, 511_999],  # RFC 9309 2.5
    "robots.unreachable_fallback_s": [-1],
    "generate.top_n": [0, -1],
    "generate.max_per_host": [0],
    "generate.max_per_domain": [0],
    "generate.fetch_window_s": [0, -600],
    "filter.max_url_length": [0, -1],
    "filter.max_path_depth": [-1],
    "filter.max_repeated_segments": [0],
    "filter.max_query_params": [-1],
    "traps.max_new_per_host": [0],
    "traps.max_new_per_pattern": [0],
    "traps.max_counter_run": [-1],
    "traps.max_query_sets": [-1],
    "traps.soft404_reprobe_s": [0, -1],
    "traps.soft404_max_distance": [-1, 64],
    "traps.pattern_window": [0, 3],  # below pattern_min_visits
    "traps.pattern_min_visits": [0, 21],  # above pattern_window
    "traps.pattern_bad_share": [0, -0.5, 1.01],
    "traps.pattern_probes": [0],
    "budget.min_pages": [0, 1001],  # above max_pages
    "budget.max_pages": [0, 19],  # below min_pages
    "budget.pages_per_linking_domain": [-1],
    "budget.defer_s": [0, 2_592_001],  # above defer_max_s
    "budget.defer_max_s": [0, 86_399],  # below defer_s
    "budget.seed_host_pages": [0],
    "budget.farm_min_hosts": [-1],
    "schedule.min_interval_s": [0, -1, 7_776_001],  # above max_interval_s
    "schedule.max_interval_s": [0, 86_399],  # below min_interval_s
    "schedule.prior_change_interval_s": [0, -1],
    "schedule.prior_visits": [-1],
    "schedule.change_memory_s": [0],
    "schedule.due_change_prob": [-0.1, 1, 1.5],
    "schedule.fetch_interval_s": [0, -1],
    "schedule.adaptive_inc_rate": [-0.1],
    "schedule.adaptive_dec_rate": [-0.1, 1],
    "schedule.retry_interval_s": [-1],
    "schedule.gone_interval_s": [-1],
    "schedule.gone_after": [0],
    "schedule.max_retries": [-1],
    "dedup.max_distance": [-1, 5],  # not below simhash_blocks
    "dedup.simhash_blocks": [0, 3, 65],  # not above max_distance; 64 bits
    "dedup.shingle_words": [0],
    "dedup.min_words": [-1],
    "dedup.minhash_perm": [0, 60],  # not a multiple of minhash_bands
    "dedup.minhash_bands": [0, 7, 128],
    "dedup.minhash_threshold": [0, 1.1],
    "dedup.hot_key_rows": [0],
    "dedup.score_factor": [0, -0.1, 1.5],
    "warc.max_file_bytes": [0, 999_999],
    "requisites.max_per_page": [-1],
    "requisites.max_per_host": [-1],
    "requisites.max_css_depth": [-1],
    "testweb.hosts": [0],
    "testweb.ips": [0, 64_771],
    "testweb.port": [-1, 65_536],
    "testweb.dup_families": [-1],
    "airflow.retries": [-1],
    "airflow.retry_delay_s": [-1],
}
# Values at the edge of a range, or that look odd but mean something.
IN_RANGE: dict[str, list[float]] = {
    "crawl.deletion_vectors_min_mb": [-1, 0],  # never; from the start
    "crawl.lease_ttl_s": [10],
    "crawl.lease_wait_s": [0],
    "crawl.vacuum_keep_segments": [1],
    "http.min_transfer_rate_bps": [0],  # off
    "http.max_idle_connections": [0],  # no keep-alive
    "http.max_decompressed_bytes": [2_097_152],  # = max_content_bytes
    "dns.cache_ttl_s": [0],
    "fetch.policy_refresh_s": [60, 0.5],
    "fetch.progress_interval_s": [0.1],
    "politeness.min_delay_s": [0, 0.001, 60],  # up to max_delay_s
    "politeness.delay_factor": [0],
    "politeness.max_failures": [1],
    "robots.cache_ttl_s": [0, 86_400],
    "robots.max_bytes": [512_000],
    "traps.max_counter_run": [0],
    "traps.max_query_sets": [0],
    "traps.soft404_max_distance": [0, 63],
    "traps.pattern_window": [4],  # = pattern_min_visits
    "traps.pattern_bad_share": [1],
    "budget.min_pages": [1000],  # = max_pages
    "budget.farm_min_hosts": [0],  # off
    "schedule.due_change_prob": [0, 0.99],
    "schedule.adaptive_dec_rate": [0, 0.99],
    "schedule.prior_visits": [0],
    "dedup.max_distance": [0, 4],
    "dedup.simhash_blocks": [4, 64],
    "dedup.minhash_threshold": [1],
    "dedup.score_factor": [1],
    "warc.max_file_bytes": [1_000_000],
    "requisites.max_per_page": [0],  # none kept: pages only
    "requisites.max_css_depth": [0],  # a page's own requisites only
    "testweb.seed": [-5, 0],
    "testweb.port": [0, 65_535],
    "testweb.ips": [1, 64_770],
    "testweb.dup_families": [0],
    "airflow.retries": [0],
}


def test_the_range_table_covers_every_number_key() -> None:
    assert set(OUT_OF_RANGE) | {"crawl.deletion_vectors_min_mb", "testweb.seed"} == NUMBER_KEYS
    # and validate has a bound, or a reason for none, for each
    assert set(RANGES) | set(ANY_NUMBER) == NUMBER_KEYS
    assert not set(RANGES) & set(ANY_NUMBER)


@pytest.mark.parametrize(
    ("key", "value"),
    [(k, v) for k, values in OUT_OF_RANGE.items() for v in values],
    ids=[f"{k}={v}" for k, values in OUT_OF_RANGE.items() for v in values],
)
def test_an_out_of_range_value_is_refused_naming_the_key(key: str, value: float) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={value}"], environ={})
    message = str(info.value)
    assert names(key, message), message
    assert "\n" not in message and len(message) < 200


@pytest.mark.parametrize(
    ("key", "value"),
    [(k, v) for k, values in IN_RANGE.items() for v in values],
    ids=[f"{k}={v}" for k, values in IN_RANGE.items() for v in values],
)
def test_a_value_at_the_edge_of_its_range_is_accepted(key: str, value: float) -> None:
    section, name = key.split(".")
    assert (
        getattr(getattr(load_config(None, [f"{key}={value}"], environ={}), section), name) == value
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["fetch.tasks=0"], "fetch.tasks must be at least 1, got 0"),
        (["http.connect_timeout_s=-5"], "http.connect_timeout_s must be more than 0, got -5"),
        (["traps.pattern_bad_share=2"], r"traps.pattern_bad_share must be in \(0, 1\], got 2"),
        (
            ["politeness.max_delay_s=0.5"],
            r"politeness.max_delay_s must be at least politeness.min_delay_s \(1\), got 0.5",
        ),
        (["schedule.min_interval_s=8e6"], r"schedule.max_interval_s must be at least schedule"),
        (["robots.max_bytes=1000"], r"must be at least 512000, got 1000 \(RFC 9309 2.5"),
        (["schedule.gone_interval_s=-7776000"], "must not be negative, got -7776000$"),
    ],
)
def test_range_messages_say_what_is_wanted(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides, environ={})
