"""decode_body: content codings undone in reverse order, under a size cap."""

from __future__ import annotations

import gzip
import random
import zlib

from trawl.contentcoding import decode_body

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
