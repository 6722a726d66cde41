"""The crawler's own request timings as a check on the access log's short gaps.

The test web stamps a request's ``start`` when its handler thread has parsed
the request and its ``end`` after the response is written (``server.py``).
A handler that has written a response may wait for the GIL before it stamps
the end, so under load an end can be late and the gap after it, as logged,
shorter than the real one. ``politeness_audit`` cannot tell that lag from a
crawler that came too soon; the crawler's own timings can, as a lower bound
on the true gap at the server:

* the server received the next request no earlier than the crawler began
  to send it, so the crawler's ``start`` of the next request is no later;
* the server finished sending the previous response no later than the
  crawler finished reading it, so the crawler's ``end`` of it is no earlier;

hence ``crawler start of next - crawler end of previous <= true gap``. The
same clock serves both sides (the wall clock of one machine).

How sound the bound is depends on where the crawler takes its times. trawl's
fetch rows (``bench/fetch_trawl.py`` makes the timings from them) start at
``fetched_at``, the wall clock read before the request is sent, and their
``elapsed_s`` counts from a monotonic reading taken just before that (the
fetcher's ``_start``) to the decoded body, after the last byte: so
``fetched_at + elapsed_s`` is never before the response's end, and both
ends err the safe way.

``crawler_gap_check`` takes the audit's short gaps (``audit.short_gaps``)
and finds, per gap, the next request among the crawler's timings (same host
and path, the one whose ``[start, end]`` holds the web's ``start``, the
closest start if several do) and the web's previous request the same way.
The crawler's gap is from the next request's start back to the latest end
of the crawler's requests to the host that started before it: the same rule
as the audit's, applied to the crawler's sequence, which holds every request
the crawler sent, so a late end stamp on the web cannot hide a later one.
A short gap is *stamp lag* when that gap is at least the required gap (no
tolerance: the audit's tolerance is for the web's stamping), else *short*;
it is *unmatched* -- and counts as confirmed, like a short one -- when
either request is not in the timings, or an end among the earlier requests
is unknown (a request that failed without a response whose end the crawler
did not record).

``RequestTiming`` is one request as the crawler timed it; ``write_timings``
and ``read_timings`` keep them as JSON lines (``host``, ``path`` as the
request-target, ``start``, ``end``; epoch seconds).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trawl.net.request import parse_target
from trawl.net.response import FetchError
from trawl.testweb.audit import ShortGap

#: How far the web's start may lie outside a crawler request's [start, end]
#: and still be that request: the fetch table keeps microseconds, the web
#: stamps with the full float.
MATCH_SLACK_S = 0.005


@dataclass(frozen=True)
class RequestTiming:
    """One request as the crawler timed it: ``start`` before it was sent, ``end``
    after its response was read (None: not known)."""

    host: str
    path: str  # the request-target: path and query, as the web logs it
    start: float
    end: float | None


@dataclass(frozen=True)
class GapCheck:
    """One short gap of the access log, checked against the crawler's timings."""

    host: str
    path: str
    start: float  # the web's start of the request that came too soon
    web_gap_s: float
    required_s: float
    crawler_gap_s: float | None  # None: unmatched
    finding: str  # "stamp_lag", "short" or "unmatched" (module docstring)

    @property
    def confirmed(self) -> bool:
        """A breach as far as the crawler's timings can tell."""
        return self.finding != "stamp_lag"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def request_timing(url: str, start: float, elapsed_s: float | None) -> RequestTiming | None:
    """The timing of a request for ``url`` begun at ``start`` and taking
    ``elapsed_s`` (None: unknown); None if ``url`` could not be requested."""
    try:
        target = parse_target(url)
    except (FetchError, ValueError):
        return None
    end = None if elapsed_s is None else start + elapsed_s
    return RequestTiming(target.host, target.request_target, start, end)


def write_timings(path: Path, timings: Iterable[RequestTiming]) -> None:
    with Path(path).open("w", encoding="utf-8") as fh:
        for t in timings:
            fh.write(json.dumps(asdict(t), separators=(",", ":")) + "\n")


def read_timings(path: Path) -> list[RequestTiming]:
    with Path(path).open(encoding="utf-8") as fh:
        return [RequestTiming(**json.loads(line)) for line in fh if line.strip()]


def by_host(timings: Iterable[RequestTiming]) -> dict[str, list[RequestTiming]]:
    """Timings per host, each list in start order."""
    out: dict[str, list[RequestTiming]] = defaultdict(list)
    for t in timings:
        out[t.host].append(t)
    for host_timings in out.values():
        host_timings.sort(key=lambda t: t.start)
    return out


def match(
    host_timings: Sequence[RequestTiming], path: str, at: float, slack_s: float = MATCH_SLACK_S
) -> RequestTiming | None:
    """The crawler's request for ``path`` in flight when the web stamped ``at``:
    ``start - slack <= at <= end + slack`` (an unknown end holds any later
    time), the closest start if several are; None if none is."""
    found = [
        t
        for t in host_timings
        if t.path == path and t.start - slack_s <= at and (t.end is None or at <= t.end + slack_s)
    ]
    return min(found, key=lambda t: abs(at - t.start), default=None)


def crawler_gap(host_timings: Sequence[RequestTiming], nxt: RequestTiming) -> float | None:
    """``nxt``'s start minus the latest end of the requests started before it;
    None if there is none or an end is unknown."""
    ends = [t.end for t in host_timings if t.start < nxt.start]
    if not ends or any(end is None for end in ends):
        return None
    return nxt.start - max(end for end in ends if end is not None)


def check_gap(gap: ShortGap, host_timings: Sequence[RequestTiming], slack_s: float) -> GapCheck:
    """One short gap against the crawler's timings of its host."""
    nxt = match(host_timings, gap.path, gap.start, slack_s)
    previous = None
    if gap.previous_path is not None and gap.previous_start is not None:
        previous = match(host_timings, gap.previous_path, gap.previous_start, slack_s)
    own = None
    if nxt is not None and previous is not None and previous.start < nxt.start:
        own = crawler_gap(host_timings, nxt)
    return GapCheck(
        gap.host, gap.path, gap.start, gap.gap_s, gap.required_s, own, finding(gap, own)
    )


def finding(gap: ShortGap, crawler_gap_s: float | None) -> str:
    """What a short gap is, given the crawler's gap (None: unmatched); no
    tolerance (module docstring)."""
    if crawler_gap_s is None:
        return "unmatched"
    return "stamp_lag" if crawler_gap_s >= gap.required_s else "short"


def crawler_gap_check(
    short_gaps: Iterable[ShortGap],
    timings: Iterable[RequestTiming],
    slack_s: float = MATCH_SLACK_S,
) -> list[GapCheck]:
    """Each of ``short_gaps``, in order, checked against the crawler's ``timings``
    (module docstring)."""
    hosts = by_host(timings)
    return [check_gap(gap, hosts.get(gap.host, []), slack_s) for gap in short_gaps]


def unmatched_requests(
    records: Iterable[dict[str, Any]],
    timings: Iterable[RequestTiming],
    slack_s: float = MATCH_SLACK_S,
) -> int:
    """How many access-log records no crawler request matches (``match``): 0 when
    the timings hold every request the web logged."""
    hosts = by_host(timings)
    return sum(
        match(hosts.get(rec["host"], []), rec["path"], float(rec["start"]), slack_s) is None
        for rec in records
    )
