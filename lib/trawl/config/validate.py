"""Checks of a config's values, and :class:`ConfigError`, what every config
mistake raises.

Types are checked as values are read (``trawl.config.load``); what is left
is what a type cannot say: a name from a fixed list, a range, an order
between two keys, a pattern. Every number key has its range in
:data:`RANGES`, or is in :data:`ANY_NUMBER` saying why it needs none (a
test keeps the two covering every key), and pairs of keys their order in
:data:`ORDERED`. They are checked once, when the ``Config`` is built, so a
stage never meets a value it cannot use; the first wrong value is the
error, and it names its key. The ``[airflow]`` checks are the ones
``airflow_dags/crawl_configs.py`` makes too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trawl.config.proxy import ProxySettings, parse_no_proxy
from trawl.config.sections import (
    AirflowConfig,
    CatalogConfig,
    Config,
    DedupConfig,
    HttpConfig,
    StorageConfig,
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
ONE_OF = {
    "spark.driver_jit": DRIVER_JITS,
    "politeness.mode": POLITENESS_MODES,
    "schedule.policy": SCHEDULE_POLICIES,
    "dedup.method": DEDUP_METHODS,
    "airflow.mode": AIRFLOW_MODES,
    "storage.path_style": PATH_STYLES,
    "storage.credentials": CREDENTIALS,
}


@dataclass(frozen=True)
class Bound:
    """The values a number key may take: ``low`` and ``high`` (None: no
    end), each included unless ``low_open`` or ``high_open`` says so;
    ``note`` says what an end value means, or why the bound is there."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    note: str = ""

    def holds(self, value: float) -> bool:
        above = self.low is None or value > self.low or (value == self.low and not self.low_open)
        below = (
            self.high is None or value < self.high or (value == self.high and not self.high_open)
        )
        return above and below

    def describe(self) -> str:
        if self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            low = "-inf" if self.low is None else _number(self.low)
            return f"must be in {left}{low}, {_number(self.high)}{right}"
        if self.low == 0 and not self.low_open:
            return "must not be negative"
        return f"must be {'more than' if self.low_open else 'at least'} {_number(self.low or 0)}"


NOT_NEGATIVE = Bound(0)
POSITIVE = Bound(0, low_open=True)
AT_LEAST_ONE = Bound(1)
SHARE = Bound(0, 1, low_open=True)  # a share or factor: (0, 1]

