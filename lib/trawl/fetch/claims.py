"""New hosts a fetch task starts within its segment (``fetch.follow_new_hosts``).

With ``fetch.follow_depth`` on, a fetched page's links to the task's own
hosts are fetched in the same segment (``trawl.fetch.follow``). A link to a
host crawldb has never seen would otherwise wait for updatedb and a whole
next segment, one that in a young crawl holds little but such hosts. A task
may start such a host itself when nothing else can be fetching it:

- crawldb knows neither the host nor its registered domain, so no other
  task of the segment has it in its fetch list, hostdb holds no pause for
  it, and no domain budget of crawldb's is shared with it (one segment runs
  at a time per crawl: the crawl lease);
- the task owns the host's address: the task of the fetch list's hosts at
  that address; for an address the fetch list does not have, the first
  task to claim it (``trawl.store.files.Claims``: a file made with
  ``O_EXCL``, or an object written with ``If-None-Match: *``, in the
  segment's ``claims/``) or, when the stage gives no claims place, the task
  its hash picks (``address_owner``). So hosts sharing an address are still served by one
  task (one request in flight per address) and no host is started by two
  tasks. The resolver picks the same address of a name in every task
  (``trawl.net.resolver``);
- the operator's policy does not block or pause it.

A started host gets the room generate would have given a host it knew
nothing of (``host_room``), and its registered domain a share of the room
generate gives a domain nothing links to yet (``domain_room``), the share
of one task. Its robots.txt, soft-404 probe and pages then go through the
task's scheduler like those of its fetch-list hosts.

``NewHostScope`` is what the fetch stage tells every task (from crawldb and
the fetch list); ``NewHosts`` keeps one task's decisions. Pure Python: the
task's threads share a ``NewHosts`` under the task's lock.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from trawl.config import Config
from trawl.store.files import Claims

# Hosts crawldb may know for the fetch stage to ship their names to every
# task (a set of this many names takes some 100 MB in each task's Python);
# a larger crawldb starts no new host in a segment.
KNOWN_HOSTS_MAX = 1_000_000


@dataclass(frozen=True)
class NewHostScope:
    """What every fetch task of a segment is told, to start new hosts."""

    known_hosts: frozenset[str]  # crawldb's hosts
    known_domains: frozenset[str]  # their registered domains
    owners: Mapping[str, int]  # address -> task of the fetch list's hosts there
    tasks: int
    claims: Claims | None = None  # where tasks claim other addresses (None: by hash)


def address_owner(address: str, owners: Mapping[str, int], tasks: int) -> int:
    """The task that serves ``address``: the fetch list's, or one picked by a
    hash that is the same in every process (``hash()`` is salted per process)."""
    owner = owners.get(address)
    if owner is not None:
        return owner % tasks
    return zlib.crc32(address.encode()) % tasks


def host_room(cfg: Config) -> int:
    """URLs of a host crawldb did not know that a task may fetch in one
    segment: what its fetch window leaves at the minimum delay after
    robots.txt and the soft-404 probe (generate's host cap for a host with
    no hostdb row), within ``generate.max_per_host`` and the new URLs
    updatedb would add of one host (``traps.max_new_per_host``)."""
    first = 1 + int(cfg.traps.soft404_probe)
    caps = [cfg.generate.max_per_host, cfg.traps.max_new_per_host]
    if cfg.politeness.min_delay_s > 0:  # 0: no minimum gap, the window bounds nothing
        caps.append(int(cfg.generate.fetch_window_s / cfg.politeness.min_delay_s) + 1 - first)
    return max(0, min(caps))


def domain_room(cfg: Config, tasks: int) -> int:
    """URLs of a registered domain crawldb did not know that one task may
    fetch in a segment: ``generate.max_per_domain``, within the budget of a
    domain nothing links to yet (``budget.min_pages``) when budgets are on,
    shared out over the tasks (rounded up), since each task starts the
    domain's hosts at its own addresses."""
    cap = cfg.generate.max_per_domain
    if cfg.budget.enabled:
        cap = min(cap, cfg.budget.min_pages)
    return -(-cap // max(1, tasks))


@dataclass
class NewHosts:
    """One task's new hosts: which it started, which it declined and why,
    and the room left to their domains (the caller holds the task's lock;
    ``owns`` takes its own)."""

    scope: NewHostScope
    task: int
    cfg: Config
    declined: dict[str, str] = field(default_factory=dict)  # host -> why not
    domain_of: dict[str, str] = field(default_factory=dict)  # started host -> domain
    domain_left: dict[str, int] = field(default_factory=dict)  # domain -> URLs left
    addresses: dict[str, bool] = field(default_factory=dict)  # address -> owned, as decided
    _owning: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def precheck(self, host: str, domain: str) -> str | None:
        """Why ``host`` is not started, from what is known before resolving
        it (None: resolve it and ask ``owns``). A host declined once stays
        declined in the task; a host being started counts as declined for
        a worker that meets it meanwhile (its link waits for updatedb)."""
        why = self.declined.get(host)
        if why is not None:
            return why
        if host in self.scope.known_hosts:
            return "known_host"
        if domain in self.scope.known_domains:
            return "known_domain"
        if self.domain_left.get(domain, 1) <= 0:
            return "domain_room"
        return None

    def owns(self, address: str) -> bool:
        """Does this task serve ``address``? Decided once per address (its
        own lock: called while resolving, outside the task's)."""
        with self._owning:
            owned = self.addresses.get(address)
            if owned is None:
                scope = self.scope
                if address in scope.owners or scope.claims is None:
                    owned = address_owner(address, scope.owners, scope.tasks) == self.task
                else:
                    owned = scope.claims.claim(address, self.task)
                self.addresses[address] = owned
            return owned

    def start(self, host: str, domain: str) -> None:
        """Record ``host`` as started, with its domain's room."""
        self.declined.pop(host, None)
        self.domain_of[host] = domain
        self.domain_left.setdefault(domain, domain_room(self.cfg, self.scope.tasks))

    def take(self, host: str) -> bool:
        """One URL of a started host's domain: False when none is left (a
        host the task did not start is not counted here)."""
        domain = self.domain_of.get(host)
        if domain is None:
            return True
        if self.domain_left[domain] <= 0:
            return False
        self.domain_left[domain] -= 1
        return True
