"""HTTP-dates (RFC 9110 5.6.7): formatting as IMF-fixdate and lenient parsing."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime


def http_date(at: datetime) -> str:
    """``at`` as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), fractions dropped."""
    return format_datetime(at.astimezone(UTC).replace(microsecond=0), usegmt=True)


def parse_http_date(value: str | None) -> datetime | None:
    """An HTTP-date (any of the three RFC 9110 forms) as an aware UTC datetime,
    or None if it is not one; a date without a zone is taken as UTC."""
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
