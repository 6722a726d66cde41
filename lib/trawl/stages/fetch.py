"""fetch: run the segment's fetch tasks on the executors.

The fetch list's ``task`` column decides which executor task fetches which
host group; the RDD is partitioned by exactly that number (an identity
partitioner), so one task owns all politeness state of its hosts and no two
tasks ever talk to one host. Each partition runs ``trawl.fetch.task`` and
writes its own WARC file under ``segments/<id>/warc/``. The segment's
counters are made here too, in one pass (``fetch_counters``).

With ``fetch.follow_depth`` and ``fetch.follow_new_hosts`` on, every task is
also told crawldb's hosts and domains and which task serves each of the
fetch list's addresses (``new_host_scope``), so that it may start hosts
crawldb has never seen (``trawl.fetch.claims``); the tasks claim the other
addresses in ``segments/<id>/claims/`` (local and mounted roots).
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from trawl.config import Config
from trawl.dedup import soft404
from trawl.fetch.claims import KNOWN_HOSTS_MAX, NewHostScope
from trawl.fetch.rules import policy_source
from trawl.fetch.task import run_fetch_task
from trawl.stages.common import StageContext, concurrently
from trawl.store.files import Claims, FetchPlaces
from trawl.store.schemas import FETCH_SCHEMA

log = logging.getLogger(__name__)


def fetch_partitions(
    fetchlist: DataFrame,
    cfg: Config,
    segment: str,
    places: FetchPlaces | None,
    deadline: float,
    scope: NewHostScope | None = None,
) -> DataFrame:
    """Run the fetch tasks. ``places``: the crawl root the tasks write their
    WARC files to and whose policy table they re-read while they run (None:
    neither, for tests of the fetching alone); ``scope`` lets them start
    hosts crawldb does not know (None: none)."""
    tasks = max(1, cfg.fetch.tasks)
    names = FETCH_SCHEMA.fieldNames()
    shared = fetchlist.sparkSession.sparkContext.broadcast(scope) if scope else None

    def run(task: int, rows: Iterable[tuple[int, Row]]) -> Iterator[tuple[Any, ...]]:
        # recursive: struct columns (stored_capture) become dicts, as the fetcher reads them
        items: Iterable[dict[str, Any]] = [row.asDict(recursive=True) for _, row in rows]
        remaining = max(0.0, deadline - time.time())
        policy = policy_source(places.root) if places is not None else None
        warc = places.open_warc if places is not None else None
        here = shared.value if shared is not None else None
        report = functools.partial(places.write_progress, task) if places is not None else None
        index = places.open_index if places is not None else None
        for record in run_fetch_task(
            items, cfg, segment, task, warc, remaining, policy, here, report, index
        ):
            yield tuple(record.get(name) for name in names)

    keyed = fetchlist.rdd.map(lambda row: (int(row["task"]) % tasks, row))
    parts = keyed.partitionBy(tasks, lambda key: key).mapPartitionsWithIndex(run)
    return fetchlist.sparkSession.createDataFrame(parts, FETCH_SCHEMA)


def new_host_scope(
    crawldb: DataFrame, fetchlist: DataFrame, cfg: Config, claims: Claims | None = None
) -> NewHostScope | None:
    """What the tasks need to start hosts crawldb does not know: its hosts
    and their registered domains, each fetch-list address's task, and the
    place where they claim other addresses (``claims``). None
    when following is off, or crawldb knows over ``KNOWN_HOSTS_MAX`` hosts
    (their names are not shipped to every task; links to new hosts then
    wait for updatedb)."""
    if not cfg.fetch.starts_new_hosts:
        return None
    tasks = max(1, cfg.fetch.tasks)
    known = crawldb.select("host", "domain").distinct().limit(KNOWN_HOSTS_MAX + 1)
    addresses = fetchlist.filter(F.col("ip").isNotNull()).select("ip", "task").distinct()
    pairs, listed = concurrently(known.collect, addresses.collect)
    if len(pairs) > KNOWN_HOSTS_MAX:
        log.warning("crawldb knows over %d hosts: no new host starts in this segment",
                    KNOWN_HOSTS_MAX)  # fmt: skip
        return None
    return NewHostScope(
        known_hosts=frozenset(str(r["host"]) for r in pairs),
        known_domains=frozenset(str(r["domain"]) for r in pairs if r["domain"]),
        owners={str(r["ip"]): int(r["task"]) % tasks for r in listed},
        tasks=tasks,
        claims=claims,
    )


def fetch(
    fetchlist: DataFrame,
    ctx: StageContext,
    places: FetchPlaces,
    time_limit_s: float | None = None,
    scope: NewHostScope | None = None,
) -> DataFrame:
    """The segment's fetch rows, fetched when the frame is written; ``scope``
    from ``new_host_scope`` (None: no host starts)."""
    limit = ctx.cfg.fetch.time_limit_s if time_limit_s is None else time_limit_s
    # The time limit is an operational bound on this run, not logical time.
    deadline = time.time() + limit
    return fetch_partitions(fetchlist, ctx.cfg, ctx.segment, places, deadline, scope)


def started_hosts(rows: DataFrame, fetchlist: DataFrame) -> int:
    """Hosts the segment's tasks started (``fetch.follow_new_hosts``): those
    of its fetch rows that its fetch list does not have."""
    listed = fetchlist.select("host").distinct()
    return rows.select("host").distinct().join(listed, "host", "left_anti").count()


def fetch_counters(rows: DataFrame) -> tuple[list[tuple[str, int]], int]:
    """(the fetch job's counters, rows failed with an internal error), from
    ONE grouped pass over the segment's fetch rows (each Spark job costs more
    than the counting):

    - ``fetch/<kind>/<outcome>``: every row;
    - ``fetch/status/<code>``: answered requests, probes left out;
    - ``robots/<decision>``: the robots.txt decision of each URL;
    - ``fetch/followed``: pages reached by a link within the segment
      (``fetch.follow_depth``), whatever their outcome (``fetch/requisite/*``
      counts the requisites, ``requisites.capture``);
    - ``fetch/why/<outcome>/<why>``: why URLs were not fetched or failed (the
      error's kind: "policy", "address", "timeout", "time_limit", ...);
    - the soft-404 probes' and soft 404s' (``trawl.dedup.soft404.probe_counters``).
      A probe is never a page: page and status counters leave it out.
    """
    probe = F.col("kind") == "probe"
    error = F.col("error")
    grouped = rows.groupBy(
        "kind",
        "outcome",
        "http_status",
        "robots_decision",
        F.when(~probe, F.substring_index(error, ":", 1)).alias("why"),
        F.when(probe, error).alias("probe_error"),
        F.coalesce(F.col("soft404"), F.lit(False)).alias("soft404"),
        F.coalesce(error.startswith("internal:"), F.lit(False)).alias("internal"),
        (F.col("linked_from").isNotNull() & (F.col("kind") == "page")).alias("linked"),
    ).count()
    counts: Counter[str] = Counter()
    probes: list[tuple[int | None, str | None, int]] = []
    soft404_pages = internal = 0
    for r in grouped.collect():
        n = int(r["count"])
        counts[f"fetch/{r['kind']}/{r['outcome'] or 'none'}"] += n
        if r["kind"] == "probe":
            probes.append((r["http_status"], r["probe_error"], n))
        else:
            if r["http_status"] is not None:
                counts[f"fetch/status/{r['http_status']}"] += n
            if r["why"] is not None:
                counts[f"fetch/why/{r['outcome']}/{r['why']}"] += n
        if r["robots_decision"] is not None:
            counts[f"robots/{r['robots_decision']}"] += n
        if r["linked"]:
            counts["fetch/followed"] += n
        soft404_pages += n if r["soft404"] else 0
        internal += n if r["internal"] else 0
    return [*counts.items(), *soft404.probe_counters(probes, soft404_pages)], internal
