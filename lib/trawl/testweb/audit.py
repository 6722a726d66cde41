"""Audits of a crawl against the test web's access log: politeness and robots.

``politeness_audit`` checks the promises a polite crawler makes to each host:
one request at a time (no overlapping [start, end] intervals) and a pause
between requests. The pause is measured from the *end* of the previous
response to the *start* of the next request to the same host -- the gap a
crawler controls after a response (Nutch's ``fetcher.server.delay``);
start-to-start would let a slow host's own latency count as politeness.
When a request starts before an earlier one has ended the gap is negative,
so overlaps also count as short gaps. ``tolerance_s`` absorbs the server's
timestamping jitter in both checks.

The *required gap* before a request to host H is the largest of

* ``min_gap_s`` (the crawler's ``politeness.min_delay_s``);
* H's Crawl-delay as its robots.txt serves it to the agent (with a model).
  The crawler's cap (``robots.max_crawl_delay_s``) does not lower it: a host
  asking for more than the cap is fetched less, never faster than it asked;
* the Retry-After of the previous response from H if that was 429 or 503
  (RFC 6585 4, RFC 9110 10.2.3): delay-seconds as given, an HTTP-date minus
  the end of that response.

A gap shorter than the required gap minus ``tolerance_s`` is a violation; the
report counts them by the term that set the requirement (``reason``) and
lists the worst (``short_gaps`` lists them all, each with the request it
follows, for ``trawl.testweb.crawlergaps`` to check against the crawler's
own timings). The crawler's own Mercator term (``delay_factor`` x response
time) is not a promise to the host, so it is never required.

*Politeness efficiency* asks how much of what politeness allowed the crawler
used. Per clock -- the IP in modes "both"/"byIP", the host in "byHost" --
and per fetch window (``windows``, e.g. each fetch job's wall-clock span;
the whole log if not given), take the clock's requests r_1..r_n in start
order. The clock *had work* from the start of r_1 to the last end: after its
last request it had none left (its hosts were exhausted or deferred, or the
time limit came), so a crawl that finishes a host early is not charged for
the idle time after. ``needed`` is the span of a replay of the same requests,
in the same order and with the same durations, each started as soon as

* the previous request on the clock ended plus the *address gap*
  (``min_gap_s``: the minimum holds per address too), and
* the previous request to the same host ended plus that host's required gap
  after it (as above: Crawl-delay, Retry-After, minimum).

Only what the hosts asked for holds the replay back: a crawler whose whole
address waits out one host's Crawl-delay or back-off (while other hosts
there had work) is charged for the wait, and so is a back-off after a
failure that came without Retry-After (it asked for no more than the
minimum). With ``delay_factor`` both gaps
are at least ``min(delay_factor x (end_k - start_k), max_delay_s)`` after
request k, the crawler's Mercator rule (``politeness.*``): a slow server
rests, and that is not counted as waste. The requests politeness *allowed*
in the span are ``allowed = n x span / needed`` (the same sequence, packed
with no slack) and efficiency = ``sum n / sum allowed`` over all clocks. 1.0
means the crawler used every slot; below 1 it waited longer than required
(or idled with work left); above 1 it went faster than allowed (overlaps or
short gaps, which the violation counts show).

``robots_audit`` lists requests the host's robots.txt forbade for the agent.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trawl.fetch.visit import retry_after_s as parse_retry_after
from trawl.testweb.model import WebModel

Record = dict[str, Any]


@dataclass(frozen=True)
class ShortGap:
    """One request that came sooner than its required gap allowed.

    ``previous_path`` and ``previous_start`` name the request whose response
    the gap is measured from (the latest-ending one started before), so the
    pair can be found again, e.g. in the crawler's own timings
    (``trawl.testweb.crawlergaps``).
    """

    host: str
    ip: str
    path: str
    start: float
    gap_s: float
    required_s: float
    reason: str  # "min_delay", "crawl_delay" or "retry_after": what set required_s
    previous_path: str | None = None
    previous_start: float | None = None


@dataclass(frozen=True)
class ClockEfficiency:
    """Efficiency of one clock (an IP, or a host in byHost mode) in one window."""

    key: str
    requests: int
    span_s: float
    needed_s: float
    allowed: float
    efficiency: float


@dataclass(frozen=True)
class PolitenessReport:
    """Summary of per-host and per-IP concurrency and spacing of requests.

    ``min_gap_s`` is the smallest end-to-start gap seen on any host (None if
    no host got two requests); ``gaps_below_min`` counts gaps shorter than
    ``required_gap_s`` minus ``tolerance_s``; ``crawl_delay_violations`` counts
    gaps shorter than the host's robots.txt Crawl-delay (only with a model).
    ``gaps_below_required`` counts gaps shorter than each request's required
    gap (module docstring), ``short_gaps_by_reason`` splits them by what set
    the requirement and ``worst_short_gaps`` lists the largest shortfalls.
    ``ip_gaps_below_min`` counts end-to-start gaps between consecutive
    requests to one address (any hosts) shorter than ``required_gap_s`` minus
    ``tolerance_s``: ``politeness.min_delay_s`` holds per address too.
    ``efficiency`` is None when there is no request in any window.
    """

    requests: int
    hosts: int
    ips: int
    max_in_flight_per_host: int
    hosts_with_overlap: int
    max_in_flight_per_ip: int
    min_gap_s: float | None
    gaps_below_min: int
    required_gap_s: float
    tolerance_s: float
    crawl_delay_violations: int
    ips_with_overlap: int
    ip_gaps_below_min: int
    gaps_below_required: int
    short_gaps_by_reason: dict[str, int]
    worst_short_gaps: tuple[ShortGap, ...]
    efficiency: float | None
    least_efficient: tuple[ClockEfficiency, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_log(access_log: Path) -> list[Record]:
    """All records of an access log (blank lines skipped)."""
    with Path(access_log).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def max_in_flight(intervals: Iterable[tuple[float, float]], slack_s: float = 0.0) -> int:
    """Most intervals open at one instant; touching (end == start) is not overlap.

    Each end is pulled in by ``slack_s``: the server stamps ``end`` a moment
    after the last byte left, by which time a sequential client may already
    have sent its next request.
    """
    spans = [(start, max(start, end - slack_s)) for start, end in intervals]
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = current = 0
    for _, delta in events:  # at equal times -1 sorts first: ends before starts
        current += delta
        peak = max(peak, current)
    # A request shorter than the slack still was in flight on its own.
    return max(peak, 1) if spans else 0


def gaps(intervals: Iterable[tuple[float, float]]) -> list[float]:
    """End-to-start gaps between consecutive requests (by start); negative = overlap."""
    ordered = sorted(intervals)
    out = []
    latest_end = ordered[0][1] if ordered else 0.0
    for start, end in ordered[1:]:
        out.append(start - latest_end)
        latest_end = max(latest_end, end)
    return out


def retry_after_s(rec: Record) -> float | None:
    """The wait a 429/503 response asked for, counted from its end; else None.

    Delay-seconds are taken as given; an HTTP-date (RFC 9110 5.6.7) becomes
    the time from the response's end to that date (0 if already past).
    Unparsable values count as absent, as RFC 9110 lets a client ignore them.
    """
    value = rec.get("retry_after")
    if rec.get("status") not in (429, 503) or not value:
        return None
    return parse_retry_after(str(value), datetime.fromtimestamp(float(rec["end"]), UTC))


def required_gap(
    previous: Record, min_gap_s: float, crawl_delay_s: float | None
) -> tuple[float, str]:
    """(required gap, reason) before the next request to the host that sent ``previous``.

    On a tie the most specific reason is named: retry_after, then crawl_delay.
    """
    terms = [(retry_after_s(previous), "retry_after"), (crawl_delay_s, "crawl_delay")]
    terms.append((min_gap_s, "min_delay"))
    return max(((v, why) for v, why in terms if v is not None), key=lambda t: t[0])


def _host_sequence(records: list[Record]) -> Iterator[tuple[Record, Record, float]]:
    """(request, the response it follows, gap) per request after a host's first.

    The response followed is the one with the latest end among the requests
    started earlier, the one the gap is measured from (see ``gaps``).
    """
    ordered = sorted(records, key=lambda r: (float(r["start"]), float(r["end"])))
    if not ordered:
        return
    latest = ordered[0]
    for rec in ordered[1:]:
        yield rec, latest, float(rec["start"]) - float(latest["end"])
        if float(rec["end"]) > float(latest["end"]):
            latest = rec


def _short_gaps(
    by_host: dict[str, list[Record]],
    min_gap_s: float,
    tolerance_s: float,
    delay_of: Callable[[str], float | None],
) -> list[ShortGap]:
    out = []
    for host, records in by_host.items():
        for rec, previous, gap in _host_sequence(records):
            required, reason = required_gap(previous, min_gap_s, delay_of(host))
            if gap < required - tolerance_s:
                out.append(
                    ShortGap(
                        host,
                        rec["ip"],
                        rec["path"],
                        rec["start"],
                        gap,
                        required,
                        reason,
                        previous["path"],
                        previous["start"],
                    )
                )
    return sorted(out, key=lambda s: s.gap_s - s.required_s)  # the largest shortfall first


def short_gaps(
    access_log: Path,
    min_gap_s: float,
    *,
    tolerance_s: float = 0.005,
    model: WebModel | None = None,
    agent: str | None = None,
) -> list[ShortGap]:
    """Every request in ``access_log`` that came sooner than its required gap,
    the largest shortfall first: all of what ``politeness_audit`` counts as
    ``gaps_below_required`` (its ``worst_short_gaps`` lists only the first
    ``examples``). Arguments as there."""
    by_host: dict[str, list[Record]] = defaultdict(list)
    for rec in read_log(access_log):
        by_host[rec["host"]].append(rec)
    return _short_gaps(by_host, min_gap_s, tolerance_s, _crawl_delays(model, agent))


def clock_efficiency(
    records: Sequence[Record],
    host_gap: Callable[[Record], float],
    address_gap: Callable[[Record], float],
    *,
    windows: Sequence[tuple[float, float]] | None = None,
    by_host: bool = False,
) -> list[ClockEfficiency]:
    """Efficiency per clock and window, as the module docstring defines it.

    ``host_gap(r)`` / ``address_gap(r)``: what request r's response asks of
    its host / its clock. A request belongs to the window its start falls
    in; requests outside every window are left out. ``by_host`` makes each
    host its own clock.
    """
    spans = windows if windows is not None else [(-math.inf, math.inf)]
    out = []
    for lo, hi in spans:
        clocks: dict[str, list[Record]] = defaultdict(list)
        for rec in records:
            if lo <= float(rec["start"]) <= hi:
                clocks[rec["host"] if by_host else rec["ip"]].append(rec)
        for key, group in clocks.items():
            group.sort(key=lambda r: float(r["start"]))
            span = max(float(r["end"]) for r in group) - float(group[0]["start"])
            needed = _replay_span(group, host_gap, address_gap)
            n = len(group)
            allowed = n * span / needed if needed > 0 and span > 0 else float(n)
            out.append(ClockEfficiency(key, n, span, needed, allowed, n / allowed))
    return out


def _replay_span(
    group: list[Record],
    host_gap: Callable[[Record], float],
    address_gap: Callable[[Record], float],
) -> float:
    """How long ``group`` takes, in its order, started each as early as allowed."""
    first = float(group[0]["start"])
    clock_free, end = first, first
    host_free: dict[str, float] = {}
    for rec in group:
        start = max(clock_free, host_free.get(rec["host"], first))
        end = start + max(0.0, float(rec["end"]) - float(rec["start"]))
        clock_free = end + address_gap(rec)
        host_free[rec["host"]] = end + host_gap(rec)
    return end - first


def politeness_audit(
    access_log: Path,
    min_gap_s: float,
    *,
    tolerance_s: float = 0.005,
    model: WebModel | None = None,
    agent: str | None = None,
    windows: Sequence[tuple[float, float]] | None = None,
    mode: str = "both",
    delay_factor: float = 0.0,
    max_delay_s: float = math.inf,
    examples: int = 5,
) -> PolitenessReport:
    """Concurrency, spacing and efficiency per host and per IP in ``access_log``.

    ``model`` supplies each host's Crawl-delay (as served to ``agent``, by
    default the model's); ``windows``, ``mode``, ``delay_factor`` and
    ``max_delay_s`` shape the efficiency (module docstring). ``examples`` is
    how many of the worst short gaps and least efficient clocks to list.
    """
    records = read_log(access_log)
    by_host: dict[str, list[Record]] = defaultdict(list)
    by_ip: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for rec in records:
        by_host[rec["host"]].append(rec)
        by_ip[rec["ip"]].append((float(rec["start"]), float(rec["end"])))
    host_peaks = [max_in_flight(_intervals(rs), tolerance_s) for rs in by_host.values()]
    ip_peaks = [max_in_flight(iv, tolerance_s) for iv in by_ip.values()]
    all_gaps = [g for rs in by_host.values() for g in gaps(_intervals(rs))]

    delay_of = _crawl_delays(model, agent)

    def address_gap(rec: Record) -> float:
        rest = delay_factor * max(0.0, float(rec["end"]) - float(rec["start"]))
        return max(min_gap_s, min(rest, max_delay_s))

    def host_gap(rec: Record) -> float:
        required = required_gap(rec, min_gap_s, delay_of(rec["host"]))[0]
        return max(required, address_gap(rec))

    short = _short_gaps(by_host, min_gap_s, tolerance_s, delay_of)
    by_host_clock = mode == "byHost"
    clocks = clock_efficiency(
        records, host_gap, address_gap, windows=windows, by_host=by_host_clock
    )
    allowed = sum(c.allowed for c in clocks)
    return PolitenessReport(
        requests=len(records),
        hosts=len(by_host),
        ips=len(by_ip),
        max_in_flight_per_host=max(host_peaks, default=0),
        hosts_with_overlap=sum(peak >= 2 for peak in host_peaks),
        max_in_flight_per_ip=max(ip_peaks, default=0),
        min_gap_s=min(all_gaps, default=None),
        gaps_below_min=sum(g < min_gap_s - tolerance_s for g in all_gaps),
        required_gap_s=min_gap_s,
        tolerance_s=tolerance_s,
        crawl_delay_violations=_crawl_delay_violations(by_host, delay_of, tolerance_s),
        ips_with_overlap=sum(peak >= 2 for peak in ip_peaks),
        ip_gaps_below_min=sum(
            g < min_gap_s - tolerance_s for iv in by_ip.values() for g in gaps(iv)
        ),
        gaps_below_required=len(short),
        short_gaps_by_reason=dict(Counter(s.reason for s in short)),
        worst_short_gaps=tuple(short[:examples]),
        efficiency=sum(c.requests for c in clocks) / allowed if allowed else None,
        least_efficient=tuple(sorted(clocks, key=lambda c: c.efficiency)[:examples]),
    )


def _crawl_delays(model: WebModel | None, agent: str | None) -> Callable[[str], float | None]:
    """host -> the Crawl-delay its robots.txt serves to ``agent`` (None without a model)."""

    def delay_of(host: str) -> float | None:
        info = model.host(host) if model is not None else None
        if model is None or info is None:
            return None
        return info.crawl_delay_for(agent or model.agent)

    return delay_of


def _intervals(records: Iterable[Record]) -> list[tuple[float, float]]:
    return [(float(r["start"]), float(r["end"])) for r in records]


def _crawl_delay_violations(
    by_host: dict[str, list[Record]],
    delay_of: Callable[[str], float | None],
    tolerance_s: float,
) -> int:
    """Gaps shorter than the host's Crawl-delay, whatever else was required."""
    count = 0
    for host, records in by_host.items():
        delay = delay_of(host)
        if delay is not None:
            count += sum(g < delay - tolerance_s for g in gaps(_intervals(records)))
    return count


def robots_audit(access_log: Path, model: WebModel, agent: str | None = None) -> list[str]:
    """``host/path`` of every request robots.txt disallowed for ``agent``, in log order.

    Requests for /robots.txt itself and for hosts outside the model are
    ignored; on a host whose robots.txt answered 5xx every other path counts.
    """
    agent = agent or model.agent
    return [
        f"{rec['host']}{rec['path']}"
        for rec in read_log(access_log)
        if rec["path"] != "/robots.txt" and model.is_disallowed(rec["host"], rec["path"], agent)
    ]
