"""Building the ``Config`` from its sources, in their written order.

Lowest first (Scrapy's ``SETTINGS_PRIORITIES`` idea): the defaults of
``trawl.config.sections``; the ``--config`` TOML file; environment variables
``TRAWL__<SECTION>__<KEY>``; ``--set section.key=value`` overrides, in the
order given. Where none of them gave ``http.proxy`` or ``http.no_proxy`` a
value, the proxy variables of the environment (``HTTPS_PROXY``, ``NO_PROXY``,
...) do (``trawl.config.proxy``). Every source is first merged, key by key, into one nested dict
of raw values (an environment value or an override is read as TOML, else as
a plain string); only then is each value checked against the type of its
default and the whole checked by ``trawl.config.validate``. Executors
rebuild the config from ``Config.to_dict`` through the same
:func:`from_dict`, so they get exactly the driver's checked values.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from trawl.config.proxy import environment_values
from trawl.config.sections import Config
from trawl.config.validate import ConfigError, validate_config

ENV_PREFIX = "TRAWL__"
# [storage] keys the standard AWS environment fills when no other source
# sets them (the variables every AWS tool reads, first one set wins).
AWS_ENVIRONMENT = {
    "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "profile": ("AWS_PROFILE",),
}


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the Config from defaults, file, environment and ``--set`` overrides."""
    env = os.environ if environ is None else environ
    raw: dict[str, dict[str, Any]] = {"storage": _aws_environment(env)}
    if path:
        _merge(raw, _read_file(path), f"config file {path}")
    for name in sorted(env):
        if name.startswith(ENV_PREFIX):
            dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
            _merge(raw, _dotted(dotted, _toml_value(env[name])), f"environment {name}")
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set wants section.key=value, got {item!r}")
        _merge(raw, _dotted(key.strip(), _toml_value(text)), f"--set {item}")
    _merge(raw, {"http": _proxy_variables(raw.get("http", {}), env)}, "the proxy variables")
    return from_dict(raw)


def _aws_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The ``[storage]`` values of the standard AWS environment: the lowest
    source after the defaults, so a config file, ``TRAWL__STORAGE__*`` or
    ``--set`` overrides them. Keys and secrets are not read here."""
    out = {}
    for key, names in AWS_ENVIRONMENT.items():
        value = next((env[n] for n in names if env.get(n)), None)
        if value:
            out[key] = value
    return out


def from_dict(raw: Mapping[str, Mapping[str, Any]]) -> Config:
    """Typed Config from a nested dict (also how executors rebuild it)."""
    sections: dict[str, Any] = {}
    known = {f.name: f for f in fields(Config)}
    for name, values in raw.items():
        if name not in known:
            hint = _did_you_mean(name, known, "[{}]")
            hint += f"{'; ' if hint else ''}known: {', '.join(known)}"
            raise ConfigError(f"unknown config section [{name}] ({hint})")
        if not isinstance(values, Mapping):
            raise ConfigError(f"[{name}] must be a table, got {_shown(values)}")
        cls = known[name].default_factory
        sections[name] = _build_section(name, cls, values)
    cfg = Config(**sections)
    validate_config(cfg)
    return cfg


def _proxy_variables(http: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``http.proxy`` and ``http.no_proxy`` from HTTP_PROXY, HTTPS_PROXY and
    NO_PROXY (and their lower-case names) where no source gave the key a value
    (``trawl.config.proxy``). Read here, when the driver loads the config;
    executors get the values with it (``Config.to_dict``)."""
    unset = [key for key in ("proxy", "no_proxy") if not http.get(key)]
    try:
        return environment_values(env, unset)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _read_file(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def _build_section(name: str, cls: Any, values: Mapping[str, Any]) -> Any:
    defaults = cls()
    kwargs: dict[str, Any] = {}
    types = {f.name: type(getattr(defaults, f.name)) for f in fields(cls)}
    for key, value in values.items():
        if key not in types:
            hint = _did_you_mean(key, types, name + ".{}") or f"known: {', '.join(types)}"
            raise ConfigError(f"unknown config key {name}.{key} ({hint})")
        kwargs[key] = _coerce(f"{name}.{key}", types[key], value)
    return dataclasses.replace(defaults, **kwargs)


# What each default's type accepts, said the way the TOML file writes it.
# Python's bool is an int, so the int and float checks refuse it by name; an
# int is a float key's value (``delay = 2``), read as 2.0.
EXPECTED = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    tuple: "a list of strings",
    dict: "a table",
}


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
        hint = f' (write ["{value}"])' if want is tuple and isinstance(value, str) else ""
        raise ConfigError(f"{key} must be {EXPECTED[want]}, got {_shown(value)}{hint}")
    if want is float:
        if not math.isfinite(value):  # nan would pass every range check
            raise ConfigError(f"{key} must be a finite number, got {value}")
        return float(value)
    if want is tuple:
        return tuple(value)
    if want is dict:
        return _spark_settings(key, value)
    return value


def _spark_settings(key: str, table: Mapping[str, Any]) -> dict[str, str]:
    """``spark.conf``: Spark wants strings, and "true", not "True". A table
    inside it is the TOML slip of an unquoted dotted key."""
    out = {}
    for name, value in table.items():
        if not isinstance(value, str | int | float):  # bool is an int
            raise ConfigError(
                f"{key}.{name} must be a string, number or boolean, got {_shown(value)} "
                '(quote a dotted Spark key: "spark.executor.memory" = "4g")'
            )
        out[str(name)] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def _shown(value: Any) -> str:
    """A wrong value as an error message shows it: short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(name: str, known: Iterable[str], spelled: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {spelled.format(close[0])}?" if close else ""


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
