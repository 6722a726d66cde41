"""Fuzz trawl.net.client against a raw-socket server on 127.0.0.1 that answers
with whatever it is told, then closes: random bytes, random status and field
lines, cut heads, chunked bodies cut short or malformed, Content-Lengths that
lie, pauses past the read timeout.

Every ``get`` gives an ``HttpResponse`` within the client's limits or a
``FetchError`` of a known kind, and returns within its total time limit (plus
a second for a busy machine: a check that it stops, not a timing). An honest
response is read exactly, and a lying one is read as far as it goes and marked
truncated. ``decode_body`` (trawl.net.coding), which every response goes
through, is fuzzed on its own: bounded output, never an exception, and the
content codings undone exactly.

Examples are few here: each is a real exchange, some of them wait out a timeout.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import get_args

import brotli
from hypothesis import example
from hypothesis import strategies as st

from tests.fuzz.properties import fuzz
from trawl.net.client import HttpClient
from trawl.net.coding import decode_body
from trawl.net.response import FetchError, FetchErrorKind, HttpResponse

UA = "trawl-fuzz/0.1"
READ_TIMEOUT_S = 0.2
TOTAL_TIMEOUT_S = 0.6
MAX_CONTENT = 2_000
MAX_DECODED = 1_000
SLACK_S = 1.0  # scheduling on a loaded machine; a hang would take far longer

# An answer: bytes to send, and pauses (seconds) between them; then the server closes.
Script = Sequence[bytes | float]


@contextmanager
def raw_server(script: Script) -> Iterator[int]:
    """A server on 127.0.0.1 that plays ``script`` to every connection, after
    reading the request head, and closes it; its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.01)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                _play(conn, script)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


def _play(conn: socket.socket, script: Script) -> None:
    conn.settimeout(2)
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(65_536)
            if not data:
                return
            head += data
        for part in script:
            if isinstance(part, float):
                time.sleep(part)
            else:
                conn.sendall(part)
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the client gave up first: what a timeout is for


def exchange(script: Script, requests: int = 1) -> list[HttpResponse | FetchError]:
    """GET / ``requests`` times in a row from a server playing ``script``,
    with one client (so a later GET may meet a pooled connection)."""
    outcomes: list[HttpResponse | FetchError] = []
    with (
        raw_server(script) as port,
        HttpClient(
            UA,
            connect_timeout_s=1,
            read_timeout_s=READ_TIMEOUT_S,
            total_timeout_s=TOTAL_TIMEOUT_S,
            max_content_bytes=MAX_CONTENT,
            max_decompressed_bytes=MAX_DECODED,
        ) as client,
    ):
        for _ in range(requests):
            started = time.monotonic()
            try:
                outcomes.append(client.get(f"http://fuzz.test:{port}/", "127.0.0.1"))
            except FetchError as exc:
                outcomes.append(exc)
            # One deadline covers connecting, the retry of a dead pooled
            # connection, the head and the body.
            assert time.monotonic() - started < TOTAL_TIMEOUT_S + SLACK_S
    return outcomes


def within_limits(outcome: HttpResponse | FetchError) -> None:
    if isinstance(outcome, FetchError):
        assert outcome.kind in get_args(FetchErrorKind)
        assert str(outcome).isprintable()  # the peer's bytes are quoted, never raw
        return
    assert 100 <= outcome.status <= 999
    assert outcome.http_version in ("HTTP/1.0", "HTTP/1.1")
    assert len(outcome.raw_body) <= MAX_CONTENT and len(outcome.body) <= MAX_DECODED
    assert outcome.truncated in (None, "length", "time", "disconnect")
    assert not (outcome.decode_error and outcome.body)
    assert outcome.request_head.endswith(b"\r\n\r\n")
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in outcome.headers)


# --- anything at all ------------------------------------------------------------------

