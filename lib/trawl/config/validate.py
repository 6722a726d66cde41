"""Checks of a config's values, and :class:`ConfigError`, what every config
mistake raises.

Types are checked as values are read (``trawl.config.load``); what is left
is what a type cannot say: a name from a fixed list, a range, an order
between two keys, a pattern. They are checked once, when the ``Config`` is
built, so a stage never meets a value it cannot use; the first wrong value
is the error. The ``[airflow]`` checks are the ones
``airflow_dags/crawl_configs.py`` makes too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from trawl.config.proxy import ProxySettings, parse_no_proxy
from trawl.config.sections import (
    AirflowConfig,
    BudgetConfig,
    Config,
    CrawlConfig,
    DedupConfig,
    FetchConfig,
    HttpConfig,
    ScheduleConfig,
    StorageConfig,
    TrapsConfig,
    WarcConfig,
)


class ConfigError(ValueError):
    """A config file, environment variable or --set override is wrong."""


POLITENESS_MODES = ("byHost", "byIP", "both")
# storage.path_style: auto = path-style for an http:// endpoint (a local or
# S3-compatible store), virtual-hosted otherwise (AWS's default).
PATH_STYLES = ("auto", "true", "false")
# storage.credentials: default = the AWS SDKs' chain (environment, shared
# credentials and config files with storage.profile, instance and container
# roles); anonymous = unsigned requests (a public bucket).
CREDENTIALS = ("default", "anonymous")
DRIVER_JITS = ("c1", "tiered")
# lagrangian / change_prob: trawl's change-rate model (trawl.crawldb.changerate);
# adaptive: Nutch's AdaptiveFetchSchedule; uniform: one interval for all.
SCHEDULE_POLICIES = ("lagrangian", "change_prob", "adaptive", "uniform")
DEDUP_METHODS = ("simhash", "minhash")
# Nutch's dedup -compareOrder, each key a preference for the canonical page.
DEDUP_ORDER_KEYS = ("https", "score", "url_length", "fetch_time")
AIRFLOW_MODES = ("local", "cluster")  # BashOperator running trawl; SparkSubmitOperator
MAX_POLICY_REFRESH_S = 60.0  # a policy block must reach running fetches within a minute
NOT_NEGATIVE = (
    "fetch.follow_redirects",
    "fetch.follow_depth",
    "politeness.max_failures",
    "schedule.max_retries",
)


def validate_config(cfg: Config) -> None:
    """Raise :class:`ConfigError` for the first value ``cfg`` may not have."""
    _validate_http(cfg.http)
    _one_of("spark.driver_jit", cfg.spark.driver_jit, DRIVER_JITS)
    _one_of("politeness.mode", cfg.politeness.mode, POLITENESS_MODES)
    _validate_fetch(cfg.fetch)
    _validate_schedule(cfg.schedule)
    _validate_dedup(cfg.dedup)
    _validate_airflow(cfg.airflow)
    _validate_traps(cfg.traps, cfg.budget)
    _validate_crawl(cfg.crawl)
    _validate_warc(cfg.warc)
    _validate_storage(cfg.storage)
    for key in NOT_NEGATIVE:
        section, name = key.split(".")
        if getattr(getattr(cfg, section), name) < 0:
            raise ConfigError(f"{key} must not be negative")


def _validate_storage(storage: StorageConfig) -> None:
    _one_of("storage.path_style", storage.path_style, PATH_STYLES)
    _one_of("storage.credentials", storage.credentials, CREDENTIALS)
    endpoint = storage.endpoint
    if endpoint and not re.fullmatch(r"https?://[^/\s?#@]+/?", endpoint):
        raise ConfigError(
            f"storage.endpoint must be http(s)://host[:port] (no path, no user), got {endpoint!r}"
        )


def _one_of(key: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{key} must be one of {', '.join(choices)}, got {value!r}")


def _validate_http(http: HttpConfig) -> None:
    if not re.fullmatch(r"[A-Za-z_-]+", http.agent_name):
        # RFC 9309 2.2.1: the product token is [a-zA-Z_-]; it is what
        # robots.txt groups are matched against.
        raise ConfigError(
            f"http.agent_name must be a robots.txt product token ([A-Za-z_-]+), "
            f"got {http.agent_name!r}"
        )
    if http.max_idle_connections < 0:
        raise ConfigError("http.max_idle_connections must not be negative (0: no keep-alive)")
    for key, parse in (("proxy", ProxySettings.parse), ("no_proxy", parse_no_proxy)):
        try:
            parse(getattr(http, key))
        except ValueError as exc:  # the message never holds the proxy's password
            raise ConfigError(f"http.{key}: {exc}") from None


def _validate_fetch(fetch: FetchConfig) -> None:
    if not 0 < fetch.policy_refresh_s <= MAX_POLICY_REFRESH_S:
        raise ConfigError(
            f"fetch.policy_refresh_s must be in (0, {MAX_POLICY_REFRESH_S:g}], "
            f"got {fetch.policy_refresh_s:g}"
        )


def _validate_schedule(sched: ScheduleConfig) -> None:
    _one_of("schedule.policy", sched.policy, SCHEDULE_POLICIES)
    if not 0 < sched.min_interval_s <= sched.max_interval_s:
        raise ConfigError("schedule: need 0 < min_interval_s <= max_interval_s")
    if sched.prior_change_interval_s <= 0 or sched.change_memory_s <= 0:
        raise ConfigError("schedule: prior_change_interval_s and change_memory_s must be > 0")
    if not 0 <= sched.due_change_prob < 1:
        raise ConfigError("schedule.due_change_prob must be in [0, 1)")
    if sched.gone_after < 1:
        raise ConfigError("schedule.gone_after must be at least 1")


def _validate_dedup(dedup: DedupConfig) -> None:
    _one_of("dedup.method", dedup.method, DEDUP_METHODS)
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
    if traps.max_query_sets < 0:
        raise ConfigError("traps: max_query_sets must not be negative (0 turns it off)")
    if not 0 <= traps.soft404_max_distance < 64 or traps.soft404_reprobe_s <= 0:
        raise ConfigError("traps: need 0 <= soft404_max_distance < 64 and soft404_reprobe_s > 0")
    if not 1 <= traps.pattern_min_visits <= traps.pattern_window or traps.pattern_probes < 1:
        raise ConfigError(
            "traps: need 1 <= pattern_min_visits <= pattern_window and pattern_probes >= 1"
        )
    if not 0.0 < traps.pattern_bad_share <= 1.0:
        raise ConfigError("traps: need 0 < pattern_bad_share <= 1")
    if not 1 <= budget.min_pages <= budget.max_pages or budget.pages_per_linking_domain < 0:
        raise ConfigError(
            "budget: need 1 <= min_pages <= max_pages and pages_per_linking_domain >= 0"
        )
    if not 0 < budget.defer_s <= budget.defer_max_s:
        raise ConfigError("budget: need 0 < defer_s <= defer_max_s")
    if budget.seed_host_pages < 1:
        raise ConfigError("budget: need seed_host_pages >= 1")


def _validate_airflow(airflow: AirflowConfig) -> None:
    """The checks ``airflow_dags/crawl_configs.py`` makes too, so that
    ``trawl`` refuses a file the DAG would refuse."""
    _one_of("airflow.mode", airflow.mode, AIRFLOW_MODES)
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


def _validate_crawl(crawl: CrawlConfig) -> None:
    if crawl.lease_ttl_s < 10 or crawl.lease_wait_s < 0:
        raise ConfigError("crawl: need lease_ttl_s >= 10 and lease_wait_s >= 0")


def _validate_warc(warc: WarcConfig) -> None:
    if not re.fullmatch(r"[A-Za-z0-9._\-]+", warc.prefix):
        raise ConfigError(f"warc.prefix must be [A-Za-z0-9._-]+, got {warc.prefix!r}")
    if warc.max_file_bytes < 1_000_000:
        raise ConfigError("warc.max_file_bytes must be at least 1000000")
