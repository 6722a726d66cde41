"""The keys derived from a URL: its host, its site, its fingerprint and bucket.

The crawl db and the fetch lists are keyed and partitioned by these, so each
must give the same answer in every process, on every executor and in every
run:

* :func:`host_of` is the host as :func:`~trawl.url.normalize.normalize`
  writes it (lower case, IDNA, IPv6 in canonical brackets), without userinfo
  or port: politeness and host state are per host.
* :func:`registered_domain` is the public suffix plus one label (the site),
  for per-site grouping. The public-suffix lookup uses tldextract's bundled
  snapshot only: executors have no internet and must all agree on the same
  suffix list.
* :func:`url_fingerprint` (the ``url_fp`` column) and :func:`host_bucket` are
  MurmurHash3, stable across processes and Python versions, unlike ``hash()``
  (PYTHONHASHSEED).
"""

from __future__ import annotations

import functools
import ipaddress

import mmh3
import tldextract

from trawl.url.normalize import TAB_NEWLINE, normalize_authority
from trawl.url.resolution import UrlError, split_uri

__all__ = ["host_bucket", "host_of", "registered_domain", "url_fingerprint"]


def host_of(url: str) -> str:
    """The normalised host of ``url`` without userinfo or port (IPv6 keeps its brackets)."""
    p = split_uri(url.strip().translate(TAB_NEWLINE))
    if p.scheme is None:
        raise UrlError("no_scheme", url)
    if not p.authority:
        raise UrlError("no_host", url)
    return normalize_authority(p.authority, p.scheme.lower(), url)[1]


@functools.cache
def _extractor() -> tldextract.TLDExtract:
    """One offline extractor per process: bundled PSL snapshot, no cache dir, no fetch."""
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=65_536)
def registered_domain(host: str) -> str:
    """The registrable domain (public suffix + one label) of a host, for per-site grouping.

    IP addresses are returned as they are. A host that is itself a public suffix is
    returned whole. Hosts under no known suffix (``localhost``, ``site-7.test``,
    ``intranet.corp``) fall back to their last two labels. Cached: a page's
    links, and a segment's, keep naming the same hosts.
    """
    host = host.strip().lower().removesuffix(".")
    if _is_ip(host):
        return host
    parts = _extractor()(host)
    if parts.suffix:
        return f"{parts.domain}.{parts.suffix}" if parts.domain else host
    return ".".join(host.split(".")[-2:])


def url_fingerprint(url: str) -> int:
    """Signed 64-bit MurmurHash3 (x64, seed 0) of ``url``: the ``url_fp`` column.

    Pass the output of :func:`~trawl.url.normalize.normalize`; the string is
    hashed exactly as given.
    """
    return mmh3.hash64(url.encode("utf-8"), seed=0, signed=True)[0]


def host_bucket(host: str, buckets: int) -> int:
    """A stable bucket in ``[0, buckets)`` from MurmurHash3-32 of ``host``.

    Stable across processes and Python versions, unlike ``hash()`` (PYTHONHASHSEED).
    """
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    return mmh3.hash(host.encode("utf-8"), seed=0, signed=False) % buckets
