"""Content-Encoding decoding for HTTP responses, with a hard cap on the output.

``decode_body(raw, codings, cap, partial)`` undoes the content codings a
response lists in ``Content-Encoding`` (RFC 9110 8.4: codings are listed in the
order they were applied, so they are undone last to first). Supported are
gzip and its alias x-gzip (RFC 9110 8.4.1.3), deflate (RFC 9110 8.4.1.2,
the zlib format of RFC 1950; raw RFC 1951 deflate, which some servers send
instead, is recognised and decoded too) and br (RFC 7932, which registers it
as an HTTP content coding in section 13; bytes after the end of a brotli
stream are an error, as the decoder reports them). Any other coding, a corrupt
stream, or a stream that ends early in a complete download gives an empty body
and an error string rather than an exception: the response
(``trawl.net.response.HttpResponse``) still holds the raw bytes for WARC and
says why ``body`` is empty.

The cap is enforced while inflating, with ``zlib.decompressobj().decompress(
data, max_length)``, not by checking the length afterwards: ``zlib.decompress``
or ``gzip.decompress`` would build the whole output first, and deflate packs
zeros about 1000:1, so a 2 MB body (a "zip bomb") could take 2 GB of memory
before any check ran. With ``max_length`` each step yields at most ``cap + 1`` bytes and
the rest stays in ``unconsumed_tail``, so the decoder never holds more than
``cap + 1`` bytes of output whatever the input says. Brotli packs zeros far
tighter (200 MB into about 300 bytes), so it gets the same treatment:
``brotli.Decompressor().process(data, output_buffer_limit=n)`` stops growing
its output at ``n`` bytes (its buffer is at least 32 KiB, so a step may
overshoot ``cap`` by that much, never more) and keeps the rest of the input
for the next call with empty input.
"""

from __future__ import annotations

import zlib

import brotli

_GZIP_WBITS = 16 + zlib.MAX_WBITS


def decode_body(
    raw: bytes, codings: list[str], cap: int, partial: bool
) -> tuple[bytes, bool, str | None]:
    """Undo content codings (listed in the order applied, RFC 9110 8.4).

    Returns (body, hit_cap, error). ``partial`` says ``raw`` was cut short, so
    an unfinished stream is expected and its decoded prefix is kept; otherwise
    an unfinished or corrupt stream gives (b"", False, error).
    """
    data, hit_cap = raw, False
    for coding in reversed(codings):
        if not data:
            break
        try:
            if coding in ("gzip", "x-gzip"):  # RFC 9110 8.4.1.3
                data, capped, complete = _inflate(data, _GZIP_WBITS, cap)
            elif coding == "deflate":  # RFC 9110 8.4.1.2: zlib format; some send raw deflate
                wbits = zlib.MAX_WBITS if _looks_like_zlib(data) else -zlib.MAX_WBITS
                data, capped, complete = _inflate(data, wbits, cap)
            elif coding == "br":  # RFC 7932
                data, capped, complete = _unbrotli(data, cap)
            else:
                return b"", False, f"unsupported content-coding: {coding}"
        except (zlib.error, brotli.error) as exc:
            return b"", False, f"{coding}: {exc}"
        hit_cap = hit_cap or capped
        if not (complete or partial or hit_cap):
            return b"", False, f"{coding}: stream ends early"
    if len(data) > cap:
        data, hit_cap = data[:cap], True
    return data, hit_cap, None


def _looks_like_zlib(data: bytes) -> bool:
    """RFC 1950 2.2: CM=8 and the header checksum (CMF*256 + FLG) % 31 == 0."""
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] * 256 + data[1]) % 31 == 0


def _inflate(data: bytes, wbits: int, cap: int) -> tuple[bytes, bool, bool]:
    """Decompress at most ``cap`` bytes: (output, hit_cap, stream_complete).

    ``max_length`` bounds every step, so a bomb costs at most ``cap + 1``
    bytes of memory. Concatenated gzip members are all decoded (RFC 1952 2.2);
    other bytes after the end of the stream are ignored, as browsers do.
    """
    out = bytearray()
    inflater = zlib.decompressobj(wbits)
    pending = data
    while pending:
        out += inflater.decompress(pending, cap + 1 - len(out))
        if len(out) > cap:
            return bytes(out[:cap]), True, False
        if inflater.eof:
            pending = inflater.unused_data
            if wbits != _GZIP_WBITS or not pending.startswith(b"\x1f\x8b"):
                return bytes(out), False, True
            inflater = zlib.decompressobj(wbits)
        else:
            pending = inflater.unconsumed_tail
    return bytes(out), False, inflater.eof


def _unbrotli(data: bytes, cap: int) -> tuple[bytes, bool, bool]:
    """Decode brotli, at most ``cap`` bytes: (output, hit_cap, stream_complete).

    The first call takes all the input; while the output limit holds the
    decoder back (``can_accept_more_data()`` false) it is called again with
    empty input, as its API requires, until the stream ends, the input runs
    out, or the cap is passed.
    """
    out = bytearray()
    decoder = brotli.Decompressor()
    pending = data
    while True:
        out += decoder.process(pending, output_buffer_limit=cap + 1 - len(out))
        pending = b""
        if len(out) > cap:
            return bytes(out[:cap]), True, False
        if decoder.is_finished():
            return bytes(out), False, True
        if decoder.can_accept_more_data():  # all input used, stream not finished
            return bytes(out), False, False
