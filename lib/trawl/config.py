"""One typed configuration for every stage, loaded once.

The defaults live here, in frozen dataclasses, and ``conf/trawl.toml``
documents every key with the same default (a test keeps the two equal).
Sources are applied in a written order, lowest first (Scrapy's
``SETTINGS_PRIORITIES`` idea):

1. the defaults below;
2. the config file given with ``--config`` (TOML, same sections and keys);
3. environment variables ``TRAWL__<SECTION>__<KEY>`` (value read as TOML);
4. ``--set section.key=value`` overrides, in the order given.

Nothing else in trawl reads the environment or a config file: components are
built from the ``Config`` object (``HttpClient.from_config(cfg)`` and so on).
Unknown sections or keys are errors, so a typo cannot silently do nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from trawl.url.filter import DEFAULT_SKIP_EXTENSIONS
from trawl.url.normalize import DEFAULT_SESSION_PARAMS, DEFAULT_STRIP_PARAMS


class ConfigError(ValueError):
    """A config file, environment variable or --set override is wrong."""


@dataclass(frozen=True)
class CrawlConfig:
    host_buckets: int = 8
    deletion_vectors_min_mb: float = 64.0
    lease_ttl_s: float = 600.0
    lease_wait_s: float = 0.0


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    app_name: str = "trawl"
    shuffle_partitions: int = 8
    jars_dir: str = ""
    log_level: str = "ERROR"
    driver_jit: str = "c1"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpConfig:
    agent_name: str = "trawl"
    user_agent: str = ""
    contact_url: str = ""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    total_timeout_s: float = 30.0
    max_content_bytes: int = 2_097_152
    max_decompressed_bytes: int = 10_485_760
    min_transfer_rate_bps: float = 1024.0
    transfer_rate_window_s: float = 10.0
    accept_encoding: str = "gzip, deflate, br"
    max_idle_connections: int = 1024


@dataclass(frozen=True)
class DnsConfig:
    hosts_file: str = ""
    cache_ttl_s: float = 3600.0


@dataclass(frozen=True)
class FetchConfig:
    allow_networks: tuple[str, ...] = ()
    tasks: int = 2
    threads_per_task: int = 16
    time_limit_s: float = 900.0
    max_outlinks_per_page: int = 500
    follow_redirects: int = 0
    follow_depth: int = 0
    follow_new_hosts: bool = True
    policy_refresh_s: float = 30.0

    @property
    def starts_new_hosts(self) -> bool:
        """Do fetch tasks start hosts crawldb never saw (``follow_new_hosts``,
        which acts only while links are followed: ``follow_depth`` > 0)?"""
        return self.follow_depth > 0 and self.follow_new_hosts


@dataclass(frozen=True)
class WarcConfig:
    prefix: str = "trawl"
    max_file_bytes: int = 1_000_000_000
    operator: str = ""
    metadata: bool = True
    revisits: bool = True


@dataclass(frozen=True)
class PolitenessConfig:
    min_delay_s: float = 1.0
    delay_factor: float = 10.0
    max_delay_s: float = 60.0
    mode: str = "both"
    max_backoff_s: float = 3600.0
    max_failures: int = 10
    failure_pause_s: float = 86_400.0


@dataclass(frozen=True)
class RobotsConfig:
    max_crawl_delay_s: float = 30.0
    cache_ttl_s: float = 86_400.0
    max_bytes: int = 512_000
    unreachable_fallback_s: float = 2_592_000.0


@dataclass(frozen=True)
class GenerateConfig:
    top_n: int = 50_000
    max_per_host: int = 200
    max_per_domain: int = 1000
    fetch_window_s: float = 600.0


@dataclass(frozen=True)
class FilterConfig:
    allowed_schemes: tuple[str, ...] = ("http", "https")
    max_url_length: int = 2048
    max_path_depth: int = 16
    max_repeated_segments: int = 3
    max_query_params: int = 8
    skip_extensions: tuple[str, ...] = DEFAULT_SKIP_EXTENSIONS


@dataclass(frozen=True)
class NormalizeConfig:
    strip_params: tuple[str, ...] = DEFAULT_STRIP_PARAMS
    session_params: tuple[str, ...] = DEFAULT_SESSION_PARAMS


@dataclass(frozen=True)
class TrapsConfig:
    max_new_per_host: int = 500
    max_new_per_pattern: int = 100
    max_counter_run: int = 32
    soft404_probe: bool = True
    soft404_reprobe_s: float = 2_592_000.0
    soft404_max_distance: int = 3


@dataclass(frozen=True)
class BudgetConfig:
    enabled: bool = True
    min_pages: int = 20
    max_pages: int = 1000
    pages_per_linking_domain: int = 10
    defer_s: float = 86_400.0
    defer_max_s: float = 2_592_000.0


@dataclass(frozen=True)
class ScheduleConfig:
    policy: str = "lagrangian"
    min_interval_s: float = 86_400.0
    max_interval_s: float = 7_776_000.0
    prior_change_interval_s: float = 604_800.0
    prior_visits: float = 1.0
    change_memory_s: float = 15_552_000.0
    due_change_prob: float = 0.0
    fetch_interval_s: float = 2_592_000.0
    adaptive_inc_rate: float = 0.4
    adaptive_dec_rate: float = 0.2
    adaptive_sync_delta: bool = True
    retry_interval_s: float = 86_400.0
    gone_interval_s: float = 7_776_000.0
    gone_after: int = 2
    max_retries: int = 3


@dataclass(frozen=True)
class DedupConfig:
    method: str = "simhash"
    max_distance: int = 3
    simhash_blocks: int = 5
    shingle_words: int = 3
    min_words: int = 30
    minhash_perm: int = 128
    minhash_bands: int = 32
    minhash_threshold: float = 0.8
    hot_key_rows: int = 2_000
    compare_order: tuple[str, ...] = ("https", "score", "url_length", "fetch_time")
    score_factor: float = 0.1


@dataclass(frozen=True)
class TestwebConfig:
    seed: int = 1
    hosts: int = 300
    ips: int = 60
    port: int = 0
    dup_families: int = 20


@dataclass(frozen=True)
class AirflowConfig:
    """How ``airflow_dags/crawl_cycle.py`` schedules this crawl (trawl's jobs
    ignore it). The DAG reads this section with ``tomllib`` from the file
    alone, as trawl is not installed in Airflow's virtualenv;
    ``airflow_dags/crawl_configs.py`` keeps the same defaults."""

    crawl_root: str = ""
    dag_id: str = ""
    schedule: str = "@daily"
    start_date: str = "2026-01-01T00:00:00Z"
    mode: str = "local"
    trawl_executable: str = "trawl"
    spark_conn_id: str = "spark_default"
    jobs_dir: str = ""
    py_files: tuple[str, ...] = ()
    jars: tuple[str, ...] = ()
    retries: int = 2
    retry_delay_s: float = 300.0


@dataclass(frozen=True)
class Config:
    crawl: CrawlConfig = field(default_factory=CrawlConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    dns: DnsConfig = field(default_factory=DnsConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    robots: RobotsConfig = field(default_factory=RobotsConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    traps: TrapsConfig = field(default_factory=TrapsConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    warc: WarcConfig = field(default_factory=WarcConfig)
    testweb: TestwebConfig = field(default_factory=TestwebConfig)
    airflow: AirflowConfig = field(default_factory=AirflowConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict (for shipping to executors and for ``--json``)."""
        return {f.name: _section_dict(getattr(self, f.name)) for f in fields(self)}


