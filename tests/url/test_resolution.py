"""Tests for trawl.url.resolution: RFC 3986 reference resolution, against the
RFC's own examples (section 5.4) and more."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trawl.url.resolution import UrlError, remove_dot_segments, resolve

CONFORMANCE = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"


def _resolution_cases() -> list[Any]:
    with (CONFORMANCE / "rfc3986_resolution.json").open(encoding="utf-8") as fh:
        cases = json.load(fh)["cases"]
    return [pytest.param(c, id=f"{c['rfc_section']}:{c['reference']!r}") for c in cases]


RESOLUTION_CASES = _resolution_cases()


def test_conformance_file_has_all_rfc_examples() -> None:
    assert len(RESOLUTION_CASES) == 42


# --------------------------------------------------------------------------- resolve


@pytest.mark.parametrize("case", RESOLUTION_CASES)
def test_resolve_rfc3986_section_5_4(case: dict[str, Any]) -> None:
    acceptable = case.get("expected_alternatives", [case["expected"]])
    assert resolve(case["base"], case["reference"]) in acceptable


def test_resolve_is_strict_for_same_scheme_reference() -> None:
    # RFC 3986 5.2.2 strict parser: a reference with a scheme is used as is.
    assert resolve("http://a/b/c/d;p?q", "http:g") == "http:g"


@pytest.mark.parametrize(
    ("base", "reference", "expected"),
    [
        ("http://a", "g", "http://a/g"),  # 5.2.3: authority and empty base path
        ("http://a", "?x", "http://a?x"),  # 5.2.2: empty ref path keeps base path
        ("http://a/b?q#f", "", "http://a/b?q"),  # base fragment is never inherited
        ("http://a/b/", "//h:8080/./x/../y", "http://h:8080/y"),
        ("https://a/b/c", "../../../../", "https://a/"),
        ("http://a/b/c", "mailto:x@y", "mailto:x@y"),
        ("foo:bar/baz", "qux", "foo:bar/qux"),  # no authority: merge on the raw path
    ],
)
def test_resolve_more_cases(base: str, reference: str, expected: str) -> None:
    assert resolve(base, reference) == expected


def test_resolve_rejects_relative_base() -> None:
    with pytest.raises(UrlError) as exc:
        resolve("/relative/base", "g")
    assert exc.value.reason == "no_scheme"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b/c/./../../g", "/a/g"),  # RFC 3986 5.2.4 example 1
        ("mid/content=5/../6", "mid/6"),  # RFC 3986 5.2.4 example 2
        ("", ""),
        ("/", "/"),
        ("/..", "/"),
        ("..", ""),
        ("/a/..", "/"),
        ("/a/b/.", "/a/b/"),
        ("a/../../b", "/b"),  # the RFC algorithm as written: "/.." leaves the "/"
        ("/a//../b", "/a/b"),
        ("/.../b", "/.../b"),
    ],
)
def test_remove_dot_segments(path: str, expected: str) -> None:
    assert remove_dot_segments(path) == expected