STATUS_LINES = st.one_of(
    st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 404 Not Found", b"HTTP/1.1 301 Moved"]),
    st.sampled_from([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", b"HTTP/1.1 204 No"]),
    st.sampled_from([b"HTTP/2 200", b"HTTP/1.1 999 X", b"HTTP/1.1 099 X", b"ICY 200 OK", b""]),
    st.binary(max_size=20),
)
FIELD_LINES = st.one_of(
    st.sampled_from([b"Content-Length: 5", b"Content-Length: 100", b"Content-Length: -1"]),
    st.sampled_from([b"Content-Length: x", b"Content-Length: 1, 1", b"Content-Length: 1e3"]),
    st.sampled_from([b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip, chunked"]),
    st.sampled_from([b"Content-Encoding: gzip", b"Content-Encoding: br", b"Content-Encoding: x"]),
    st.sampled_from([b"Content-Encoding: deflate, gzip", b"Connection: close", b" folded"]),
    st.sampled_from([b":", b"X: \xff\xfe", b"Connection: keep-alive", b"X" * 70_000]),
    st.binary(max_size=30).map(lambda line: line.replace(b"\r", b"").replace(b"\n", b"")),
)
BODIES = st.one_of(
    st.binary(max_size=300),
    st.sampled_from([b"5\r\nhello\r\n0\r\n\r\n", b"5\r\nhel", b"zz\r\n", b"fffffffffffffffff\r\n"]),
    st.sampled_from([gzip.compress(b"hello " * 400), gzip.compress(b"hello")[:12]]),
    st.just(brotli.compress(bytes(100_000))),
)


@st.composite
def scripts(draw: st.DrawFn) -> list[bytes | float]:
    fields = b"".join(line + b"\r\n" for line in draw(st.lists(FIELD_LINES, max_size=5)))
    blank = draw(st.sampled_from([b"\r\n", b"\n", b""]))
    data = draw(STATUS_LINES) + b"\r\n" + fields + blank + draw(BODIES)
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 4)):
        return [data]
    at = draw(st.integers(0, len(data)))
    return [data[:at], draw(st.sampled_from([0.05, READ_TIMEOUT_S + 0.1])), data[at:]]


@fuzz(scripts(), max_examples=25, deadline_ms=10_000, hang_s=20)
@example([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"])
@example([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", 0.3])
def test_any_answer_gives_a_response_or_fetch_error(script: list[bytes | float]) -> None:
    for outcome in exchange(script, requests=2):
        within_limits(outcome)


# --- honest and lying framing --------------------------------------------------------

FRAMINGS = ["length", "close", "chunked", "length_over", "length_under", "chunked_cut"]


@st.composite
def framed_answers(draw: st.DrawFn) -> tuple[int, bytes, str, bytes]:
    """(status, body, framing, the bytes sent for it)."""
    status = draw(st.sampled_from([200, 201, 301, 404, 410, 500, 503]))
    body = draw(st.binary(min_size=1, max_size=500))
    framing = draw(st.sampled_from(FRAMINGS))
    fields = draw(st.lists(st.from_regex(r"X-[A-Za-z]{1,8}: [!-~]{0,20}", fullmatch=True)))
    if framing.startswith("length"):
        told = len(body) + {"length": 0, "length_over": 7, "length_under": -1}[framing]
        fields.append(f"Content-Length: {told}")
        sent = body
    elif framing.startswith("chunked"):
        fields.append("Transfer-Encoding: chunked")
        cuts = sorted(draw(st.lists(st.integers(1, len(body)), max_size=4, unique=True)))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        sent = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"
        if framing == "chunked_cut":
            sent = sent[: draw(st.integers(0, len(sent) - 5))]  # before the last chunk's end
    else:
        fields.append("Connection: close")  # the end of the connection ends the body
        sent = body
    head = f"HTTP/1.1 {status} Fuzz\r\n" + "".join(f"{f}\r\n" for f in fields) + "\r\n"
    return status, body, framing, head.encode("ascii") + sent


@fuzz(framed_answers(), max_examples=25, deadline_ms=10_000, hang_s=20)
def test_a_body_is_read_exactly_as_far_as_it_came(answer: tuple[int, bytes, str, bytes]) -> None:
    status, body, framing, sent = answer
    (outcome,) = exchange([sent])
    assert isinstance(outcome, HttpResponse)
    assert outcome.status == status
    if framing in ("length", "close", "chunked"):
        assert (outcome.raw_body, outcome.truncated) == (body, None)
    elif framing == "length_over":  # the peer closed before Content-Length bytes came
        assert (outcome.raw_body, outcome.truncated) == (body, "disconnect")
    elif framing == "length_under":  # what the Content-Length says, no more
        assert (outcome.raw_body, outcome.truncated) == (body[:-1], None)
    else:
        assert body.startswith(outcome.raw_body) and outcome.truncated == "disconnect"


# --- content codings ------------------------------------------------------------------

CODERS = {
    "gzip": lambda data: gzip.compress(data, mtime=0),
    "x-gzip": lambda data: gzip.compress(data, mtime=0),
    "deflate": zlib.compress,
    "br": brotli.compress,
}


@fuzz(
    st.one_of(st.binary(max_size=300), st.just(gzip.compress(bytes(1_000_000)))),
    st.lists(st.sampled_from(["gzip", "x-gzip", "deflate", "br", "identity", "zstd"]), max_size=3),
    st.integers(0, 2_000),
    st.booleans(),
    max_examples=300,
)
def test_decoding_any_bytes_is_bounded(
    raw: bytes, codings: list[str], cap: int, partial: bool
) -> None:
    body, hit_cap, error = decode_body(raw, codings, cap, partial)
    assert len(body) <= cap
    assert not (error and (body or hit_cap))


@fuzz(
    st.binary(max_size=3_000),
    st.lists(st.sampled_from(sorted(CODERS)), min_size=1, max_size=3),
    st.integers(0, 4_000),
    max_examples=200,
)
@example(bytes(3_000), ["br"], 1)
def test_content_codings_are_undone_exactly(data: bytes, codings: list[str], cap: int) -> None:
    coded = data
    for coding in codings:  # RFC 9110 8.4: listed in the order applied
        coded = CODERS[coding](coded)
    body, hit_cap, error = decode_body(coded, codings, cap, partial=False)
    assert error is None
    assert data.startswith(body)
    if not hit_cap:
        assert body == data
    if len(codings) == 1:  # one coding: the cap is the only limit
        assert (body, hit_cap) == (data[:cap], len(data) > cap)
