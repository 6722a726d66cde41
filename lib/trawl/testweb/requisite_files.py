"""The bytes of the test web's page requisites: stylesheets, script, images, font.

Each file is a pure function of its host and path (``requisite_file``), real
and valid for what it claims to be, so a browser renders a test-web page
without a console message and a crawler's parsers meet the real thing:

* the stylesheets are the ones ``trawl.testweb.requisites`` describes, each
  with a comment naming its host (which makes their bytes the host's own);
* the script sets ``data-app-ran="1"`` on the root element and nothing else:
  no request leaves it, so what a page loads is what its markup names;
* the images are PNGs written here with ``zlib`` and ``struct`` (PNG, ISO/IEC
  15948: signature, IHDR, one IDAT, IEND, each chunk with its CRC-32), RGB
  checkerboards whose two colours come from a digest of the host and the
  image, so no two images are byte-identical but the logo and its copy
  (the copy is the logo's bytes); a photo's 2x candidate is its 1x at twice
  the size, as a ``srcset`` means;
* the font is a real WOFF2 (W3C WOFF 2.0) that Chromium's font sanitizer
  accepts: "Trawl Sans", three glyphs (.notdef, space, a box for "A"), made
  once with fontTools' ``FontBuilder`` and stored below, 312 bytes. A font a
  browser cannot decode costs a console warning ("Failed to decode
  downloaded font", "OTS parsing error"), which is why it is not junk bytes.
  Each host's copy carries the host's name in the WOFF2 *private data
  block* (section 8: user agents ignore it), which must start on a 4-byte
  boundary after the font data and be named, with the file's length, in the
  header; so the fonts too are distinct per host.

The content types are those of the files' registrations: text/css (RFC
2318), text/javascript (RFC 9239), image/png and font/woff2 (RFC 8081).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib
from dataclasses import dataclass

from trawl.testweb.records import HostInfo
from trawl.testweb.requisites import (
    BACKGROUND,
    BANNER,
    FAVICON,
    FONT,
    IMPORTED,
    LOGO,
    LOGO_COPY,
    SCRIPT,
    SECRET,
    STYLESHEET,
    photo_number,
    photo_paths,
    serves,
)

CSS_TYPE = "text/css; charset=utf-8"
JS_TYPE = "text/javascript; charset=utf-8"
PNG_TYPE = "image/png"
WOFF2_TYPE = "font/woff2"
#: (width, height) of each image but the photos, whose 1x is ``PHOTO_SIZE``.
IMAGE_SIZES = {
    LOGO: (24, 8),
    FAVICON: (16, 16),
    BACKGROUND: (4, 4),
    SECRET: (4, 4),
    BANNER: (32, 8),
}
PHOTO_SIZE = (8, 6)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_FONT = base64.b64decode(
    "d09GMgABAAAAAAE4AAoAAAAAAqQAAADvAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAABmAAPAo4QgE2"
    "AiQDDAsIAAQgBWkHKBv0AcgeB3YM+YZJdNgUYRksfvFgP8beto/KddGsFrKHkkhEPFEqCa6bqduO"
    "KS0FS1K7LIhlPPzIQ44mpDC9zU6LKCAvSDQwOWwt4DTQ6IXfbQyVoF6v4fStLqq4Dzo0LQHeW4UJ"
    "BwWoCQ8AgAmQKIwrgXHNAjo1IU04+P/nJv8f/+8EAAp0ItGNXkADgWitr2OAsXjpUtEuFBk772IP"
    "9dfuqmd42qyv3iI5l5coCYKa+F8nz0CLaQEAqHix6Cs+CZQmQFrUrAoQejFOXXqVaD3CuBGjNGj2"
    "KFjCpOeP1B/YEqgIHCKXhuN6hEJDq9EZAAAA"
)
#: Byte offsets in the WOFF2 header (WOFF 2.0, 3): the file's length, and
#: privOffset followed by privLength.
_WOFF2_LENGTH_AT = 8
_WOFF2_PRIVATE_AT = 40


@dataclass(frozen=True)
class RequisiteFile:
    """A requisite's body and Content-Type."""

    body: bytes
    content_type: str


def site_css(host: str) -> str:
    """``/static/site.css``: the import and the background, relative to the sheet."""
    return (
        '@import url("fonts.css");\n'
        f"/* site.css of {host} (trawl testweb): both URLs resolve against this file */\n"
        "body { background: #f6f4ee url(img/bg.png) repeat; margin: 2em; }\n"
        "img { max-width: 100%; }\n"
    )


def fonts_css(host: str) -> str:
    """``/static/fonts.css``: the web font, and the headings set in it."""
    return (
        f"/* fonts.css of {host} (trawl testweb) */\n"
        '@font-face { font-family: "Trawl Sans"; src: url(/static/font.woff2) format("woff2"); }\n'
        'h1 { font-family: "Trawl Sans", sans-serif; }\n'
    )


def app_js(host: str) -> str:
    """``/static/app.js``: marks that it ran, requests nothing."""
    return (
        f"// app.js of {host} (trawl testweb): marks the page as scripted, requests nothing\n"
        'document.documentElement.dataset.appRan = "1";\n'
    )


def woff2_font(host: str) -> bytes:
    """The font with ``host`` in its private data block (module docstring)."""
    font = _FONT + b"\0" * (-len(_FONT) % 4)
    private = f"trawl testweb font of {host}".encode()
    data = bytearray(font + private + b"\0" * (-len(private) % 4))
    struct.pack_into(">I", data, _WOFF2_LENGTH_AT, len(data))
    struct.pack_into(">II", data, _WOFF2_PRIVATE_AT, len(font), len(private))
    return bytes(data)


def _chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data, CRC-32 of type and data (PNG 5.3)."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, colours: tuple[bytes, bytes]) -> bytes:
    """An 8-bit RGB PNG of 2x2-pixel checks in ``colours``; each row has filter 0."""
    rows = (
        b"\0" + b"".join(colours[(x // 2 + y // 2) % 2] for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # depth 8, RGB, no interlace
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + _chunk(b"IEND", b"")
    )


def _colours(host: str, image: str) -> tuple[bytes, bytes]:
    digest = hashlib.sha256(f"{host}{image}".encode()).digest()
    return digest[0:3], digest[3:6]


def image(host: str, path: str) -> bytes:
    """The PNG at ``path`` on ``host`` (a requisite image's path)."""
    number = photo_number(path)
    if number is not None:
        scale = 2 if path == photo_paths(number)[1] else 1
        width, height = PHOTO_SIZE
        return png(width * scale, height * scale, _colours(host, f"photo-{number}"))
    if path == LOGO_COPY:
        path = LOGO  # the same bytes under another URL
    return png(*IMAGE_SIZES[path], _colours(host, path))


def requisite_file(host: HostInfo, path: str) -> RequisiteFile | None:
    """The requisite ``host`` serves at ``path``, or None if it serves none there."""
    if not serves(host, path):
        return None
    texts = {
        STYLESHEET: (site_css, CSS_TYPE),
        IMPORTED: (fonts_css, CSS_TYPE),
        SCRIPT: (app_js, JS_TYPE),
    }
    if path in texts:
        text, content_type = texts[path]
        return RequisiteFile(text(host.name).encode(), content_type)
    if path == FONT:
        return RequisiteFile(woff2_font(host.name), WOFF2_TYPE)
    return RequisiteFile(image(host.name, path), PNG_TYPE)
