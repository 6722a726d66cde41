"""The keys derived from a URL: its host, its site, its fingerprint and bucket.

The crawl db and the fetch lists are keyed and partitioned by these, so each
must give the same answer in every process, on every executor and in every
run:

* :func:`host_of` is the host as :func:`~trawl.url.normalize.normalize`
  writes it (lower case, IDNA, IPv6 in canonical brackets), without userinfo
  or port: politeness and host state are per host.
* :func:`registered_domain` is the public suffix plus one label (the site),
  for per-site grouping: domain budgets, ``generate.max_per_domain``, domain
  policy rules, the domain link graph, ``export --domain``. The suffixes are
  the Public Suffix List's ICANN *and private* sections (tldextract's
  ``include_psl_private_domains``): the private section lists the names under
  which anyone may get a site of their own (``github.io``, ``blogspot.com``,
  ``s3.amazonaws.com``), so ``alice.github.io`` and ``bob.github.io`` are two
  sites with two budgets, as browsers keep their cookies apart
  (https://publicsuffix.org/learn/). The lookup uses tldextract's bundled
  snapshot only, never fetched at run time: executors have no internet and
  must all agree on the same suffix list.
* :data:`DOMAIN_RULE` names that rule. The tables that store registered
  domains record the rule their rows were written under (a table property,
  ``trawl.store.domainrule``); a table from before the private section, with
  :func:`icann_registered_domain`'s values, is migrated in place when a job
  first opens it, and :func:`domains_with_private_suffixes` says which of its
  old values the new rule splits.
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

__all__ = [
    "DOMAIN_RULE",
    "domains_with_private_suffixes",
    "host_bucket",
    "host_of",
    "icann_registered_domain",
    "registered_domain",
    "url_fingerprint",
]

# The rule :func:`registered_domain` implements, as the crawl tables record it
# (``trawl.store.domainrule``). Change it with the rule: a table written under
# another rule is then migrated. Tables without it were written under the
# ICANN section alone (:func:`icann_registered_domain`).
DOMAIN_RULE = "psl-icann+private"


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
    """One offline extractor per process: bundled PSL snapshot (both sections),
    no cache dir, no fetch. A call may still ask for the ICANN section alone."""
    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _registrable(host: str, private: bool) -> str:
    host = host.strip().lower().removesuffix(".")
    if _is_ip(host):
        return host
    parts = _extractor()(host, include_psl_private_domains=private)
    if parts.suffix:
        return f"{parts.domain}.{parts.suffix}" if parts.domain else host
    return ".".join(host.split(".")[-2:])


@functools.lru_cache(maxsize=65_536)
def registered_domain(host: str) -> str:
    """The registrable domain (public suffix + one label) of a host, for per-site grouping.

    Private-section suffixes count: ``alice.github.io`` is its own site, and
    so is ``bucket.s3.amazonaws.com``. IP addresses are returned as they are.
    A host that is itself a public suffix (``github.io``, ``co.uk``) is
    returned whole. Hosts under no known suffix (``localhost``,
    ``site-7.test``, ``intranet.corp``) fall back to their last two labels.
    Cached: a page's links, and a segment's, keep naming the same hosts.
    """
    return _registrable(host, private=True)


def icann_registered_domain(host: str) -> str:
    """:func:`registered_domain` under the PSL's ICANN section alone: what trawl
    stored before it used the private section (every ``*.github.io`` site in
    ``github.io``). For migrating tables written then, nothing else."""
    return _registrable(host, private=False)


@functools.cache
def domains_with_private_suffixes() -> frozenset[str]:
    """The ICANN-rule registered domains that hold a private-section suffix
    (``github.io``, ``blogspot.com``, ``amazonaws.com`` for ``s3.amazonaws.com``):
    the only old values whose hosts :func:`registered_domain` may now put in
    other sites. A wildcard (``*.compute-1.amazonaws.com``) or exception
    (``!www.ck``) rule counts by the name it is written on."""
    icann = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    private = set(_extractor().tlds) - set(icann.tlds)
    return frozenset(icann_registered_domain(s.lstrip("!").removeprefix("*.")) for s in private)


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
