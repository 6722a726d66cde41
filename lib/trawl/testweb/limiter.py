"""``RateLimiter``: the test web's memory of each throttled host's traffic.

Rendering is otherwise a pure function of the model; a host with a
``Throttle`` is the exception, because whether it serves a request depends on
when the previous response to it ended (a rate limiter) or how many requests
it has seen (a flaky server). That state lives here, one entry per host,
behind one lock: the server is threaded and answers many hosts at once, and a
crawler that breaks its promise sends two requests to one host at once.

The limiter stamps a served response's end as the moment it admitted the
request plus the host's ``slow`` delay; the access log stamps it a little
later (after the bytes are written). So the limiter is a hair more lenient
than the politeness audit: a crawler that waits the Retry-After it was given,
counted from when it received the answer, is always served.

Retry-After (RFC 9110 10.2.3) is delay-seconds, rounded up to a whole second,
or an IMF-fixdate rounded up to the next whole second (an HTTP-date has no
fractions), so waiting exactly what the header says never arrives early.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from email.utils import formatdate

from trawl.testweb.records import HostInfo, Throttle


@dataclass
class _HostTraffic:
    free_at: float = 0.0  # "limit": a request before this is throttled
    requests: int = 0  # "flaky": requests seen so far


def retry_after_value(throttle: Throttle, now: float, wait_s: float) -> str:
    """The Retry-After header for a wait of ``wait_s`` seconds from ``now``."""
    if throttle.http_date:
        return formatdate(math.ceil(now + wait_s), usegmt=True)
    return str(max(1, math.ceil(wait_s)))


class RateLimiter:
    """Decides, per request to a throttled host, whether to push back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[str, _HostTraffic] = {}

    def push_back(self, host: HostInfo, now: float) -> str | None:
        """The Retry-After to answer with, or None to serve the request.

        ``now`` is when the request arrived (``time.time()``); an admitted
        request to a "limit" host is assumed to end ``host.slow`` later.
        """
        throttle = host.throttle
        if throttle is None:
            return None
        with self._lock:
            state = self._hosts.setdefault(host.name, _HostTraffic())
            if throttle.kind == "flaky":
                state.requests += 1
                if state.requests % throttle.every == 0:
                    return retry_after_value(throttle, now, throttle.retry_after_s)
                return None
            if now < state.free_at:
                return retry_after_value(throttle, now, state.free_at - now)
            state.free_at = now + host.slow + throttle.interval_s
            return None

    def reset(self) -> None:
        """Forget all traffic (a fresh server for the same model)."""
        with self._lock:
            self._hosts.clear()
