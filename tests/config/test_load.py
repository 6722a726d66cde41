"""trawl.config.load: precedence of the sources, values read as TOML, type
errors, unknown keys, and the dict round trip executors rely on."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from trawl.config import Config, ConfigError, from_dict, load_config


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trawl.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- precedence


@pytest.mark.parametrize(
    ("file_value", "env_value", "set_values", "expected"),
    [
        (None, None, [], 2),  # the default
        (3, None, [], 3),  # file over default
        (3, "5", [], 5),  # environment over file
        (None, "5", [], 5),
        (3, "5", ["fetch.tasks=7"], 7),  # --set over environment
        (3, None, ["fetch.tasks=7"], 7),
        (None, None, ["fetch.tasks=7", "fetch.tasks=9"], 9),  # later --set wins
    ],
)
def test_precedence_defaults_file_environment_set(
    tmp_path: Path,
    file_value: int | None,
    env_value: str | None,
    set_values: list[str],
    expected: int,
) -> None:
    path = write_toml(tmp_path, f"[fetch]\ntasks = {file_value}\n") if file_value else None
    environ = {"TRAWL__FETCH__TASKS": env_value} if env_value else {}
    cfg = load_config(path, set_values, environ=environ)
    assert cfg.fetch.tasks == expected
    # Everything not set stays at its default.
    assert cfg.fetch.threads_per_task == Config().fetch.threads_per_task
    assert dataclasses.replace(cfg.fetch, tasks=2) == Config().fetch


def test_sources_merge_key_by_key(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[fetch]\ntasks = 3\nthreads_per_task = 4\n")
    cfg = load_config(
        path, ["politeness.min_delay_s=0.5"], environ={"TRAWL__FETCH__THREADS_PER_TASK": "6"}
    )
    assert (cfg.fetch.tasks, cfg.fetch.threads_per_task) == (3, 6)
    assert cfg.politeness.min_delay_s == 0.5


def test_environment_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAWL__FETCH__TASKS", "11")
    assert load_config().fetch.tasks == 11
    assert load_config(environ={}).fetch.tasks == 2


@pytest.mark.parametrize(
    ("environ", "section", "key", "expected"),
    [
        ({"TRAWL__HTTP__AGENT_NAME": "mybot"}, "http", "agent_name", "mybot"),
        ({"TRAWL__HTTP__AGENT_NAME": '"quoted"'}, "http", "agent_name", "quoted"),
        ({"TRAWL__POLITENESS__MIN_DELAY_S": "2"}, "politeness", "min_delay_s", 2.0),
        (
            {"TRAWL__FETCH__ALLOW_NETWORKS": '["10.0.0.0/8"]'},
            "fetch",
            "allow_networks",
            ("10.0.0.0/8",),
        ),
        ({"OTHER__FETCH__TASKS": "9", "TRAWL_FETCH_TASKS": "9"}, "fetch", "tasks", 2),
    ],
)
def test_environment_values(environ: dict[str, str], section: str, key: str, expected: Any) -> None:
    cfg = load_config(environ=environ)
    assert getattr(getattr(cfg, section), key) == expected


# --------------------------------------------------------------------------- --set values


@pytest.mark.parametrize(
    ("override", "section", "key", "expected"),
    [
        ('fetch.allow_networks=["127.0.0.0/8"]', "fetch", "allow_networks", ("127.0.0.0/8",)),
        (
            'fetch.allow_networks=["10.0.0.0/8", "::1/128"]',
            "fetch",
            "allow_networks",
            ("10.0.0.0/8", "::1/128"),
        ),
        ("fetch.allow_networks=[]", "fetch", "allow_networks", ()),
        ("fetch.tasks=4", "fetch", "tasks", 4),
        ("fetch.tasks = 4", "fetch", "tasks", 4),
        ("politeness.min_delay_s=0.25", "politeness", "min_delay_s", 0.25),
        ("robots.max_bytes=1_000_000", "robots", "max_bytes", 1_000_000),
        ("http.agent_name=mybot", "http", "agent_name", "mybot"),
        ('http.agent_name="my-bot"', "http", "agent_name", "my-bot"),
        (
            "http.contact_url=https://example.org/bot",
            "http",
            "contact_url",
            "https://example.org/bot",
        ),
        ("spark.master=local[2]", "spark", "master", "local[2]"),
        ("dns.hosts_file=/tmp/hosts", "dns", "hosts_file", "/tmp/hosts"),
        ("http.user_agent=", "http", "user_agent", ""),
    ],
)
def test_set_values_read_as_toml_else_plain_string(
    override: str, section: str, key: str, expected: Any
) -> None:
    value = getattr(getattr(load_config(None, [override], environ={}), section), key)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("override", "expected"),
    [("politeness.min_delay_s=2", 2.0), ("schedule.fetch_interval_s=60", 60.0)],
)
def test_int_accepted_for_float_key(override: str, expected: float) -> None:
    section, rest = override.split(".", 1)
    key = rest.split("=", 1)[0]
    value = getattr(getattr(load_config(None, [override], environ={}), section), key)
    assert value == expected
    assert isinstance(value, float)


def test_int_accepted_for_float_key_in_file(tmp_path: Path) -> None:
    cfg = load_config(write_toml(tmp_path, "[politeness]\nmax_delay_s = 30\n"), environ={})
    assert cfg.politeness.max_delay_s == 30.0
    assert isinstance(cfg.politeness.max_delay_s, float)


def test_spark_conf_keeps_the_dots_of_spark_keys() -> None:
    cfg = load_config(
        None,
        ["spark.conf.spark.executor.memory=4g", "spark.conf.spark.sql.shuffle.partitions=4"],
        environ={},
    )
    assert cfg.spark.conf == {"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": "4"}
    assert cfg.spark.master == Config().spark.master


def test_spark_conf_from_file_and_set_merge(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        '[spark.conf]\n"spark.executor.memory" = "2g"\n"spark.driver.memory" = "1g"\n',
    )
    cfg = load_config(path, ["spark.conf.spark.executor.memory=4g"], environ={})
    assert cfg.spark.conf == {"spark.executor.memory": "4g", "spark.driver.memory": "1g"}


def test_driver_jit_sets_the_driver_jvm_options() -> None:
    from trawl.store.session import spark_conf

    c1 = spark_conf(load_config(None, [], environ={}))
    options = c1["spark.driver.extraJavaOptions"].split()
    assert {"-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=0.1"} <= set(options)
    assert "TieredStopAtLevel" not in c1.get("spark.executor.extraJavaOptions", "")
    tiered = spark_conf(load_config(None, ["spark.driver_jit=tiered"], environ={}))
    for option in ("TieredStopAtLevel", "CompileThresholdScaling"):
        assert option not in tiered.get("spark.driver.extraJavaOptions", "")
    # the log configuration stays either way
    assert "log4j2" in c1["spark.driver.extraJavaOptions"]
    assert "log4j2" in tiered["spark.driver.extraJavaOptions"]
    # a user's own driver options replace trawl's whole
    own = ["spark.conf.spark.driver.extraJavaOptions=-Xss4m"]
    assert spark_conf(load_config(None, own, environ={}))["spark.driver.extraJavaOptions"] == (
        "-Xss4m"
    )


def test_the_spark_sql_command_starts_its_jvm_as_the_driver_is() -> None:
    """``trawl catalog``'s spark-sql line: the driver's JIT and log options,
    not the class archive (made for trawl's class path), the operator's own
    driver options instead when set."""
    from trawl.store.session import spark_sql_command

    def java_options(*sets: str) -> str:
        command = spark_sql_command(load_config(None, list(sets), environ={}))
        return command[command.index("--driver-java-options") + 1]

    c1 = java_options("spark.class_archive=true").split()
    assert {"-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=0.1"} <= set(c1)
    assert any("log4j2" in option for option in c1)
    assert not any("SharedArchiveFile" in option for option in c1)
    assert "TieredStopAtLevel" not in java_options("spark.driver_jit=tiered")
    assert java_options("spark.conf.spark.driver.extraJavaOptions=-Xss4m") == "-Xss4m"


def test_a_local_driver_gets_a_quarter_of_the_memory_unless_set() -> None:
    from trawl.store.session import local_driver_memory, spark_conf

    mib = int(local_driver_memory().removesuffix("m"))
    assert 1024 <= mib <= 8192
    assert spark_conf(load_config(None, [], environ={}))["spark.driver.memory"] == f"{mib}m"
    own = ["spark.conf.spark.driver.memory=3g"]
    assert spark_conf(load_config(None, own, environ={}))["spark.driver.memory"] == "3g"
    cluster = ["spark.master=yarn"]
    assert "spark.driver.memory" not in spark_conf(load_config(None, cluster, environ={}))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("fetch.tasks=2.5", "fetch.tasks must be an integer, got 2.5"),
        ("fetch.tasks=true", "fetch.tasks must be an integer, got True"),  # TOML bool, not "true"
        ('fetch.tasks="3"', "fetch.tasks must be an integer, got '3'"),
        ("fetch.tasks=[1]", "fetch.tasks must be an integer"),
        ("politeness.min_delay_s=true", "politeness.min_delay_s must be a number, got True"),
        ("politeness.min_delay_s=fast", "politeness.min_delay_s must be a number"),
        ("http.agent_name=3", "http.agent_name must be a string"),
        ("fetch.allow_networks=[1, 2]", "fetch.allow_networks must be a list of strings"),
        ("fetch.allow_networks=127.0.0.0/8", "fetch.allow_networks must be a list of strings"),
        ("spark.conf=3", "spark.conf must be a table"),
    ],
)
def test_wrong_types_raise(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override], environ={})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("nosuch.key=1", r"unknown config section \[nosuch\]"),
        ("fetch.nokey=1", r"unknown config key fetch\.nokey"),
        ("fetch.Tasks=1", r"unknown config key fetch\.Tasks"),
        ("nokey", "--set wants section.key=value"),
        ("=3", "--set wants section.key=value"),
        (" =3", "--set wants section.key=value"),
        ("a.b.c=1", "override key must be section.key"),
        ("fetch=3", "override key must be section.key"),
        ("fetch.tasks.x=3", "override key must be section.key"),
    ],
)
def test_bad_overrides_raise(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override], environ={})


def test_unknown_section_message_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, ["fetcher.tasks=1"], environ={})
    assert "fetcher" in str(info.value)
    assert "fetch" in str(info.value).split("known:")[1]


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TRAWL__NOPE__X": "1"}, r"unknown config section \[nope\]"),
        ({"TRAWL__FETCH__NOPE": "1"}, r"unknown config key fetch\.nope"),
        ({"TRAWL__FETCH": "1"}, "override key must be section.key"),
        ({"TRAWL__FETCH__TASKS": "many"}, "fetch.tasks must be an integer"),
    ],
)
def test_bad_environment_raises(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(environ=environ)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[fetch]\ntasks = \n", "not valid TOML"),
        ("fetch = 3\n", r"\[fetch\] must be a table"),
        ("[fetch]\nworkers = 3\n", r"unknown config key fetch\.workers"),
        ("[fetchers]\ntasks = 3\n", r"unknown config section \[fetchers\]"),
        ('[fetch]\ntasks = "3"\n', "fetch.tasks must be an integer"),
    ],
)
def test_bad_files_raise(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write_toml(tmp_path, text), environ={})


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml", environ={})


# --------------------------------------------------------------------------- round trip


def custom_config() -> Config:
    return load_config(
        None,
        [
            "fetch.tasks=5",
            'fetch.allow_networks=["127.0.0.0/8"]',
            "politeness.min_delay_s=0.05",
            "http.agent_name=mybot",
            "spark.conf.spark.executor.memory=4g",
            'filter.allowed_schemes=["https"]',
        ],
        environ={},
    )


@pytest.mark.parametrize("make", [Config, custom_config], ids=["defaults", "custom"])
def test_from_dict_round_trip(make: Any) -> None:
    cfg = make()
    assert from_dict(cfg.to_dict()) == cfg
    # The dict survives JSON (how it is shipped to executors and printed).
    assert from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_to_dict_is_plain_and_complete() -> None:
    d = custom_config().to_dict()
    assert set(d) == {f.name for f in dataclasses.fields(Config)}
    assert d["fetch"]["tasks"] == 5
    assert d["fetch"]["allow_networks"] == ("127.0.0.0/8",)
    assert d["spark"]["conf"] == {"spark.executor.memory": "4g"}
    assert type(d["spark"]["conf"]) is dict


def test_from_dict_partial_fills_defaults() -> None:
    cfg = from_dict({"fetch": {"tasks": 4}})
    assert cfg.fetch.tasks == 4
    assert dataclasses.replace(cfg, fetch=Config().fetch) == Config()
