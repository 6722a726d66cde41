"""Resolver: hosts-file pins, system look-ups with a cache, and the SSRF guard."""

from __future__ import annotations

import pickle
import socket
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from trawl.net.resolver import AddressRefused, Resolver, parse_hosts


class FakeLookup:
    """A stand-in for the system resolver that counts its calls."""

    def __init__(self, answers: dict[str, Sequence[str]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, host: str) -> Sequence[str]:
        self.calls.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def no_lookup(host: str) -> Sequence[str]:
    raise AssertionError(f"unexpected look-up of {host!r}")


def make(
    hosts: str | None = None,
    tmp_path: Path | None = None,
    allow: Sequence[str] = (),
    lookup: Callable[[str], Sequence[str]] = no_lookup,
) -> Resolver:
    hosts_file = None
    if hosts is not None:
        assert tmp_path is not None
        hosts_file = tmp_path / "hosts"
        hosts_file.write_text(hosts, encoding="utf-8")
    return Resolver(hosts_file, allow, lookup=lookup)


HOSTS = """\
# trawl test pins
93.184.216.34   www.Example.COM  example.com   # aliases share the address

2001:db8::10    v6.example
8.8.8.8         dns.example.
8.8.4.4         dns.example      # a later line for the same name loses
127.0.0.5       pinned-local.test
"""


# -- hosts file ---------------------------------------------------------------


def test_hosts_file_pins_names_and_aliases_case_insensitively(tmp_path: Path) -> None:
    r = make(HOSTS, tmp_path)
    assert r.resolve("www.example.com") == "93.184.216.34"
    assert r.resolve("WWW.EXAMPLE.COM") == "93.184.216.34"
    assert r.resolve("Example.Com.") == "93.184.216.34"
    assert r.resolve("dns.example") == "8.8.8.8"


def test_hosts_file_first_line_wins_and_comments_are_ignored() -> None:
    pins = parse_hosts(HOSTS)
    assert str(pins["dns.example"]) == "8.8.8.8"
    assert set(pins) == {
        "www.example.com",
        "example.com",
        "v6.example",
        "dns.example",
        "pinned-local.test",
    }


def test_pinned_addresses_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(AddressRefused) as info:
        make(HOSTS, tmp_path).resolve("pinned-local.test")
    assert info.value.reason == "loopback"
    assert info.value.address == "127.0.0.5"
    allowed = make(HOSTS, tmp_path, allow=["127.0.0.0/8"])
    assert allowed.resolve("pinned-local.test") == "127.0.0.5"


def test_pinned_documentation_address_is_reserved(tmp_path: Path) -> None:
    # 2001:db8::/32 is for documentation (RFC 3849): not globally routable.
    with pytest.raises(AddressRefused) as info:
        make(HOSTS, tmp_path).resolve("v6.example")
    assert info.value.reason in ("private", "reserved")


@pytest.mark.parametrize(
    ("text", "message"),
    [("1.2.3.4\n", "address without a name"), ("# ok\nnot-an-ip host\n", ":2: not an IP")],
)
def test_malformed_hosts_file_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(text, tmp_path)


def test_missing_hosts_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Resolver(tmp_path / "nope")


# -- IP literals and the SSRF guard ---------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("8.8.8.8", "8.8.8.8"),
        ("[2606:4700:4700::1111]", "2606:4700:4700::1111"),
        ("2606:4700:4700::1111", "2606:4700:4700::1111"),
        ("::ffff:8.8.8.8", "8.8.8.8"),  # IPv4-mapped: the IPv4 host it reaches
    ],
)
def test_public_ip_literals_need_no_lookup(host: str, expected: str) -> None:
    assert make().resolve(host) == expected


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("[::1]", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("169.254.169.254", "link_local"),
        ("fe80::1", "link_local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "reserved"),  # RFC 6598 shared address space
    ],
)
def test_non_public_addresses_are_refused(host: str, reason: str) -> None:
    with pytest.raises(AddressRefused) as info:
        make().resolve(host)
    assert info.value.reason == reason
    assert info.value.host == host


def test_allow_networks_opens_exactly_those_networks() -> None:
    r = make(allow=["127.0.0.0/8", "::1/128", "10.0.0.0/8"])
    assert r.resolve("127.0.0.1") == "127.0.0.1"
    assert r.resolve("[::1]") == "::1"
    assert r.resolve("10.200.0.1") == "10.200.0.1"
    for host in ("192.168.0.1", "169.254.169.254"):
        with pytest.raises(AddressRefused):
            r.resolve(host)


def test_a_single_cidr_string_is_one_network() -> None:
    r = Resolver(None, "127.0.0.0/8", lookup=no_lookup)
    assert r.resolve("127.0.0.1") == "127.0.0.1"


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "not-a-net", "::1/129"])
def test_invalid_cidr_fails_at_construction(bad: str) -> None:
    with pytest.raises(ValueError, match=r"allow_networks: invalid CIDR"):
        Resolver(None, ["127.0.0.0/8", bad])


# -- names from the system resolver -------------------------------------------------


def test_resolved_address_is_checked() -> None:
    lookup = FakeLookup({"rebind.example": ["10.0.0.5"]})
    with pytest.raises(AddressRefused) as info:
        make(lookup=lookup).resolve("rebind.example")
    assert (info.value.reason, info.value.address) == ("private", "10.0.0.5")


