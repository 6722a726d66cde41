"""The kill harness (issue 30): run ``trawl`` as a user does, kill its whole
process tree at a fault point or a moment, and check what the crawl kept.

``trawl cycle`` runs as a subprocess in a session of its own and is killed
with SIGKILL -- every process of its session: driver, JVM and the PySpark
workers, whose daemon makes a process group of its own -- at a fault point
(``trawl.faults``: ``TRAWL_FAULT_KILL``) or some seconds after a progress
line. ``check_crawl`` then compares the crawl left, table by table and read
without a JVM (``trawl.store.lake``), with an uninterrupted crawl of the
same web at the same logical times, and lists what is wrong per check:
a URL lost, a fetch row, event or WARC record doubled, a segment half
merged, a WARC file that does not read to its end, a reference into the
archive that does not land on its record, a lease left behind.

``tests/runner/test_kills.py`` runs one chain of kills at fixed points;
``bench/bench_kills.py`` runs chains of kills at random moments over many
seeds and records how many were survived.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from warcio.checker import Checker

from trawl.store.files import CrawlRoot, warc_files, warc_record, warc_rel
from trawl.store.lake import open_lake
from trawl.store.lease import LEASE_FILE
from trawl.testweb import TestWeb, WebModel
from trawl.warc.reader import check_file, iter_records
from trawl.warc.writer import WarcRef

LIB = Path(__file__).resolve().parents[2]  # the folder that holds trawl
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
STEP = timedelta(hours=1)
CYCLES = 2
JOBS = ("generate", "fetch", "updatedb", "dedup", "events")


# --- the web and the commands ---------------------------------------------------------


def small_web(seed: int = 11) -> WebModel:
    """Five hosts on two addresses, 21 pages for seed 11. No throttled hosts (their 429s
    depend on the wall clock) and no Crawl-delay (seconds per page): what
    the crawl fetches depends on the web alone."""
    return WebModel.generate(
        seed, hosts=5, ips=2, pages_per_host=(3, 6), throttled=0.0, crawl_delays=0.0
    )


def settings(web: TestWeb) -> list[str]:
    return [
        f"dns.hosts_file={web.hosts_file}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        "politeness.min_delay_s=0.1",
        "fetch.time_limit_s=60",
        "generate.max_per_host=6",
        "crawl.host_buckets=4",
        "spark.master=local[2]",
        "spark.shuffle_partitions=2",
    ]


def command(job: str, root: str, web: TestWeb, cycle: int = 1) -> list[str]:
    """``trawl cycle`` (all cycles from AT, seeds injected), or one job on
    cycle ``cycle``'s segment."""
    sets = [a for s in settings(web) for a in ("--set", s)]
    head = [sys.executable, "-m", "trawl.cli", job, "--crawl", root]
    if job == "cycle":
        return [
            *head,
            "--seeds",
            str(web.seeds_file),
            "--cycles",
            str(CYCLES),
            "--at",
            AT.isoformat(),
            *sets,
        ]
    at = AT + (cycle - 1) * STEP
    return [*head, "--at", at.isoformat(), "--segment", segment_of(at), *sets]


