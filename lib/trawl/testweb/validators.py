"""Validators and conditional requests for the test web (RFC 9110 8.8 and 13).

200 responses carry a strong ``ETag`` -- a digest of the content, so it
changes exactly when the representation does (RFC 9110 8.8.1: a strong
validator) -- and ``Last-Modified``, when the content last changed, as an
IMF-fixdate (RFC 9110 5.6.7: whole seconds). A request whose condition says
the client holds the current representation is answered 304 Not Modified
with those two fields and no content (RFC 9110 15.4.5).

Evaluation follows RFC 9110 13.2.2 for GET and HEAD (the only methods served):

* If-None-Match (13.1.2) decides when it is present: "*" matches any current
  representation; otherwise it is a list of entity-tags compared with the
  *weak* function (13.1.2: "A recipient MUST use the weak comparison function
  when comparing entity tags for If-None-Match"): opaque tags equal, ``W/``
  ignored. A match means 304; a field holding no entity-tag never matches.
* If-Modified-Since (13.1.3) is read only when If-None-Match is absent, and
  only if it is one valid HTTP-date (else it is ignored). The representation
  is unmodified when its Last-Modified, at the second resolution HTTP-dates
  have, is no later than that date.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from trawl.net.dates import http_date, parse_http_date

__all__ = ["http_date", "not_modified", "parse_http_date", "strong_etag"]

_ENTITY_TAG = re.compile(r'(?:W/)?"([^"]*)"')  # RFC 9110 8.8.3: [ W/ ] DQUOTE *etagc DQUOTE


def strong_etag(content: bytes) -> str:
    """A strong entity-tag for ``content``: part of its SHA-256, quoted."""
    return f'"{hashlib.sha256(content).hexdigest()[:24]}"'


def none_match_hits(field: str, etag: str) -> bool:
    """Whether an If-None-Match field matches ``etag`` ("*", or weakly equal to one tag)."""
    if field.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(f'"{tag}"' == opaque for tag in _ENTITY_TAG.findall(field))


def not_modified(
    etag: str,
    last_modified: datetime,
    if_none_match: str | None,
    if_modified_since: str | None,
) -> bool:
    """Whether a GET or HEAD with these conditions is answered 304 (module docstring)."""
    if if_none_match is not None:
        return none_match_hits(if_none_match, etag)  # IMS is then ignored (13.1.3)
    if if_modified_since is None:
        return False
    since = parse_http_date(if_modified_since)
    if since is None:
        return False
    return int(last_modified.timestamp()) <= since.timestamp()