def test_the_lowest_answer_of_the_first_family_is_the_one_checked_and_returned() -> None:
    lookup = FakeLookup(
        {
            "multi.example": ["93.184.216.34", "2001:db8::1", "93.184.216.3"],
            "rotated.example": ["93.184.216.3", "93.184.216.34"],
            "v6.example": ["2606:2800::9", "93.184.216.3", "2606:2800::1"],
            "bad-lowest.example": ["11.0.0.1", "10.0.0.1"],
        }
    )
    r = make(lookup=lookup)
    # a rotating DNS answer gives every task the same address
    assert r.resolve("multi.example") == r.resolve("rotated.example") == "93.184.216.3"
    assert r.resolve("v6.example") == "2606:2800::1"
    with pytest.raises(AddressRefused):  # no shopping for a public answer
        r.resolve("bad-lowest.example")


def test_unresolvable_name_is_refused() -> None:
    with pytest.raises(AddressRefused) as info:
        make(lookup=FakeLookup({})).resolve("nxdomain.example")
    assert info.value.reason == "unresolvable"
    assert info.value.address is None


def test_cache_honours_ttl() -> None:
    clock, lookup = FakeClock(), FakeLookup({"cached.example": ["93.184.216.34"]})
    r = Resolver(None, cache_ttl_s=100.0, clock=clock, lookup=lookup)
    assert r.resolve("cached.example") == "93.184.216.34"
    clock.now += 99.0
    assert r.resolve("Cached.Example.") == "93.184.216.34"  # same name, normalised
    assert lookup.calls == ["cached.example"]
    clock.now += 2.0
    r.resolve("cached.example")
    assert len(lookup.calls) == 2


def test_negative_answers_are_cached_for_a_shorter_time() -> None:
    clock, lookup = FakeClock(), FakeLookup({})
    r = Resolver(None, cache_ttl_s=3600.0, clock=clock, lookup=lookup, negative_ttl_s=60.0)
    for _ in range(2):
        with pytest.raises(AddressRefused):
            r.resolve("down.example")
    assert len(lookup.calls) == 1
    clock.now += 61.0
    lookup.answers["down.example"] = ["93.184.216.34"]
    assert r.resolve("down.example") == "93.184.216.34"
    assert len(lookup.calls) == 2


def test_cache_is_bounded() -> None:
    lookup = FakeLookup({f"h{i}.example": ["93.184.216.34"] for i in range(10)})
    r = Resolver(None, clock=FakeClock(), lookup=lookup, max_cache_entries=4)
    for i in range(10):
        r.resolve(f"h{i}.example")
    r.resolve("h9.example")  # recent: still cached
    assert len(lookup.calls) == 10
    r.resolve("h0.example")  # evicted long ago
    assert len(lookup.calls) == 11


def test_system_resolver_numeric_tricks_are_caught() -> None:
    # "127.1" and "2130706433" are not IP literals for ipaddress, but the
    # system resolver turns them into 127.0.0.1 - which is then refused.
    r = Resolver(None)
    for host in ("127.1", "2130706433", "localhost"):
        with pytest.raises(AddressRefused) as info:
            r.resolve(host)
        assert info.value.reason == "loopback"
    allowed = Resolver(None, ["127.0.0.0/8", "::1/128"])
    assert allowed.resolve("127.1") == "127.0.0.1"


def test_address_refused_pickles_and_reads_well() -> None:
    exc = AddressRefused("evil.example", "10.0.0.5", "private")
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.host, copy.address, copy.reason) == ("evil.example", "10.0.0.5", "private")
    assert str(copy) == "evil.example -> 10.0.0.5: private"
    assert str(AddressRefused("x.example", None, "unresolvable")) == "x.example: unresolvable"


def test_many_names_are_looked_up_several_at_a_time_and_answered_in_order() -> None:
    """``addresses`` (generate's resolution of new hosts): lookups overlap,
    and each host gets what ``resolve`` gives it, the refused address for a
    refused one, None for a name that does not resolve."""
    at_once = 4
    # Each lookup waits until four are in flight: one at a time, the first
    # would wait out the barrier's timeout and fail.
    barrier = threading.Barrier(at_once, timeout=30)
    answers = {f"h{i}.example": [f"93.184.216.{i}"] for i in range(10)}
    answers["inside.example"] = ["10.0.0.5"]
    fake = FakeLookup(answers)

    def lookup(host: str) -> Sequence[str]:
        barrier.wait()
        return fake(host)

    hosts = [*answers, "gone.example", "127.0.0.1", "h3.example"]
    resolver = make(lookup=lookup)
    got = list(resolver.addresses(hosts[:at_once], threads=at_once))
    assert got == [(h, answers[h][0]) for h in hosts[:at_once]]
    barrier.reset()
    rest = hosts[at_once:]
    # eight names to look up (the literal and the name cached are not): two rounds of four
    got = list(resolver.addresses(rest, threads=at_once))
    expected = {h: answers[h][0] for h in answers}
    expected.update({"inside.example": "10.0.0.5", "gone.example": None, "127.0.0.1": "127.0.0.1"})
    assert got == [(h, expected[h]) for h in rest]
    assert sorted(fake.calls) == sorted({*answers, "gone.example"})  # each name once
