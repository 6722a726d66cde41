"""Export: the captures archive builders ask for, copied into new WARC files
(``trawl export warc``) or packed as a WACZ (``trawl export wacz``).

``select_captures`` is the Spark half: the page fetches of the chosen
segments that have a WARC record (a response or revisit), filtered by capture
time (WARC-Date, the fetch's ``fetched_at``), host, registered domain, HTTP
status and duplicate state (crawldb's ``duplicate_of``: a page trawl's dedup
holds to be a copy of another). The copying itself is ``trawl.warc.lookup``,
record for record and byte for byte, on the driver: WARC files are written
on local (or mounted) disks, as the fetch stage writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Selection:
    """What ``trawl export warc|wacz`` was asked for (empty: no restriction)."""

    segments: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    hosts: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()  # "200", "404", "3xx" ...
    duplicates: bool = True

    def describe(self) -> dict[str, str]:
        """The selection as warcinfo fields."""
        out = {"isPartOf": "export"}
        if self.segments:
            out["segments"] = " ".join(self.segments)
        if self.since:
            out["capturedSince"] = self.since.isoformat()
        if self.until:
            out["capturedUntil"] = self.until.isoformat()
        if self.hosts:
            out["hosts"] = " ".join(self.hosts)
        if self.domains:
            out["domains"] = " ".join(self.domains)
        if self.statuses:
            out["statuses"] = " ".join(self.statuses)
        out["duplicates"] = "included" if self.duplicates else "excluded"
        return out


def parse_statuses(values: Sequence[str]) -> tuple[str, ...]:
    """``200``, ``404`` or a class ``2xx``; comma-separated lists allowed."""
    out = []
    for value in (v.strip().lower() for text in values for v in text.split(",")):
        if not value:
            continue
        if not (
            len(value) == 3 and value[0] in "12345" and (value[1:].isdigit() or value[1:] == "xx")
        ):
            raise ValueError(f"--status wants a code (404) or a class (4xx), got {value!r}")
        out.append(value)
    return tuple(out)


def _status_filter(statuses: Sequence[str]) -> Column:
    status = F.col("http_status")
    terms = [
        (F.floor(status / 100) == int(s[0])) if s.endswith("xx") else (status == int(s))
        for s in statuses
    ]
    out = terms[0]
    for term in terms[1:]:
        out = out | term
    return out


def select_captures(fetch: DataFrame, crawldb: DataFrame, selection: Selection) -> DataFrame:
    """(segment, warc_file, warc_offset, url, http_status) of every selected
    capture, from the chosen segments' fetch rows (with their ``segment``),
    and what a WACZ page list says of it: ``fetched_us`` (the capture time,
    WARC-Date, in microseconds since the epoch: no time zone on the way to
    Python), ``content_type`` and ``title``.

    Page requisites (``requisites.capture``) go with the pages: one is
    selected by time and status as a page is, and by host and domain either
    itself or through the page whose capture fetched it (``linked_from``),
    so that an export of a site keeps the images it shows from elsewhere."""
    rows = fetch.filter(F.col("kind").isin("page", "requisite") & F.col("warc_file").isNotNull())
    if selection.since:
        rows = rows.filter(F.col("fetched_at") >= F.lit(selection.since))
    if selection.until:
        rows = rows.filter(F.col("fetched_at") < F.lit(selection.until))
    if selection.statuses:
        rows = rows.filter(_status_filter(selection.statuses))
    requisites = rows.filter(F.col("kind") == "requisite")
    rows = rows.filter(F.col("kind") == "page")
    if selection.hosts:
        rows = rows.filter(F.col("host").isin(list(selection.hosts)))
    if selection.domains or not selection.duplicates:
        rows = rows.join(crawldb.select("url", "domain", "duplicate_of"), "url", "left")
        if selection.domains:
            rows = rows.filter(F.col("domain").isin(list(selection.domains)))
        if not selection.duplicates:
            rows = rows.filter(F.col("duplicate_of").isNull())
    if selection.hosts or selection.domains:
        own = F.lit(True)
        if selection.hosts:
            own = own & F.col("host").isin(list(selection.hosts))
        if selection.domains:
            own = own & F.col("domain").isin(list(selection.domains))
        pages = rows.select(F.col("url").alias("linked_from")).distinct()
        requisites = requisites.join(crawldb.select("url", "domain"), "url", "left").join(
            pages.withColumn("_page", F.lit(True)), "linked_from", "left"
        )
        requisites = requisites.filter(own | F.col("_page").isNotNull())
    columns = (
        "segment", "warc_file", "warc_offset", "url", "http_status",
        F.unix_micros("fetched_at").alias("fetched_us"), "content_type", "title",
    )  # fmt: skip
    return rows.select(*columns).unionByName(requisites.select(*columns))
