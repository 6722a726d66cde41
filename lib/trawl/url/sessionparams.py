"""Session-id parameters a host is seen to use, learned from its pages.

``trawl.url.normalize`` drops the session parameters everyone knows (``PHPSESSID``,
``jsessionid``, ``sid`` ...). A site can call its own anything (``?vt=``,
``?visit=``), and then every page it serves links every other page under a
fresh name. Such a parameter gives itself away: two URLs of the host that
differ only in its value serve the same page. So per host, a parameter is
learned as a session parameter when

* some URL of the host, with the parameter taken out, was fetched under two
  or more of its values with the same content (equal main-text simhash, or
  equal body sha256 where there is no simhash), and
* no such URL was fetched under two values with different content (then the
  parameter selects content: ``?page=2``, ``?id=7``).

updatedb learns from the segment's pages and the host's earlier ones in
crawldb (``hostparams`` table) and admits links with the learned parameters
dropped. The functions here are the pure per-record part.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

__all__ = ["param_variants", "strip_params"]


def _split(url: str) -> tuple[str, str, str]:
    """(before "?", query, "#fragment" or "")."""
    head, hash_, fragment = url.partition("#")
    base, _, query = head.partition("?")
    return base, query, hash_ + fragment


def param_variants(url: str) -> Iterator[tuple[str, str, str]]:
    """(name, value, the URL without that parameter) for each query parameter
    that appears once in ``url`` (a repeated name is not an id)."""
    base, query, fragment = _split(url)
    pieces = [p for p in query.split("&") if p]
    names = [p.partition("=")[0] for p in pieces]
    for i, piece in enumerate(pieces):
        name, _, value = piece.partition("=")
        if not name or names.count(name) > 1:
            continue
        rest = "&".join(pieces[:i] + pieces[i + 1 :])
        yield name, value, base + ("?" + rest if rest else "") + fragment


def strip_params(url: str, names: Collection[str]) -> str:
    """``url`` without the query parameters named in ``names`` (exact names)."""
    if not names or "?" not in url:
        return url
    base, query, fragment = _split(url)
    kept = [p for p in query.split("&") if p and p.partition("=")[0] not in names]
    return base + ("?" + "&".join(kept) if kept else "") + fragment
