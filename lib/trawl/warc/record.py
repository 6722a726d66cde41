"""A WARC record as read back: where it is, its header fields, its block.

``trawl.warc.reader`` frames records out of a file (and raises
``WarcFormatError`` where it cannot); this is what it hands out, read the way
warcio and cdxj-indexer read it, so an index or a replay built from trawl's
reader sees the same names and values as one built from theirs:

* ``headers`` are the header fields in file order, names as written; a field
  is looked up in any case, the first one of a name winning.
* ``target_uri`` strips the angle brackets wget 1.19 wrote around
  ``WARC-Target-URI`` and percent-encodes spaces, as warcio does.
* A block starts with an HTTP head (``http_head``) by warcio's rule: a
  non-empty ``response``, ``request`` or ``revisit`` block of an http(s) URI.
  The head is parsed as warcio parses it, the first line split at its first
  space whatever it says; the payload (section 5.9) is what follows it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from warcio.statusandheaders import StatusAndHeadersParser

__all__ = ["Headers", "HttpHead", "WarcFormatError", "WarcRecord", "header_value"]

Headers = tuple[tuple[str, str], ...]

# verify=False: the first line is split at its first space, whatever it says
# (warcio reads requests and responses this way for cdxj-indexer).
_HTTP_PARSER = StatusAndHeadersParser([], verify=False)

# warcio's rule for which blocks start with an HTTP head (ArcWarcRecordLoader).
_HTTP_RECORD_TYPES = ("response", "request", "revisit")
_HTTP_SCHEMES = ("http:", "https:")


class WarcFormatError(ValueError):
    """A WARC file, or the bytes at a ``warc_ref``, is not what WARC 1.1 says.

    ``file`` names the file (or the source given), ``offset`` the record's offset
    and ``problem`` what is wrong with it.
    """

    def __init__(self, file: str, offset: int, problem: str) -> None:
        super().__init__(f"{file}: record at offset {offset}: {problem}")
        self.file = file
        self.offset = offset
        self.problem = problem


def header_value(headers: Headers, name: str) -> str | None:
    """The first field called ``name`` (any case), or None."""
    lower = name.lower()
    return next((value for key, value in headers if key.lower() == lower), None)


@dataclass(frozen=True, slots=True)
class HttpHead:
    """The HTTP head at the start of a block, as warcio parses it.

    ``protocol`` is the first word of the first line ("HTTP/1.1", or the method of
    a request) and ``status_line`` the rest ("200 OK", "/ HTTP/1.1"). ``length`` is
    its size in bytes, the blank line included.
    """

    protocol: str
    status_line: str
    headers: Headers
    length: int

    @property
    def status(self) -> str:
        """The status code of a response ("200"): the first word of ``status_line``."""
        return self.status_line.split(" ", 1)[0]

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)


@dataclass(frozen=True, slots=True)
class WarcRecord:
    """One WARC record: where it is, its header fields and its block.

    ``headers`` are the header fields in file order (names as written);
    ``block`` is the Content-Length bytes after them (section 4), as stored.
    """

    offset: int
    length: int
    rec_type: str
    headers: Headers
    block: bytes = field(repr=False)
    version: str = "WARC/1.1"

    def header(self, name: str) -> str | None:
        """The first field called ``name`` (any case), or None."""
        return header_value(self.headers, name)

    @property
    def target_uri(self) -> str | None:
        """WARC-Target-URI as warcio reads it: angle brackets (the wget 1.19 bug)
        stripped, spaces percent-encoded."""
        uri = self.header("WARC-Target-URI")
        if uri is not None and uri.startswith("<") and uri.endswith(">"):
            uri = uri[1:-1]
        return None if uri is None else uri.replace(" ", "%20")

    def http_head(self) -> HttpHead | None:
        """The HTTP head of a non-empty response, request or revisit block of an
        http(s) URI (warcio's rule); None for any other record."""
        uri = self.target_uri
        if self.rec_type not in _HTTP_RECORD_TYPES or not self.block or uri is None:
            return None
        if not uri.startswith(_HTTP_SCHEMES):
            return None
        stream = io.BytesIO(self.block)
        parsed = _HTTP_PARSER.parse(stream)
        headers = tuple((str(k), str(v)) for k, v in parsed.headers)
        return HttpHead(str(parsed.protocol), str(parsed.statusline), headers, stream.tell())

    def payload(self) -> bytes:
        """The block after its HTTP head, if it has one (section 5.9), else the block."""
        head = self.http_head()
        return self.block[head.length :] if head is not None else self.block
