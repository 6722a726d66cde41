"""URI references split, recomposed and resolved, as RFC 3986 writes it.

Links found in pages are made absolute with :func:`resolve` before they are
normalised (``trawl.url.normalize``), which splits and recomposes URLs with
the same :func:`split_uri` and :func:`recompose`.

Why it is built this way:

* :func:`resolve` follows RFC 3986 section 5.2 literally (strict parser, no
  ``urljoin``): ``urllib.parse.urljoin`` is not conformant (it mishandles some
  of the section 5.4 abnormal examples), and link resolution must be exact or
  the crawler invents URLs that no browser would request.
* A reference is split by the regular expression of RFC 3986 Appendix B,
  which matches every string: a component that is absent (``None``) is told
  apart from one that is empty (``""``), as section 5.2.2 needs.
* Pure Python on ``str`` (no pyspark import), so it runs unchanged inside
  Spark UDFs and is unit-tested without a JVM.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["UriParts", "UrlError", "recompose", "remove_dot_segments", "resolve", "split_uri"]

# RFC 3986 Appendix B: the component-splitting regular expression.
_URI_RE = re.compile(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.S)


class UrlError(ValueError):
    """A URL that cannot be resolved or normalised; ``reason`` is machine-readable."""

    def __init__(self, reason: str, url: str) -> None:
        super().__init__(f"{reason}: {url!r}")
        self.reason = reason
        self.url = url


class UriParts(NamedTuple):
    """The five RFC 3986 components; ``None`` means the component is undefined."""

    scheme: str | None
    authority: str | None
    path: str
    query: str | None
    fragment: str | None


def split_uri(uri: str) -> UriParts:
    """Split a URI reference into components (RFC 3986 Appendix B)."""
    m = _URI_RE.match(uri)
    if m is None:  # the expression matches every string; kept for the type checker
        raise UrlError("unparsable", uri)
    scheme, authority, path, query, fragment = m.groups()
    return UriParts(scheme, authority, path, query, fragment)


def recompose(p: UriParts) -> str:
    """RFC 3986 5.3 component recomposition."""
    out = []
    if p.scheme is not None:
        out.append(p.scheme + ":")
    if p.authority is not None:
        out.append("//" + p.authority)
    out.append(p.path)
    if p.query is not None:
        out.append("?" + p.query)
    if p.fragment is not None:
        out.append("#" + p.fragment)
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4: remove "." and ".." segments, step by step as the RFC writes it."""
    inp, out = path, ""
    while inp:
        if inp.startswith(("../", "./")):  # 2.A: drop the prefix
            inp = inp[inp.find("/") + 1 :]
        elif inp.startswith("/./") or inp == "/.":  # 2.B: replace the prefix with "/"
            inp = "/" + inp[3:]
        elif inp.startswith("/../") or inp == "/..":  # 2.C: ... and pop the last output segment
            inp = "/" + inp[4:]
            out = out[: max(out.rfind("/"), 0)]
        elif inp in (".", ".."):  # 2.D
            inp = ""
        else:  # 2.E: move the first segment (with its leading "/", if any) to the output
            cut = inp.find("/", 1)
            cut = len(inp) if cut < 0 else cut
            out, inp = out + inp[:cut], inp[cut:]
    return out


def _merge(base: UriParts, ref_path: str) -> str:
    """RFC 3986 5.2.3: merge a relative-path reference with the base path."""
    if base.authority is not None and base.path == "":
        return "/" + ref_path
    return base.path[: base.path.rfind("/") + 1] + ref_path


def resolve(base: str, reference: str) -> str:
    """Resolve ``reference`` against the absolute URI ``base`` (RFC 3986 5.2.2, strict).

    The strings are taken as they are: strip whitespace from ``href`` values
    before calling (HTML does), and :func:`~trawl.url.normalize.normalize` the result
    before storing it.
    """
    b = split_uri(base)
    if b.scheme is None:  # RFC 3986 5.2.1: the base URI must be absolute
        raise UrlError("no_scheme", base)
    r = split_uri(reference)
    if r.scheme is not None:
        t_scheme, t_auth, t_path, t_query = (
            r.scheme,
            r.authority,
            remove_dot_segments(r.path),
            r.query,
        )
    elif r.authority is not None:
        t_scheme, t_auth, t_path, t_query = (
            b.scheme,
            r.authority,
            remove_dot_segments(r.path),
            r.query,
        )
    elif r.path == "":
        t_scheme, t_auth, t_path = b.scheme, b.authority, b.path
        t_query = r.query if r.query is not None else b.query
    elif r.path.startswith("/"):
        t_scheme, t_auth, t_path, t_query = (
            b.scheme,
            b.authority,
            remove_dot_segments(r.path),
            r.query,
        )
    else:
        merged = remove_dot_segments(_merge(b, r.path))
        t_scheme, t_auth, t_path, t_query = b.scheme, b.authority, merged, r.query
    return recompose(UriParts(t_scheme, t_auth, t_path, t_query, r.fragment))