def _section_dict(section: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(section):
        value = getattr(section, f.name)
        out[f.name] = dict(value) if isinstance(value, Mapping) else value
    return out


ENV_PREFIX = "TRAWL__"


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the Config from defaults, file, environment and ``--set`` overrides."""
    raw: dict[str, dict[str, Any]] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                _merge(raw, tomllib.load(fh), f"config file {path}")
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    env = os.environ if environ is None else environ
    for name in sorted(env):
        if name.startswith(ENV_PREFIX):
            dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
            _merge(raw, _dotted(dotted, _toml_value(env[name])), f"environment {name}")
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set wants section.key=value, got {item!r}")
        _merge(raw, _dotted(key.strip(), _toml_value(text)), f"--set {item}")
    return from_dict(raw)


def from_dict(raw: Mapping[str, Mapping[str, Any]]) -> Config:
    """Typed Config from a nested dict (also how executors rebuild it)."""
    sections: dict[str, Any] = {}
    known = {f.name: f for f in fields(Config)}
    for name, values in raw.items():
        if name not in known:
            raise ConfigError(f"unknown config section [{name}] (known: {', '.join(known)})")
        cls = known[name].default_factory
        sections[name] = _build_section(name, cls, values)
    cfg = Config(**sections)
    _validate(cfg)
    return cfg


POLITENESS_MODES = ("byHost", "byIP", "both")
DRIVER_JITS = ("c1", "tiered")
# lagrangian / change_prob: trawl's change-rate model (trawl.crawldb.changerate);
# adaptive: Nutch's AdaptiveFetchSchedule; uniform: one interval for all.
SCHEDULE_POLICIES = ("lagrangian", "change_prob", "adaptive", "uniform")
DEDUP_METHODS = ("simhash", "minhash")
# Nutch's dedup -compareOrder, each key a preference for the canonical page.
DEDUP_ORDER_KEYS = ("https", "score", "url_length", "fetch_time")
AIRFLOW_MODES = ("local", "cluster")  # BashOperator running trawl; SparkSubmitOperator
MAX_POLICY_REFRESH_S = 60.0  # a policy block must reach running fetches within a minute


def _validate(cfg: Config) -> None:
    """Checks of values (types are checked as they are read)."""
    if not re.fullmatch(r"[A-Za-z_-]+", cfg.http.agent_name):
        # RFC 9309 2.2.1: the product token is [a-zA-Z_-]; it is what
        # robots.txt groups are matched against.
        raise ConfigError(
            f"http.agent_name must be a robots.txt product token ([A-Za-z_-]+), "
            f"got {cfg.http.agent_name!r}"
        )
    if cfg.http.max_idle_connections < 0:
        raise ConfigError("http.max_idle_connections must not be negative (0: no keep-alive)")
    if cfg.spark.driver_jit not in DRIVER_JITS:
        raise ConfigError(
            f"spark.driver_jit must be one of {', '.join(DRIVER_JITS)}, "
            f"got {cfg.spark.driver_jit!r}"
        )
    if cfg.politeness.mode not in POLITENESS_MODES:
        raise ConfigError(
            f"politeness.mode must be one of {', '.join(POLITENESS_MODES)}, "
            f"got {cfg.politeness.mode!r}"
        )
    if not 0 < cfg.fetch.policy_refresh_s <= MAX_POLICY_REFRESH_S:
        raise ConfigError(
            f"fetch.policy_refresh_s must be in (0, {MAX_POLICY_REFRESH_S:g}], "
            f"got {cfg.fetch.policy_refresh_s:g}"
        )
    if cfg.schedule.policy not in SCHEDULE_POLICIES:
        raise ConfigError(
            f"schedule.policy must be one of {', '.join(SCHEDULE_POLICIES)}, "
            f"got {cfg.schedule.policy!r}"
        )
    sched = cfg.schedule
    if not 0 < sched.min_interval_s <= sched.max_interval_s:
        raise ConfigError("schedule: need 0 < min_interval_s <= max_interval_s")
    if sched.prior_change_interval_s <= 0 or sched.change_memory_s <= 0:
        raise ConfigError("schedule: prior_change_interval_s and change_memory_s must be > 0")
    if not 0 <= sched.due_change_prob < 1:
        raise ConfigError("schedule.due_change_prob must be in [0, 1)")
    if sched.gone_after < 1:
        raise ConfigError("schedule.gone_after must be at least 1")
    _validate_dedup(cfg.dedup)
    _validate_airflow(cfg.airflow)
    _validate_traps(cfg.traps, cfg.budget)
    if cfg.crawl.lease_ttl_s < 10 or cfg.crawl.lease_wait_s < 0:
        raise ConfigError("crawl: need lease_ttl_s >= 10 and lease_wait_s >= 0")
    if not re.fullmatch(r"[A-Za-z0-9._\-]+", cfg.warc.prefix):
        raise ConfigError(f"warc.prefix must be [A-Za-z0-9._-]+, got {cfg.warc.prefix!r}")
    if cfg.warc.max_file_bytes < 1_000_000:
        raise ConfigError("warc.max_file_bytes must be at least 1000000")
    for key in (
        "fetch.follow_redirects",
        "fetch.follow_depth",
        "politeness.max_failures",
        "schedule.max_retries",
    ):
        section, name = key.split(".")
        if getattr(getattr(cfg, section), name) < 0:
            raise ConfigError(f"{key} must not be negative")


def _validate_dedup(dedup: DedupConfig) -> None:
    if dedup.method not in DEDUP_METHODS:
        raise ConfigError(
            f"dedup.method must be one of {', '.join(DEDUP_METHODS)}, got {dedup.method!r}"
        )
    if not 0 <= dedup.max_distance < dedup.simhash_blocks <= 64:
        # pigeonhole: k differing bits leave simhash_blocks - k blocks intact
        raise ConfigError("dedup: need 0 <= max_distance < simhash_blocks <= 64")
    if dedup.minhash_perm % dedup.minhash_bands or dedup.minhash_bands < 1:
        raise ConfigError("dedup.minhash_bands must divide dedup.minhash_perm")
    if not 0 < dedup.minhash_threshold <= 1 or dedup.shingle_words < 1:
        raise ConfigError("dedup: need 0 < minhash_threshold <= 1 and shingle_words >= 1")
    unknown = set(dedup.compare_order) - set(DEDUP_ORDER_KEYS)
    if unknown or len(set(dedup.compare_order)) != len(dedup.compare_order):
        raise ConfigError(
            f"dedup.compare_order: distinct keys of {', '.join(DEDUP_ORDER_KEYS)}, "
            f"got {list(dedup.compare_order)}"
        )


def _validate_traps(traps: TrapsConfig, budget: BudgetConfig) -> None:
    if traps.max_new_per_host < 1 or traps.max_new_per_pattern < 1:
        raise ConfigError("traps: max_new_per_host and max_new_per_pattern must be at least 1")
    if traps.max_counter_run < 0:
        raise ConfigError("traps: max_counter_run must not be negative (0 turns it off)")
    if not 0 <= traps.soft404_max_distance < 64 or traps.soft404_reprobe_s <= 0:
        raise ConfigError("traps: need 0 <= soft404_max_distance < 64 and soft404_reprobe_s > 0")
    if not 1 <= budget.min_pages <= budget.max_pages or budget.pages_per_linking_domain < 0:
        raise ConfigError(
            "budget: need 1 <= min_pages <= max_pages and pages_per_linking_domain >= 0"
        )
    if not 0 < budget.defer_s <= budget.defer_max_s:
        raise ConfigError("budget: need 0 < defer_s <= defer_max_s")


def _validate_airflow(airflow: AirflowConfig) -> None:
    """The checks ``airflow_dags/crawl_configs.py`` makes too, so that
    ``trawl`` refuses a file the DAG would refuse."""
    if airflow.mode not in AIRFLOW_MODES:
        raise ConfigError(
            f"airflow.mode must be one of {', '.join(AIRFLOW_MODES)}, got {airflow.mode!r}"
        )
    if airflow.mode == "cluster" and not airflow.jobs_dir:
        raise ConfigError("airflow.mode = cluster needs airflow.jobs_dir (where jobs/*.py are)")
    if airflow.dag_id and not re.fullmatch(r"[A-Za-z0-9_.\-]{1,250}", airflow.dag_id):
        # Airflow's own rule for DAG ids
        raise ConfigError(f"airflow.dag_id must be [A-Za-z0-9_.-]+, got {airflow.dag_id!r}")
    try:
        start = datetime.fromisoformat(airflow.start_date)
    except ValueError:
        start = None
    if start is None or start.tzinfo is None:
        raise ConfigError(
            f"airflow.start_date must be ISO 8601 with a zone, got {airflow.start_date!r}"
        )
    if airflow.retries < 0 or airflow.retry_delay_s < 0:
        raise ConfigError("airflow: retries and retry_delay_s must not be negative")


def _build_section(name: str, cls: Any, values: Mapping[str, Any]) -> Any:
    defaults = cls()
    kwargs: dict[str, Any] = {}
    types = {f.name: type(getattr(defaults, f.name)) for f in fields(cls)}
    for key, value in values.items():
        if key not in types:
            raise ConfigError(f"unknown config key {name}.{key} (known: {', '.join(types)})")
        kwargs[key] = _coerce(f"{name}.{key}", types[key], value)
    return dataclasses.replace(defaults, **kwargs)


def _coerce(key: str, want: type, value: Any) -> Any:
    """Check and convert one value to the type of its default."""
    ok = {
        bool: isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        str: isinstance(value, str),
        tuple: isinstance(value, list | tuple) and all(isinstance(v, str) for v in value),
        dict: isinstance(value, Mapping),
    }.get(want, False)
    if not ok:
        raise ConfigError(f"{key} must be {want.__name__}, got {value!r}")
    if want is float:
        return float(value)
    if want is tuple:
        return tuple(value)
    if want is dict:  # spark.conf: Spark wants strings, and "true", not "True"
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
    return value


def _toml_value(text: str) -> Any:
    """Read a value as TOML (``3``, ``"x"``, ``["a"]``), else as a plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _dotted(key: str, value: Any) -> dict[str, Any]:
    """``"fetch.tasks"`` -> ``{"fetch": {"tasks": value}}``.

    ``spark.conf.<any spark key>`` keeps the dots of the Spark key.
    """
    parts = key.split(".")
    if len(parts) < 2:
        raise ConfigError(f"override key must be section.key, got {key!r}")
    if parts[0] == "spark" and parts[1] == "conf" and len(parts) > 2:
        return {"spark": {"conf": {".".join(parts[2:]): value}}}
    if len(parts) != 2:
        raise ConfigError(f"override key must be section.key, got {key!r}")
    return {parts[0]: {parts[1]: value}}


def _merge(into: dict[str, Any], new: Mapping[str, Any], source: str) -> None:
    for section, values in new.items():
        if not isinstance(values, Mapping):
            raise ConfigError(f"{source}: [{section}] must be a table")
        target = into.setdefault(section, {})
        for key, value in values.items():
            if isinstance(value, Mapping) and isinstance(target.get(key), dict):
                target[key].update(value)
            else:
                target[key] = dict(value) if isinstance(value, Mapping) else value
