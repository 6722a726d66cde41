"""A response read under hard limits and recorded exactly for WARC and the parser.

``HttpResponse`` holds ``headers`` in arrival order with repeats; ``raw_body``,
de-chunked but still content-coded (what WARC stores); ``body`` with
gzip/x-gzip/deflate/br undone (RFC 9110 8.4, ``trawl.net.coding``); and the
``request_head`` that asked for it (``trawl.net.request``). ``FetchError`` is
the other outcome: no response head arrived, and ``kind`` says where.

The limits, ``trawl.net.client.HttpClient``'s, are hard, because a server
may be hostile rather than slow: the read timeout (any wait for bytes), the
exchange's deadline (its total time), the minimum transfer rate (bytes per
second over the last window of the body, judged once the body has been read
for a whole window: a 1 byte/s drip never trips the read timeout, and without
this would hold a fetch thread until the deadline) and the cap on the raw
body (``read_body``). The response is read through ``_DeadlineReader``, which gives every
socket read the smaller of the read timeout and the time left, so the total
limit holds in the head, in chunk-size lines and in trailers too, where
``http.client`` reads line by line (a head dripped one byte at a time, or an
endless run of ``100 Continue``, would otherwise never end). A head the peer
closed before its blank line is refused (``BoundedResponse``), where
``http.client`` alone would make it a complete response with no body
(RFC 9112 8). A limit hit mid-body keeps what came and sets ``truncated`` to
the WARC 1.1 reason: "length", "time" (total time or transfer rate), or
"disconnect" when the peer closed early or broke the framing.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BoundedResponse",
    "FetchError",
    "FetchErrorKind",
    "HttpResponse",
    "Truncation",
    "content_codings",
    "read_body",
]

Truncation = Literal["length", "time", "disconnect"]
FetchErrorKind = Literal["invalid_url", "connect", "tls", "timeout", "read", "protocol", "proxy"]
_READ_SIZE = 65_536
_RATE_SAMPLES = 10  # samples kept per transfer-rate window (bounds the memory of the check)


@dataclass(frozen=True)
class HttpResponse:
    url: str
    status: int
    reason: str
    http_version: str  # "HTTP/1.1" or "HTTP/1.0"
    headers: list[tuple[str, str]]  # as received: order and repeats kept
    raw_body: bytes  # de-chunked, still content-coded, at most max_content_bytes
    body: bytes  # content-decoded, at most max_decompressed_bytes; b"" if undecodable
    truncated: Truncation | None
    request_head: bytes  # request line + fields + blank line, exactly as sent
    ip: str
    elapsed_s: float  # start of get() to the end of the body
    ttfb_s: float  # start of get() to the parsed response head
    decode_error: str | None = None  # why ``body`` is empty although ``raw_body`` is not

    def header(self, name: str) -> str | None:
        """The first value of field ``name`` (case-insensitive, RFC 9110 5.1), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


class FetchError(Exception):
    """The exchange failed before a response head arrived; ``kind`` says where."""

    def __init__(self, kind: FetchErrorKind, message: str) -> None:
        super().__init__(kind, message)  # args as given: picklable for Spark
        self.kind: FetchErrorKind = kind
        self.message = message

    def __str__(self) -> str:
        return self.message


def content_codings(headers: list[tuple[str, str]]) -> list[str]:
    """The codings ``Content-Encoding`` lists, in order applied, ``identity`` left out."""
    codings = [
        item.strip().lower()
        for name, value in headers
        if name.lower() == "content-encoding"
        for item in value.split(",")
    ]
    return [c for c in codings if c and c != "identity"]


class _DeadlineReader(io.RawIOBase):
    """The socket as ``http.client`` reads it, with each wait bounded by the
    read timeout and by the time left until the exchange's deadline."""

    def __init__(self, sock: socket.socket, deadline: float, read_timeout_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # keeps the socket open until closed
        self._deadline = deadline
        self._read_timeout_s = read_timeout_s
        self.eof = False  # the peer closed its end

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("total time limit reached")
        self._sock.settimeout(min(self._read_timeout_s, left))
        try:
            n = self._raw.readinto(buffer)
        except TimeoutError:  # say which limit it was
            if time.monotonic() >= self._deadline:
                raise TimeoutError("total time limit reached") from None
            raise TimeoutError(f"no bytes for {self._read_timeout_s:g} s (read timeout)") from None
        self.eof = self.eof or n == 0
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


class BoundedResponse(http.client.HTTPResponse):
    """An ``HTTPResponse`` that reads through a ``_DeadlineReader`` and refuses
    a head the peer cut short."""

    def __init__(
        self, sock: socket.socket, deadline: float, read_timeout_s: float, method: str | None
    ) -> None:
        super().__init__(sock, method=method)
        self.fp.close()  # the plain reader made by HTTPResponse; nothing was read from it
        self._reader = _DeadlineReader(sock, deadline, read_timeout_s)
        self.fp = io.BufferedReader(self._reader)

    def begin(self) -> None:
        super().begin()
        # http.client takes end of input for the end of the fields. The head is
        # read line by line and a line is only read past once it is whole, so
        # end of input seen by now means the fields never ended: RFC 9112 8,
        # an incomplete message (else a cut-off head is a 200 with no body).
        if self._reader.eof:
            raise ConnectionAbortedError("the peer closed the connection inside the response head")


class _TransferRate:
    """Is the body arriving slower than ``floor_bps``, averaged over the last
    ``window_s``? Judged only once the body has been read for a whole window.

    Samples of (time, bytes so far) are kept about ``window_s / _RATE_SAMPLES``
    apart, so the memory is bounded whatever the read pattern; the average is
    taken from the newest sample at least one window old, i.e. over a span of
    one window to one window plus a sample spacing.
    """

    def __init__(self, floor_bps: float, window_s: float, started: float) -> None:
        self.floor_bps = floor_bps
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque([(started, 0)])

    def too_slow(self, received: int, now: float) -> bool:
        if self.floor_bps <= 0 or self.window_s <= 0:
            return False
        if now - self._samples[-1][0] >= self.window_s / _RATE_SAMPLES:
            self._samples.append((now, received))
        while len(self._samples) > 1 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()
        since, then = self._samples[0]
        if now - since < self.window_s:
            return False
        return (received - then) / (now - since) < self.floor_bps


def read_body(
    resp: http.client.HTTPResponse, cap: int, min_rate_bps: float, rate_window_s: float
) -> tuple[bytes, Truncation | None]:
    """Read the payload in chunks until EOF or a limit (module docstring).

    Each read waits at most the read timeout and never past the deadline
    (``_DeadlineReader``); the transfer rate is judged after every read.
    """
    raw = bytearray()
    rate = _TransferRate(min_rate_bps, rate_window_s, time.monotonic())
    while True:
        try:
            chunk = resp.read1(min(_READ_SIZE, cap + 1 - len(raw)))
        except TimeoutError:
            return bytes(raw), "time"
        except (OSError, http.client.HTTPException):  # reset, IncompleteRead, TLS
            return bytes(raw), "disconnect"
        if not chunk:
            break
        raw += chunk
        if len(raw) > cap:
            return bytes(raw[:cap]), "length"
        if rate.too_slow(len(raw), time.monotonic()):
            return bytes(raw), "time"
    if resp.length:  # Content-Length promised more than came (RFC 9112 8)
        return bytes(raw), "disconnect"
    return bytes(raw), None