def segment_of(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def environment(fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.lower() not in _PROXIES}
    env.pop("TRAWL_FAULT_KILL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LIB), env.get("PYTHONPATH")]))
    if fault:
        env["TRAWL_FAULT_KILL"] = fault
    return env


_PROXIES = ("http_proxy", "https_proxy", "no_proxy")  # the web is on loopback


# --- one run, killed -----------------------------------------------------------------


@dataclass(frozen=True)
class Aim:
    """Where to kill a run: at a fault point (``fault``, as TRAWL_FAULT_KILL
    names it), or ``after_s`` seconds after the ``nth`` progress line that
    contains ``line`` (no ``line``: after the start)."""

    fault: str | None = None
    line: str | None = None
    nth: int = 1
    after_s: float | None = None


@dataclass
class Run:
    command: list[str]
    aim: Aim | None
    pid: int
    returncode: int
    seconds: float
    killed_at_s: float | None  # when the harness sent SIGKILL, if it did
    progress: list[str]  # the [trawl] lines, in order
    tail: list[str]  # the last lines of stderr
    stray: int  # processes of its session still there when the driver was gone
    lease_before: dict[str, Any] | None = None  # the crawl's lease when it started
    lease_after: dict[str, Any] | None = None  # and when it had ended

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def milestones(self) -> list[str]:
        """``"1"`` once cycle 1 starts, ``"1/fetch"`` once its fetch is done, ..."""
        out: list[str] = []
        for line in self.progress:
            if m := re.match(r"\[trawl\] cycle (\d+)/", line):
                out.append(m[1])
            elif (m := re.match(r"\[trawl\]   (\w+): ", line)) and m[1] in JOBS and out:
                out.append(f"{out[-1].split('/')[0]}/{m[1]}")
        return out

    @property
    def stage(self) -> str:
        """The stage the run was in when it ended: the one after its last milestone."""
        done = self.milestones
        if not done:
            return "start"
        cycle, _, last = done[-1].partition("/")
        after = JOBS.index(last) + 1 if last else 0
        return f"{cycle}/{JOBS[after]}" if after < len(JOBS) else f"{cycle}/end"


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live process of session ``sid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # state ppid pgrp session ...
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append((int(entry.name), int(fields[2])))
    return found


def kill_session(sid: int) -> int:
    """SIGKILL every process group of session ``sid``; how many processes it had."""
    members = session_members(sid)
    for group in {g for _, g in members}:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    return len(members)


def reap_session(sid: int, timeout_s: float = 30.0) -> int:
    """Kill what is left of session ``sid`` until nothing is; how many were left."""
    left = len(session_members(sid))
    deadline = time.monotonic() + timeout_s
    while kill_session(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def run_once(argv: list[str], aim: Aim | None, root: str, timeout_s: float = 900) -> Run:
    """Run ``argv`` in a new session, kill it as ``aim`` says, wait, and
    clear up what is left of its session."""
    fault = aim.fault if aim else None
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=environment(fault),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    progress: list[str] = []
    tail: list[str] = []
    killed_at: list[float] = []

    def kill() -> None:
        if proc.poll() is None:
            killed_at.append(time.monotonic() - started)
            kill_session(proc.pid)

    timers = []

    def arm() -> None:
        assert aim is not None and aim.after_s is not None
        timers.append(threading.Timer(aim.after_s, kill))
        timers[-1].start()

    if aim and aim.after_s is not None and aim.line is None:
        arm()
    seen = 0
    assert proc.stderr is not None
    with proc:
        for line in proc.stderr:
            line = line.rstrip("\n")
            tail = [*tail[-59:], line]
            if line.startswith("[trawl]"):
                progress.append(line)
                if aim and aim.line and aim.line in line:
                    seen += 1
                    if seen == aim.nth:
                        arm()
        code = proc.wait(timeout=timeout_s)
    for timer in timers:
        timer.cancel()
    stray = reap_session(proc.pid)
    return Run(
        argv,
        aim,
        proc.pid,
        code,
        round(time.monotonic() - started, 1),
        round(killed_at[0], 1) if killed_at else None,
        progress,
        tail,
        stray,
        lease_after=read_lease(root),
    )


def read_lease(root: str) -> dict[str, Any] | None:
    path = Path(root) / LEASE_FILE
    return json.loads(path.read_text()) if path.exists() else None


# --- the checks ----------------------------------------------------------------------

CHECKS = (
    "urls", "statuses", "crawldb_rows", "hostdb", "content", "fetch_unique", "fetch_rows",
    "events_unique", "events", "counters", "last_segment", "warc_files", "warc_responses",
    "warc_refs", "captures", "lease",
)  # fmt: skip
# crawldb's columns that an uninterrupted crawl of this web sets the same way
# every time (not the timings, not hostdb's delays)
CRAWLDB_COLUMNS = (
    "url",
    "status",
    "depth",
    "fetches",
    "retries",
    "last_segment",
    "generated_segment",
    "http_status",
    "content_sha256",
    "duplicate_of",
)


@dataclass
class Verdict:
    problems: dict[str, list[str]]  # check -> what is wrong (empty: it held)
    notes: dict[str, Any] = field(default_factory=dict)  # figures that are no check

    @property
    def failed(self) -> list[str]:
        return [name for name in CHECKS if self.problems.get(name)]


def table(root: CrawlRoot, query: str) -> list[tuple[Any, ...]]:
    lake = open_lake(root)
    try:
        return [tuple(r.values()) for r in lake.rows(query)]
    finally:
        lake.close()


def differ(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], limit: int = 5) -> list[str]:
    """The rows one side has and the other not (as multisets), a few of each."""
    a, b = Counter(got), Counter(want)
    lost, extra = list((b - a).elements()), list((a - b).elements())
    return [f"missing {r}" for r in sorted(lost, key=str)[:limit]] + [
        f"extra {r}" for r in sorted(extra, key=str)[:limit]
    ]


def doubled(rows: list[tuple[Any, ...]], limit: int = 5) -> list[str]:
    return [f"{n} times {k}" for k, n in Counter(rows).items() if n > 1][:limit]


def compared(crawl: CrawlRoot, reference: CrawlRoot) -> dict[str, list[str]]:
    """The checks against the uninterrupted crawl."""
    queries = {
        "urls": "SELECT url FROM crawldb",
        "statuses": "SELECT url, status FROM crawldb",
        "crawldb_rows": f"SELECT {', '.join(CRAWLDB_COLUMNS)} FROM crawldb",
        "hostdb": "SELECT host, robots_status FROM hostdb",
        "content": "SELECT content_sha256 FROM content",
        "fetch_rows": "SELECT segment, kind, url, outcome, http_status FROM fetch",
        "events": "SELECT segment, event, url, status FROM events",
    }
    return {name: differ(table(crawl, q), table(reference, q)) for name, q in queries.items()}


def within(crawl: CrawlRoot) -> dict[str, list[str]]:
    """The checks of the crawl on its own: nothing doubled, nothing half merged."""
    # a robots.txt answered 5xx is fetched again in the segment (each try a
    # row): those are compared with the reference's, not counted here
    fetch = table(crawl, "SELECT segment, url, kind FROM fetch WHERE kind <> 'robots'")
    segments = sorted({r[0] for r in fetch})
    counted = set(table(crawl, "SELECT DISTINCT segment, job FROM counters"))
    updated = {s for s, j in counted if j == "updatedb"}
    stale = table(crawl, "SELECT url, last_segment FROM crawldb WHERE last_segment IS NOT NULL")
    return {
        "fetch_unique": doubled(fetch),
        "events_unique": doubled(table(crawl, "SELECT segment, event, url FROM events")),
        "counters": [
            f"{s}: no {j} counters" for s in segments for j in JOBS if (s, j) not in counted
        ],
        "last_segment": [f"{u} names {s}, not merged" for u, s in stale if s not in updated][:5],
        "lease": [f"left: {read_lease(crawl.uri)}"] if read_lease(crawl.uri) else [],
    }


def archived(
    crawl: CrawlRoot,
) -> tuple[dict[str, list[str]], dict[str, Any], list[tuple[Any, ...]]]:
    """The checks of the WARC files, and of every reference into them; and
    the response records, (segment, target URI) each."""
    problems: dict[str, list[str]] = {
        "warc_files": [],
        "warc_responses": [],
        "warc_refs": [],
        "captures": [],
    }
    uri_of: dict[str, str | None] = {}  # WARC-Record-ID -> WARC-Target-URI
    responses: list[tuple[Any, ...]] = []
    partial = 0
    for segment in crawl.dirs("segments"):
        folder = crawl.local_path(warc_rel(segment))
        assert folder is not None
        partial += sum(1 for p in folder.glob(".*.open")) if folder.exists() else 0
        for name in warc_files(crawl, segment):
            path = folder / name
            broken = check_file(path) + warcio_check(path)
            problems["warc_files"] += broken
            if broken:  # its records cannot all be read: the check above says so
                continue
            for record in iter_records(path, verify=False):
                uri_of[record.header("WARC-Record-ID") or ""] = record.target_uri
                if record.rec_type == "response":
                    responses.append((segment, record.target_uri))
    refs = table(
        crawl,
        "SELECT url, warc_file, warc_offset, warc_length FROM fetch "
        "WHERE warc_file IS NOT NULL UNION ALL SELECT url, warc_ref.file, "
        "warc_ref.offset, warc_ref.length FROM events WHERE warc_ref.file IS NOT NULL",
    )
    for url, *where in refs:
        try:
            record, _ = warc_record(crawl, WarcRef(*where))
            if record.target_uri != url:
                problems["warc_refs"].append(f"{url} -> {where}: {record.target_uri}")
        except (OSError, ValueError) as exc:
            problems["warc_refs"].append(f"{url} -> {where}: {exc}")
    captures = table(
        crawl,
        "SELECT url, stored_capture.record_id, stored_capture.uri FROM "
        "crawldb WHERE stored_capture.record_id IS NOT NULL",
    )
    problems["captures"] = [
        f"{u}: record {r} is not archived" for u, r, t in captures if uri_of.get(r) != t
    ][:5]
    notes = {"warc_refs": len(refs), "captures": len(captures), "partial_warc_files": partial}
    return problems, notes, responses


def warcio_check(path: Path) -> list[str]:
    """What ``warcio check`` says of the file (every record read through and
    its digests checked, as archive tools would), [] when it passes."""
    said = io.StringIO()
    checker = Checker(SimpleNamespace(inputs=[str(path)], verbose=False))
    with contextlib.redirect_stdout(said):
        failed = checker.process_all()
    return [f"warcio check {path.name}: {' '.join(said.getvalue().split())}"] if failed else []


def check_crawl(crawl: CrawlRoot, reference: CrawlRoot) -> Verdict:
    """Every check of ``crawl`` against the uninterrupted ``reference``."""
    warc, notes, responses = archived(crawl)
    # a response archived twice (a task's WARC file written again, or kept
    # beside its rewrite), or lost: the multisets differ
    warc["warc_responses"] = differ(responses, archived(reference)[2])
    problems = {**compared(crawl, reference), **within(crawl), **warc}
    notes["counter_values_differ"] = differ(
        table(crawl, "SELECT segment, job, name, value FROM counters WHERE job <> 'inject'"),
        table(reference, "SELECT segment, job, name, value FROM counters WHERE job <> 'inject'"),
    )
    return Verdict({name: problems[name] for name in CHECKS}, notes)


# --- the chain of kills --------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    name: str
    job: str  # "cycle", or the stage re-run alone
    aim: Aim | None
    stage: str  # where the run must have been when it ended (Run.stage)
    returncode: int = -signal.SIGKILL


def run_chain(chain: tuple[Kill, ...], web: TestWeb, root: str) -> list[Run]:
    runs = []
    for kill in chain:
        before = read_lease(root)
        run = run_once(command(kill.job, root, web), kill.aim, root)
        run.lease_before = before
        runs.append(run)
    return runs
