"""A test's own HTTP server on loopback, run in a thread for a ``with`` block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer
from typing import TypeVar

S = TypeVar("S", bound=BaseServer)


@contextmanager
def serving(server: S, name: str) -> Iterator[S]:
    """``server`` answering in a thread (``name``) while the block runs; shut
    down, its socket closed and its thread joined after, failure or not."""
    thread = threading.Thread(target=server.serve_forever, name=name)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
