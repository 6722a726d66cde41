"""decode_body: content codings undone in reverse order, under a size cap (bombs included)."""

from __future__ import annotations

import gzip
import random
import tracemalloc
import zlib

import brotli

from trawl.net.coding import decode_body

TEXT = b"<html><body>" + b"hello trawl " * 500 + b"</body></html>"


def test_decode_body_undoes_stacked_codings_in_reverse_order() -> None:
    coded = gzip.compress(zlib.compress(TEXT))  # deflate first, then gzip
    assert decode_body(coded, ["deflate", "gzip"], 1_000_000, False) == (TEXT, False, None)
    assert decode_body(coded, ["deflate", "gzip"], 100, False) == (TEXT[:100], True, None)


def test_decode_body_keeps_a_prefix_of_a_truncated_download() -> None:
    data = random.Random(7).randbytes(20_000)  # incompressible: the cut loses little
    cut = gzip.compress(data)[:-100]
    body, capped, error = decode_body(cut, ["gzip"], 1_000_000, partial=True)
    assert error is None and not capped
    assert data.startswith(body) and len(body) > 15_000
    assert decode_body(cut, ["gzip"], 1_000_000, partial=False) == (
        b"",
        False,
        "gzip: stream ends early",
    )


def test_brotli_is_decoded_under_the_cap() -> None:
    coded = gzip.compress(brotli.compress(TEXT))  # br first, then gzip
    assert decode_body(coded, ["br", "gzip"], 1_000_000, False) == (TEXT, False, None)
    assert decode_body(brotli.compress(TEXT), ["br"], 100, False) == (TEXT[:100], True, None)


def test_brotli_bomb_never_grows_past_the_cap() -> None:
    packer, zeros = brotli.Compressor(quality=5), bytes(1 << 20)
    bomb = b"".join(packer.process(zeros) for _ in range(200)) + packer.finish()  # 200 MiB
    assert len(bomb) < 1_000
    tracemalloc.start()
    try:
        body, capped, error = decode_body(bomb, ["br"], 1_000_000, False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (body, capped, error) == (bytes(1_000_000), True, None)
    assert peak < 4_000_000  # a few copies of the capped output, not 200 MiB


def test_brotli_cut_short_or_corrupt() -> None:
    data = random.Random(7).randbytes(20_000)
    cut = brotli.compress(data)[:-100]
    body, capped, error = decode_body(cut, ["br"], 1_000_000, partial=True)
    assert error is None and not capped
    assert data.startswith(body) and len(body) > 15_000
    cut_error = "br: stream ends early"
    assert decode_body(cut, ["br"], 1_000_000, partial=False) == (b"", False, cut_error)
    assert decode_body(b"not brotli at all", ["br"], 1_000_000, False) == (
        b"",
        False,
        "br: brotli: decoder failed",
    )
