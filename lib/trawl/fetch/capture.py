"""A visit's exchange in the fetch task's WARC files: capture or revisit, and its metadata.

The raw exchange of every visit goes to WARC once its outcome is known (the
body is read in full by then), in the task's file for that outcome
(``warc.SUBSETS``): robots.txt with robots.txt, pages and 304s with the pages,
everything else with the diagnostics -- a soft 404 goes with the 404s, not
with the pages. With ``warc.revisits``, a 304 is a server-not-modified
revisit of the stored copy (the fetch list's ``stored_capture``), and a 200
whose payload is the stored copy's, or one this task already archived, or
one an earlier segment stored for a requisite of the host
(``requisites_stored``), an identical-payload-digest revisit of that record.
With ``warc.metadata``, a page's capture gets a ``metadata`` record beside its
response; a fetch that got no response leaves one in the diagnostics.

``task_archive`` opens the task's files; ``FetchArchive`` writes to them and
is shared by the task's worker threads, as the fetcher that holds it is: the
``TaskArchive`` is not thread-safe, so every write goes through its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from trawl import __version__
from trawl.config import WarcConfig
from trawl.crawldb.status import FetchOutcome
from trawl.fetch.row import Row
from trawl.net.response import HttpResponse
from trawl.warc.archive import Opener, TaskArchive
from trawl.warc.fields import payload_digest
from trawl.warc.writer import REVISIT_IDENTICAL, REVISIT_NOT_MODIFIED, Stored, WarcWriter

Capture = tuple[WarcWriter, str]  # the file a capture went to, and its response's record id


def _stored(capture: Mapping[str, Any]) -> Stored | None:
    """The fetch list's ``stored_capture`` as a revisit's target (None if incomplete)."""
    if not (capture.get("record_id") and capture.get("uri") and capture.get("date")):
        return None
    return Stored(str(capture["record_id"]), str(capture["uri"]), str(capture["date"]))


def _capture(stored: Stored, digest: str) -> Row:
    """A ``stored_capture`` value (schemas.CAPTURE_TYPE) for the fetch row."""
    return {"record_id": stored.record_id, "uri": stored.target_uri, "date": stored.date,
            "digest": digest}  # fmt: skip


def task_archive(
    cfg: WarcConfig, place: str | Opener, segment: str, task: int, agent: str,
    index: Opener | None = None,
) -> TaskArchive:  # fmt: skip
    """The fetch task's WARC files; their ``warcinfo`` names the segment, the
    robots.txt policy (obeyed) and ``agent``, the User-Agent sent.
    ``index``: where each file's CDXJ index goes (``TaskArchive``)."""
    return TaskArchive(
        place,
        segment,
        task,
        software=f"trawl/{__version__}",
        prefix=cfg.prefix,
        max_file_bytes=cfg.max_file_bytes,
        operator=cfg.operator or None,
        extra_info={
            "isPartOf": segment,
            "robots": "obey",
            "http-header-user-agent": agent,
        },
        index=index,
    )


def subset_for(outcome: FetchOutcome) -> str:
    """The task's WARC file for a page fetch with this outcome (``warc.SUBSETS``):
    pages and 304s with the pages, everything else with the diagnostics."""
    if outcome in (FetchOutcome.SUCCESS, FetchOutcome.NOTMODIFIED):
        return "warc"
    return "crawldiagnostics"


