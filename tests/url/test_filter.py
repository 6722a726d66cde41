"""Tests for trawl.url.filter.UrlFilter."""

from __future__ import annotations

from typing import Any

import pytest

from trawl.url.filter import DEFAULT_SKIP_EXTENSIONS, UrlFilter

DEFAULT = UrlFilter()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        # accepted
        ("http://example.com/", None),
        ("https://example.com/a/b/c.html?x=1", None),
        ("HTTPS://example.com/", None),
        ("http://example.com/index.php", None),
        ("http://example.com/feed.xml", None),
        ("http://example.com/.htaccess", None),  # leading dot is not an extension
        ("http://example.com/v1.2/", None),  # extension rule looks at the last segment only
        ("http://example.com/image.jpg/", None),  # trailing "/": a directory, not a file
        ("http://example.com/page?file=photo.jpg", None),  # query is not the path
        ("http://example.com/page#photo.jpg", None),
        ("http://img.example.com/", None),  # host is not the path
        ("http://example.com/" + "/".join("abcdefghijklmnop"), None),  # depth 16
        ("http://example.com/a/b/a/b/a/b", None),  # each segment 3 times: allowed
        ("http://example.com/a//a//a", None),  # empty segments do not count
        # scheme
        ("ftp://example.com/", "scheme"),
        ("mailto:someone@example.com", "scheme"),
        ("javascript:void(0)", "scheme"),
        ("example.com/page", "scheme"),
        ("/relative/path", "scheme"),
        ("", "scheme"),
        ("1http://example.com/", "scheme"),
        # length
        ("http://example.com/" + "x" * (2048 - 19), None),
        ("http://example.com/" + "x" * (2048 - 18), "too_long"),
        # extensions (case-insensitive, ignoring ";params")
        ("http://example.com/logo.png", "extension"),
        ("http://example.com/PHOTO.JPG", "extension"),
        ("http://example.com/a/b/archive.tar.gz?dl=1", "extension"),
        ("http://example.com/app.js;jsessionid=abc", "extension"),
        ("http://example.com/style.css#x", "extension"),
        ("http://example.com/paper.pdf", "extension"),
        ("http://example.com/font.woff2", "extension"),
        ("http://example.com/clip.mp4", "extension"),
        # path depth
        ("http://example.com/" + "/".join("abcdefghijklmnopq"), "path_depth"),
        # repeated segments (crawler trap)
        ("http://example.com/a/b/a/b/a/b/a/b", "repeated_segments"),
        ("http://example.com/x/x/x/x", "repeated_segments"),
        ("http://example.com/page/1/page/2/page/3/page/4/", "repeated_segments"),
        # faceted search combining every filter
        ("http://example.com/s?" + "&".join(f"f{i}=on" for i in range(8)), None),
        ("http://example.com/s?" + "&".join(f"f{i}=on" for i in range(9)), "too_many_params"),
        ("http://example.com/s?a=1&&&&&&&&&&b=2#x&y&z", None),  # empty pieces do not count
    ],
)
def test_default_filter(url: str, reason: str | None) -> None:
    assert DEFAULT.reject_reason(url) == reason
    assert DEFAULT.accepts(url) is (reason is None)


@pytest.mark.parametrize(
    ("kwargs", "url", "reason"),
    [
        ({"allowed_schemes": ("https",)}, "http://example.com/", "scheme"),
        ({"allowed_schemes": ("HTTPS",)}, "https://example.com/", None),
        ({"allowed_schemes": ("ftp",)}, "ftp://example.com/", None),
        ({"max_url_length": 20}, "http://example.com/ab", "too_long"),
        ({"max_url_length": 21}, "http://example.com/ab", None),
        ({"max_path_depth": 2}, "http://example.com/a/b/c", "path_depth"),
        ({"max_path_depth": 2}, "http://example.com/a/b/", None),
        ({"max_repeated_segments": 1}, "http://example.com/a/b/a", "repeated_segments"),
        ({"max_query_params": 1}, "http://example.com/?a=1&b=2", "too_many_params"),
        ({"max_query_params": 2}, "http://example.com/?a=1&b=2", None),
        ({"max_repeated_segments": 1}, "http://example.com/a/b/c", None),
        ({"skip_extensions": ()}, "http://example.com/logo.png", None),
        ({"skip_extensions": (".PHP",)}, "http://example.com/index.php", "extension"),
        ({"skip_extensions": ["html"]}, "http://example.com/logo.png", None),
        ({"skip_extensions": ("", ".")}, "http://example.com/README", None),
    ],
)
def test_filter_parameters(kwargs: dict[str, Any], url: str, reason: str | None) -> None:
    assert UrlFilter(**kwargs).reject_reason(url) == reason


def test_scheme_checked_before_length() -> None:
    # Reasons are reported in a fixed order: cheapest, most decisive rule first.
    assert DEFAULT.reject_reason("ftp://example.com/" + "x" * 5000) == "scheme"
    assert DEFAULT.reject_reason("http://example.com/" + "a/" * 3000 + "x.png") == "too_long"


def test_default_extensions_are_lowercase_without_dots() -> None:
    assert DEFAULT_SKIP_EXTENSIONS
    for ext in DEFAULT_SKIP_EXTENSIONS:
        assert ext == ext.lower().strip(".")
    assert len(set(DEFAULT_SKIP_EXTENSIONS)) == len(DEFAULT_SKIP_EXTENSIONS)
    assert not {"html", "htm", "php", "asp", "aspx", "xml", "txt"} & set(DEFAULT_SKIP_EXTENSIONS)
