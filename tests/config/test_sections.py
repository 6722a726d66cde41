"""trawl.config.sections: the defaults, and conf/trawl.toml documenting exactly them."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from trawl.config import Config, load_config

CONF = Path(__file__).resolve().parents[2] / "conf" / "trawl.toml"


# --------------------------------------------------------------------------- conf/trawl.toml


def test_documented_file_loads_to_exactly_the_defaults() -> None:
    assert load_config(CONF, environ={}) == Config()
    assert load_config(CONF, environ={}).to_dict() == Config().to_dict()


def test_documented_file_lists_every_section_and_key() -> None:
    with CONF.open("rb") as fh:
        documented = tomllib.load(fh)
    expected = {
        section.name: {f.name for f in dataclasses.fields(section.default_factory())}  # type: ignore[misc]
        for section in dataclasses.fields(Config)
    }
    assert set(documented) == set(expected)
    for name, keys in expected.items():
        assert set(documented[name]) == keys, f"[{name}] keys differ from the dataclass"


def test_documented_values_equal_the_defaults_one_by_one() -> None:
    with CONF.open("rb") as fh:
        documented = tomllib.load(fh)
    defaults = Config().to_dict()
    for section, values in documented.items():
        for key, value in values.items():
            want = defaults[section][key]
            got = tuple(value) if isinstance(value, list) else value
            assert got == want, f"{section}.{key}: file {value!r} != default {want!r}"
            assert type(got) is type(want), f"{section}.{key}: type differs"
