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

``robots_audit`` lists requests the host's robots.txt forbade for the agent.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trawl.testweb.model import WebModel


@dataclass(frozen=True)
class PolitenessReport:
    """Summary of per-host and per-IP concurrency and spacing of requests.

    ``min_gap_s`` is the smallest end-to-start gap seen on any host (None if
    no host got two requests); ``gaps_below_min`` counts gaps shorter than
    ``required_gap_s`` minus ``tolerance_s``; ``crawl_delay_violations`` counts
    gaps shorter than the host's robots.txt Crawl-delay (only with a model).
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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_log(access_log: Path) -> list[dict[str, Any]]:
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


def politeness_audit(
    access_log: Path,
    min_gap_s: float,
    *,
    tolerance_s: float = 0.005,
    model: WebModel | None = None,
) -> PolitenessReport:
    """Concurrency and spacing per host (and concurrency per IP) in ``access_log``."""
    records = read_log(access_log)
    by_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_ip: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for rec in records:
        interval = (float(rec["start"]), float(rec["end"]))
        by_host[rec["host"]].append(interval)
        by_ip[rec["ip"]].append(interval)
    peaks = {host: max_in_flight(iv, tolerance_s) for host, iv in by_host.items()}
    all_gaps: list[float] = []
    delay_violations = 0
    for host, intervals in by_host.items():
        host_gaps = gaps(intervals)
        all_gaps += host_gaps
        info = model.host(host) if model is not None else None
        if info is not None and info.crawl_delay is not None:
            delay_violations += sum(g < info.crawl_delay - tolerance_s for g in host_gaps)
    return PolitenessReport(
        requests=len(records),
        hosts=len(by_host),
        ips=len(by_ip),
        max_in_flight_per_host=max(peaks.values(), default=0),
        hosts_with_overlap=sum(peak >= 2 for peak in peaks.values()),
        max_in_flight_per_ip=max(
            (max_in_flight(iv, tolerance_s) for iv in by_ip.values()), default=0
        ),
        min_gap_s=min(all_gaps, default=None),
        gaps_below_min=sum(g < min_gap_s - tolerance_s for g in all_gaps),
        required_gap_s=min_gap_s,
        tolerance_s=tolerance_s,
        crawl_delay_violations=delay_violations,
    )


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
