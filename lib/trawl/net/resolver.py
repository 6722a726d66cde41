"""Host name -> IP address for the fetcher, with the SSRF guard.

A crawler fetches URLs that strangers wrote, so a page can point it at
``http://169.254.169.254/`` (cloud metadata), ``http://localhost:8080/admin``
or a name whose DNS record says ``10.0.0.5``. ``Resolver.resolve`` turns a host
into one address and refuses private, loopback, link-local, reserved,
multicast and unspecified addresses unless the operator allowed the network
(``fetch.allow_networks``, CIDR strings).

Why the check is on the *resolved address* and why it must be the one used:
checking the name (or resolving once to check and again to connect) is open
to DNS rebinding - the attacker's DNS server answers a public address to the
check and ``127.0.0.1`` to the connect a moment later (short TTLs make that
easy). So the resolver picks exactly one address, checks that address, and
the fetcher (``trawl.net.client.HttpClient.get(url, ip)``) connects to that
exact address, never resolving the name again; the name is only sent in
``Host`` and TLS SNI. Names that spell a number (``127.1``, ``2130706433``)
are no way around it either: the system resolver turns them into the address
that is then checked.

Names come from, in order:

1. the hosts file (hosts(5) syntax), which pins names to addresses like
   ``curl --resolve`` - the test web and private crawls use it. Pinned
   addresses are checked too: pinning a name to loopback also needs
   ``allow_networks`` (two explicit opt-ins, never one by accident);
2. ``socket.getaddrinfo`` (the system resolver): of the family of its first
   answer (IPv4 or IPv6), the lowest address, so that every task and
   generate pick the same address of a name whose DNS rotates its answers
   (fetch tasks serve addresses, not names: ``trawl.fetch.claims``); cached
   for ``cache_ttl_s`` (failures for ``negative_ttl_s``) so a task does not
   ask twice for the same host.

A ``Resolver`` is shared by a fetch task's worker threads: the cache is
guarded by a lock (a look-up itself runs outside it).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from trawl.config import Config

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
RefusalReason = Literal[
    "private", "loopback", "link_local", "reserved", "multicast", "unspecified", "unresolvable"
]
Lookup = Callable[[str], Sequence[str]]

# Names ``Resolver.addresses`` looks up at once: a lookup is a wait on the
# network (tens of milliseconds, seconds for a name whose servers do not
# answer), so generate's first cycle over thousands of new hosts would
# otherwise spend minutes resolving them one after another in one task.
LOOKUP_THREADS = 16

# RFC 6052 2.1: the NAT64 well-known prefix embeds an IPv4 address in the
# last 32 bits; a NAT64 gateway would forward to it.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class AddressRefused(Exception):
    """``host`` cannot be fetched: its address is not public, or it has none.

    ``reason`` is one of ``RefusalReason``; ``address`` is the refused address
    (None when the host did not resolve).
    """

    def __init__(self, host: str, address: str | None, reason: RefusalReason) -> None:
        super().__init__(host, address, reason)  # args as given: picklable for Spark
        self.host = host
        self.address = address
        self.reason: RefusalReason = reason

    def __str__(self) -> str:
        if self.address is None:
            return f"{self.host}: {self.reason}"
        return f"{self.host} -> {self.address}: {self.reason}"


def system_lookup(host: str) -> list[str]:
    """All addresses of ``host`` from the system resolver, in its order.

    Raises ``OSError`` (``socket.gaierror``) when the name does not resolve.
    """
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [
        str(sockaddr[0])
        for family, _, _, _, sockaddr in infos
        if family in (socket.AF_INET, socket.AF_INET6)
    ]


def parse_hosts(text: str, source: str = "hosts file") -> dict[str, IPAddress]:
    """Parse hosts(5) text: ``ADDRESS NAME [ALIAS...]``, ``#`` comments.

    Names are case-insensitive (RFC 4343) and a trailing dot is dropped; the
    first line naming a host wins, as in glibc. A malformed address raises
    ``ValueError`` with the line number: a broken pin file must be loud.
    """
    pins: dict[str, IPAddress] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{source}:{lineno}: address without a name: {line.strip()!r}")
        try:
            address = ipaddress.ip_address(fields[0])
        except ValueError:
            raise ValueError(f"{source}:{lineno}: not an IP address: {fields[0]!r}") from None
        for name in fields[1:]:
            pins.setdefault(_normalize_name(name), address)
    return pins


def parse_networks(cidrs: Sequence[str]) -> tuple[IPNetwork, ...]:
    """CIDR strings -> networks; ``ValueError`` naming the bad entry."""
    if isinstance(cidrs, str):  # a lone string would be iterated per character
        cidrs = (cidrs,)
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"allow_networks: invalid CIDR {cidr!r}: {exc}") from None
    return tuple(networks)


def classify(address: IPAddress) -> RefusalReason | None:
    """Why ``address`` must not be fetched by default, or None if it is public.

    The order matters where ranges overlap (127.0.0.1 is also "private" for
    the ``ipaddress`` module): the most specific reason is reported.
    """
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link_local"  # 169.254/16 holds cloud metadata endpoints
    if address.is_multicast:
        return "multicast"
    if address.is_reserved:
        return "reserved"  # IPv4 240/4 (RFC 1112 4), IPv6 blocks the IETF reserves
    if address.is_private:
        return "private"  # RFC 1918, RFC 4193 ULA, and IANA special-purpose blocks
    if not address.is_global:
        return "reserved"  # the rest of the special-purpose registry (RFC 6890), e.g. 100.64/10
    return None


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one really reaches (mapped ::ffff:a.b.c.d, NAT64)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:  # RFC 4291 2.5.5.2
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _normalize_name(name: str) -> str:
    return name.strip().lower().rstrip(".")


def _ip_literal(host: str) -> IPAddress | None:
    """``host`` as an address if it is an IP literal (IPv6 may be bracketed, RFC 3986 3.2.2)."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class Resolver:
    """Resolve host names to one checked address; see the module docstring.

    ``lookup`` replaces the system resolver (tests count calls with it);
    ``clock`` is monotonic seconds, injectable for cache tests.
    """

    def __init__(
        self,
        hosts_file: str | Path | None,
        allow_networks: Sequence[str] = (),
        cache_ttl_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        negative_ttl_s: float = 60.0,
        lookup: Lookup = system_lookup,
        max_cache_entries: int = 65_536,
    ) -> None:
        self.allow_networks = parse_networks(allow_networks)
        self.pins: dict[str, IPAddress] = {}
        if hosts_file:
            path = Path(hosts_file)
            self.pins = parse_hosts(path.read_text(encoding="utf-8"), str(path))
        self.cache_ttl_s = cache_ttl_s
        self.negative_ttl_s = min(negative_ttl_s, cache_ttl_s)
        self.max_cache_entries = max_cache_entries
        self._clock = clock
        self._lookup = lookup
        self._cache: dict[str, tuple[float, IPAddress | None]] = {}  # name -> (expires, addr)
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: Config) -> Resolver:
        """The resolver of ``dns.*`` and ``fetch.allow_networks``."""
        return cls(
            cfg.dns.hosts_file or None, cfg.fetch.allow_networks, cache_ttl_s=cfg.dns.cache_ttl_s
        )

    def resolve(self, host: str) -> str:
        """The address to connect to for ``host``, or ``AddressRefused``.

        The returned string is a plain address (IPv6 without brackets); the
        caller must connect to exactly it (DNS rebinding, module docstring).
        """
        address = _ip_literal(host.strip())
        if address is None:
            name = _normalize_name(host)
            address = self.pins.get(name)
            if address is None:
                address = self._resolve_name(name)
            if address is None:
                raise AddressRefused(host, None, "unresolvable")
        return str(self.check(host, address))

    def addresses(
        self, hosts: Iterable[str], threads: int = LOOKUP_THREADS
    ) -> Iterator[tuple[str, str | None]]:
        """``(host, address)`` for each of ``hosts``, in their order, up to
        ``threads`` lookups at a time: the address ``resolve`` gives, or for
        a refused one the address refused (None: the name does not resolve)."""

        def one(host: str) -> tuple[str, str | None]:
            try:
                return host, self.resolve(host)
            except AddressRefused as exc:
                return host, exc.address

        names = iter(hosts)
        with ThreadPoolExecutor(threads, thread_name_prefix="trawl-dns") as pool:
            while chunk := list(islice(names, 64 * threads)):
                yield from pool.map(one, chunk)

    def check(self, host: str, address: IPAddress) -> IPAddress:
        """The address to connect to if ``address`` may be fetched, else ``AddressRefused``.

        An IPv6 address that embeds an IPv4 one is judged by the IPv4 address it
        reaches; an IPv4-mapped one is returned in its IPv4 form (same host).
        """
        target = _embedded_ipv4(address) or address
        if not (self._allowed(address) or self._allowed(target)):
            reason = classify(target)
            if reason is not None:
                raise AddressRefused(host, str(address), reason)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            return address.ipv4_mapped
        return address

    def _allowed(self, address: IPAddress) -> bool:
        return any(address in network for network in self.allow_networks)

    def _resolve_name(self, name: str) -> IPAddress | None:
        now = self._clock()
        with self._lock:
            cached = self._cache.get(name)
        if cached is not None and cached[0] > now:
            return cached[1]
        address = self._lookup_address(name)
        ttl = self.cache_ttl_s if address is not None else self.negative_ttl_s
        self._store(name, now + ttl, address)
        return address

    def _lookup_address(self, name: str) -> IPAddress | None:
        """The lowest address of the first answer's family (IPv4 or IPv6);
        None when the name does not resolve. The one address is then checked:
        no other answer is tried if it is refused."""
        if not name:
            return None
        try:
            answers = self._lookup(name)
        except (OSError, UnicodeError):  # gaierror; a label too long for IDNA
            return None
        # an IPv6 zone id (fe80::1%eth0) is kept
        literals = [a for a in map(_ip_literal, answers) if a is not None]
        if not literals:
            return None
        family = [a for a in literals if a.version == literals[0].version]
        return min(family, key=lambda a: (a.packed, str(a)))

    def _store(self, name: str, expires: float, address: IPAddress | None) -> None:
        with self._lock:
            if len(self._cache) >= self.max_cache_entries:
                now = self._clock()
                for key in [k for k, (exp, _) in self._cache.items() if exp <= now]:
                    del self._cache[key]
                while len(self._cache) >= self.max_cache_entries:
                    del self._cache[next(iter(self._cache))]  # oldest insertion first
            self._cache.pop(name, None)
            self._cache[name] = (expires, address)
