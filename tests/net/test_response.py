"""Tests for trawl.net.response: the transfer-rate floor and FetchError.

Reading real responses under the limits is checked against misbehaving
servers in ``tests/net/test_client.py``."""

from __future__ import annotations

import pickle

from trawl.net import response as httpresponse
from trawl.net.response import FetchError


def test_transfer_rate_is_judged_over_the_last_window() -> None:
    rate = httpresponse._TransferRate(100, 1.0, started=0.0)
    assert not rate.too_slow(10, 0.5)  # slow, but not a whole window read yet
    assert not rate.too_slow(1000, 1.0)  # 1000 bytes in the first second
    assert not rate.too_slow(1100, 1.5)  # 1100 - 10 bytes over the last second or so
    assert rate.too_slow(1110, 2.5)  # 1110 - 1000 over the last 1.5 s: 73 bytes/s
    assert not httpresponse._TransferRate(0, 1.0, started=0.0).too_slow(0, 100.0)  # disabled


def test_fetch_error_pickles_and_reads_well() -> None:
    copy = pickle.loads(pickle.dumps(FetchError("timeout", "read timed out")))
    assert (copy.kind, str(copy)) == ("timeout", "read timed out")
