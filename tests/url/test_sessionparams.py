"""trawl.url.sessionparams: a URL's parameter variants, and stripping learned names."""

from __future__ import annotations

from trawl.url.sessionparams import param_variants, strip_params


def test_each_parameter_once_with_the_url_without_it() -> None:
    got = list(param_variants("http://h.test/p?a=1&vt=9f&b=#top"))
    assert got == [
        ("a", "1", "http://h.test/p?vt=9f&b=#top"),
        ("vt", "9f", "http://h.test/p?a=1&b=#top"),
        ("b", "", "http://h.test/p?a=1&vt=9f#top"),
    ]
    assert list(param_variants("http://h.test/p?vt=1")) == [("vt", "1", "http://h.test/p")]


def test_no_variants_without_a_query_or_for_repeated_names() -> None:
    assert list(param_variants("http://h.test/p")) == []
    assert list(param_variants("http://h.test/p?")) == []
    assert [n for n, _, _ in param_variants("http://h.test/p?t=1&t=2&x=3")] == ["x"]
    assert list(param_variants("http://h.test/p?=1")) == []


def test_strip_drops_exact_names_only() -> None:
    assert strip_params("http://h.test/p?vt=1&page=2", {"vt"}) == "http://h.test/p?page=2"
    assert strip_params("http://h.test/p?vt=1", ["vt"]) == "http://h.test/p"
    assert strip_params("http://h.test/p?vtx=1&VT=2", {"vt"}) == "http://h.test/p?vtx=1&VT=2"
    assert strip_params("http://h.test/p?vt=1#f", {"vt"}) == "http://h.test/p#f"
    assert strip_params("http://h.test/p?vt=1", ()) == "http://h.test/p?vt=1"
