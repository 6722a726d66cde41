"""One typed configuration for every stage, loaded once.

Sources are applied in a written order, lowest first:

1. the defaults (``conf/trawl.toml`` documents every key with the same one);
2. the config file given with ``--config`` (TOML, same sections and keys);
3. environment variables ``TRAWL__<SECTION>__<KEY>`` (value read as TOML);
4. ``--set section.key=value`` overrides, in the order given.

Where none of them gave ``http.proxy`` or ``http.no_proxy`` a value, the
proxy variables ``http_proxy``, ``https_proxy`` and ``no_proxy`` (or upper
case) do, as curl reads them (``trawl.config.proxy``).

Nothing else in trawl reads the environment or a config file: components are
built from the ``Config`` object (``HttpClient.from_config(cfg)`` and so on).
Unknown sections or keys are errors, so a typo cannot silently do nothing.

Four modules, along the seam between what a config is and how one is made:
``sections`` (the frozen dataclasses and their defaults), ``load`` (the
sources, merged and coerced to the defaults' types), ``validate`` (checks
of values, and ``ConfigError``) and ``proxy`` (what the proxy settings mean,
parsed here so that a wrong one fails on the driver, not in a fetch
task). Everything is imported from here: ``from trawl.config import
Config, load_config``.
"""

from __future__ import annotations

from trawl.config.load import ENV_PREFIX, from_dict, load_config
from trawl.config.proxy import (
    NoProxy,
    ProxyEndpoint,
    ProxySettings,
    parse_no_proxy,
    parse_proxy_url,
)
from trawl.config.sections import (
    AirflowConfig,
    BudgetConfig,
    Config,
    CrawlConfig,
    DedupConfig,
    DnsConfig,
    FetchConfig,
    FilterConfig,
    GenerateConfig,
    HttpConfig,
    NormalizeConfig,
    PolitenessConfig,
    RequisitesConfig,
    RobotsConfig,
    ScheduleConfig,
    SparkConfig,
    StorageConfig,
    TestwebConfig,
    TrapsConfig,
    WarcConfig,
)
from trawl.config.validate import (
    AIRFLOW_MODES,
    DEDUP_METHODS,
    DEDUP_ORDER_KEYS,
    DRIVER_JITS,
    MAX_POLICY_REFRESH_S,
    POLITENESS_MODES,
    SCHEDULE_POLICIES,
    ConfigError,
)

__all__ = [
    "AIRFLOW_MODES",
    "DEDUP_METHODS",
    "DEDUP_ORDER_KEYS",
    "DRIVER_JITS",
    "ENV_PREFIX",
    "MAX_POLICY_REFRESH_S",
    "POLITENESS_MODES",
    "SCHEDULE_POLICIES",
    "AirflowConfig",
    "BudgetConfig",
    "Config",
    "ConfigError",
    "CrawlConfig",
    "DedupConfig",
    "DnsConfig",
    "FetchConfig",
    "FilterConfig",
    "GenerateConfig",
    "HttpConfig",
    "NoProxy",
    "NormalizeConfig",
    "PolitenessConfig",
    "ProxyEndpoint",
    "ProxySettings",
    "RequisitesConfig",
    "RobotsConfig",
    "ScheduleConfig",
    "SparkConfig",
    "StorageConfig",
    "TestwebConfig",
    "TrapsConfig",
    "WarcConfig",
    "from_dict",
    "load_config",
    "parse_no_proxy",
    "parse_proxy_url",
]