# The range of every number key whose range means something; conf/trawl.toml
# says what each key is.
RANGES: dict[str, Bound] = {
    "crawl.host_buckets": AT_LEAST_ONE,
    "crawl.lease_ttl_s": Bound(10),
    "crawl.lease_wait_s": NOT_NEGATIVE,
    "crawl.vacuum_keep_segments": AT_LEAST_ONE,
    "spark.shuffle_partitions": AT_LEAST_ONE,
    "http.connect_timeout_s": POSITIVE,
    "http.read_timeout_s": POSITIVE,
    "http.total_timeout_s": POSITIVE,
    "http.max_content_bytes": AT_LEAST_ONE,
    "http.max_decompressed_bytes": AT_LEAST_ONE,
    "http.min_transfer_rate_bps": Bound(0, note="0 turns it off"),
    "http.transfer_rate_window_s": POSITIVE,
    "http.max_idle_connections": Bound(0, note="0: no keep-alive"),
    "dns.cache_ttl_s": NOT_NEGATIVE,
    "fetch.tasks": AT_LEAST_ONE,
    "fetch.threads_per_task": AT_LEAST_ONE,
    "fetch.time_limit_s": POSITIVE,
    "fetch.max_outlinks_per_page": NOT_NEGATIVE,
    "fetch.follow_redirects": NOT_NEGATIVE,
    "fetch.follow_depth": NOT_NEGATIVE,
    "fetch.policy_refresh_s": Bound(0, MAX_POLICY_REFRESH_S, low_open=True),
    "fetch.progress_interval_s": POSITIVE,
    "fetch.progress_log_s": POSITIVE,
    # 0: the gap is the response-time rule alone (10 x the last response time)
    "politeness.min_delay_s": NOT_NEGATIVE,
    "politeness.delay_factor": NOT_NEGATIVE,
    "politeness.max_delay_s": NOT_NEGATIVE,
    "politeness.max_backoff_s": NOT_NEGATIVE,
    # 0 would stop every host before its first request
    "politeness.max_failures": AT_LEAST_ONE,
    "politeness.failure_pause_s": NOT_NEGATIVE,
    "robots.max_crawl_delay_s": NOT_NEGATIVE,
    "robots.cache_ttl_s": Bound(0, 86_400, note="RFC 9309 2.4: at most 24 hours"),
    "robots.max_bytes": Bound(512_000, note="RFC 9309 2.5: at least 500 KiB"),
    "robots.unreachable_fallback_s": NOT_NEGATIVE,
    "generate.top_n": AT_LEAST_ONE,
    "generate.max_per_host": AT_LEAST_ONE,
    "generate.max_per_domain": AT_LEAST_ONE,
    "generate.fetch_window_s": POSITIVE,
    "filter.max_url_length": AT_LEAST_ONE,
    "filter.max_path_depth": NOT_NEGATIVE,
    "filter.max_repeated_segments": AT_LEAST_ONE,  # 0 would refuse every path
    "filter.max_query_params": NOT_NEGATIVE,
    "traps.max_new_per_host": AT_LEAST_ONE,
    "traps.max_new_per_pattern": AT_LEAST_ONE,
    "traps.max_counter_run": Bound(0, note="0 turns it off"),
    "traps.max_query_sets": Bound(0, note="0 turns it off"),
    "traps.soft404_reprobe_s": POSITIVE,
    "traps.soft404_max_distance": Bound(0, 64, high_open=True, note="bits of a simhash"),
    "traps.pattern_window": AT_LEAST_ONE,
    "traps.pattern_min_visits": AT_LEAST_ONE,
    "traps.pattern_bad_share": SHARE,
    "traps.pattern_probes": AT_LEAST_ONE,
    "budget.min_pages": AT_LEAST_ONE,
    "budget.max_pages": AT_LEAST_ONE,
    "budget.pages_per_linking_domain": NOT_NEGATIVE,
    "budget.defer_s": POSITIVE,
    "budget.defer_max_s": POSITIVE,
    "budget.seed_host_pages": AT_LEAST_ONE,
    "budget.farm_min_hosts": NOT_NEGATIVE,
    "schedule.min_interval_s": POSITIVE,
    "schedule.max_interval_s": POSITIVE,
    "schedule.prior_change_interval_s": POSITIVE,
    "schedule.prior_visits": NOT_NEGATIVE,
    "schedule.change_memory_s": POSITIVE,
    "schedule.due_change_prob": Bound(0, 1, high_open=True),
    "schedule.fetch_interval_s": POSITIVE,
    "schedule.adaptive_inc_rate": NOT_NEGATIVE,
    # the interval is multiplied by 1 - dec_rate and must stay positive
    "schedule.adaptive_dec_rate": Bound(0, 1, high_open=True),
    "schedule.retry_interval_s": NOT_NEGATIVE,
    "schedule.gone_interval_s": NOT_NEGATIVE,
    "schedule.gone_after": AT_LEAST_ONE,
    "schedule.max_retries": NOT_NEGATIVE,
    "dedup.max_distance": Bound(0, 64, high_open=True, note="bits of a simhash"),
    "dedup.simhash_blocks": Bound(1, 64, note="blocks of a 64-bit simhash"),
    "dedup.shingle_words": AT_LEAST_ONE,
    "dedup.min_words": NOT_NEGATIVE,
    "dedup.minhash_perm": AT_LEAST_ONE,
    "dedup.minhash_bands": AT_LEAST_ONE,
    "dedup.minhash_threshold": SHARE,
    "dedup.hot_key_rows": AT_LEAST_ONE,
    "dedup.score_factor": SHARE,  # a duplicate's score is divided by it on its return
    "warc.max_file_bytes": Bound(1_000_000),
    "requisites.max_per_page": NOT_NEGATIVE,
    "requisites.max_per_host": NOT_NEGATIVE,
    "requisites.max_css_depth": NOT_NEGATIVE,
    "testweb.hosts": AT_LEAST_ONE,
    # 127.0.1.1 onwards, 254 a /24, up to 127.0.255.254
    "testweb.ips": Bound(1, 254 * 255),
    "testweb.port": Bound(0, 65_535, note="0: any free port"),
    "testweb.dup_families": NOT_NEGATIVE,
    "airflow.retries": NOT_NEGATIVE,
    "airflow.retry_delay_s": NOT_NEGATIVE,
}
# The number keys any value suits, and why.
ANY_NUMBER = {
    "crawl.deletion_vectors_min_mb": "0: from the start; negative: never",
    "testweb.seed": "any seed makes a web",
}
# (lower, higher, strictly): the first key's value may not exceed the second's.
ORDERED = (
    ("politeness.min_delay_s", "politeness.max_delay_s", False),
    ("politeness.min_delay_s", "politeness.max_backoff_s", False),
    ("http.max_content_bytes", "http.max_decompressed_bytes", False),
    ("schedule.min_interval_s", "schedule.max_interval_s", False),
    ("budget.min_pages", "budget.max_pages", False),
    ("budget.defer_s", "budget.defer_max_s", False),
    ("traps.pattern_min_visits", "traps.pattern_window", False),
    # pigeonhole: k differing bits leave simhash_blocks - k blocks intact
    ("dedup.max_distance", "dedup.simhash_blocks", True),
)


