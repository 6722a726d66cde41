"""The shape of trawl's configuration: one frozen dataclass per section, with
its defaults, and :class:`Config` holding them all.

The defaults live here, and ``conf/trawl.toml`` documents every key with the
same default (a test keeps the two equal). Each field's default also fixes
the type a value from a file, the environment or ``--set`` must have
(``trawl.config.load`` coerces to it), so a section is declared once, here.
Frozen, so a stage cannot change the config it was given; ``Config.to_dict``
makes the plain dict that ships it to executors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from trawl.url.filter import DEFAULT_SKIP_EXTENSIONS
from trawl.url.normalize import DEFAULT_SESSION_PARAMS, DEFAULT_STRIP_PARAMS


@dataclass(frozen=True)
class CrawlConfig:
    host_buckets: int = 8
    deletion_vectors_min_mb: float = 64.0
    lease_ttl_s: float = 600.0
    lease_wait_s: float = 0.0
    vacuum_keep_segments: int = 10


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    app_name: str = "trawl"
    shuffle_partitions: int = 8
    jars_dir: str = ""
    log_level: str = "ERROR"
    driver_jit: str = "c1"
    small_jobs: bool = True
    class_archive: bool = True
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
    proxy: str = ""  # trawl.config.proxy: syntax, and how the environment fills it
    no_proxy: tuple[str, ...] = ()


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
    progress_interval_s: float = 5.0
    progress_log_s: float = 30.0

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
class RequisitesConfig:
    """Page requisites, the archive preset (``trawl.parse.requisites``)."""

    capture: bool = False
    max_per_page: int = 100
    max_per_host: int = 1000
    max_css_depth: int = 3


@dataclass(frozen=True)
class StorageConfig:
    """Where an object-store crawl root lives and how to reach it. Empty
    values come from the standard AWS environment (``trawl.config.load``);
    credentials never pass through here: every client takes them from the
    AWS SDKs' own chain (environment, shared files, instance roles)."""

    endpoint: str = ""
    region: str = ""
    path_style: str = "auto"
    credentials: str = "default"
    profile: str = ""


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
    max_query_sets: int = 16
    soft404_probe: bool = True
    soft404_reprobe_s: float = 2_592_000.0
    soft404_max_distance: int = 3
    pattern_window: int = 20
    pattern_min_visits: int = 4
    pattern_bad_share: float = 0.5
    pattern_probes: int = 2


@dataclass(frozen=True)
class BudgetConfig:
    enabled: bool = True
    min_pages: int = 20
    max_pages: int = 1000
    pages_per_linking_domain: int = 10
    defer_s: float = 86_400.0
    defer_max_s: float = 2_592_000.0
    seed_host_pages: int = 1000
    trust_seed_domains: bool = False
    farm_min_hosts: int = 20


@dataclass(frozen=True)
class ScheduleConfig:
    policy: str = "lagrangian"
    min_interval_s: float = 86_400.0
    max_interval_s: float = 7_776_000.0
    prior_change_interval_s: float = 604_800.0
    prior_visits: float = 1.0
    change_memory_s: float = 15_552_000.0
    due_change_prob: float = 0.5
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
    method: str = "minhash"
    max_distance: int = 3
    simhash_blocks: int = 5
    shingle_words: int = 3
    min_words: int = 30
    minhash_perm: int = 64
    minhash_bands: int = 16
    minhash_threshold: float = 0.6
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
class CatalogConfig:
    database: str = ""
    metastore_uri: str = ""
    metastore_dir: str = ""
    register_in_cycle: bool = False


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
    requisites: RequisitesConfig = field(default_factory=RequisitesConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
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