class FetchArchive:
    """The task's WARC files as the fetcher writes them (none: nothing is written)."""

    def __init__(self, warc: TaskArchive | None, cfg: WarcConfig) -> None:
        self.warc = warc
        self.cfg = cfg
        self._lock = threading.Lock()
        # payload digest -> a record of an earlier segment holding it (``know``)
        self._earlier: dict[str, Stored] = {}

    def know(self, captures: Iterable[Mapping[str, Any]]) -> None:
        """Copies earlier segments stored (``stored_capture`` values: the
        fetch list's ``requisites_stored``): a payload fetched again under
        another URL is archived as a revisit of one of them."""
        with self._lock:
            for capture in captures:
                stored = _stored(capture)
                digest = capture.get("digest")
                if stored is not None and digest:
                    self._earlier.setdefault(str(digest), stored)

    def exchange(
        self,
        url: str,
        resp: HttpResponse,
        fetched_at: datetime,
        subset: str,
        item: Mapping[str, Any] | None = None,
    ) -> tuple[Row, Capture | None]:
        """Write the exchange to the task's ``subset`` file: a response and its
        request, or a revisit. A 304 is a server-not-modified revisit of the
        stored copy (``item["stored_capture"]``, the fetch list's); a 200 whose
        payload is the stored copy's, or one this task already archived, is an
        identical-payload-digest revisit of that record. Returns the fetch
        row's WARC fields and the (file, record) written."""
        if self.warc is None:
            return {}, None
        known = (item or {}).get("stored_capture")
        previous = _stored(known) if known else None
        exchange: dict[str, Any] = {
            "url": url,
            "ip": resp.ip,
            "fetched_at": fetched_at,
            "request_head": resp.request_head,
            "status_line": f"{resp.http_version} {resp.status} {resp.reason}",
            "response_headers": resp.headers,
        }
        revisits = self.cfg.revisits
        stored: Row | None = None  # the record a later revisit of this copy names
        with self._lock:
            writer = self.warc.writer(subset)
            if revisits and resp.status == 304:
                ref = writer.write_revisit(
                    **exchange, profile=REVISIT_NOT_MODIFIED, refers_to=previous
                )
            else:
                digest = payload_digest(resp.raw_body)
                earlier = None
                if revisits and subset == "warc" and not resp.truncated:
                    same = previous is not None and (known or {}).get("digest") == digest
                    earlier = (
                        previous if same else self.warc.stored(digest) or self._earlier.get(digest)
                    )
                if earlier is not None:
                    ref = writer.write_revisit(
                        **exchange, profile=REVISIT_IDENTICAL, digest=digest, refers_to=earlier
                    )
                    stored = _capture(earlier, digest)
                else:
                    ref = writer.write_exchange(
                        **exchange, body=resp.raw_body, truncated=resp.truncated
                    )
                    if subset == "warc" and not resp.truncated:
                        self.warc.remember(digest, ref, url, fetched_at)
                        stored = _capture(Stored.of(ref, url, fetched_at), digest)
        fields = {
            "warc_file": ref.file,
            "warc_offset": ref.offset,
            "warc_length": ref.length,
            "stored_capture": stored,
        }
        return fields, (writer, ref.record_id)

    def metadata(self, url: str, fetched_at: datetime, row: Row, capture: Capture) -> None:
        """The capture's ``metadata`` record, beside its response (same file):
        timings, the robots decision, whether the content changed, outlinks."""
        if not self.cfg.metadata:
            return
        fields: list[tuple[str, str]] = [
            ("ip", str(row.get("ip") or "")),
            ("fetchTimeMs", str(round((row.get("elapsed_s") or 0.0) * 1000))),
            ("ttfbMs", str(round((row.get("ttfb_s") or 0.0) * 1000))),
            ("robots", str(row.get("robots_decision") or "")),
        ]
        if row.get("changed") is not None:
            fields.append(("changed", "yes" if row["changed"] else "no"))
        if row.get("robots_meta"):
            fields.append(("robotsMeta", str(row["robots_meta"])))
        fields += [("outlink", str(link["url"])) for link in row.get("outlinks") or ()]
        writer, record_id = capture
        with self._lock:
            writer.write_metadata(
                url=url, fetched_at=fetched_at, fields=fields, concurrent_to=record_id
            )

    def failure(self, url: str, ip: str, fetched_at: datetime, row: Row) -> None:
        """A fetch that got no response: a metadata record in crawldiagnostics."""
        if self.warc is None:
            return
        fields = [("fetchError", str(row.get("error") or "")), ("ip", ip)]
        with self._lock:
            self.warc.writer("crawldiagnostics").write_metadata(
                url=url, fetched_at=fetched_at, fields=fields
            )