def validate_config(cfg: Config) -> None:
    """Raise :class:`ConfigError` for the first value ``cfg`` may not have."""
    for key, choices in ONE_OF.items():
        _one_of(key, _value(cfg, key), choices)
    for key, bound in RANGES.items():
        _within(key, _value(cfg, key), bound)
    for lower, higher, strictly in ORDERED:
        _ordered(cfg, lower, higher, strictly)
    _validate_http(cfg.http)
    _validate_dedup(cfg.dedup)
    _validate_airflow(cfg.airflow)
    _validate_warc(cfg.warc)
    _validate_storage(cfg.storage)
    _validate_catalog(cfg.catalog)


def _value(cfg: Config, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def _within(key: str, value: float, bound: Bound) -> None:
    if not bound.holds(value):
        note = f" ({bound.note})" if bound.note else ""
        raise ConfigError(f"{key} {bound.describe()}, got {_number(value)}{note}")


def _ordered(cfg: Config, lower: str, higher: str, strictly: bool) -> None:
    low, high = _value(cfg, lower), _value(cfg, higher)
    if high < low or (strictly and high == low):
        than = "more than" if strictly else "at least"
        raise ConfigError(f"{higher} must be {than} {lower} ({_number(low)}), got {_number(high)}")


def _number(value: float) -> str:
    """2592000.0 as 2592000, not 2.592e+06; 0.25 as 0.25."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _validate_storage(storage: StorageConfig) -> None:
    endpoint = storage.endpoint
    if endpoint and not re.fullmatch(r"https?://[^/\s?#@]+/?", endpoint):
        raise ConfigError(
            f"storage.endpoint must be http(s)://host[:port] (no path, no user), got {endpoint!r}"
        )


def _validate_catalog(catalog: CatalogConfig) -> None:
    if catalog.database and not re.fullmatch(r"[a-z_][a-z0-9_]{0,127}", catalog.database):
        raise ConfigError(
            f"catalog.database must be a SQL name ([a-z_][a-z0-9_]*), got {catalog.database!r}"
        )
    uri = catalog.metastore_uri
    if uri and not re.fullmatch(r"thrift://[^/\s]+(,thrift://[^/\s]+)*", uri):
        raise ConfigError(f"catalog.metastore_uri must be thrift://host:port, got {uri!r}")


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
    for key, parse in (("proxy", ProxySettings.parse), ("no_proxy", parse_no_proxy)):
        try:
            parse(getattr(http, key))
        except ValueError as exc:  # the message never holds the proxy's password
            raise ConfigError(f"http.{key}: {exc}") from None


def _validate_dedup(dedup: DedupConfig) -> None:
    if dedup.minhash_perm % dedup.minhash_bands:
        raise ConfigError(
            f"dedup.minhash_bands must divide dedup.minhash_perm ({dedup.minhash_perm}), "
            f"got {dedup.minhash_bands}"
        )
    unknown = set(dedup.compare_order) - set(DEDUP_ORDER_KEYS)
    if unknown or len(set(dedup.compare_order)) != len(dedup.compare_order):
        raise ConfigError(
            f"dedup.compare_order: distinct keys of {', '.join(DEDUP_ORDER_KEYS)}, "
            f"got {list(dedup.compare_order)}"
        )


def _validate_airflow(airflow: AirflowConfig) -> None:
    """The checks ``airflow_dags/crawl_configs.py`` makes too, so that
    ``trawl`` refuses a file the DAG would refuse."""
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


def _validate_warc(warc: WarcConfig) -> None:
    if not re.fullmatch(r"[A-Za-z0-9._\-]+", warc.prefix):
        raise ConfigError(f"warc.prefix must be [A-Za-z0-9._-]+, got {warc.prefix!r}")
