"""Kill tests (issue 30): a crawl killed anywhere, then re-run, loses nothing
and doubles nothing.

One chain of crashes at fixed points (``trawl.devtools.kills`` runs and
checks them): each run is killed further on than the last, the next one
(the same ``trawl cycle``, or after a kill inside updatedb ``trawl updatedb``
alone, as an operator would) recovers from it, and a last run completes. A
JVM costs 15-20 s to start, so a chain of seven kills takes eight runs where
seven kills with a re-run each would take fourteen. The crawl left is
compared with an uninterrupted crawl of the same web at the same logical
times, which runs in this process (the shared ``spark``) while the chain
runs.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trawl.cli import EXIT_IN_USE
from trawl.devtools.kills import (
    AT,
    CYCLES,
    STEP,
    Aim,
    Kill,
    Run,
    Verdict,
    check_crawl,
    run_chain,
    segment_of,
    settings,
    small_web,
    table,
)
from trawl.store.files import CrawlRoot, warc_files, warc_rel
from trawl.store.lease import LEASE_FILE
from trawl.testweb import TestWeb

pytestmark = pytest.mark.crawl  # Spark crawls of the test web


CHAIN = (
    # generate's MERGE that marks the chosen URLs, about to commit (the first
    # MERGE into crawldb is inject's): the fetch list is written whole
    Kill("merge:crawldb", "cycle", Aim(fault="merge:crawldb@2"), "1/generate"),
    # in a fetch task, a page's response written, its request not, its WARC
    # file open. SIGKILL takes the PySpark worker daemon's process group, not
    # the driver's: Spark fails the task, local mode does not retry it, and
    # the run ends with exit 1, the WARC file left half written under its
    # hidden name
    Kill("warc:mid-file", "cycle", Aim(fault="warc:mid-file@5"), "1/fetch", returncode=1),
    # the fetch done and its table's files written, the completion marker not
    Kill("unmarked:fetch", "cycle", Aim(fault="unmarked:fetch"), "1/fetch"),
    # a stage kill, aimed by the progress lines: 6 s into updatedb (20 s or more)
    Kill("in updatedb", "cycle", Aim(line="  fetch: ", after_s=6.0), "1/updatedb"),
    # updatedb alone, killed just after crawldb's MERGE committed, before it counted
    Kill("merged:crawldb", "updatedb", Aim(fault="merged:crawldb"), "start"),
    # dedup, the new contents MERGEd into content, crawldb's duplicate marks not
    Kill("merged:content", "cycle", Aim(fault="merged:content"), "1/dedup"),
    # events MERGEd, their counters not written: a re-run that appended the
    # segment's events again would double every one of them
    Kill("merged:events", "cycle", Aim(fault="merged:events"), "1/events"),
    Kill("completes", "cycle", None, "2/end", returncode=0),
)


def reference_crawl(spark: Any, web: TestWeb, root: str) -> None:
    from trawl.config import load_config
    from trawl.runner import JobContext, run_cycles, run_inject

    first = JobContext(spark, load_config(None, settings(web)), root, segment_of(AT), AT)
    run_inject(first, [str(web.seeds_file)])
    run_cycles(first, CYCLES, STEP)


@dataclass
class Chain:
    root: CrawlRoot
    reference: CrawlRoot
    runs: list[Run]
    verdict: Verdict


@pytest.fixture(scope="module")
def chain(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    out = tmp_path_factory.mktemp("kills")
    # the reference crawl in this process's JVM while the chain runs
    with TestWeb(small_web(), out / "web", n_seeds=5) as web, ThreadPoolExecutor(1) as pool:
        reference = pool.submit(reference_crawl, spark, web, str(out / "reference"))
        runs = run_chain(CHAIN, web, str(out / "killed"))
        reference.result()
    root, ref = CrawlRoot.of(str(out / "killed")), CrawlRoot.of(str(out / "reference"))
    yield Chain(root, ref, runs, check_crawl(root, ref))


# --- the tests -----------------------------------------------------------------------


@pytest.mark.parametrize("i", range(len(CHAIN)), ids=[k.name for k in CHAIN])
def test_each_run_ended_where_it_was_aimed(chain: Chain, i: int) -> None:
    run, kill = chain.runs[i], CHAIN[i]
    assert (run.returncode, run.stage) == (kill.returncode, kill.stage), run.tail[-15:]


def test_each_rerun_took_over_the_killed_runs_lease_at_once(chain: Chain) -> None:
    """A run killed with SIGKILL leaves its lease; the next run, on this
    host, sees its holder is gone and takes it over without waiting (the
    default ``crawl.lease_wait_s`` is 0: it would have exited 75)."""
    taken = 0
    for killed, rerun in zip(chain.runs, chain.runs[1:], strict=False):
        if killed.killed:
            assert killed.lease_after is not None and killed.lease_after["pid"] == killed.pid
            assert rerun.lease_before == killed.lease_after
            assert rerun.returncode != EXIT_IN_USE
            taken += 1
        else:  # a run that ended (failed or not) released its lease
            assert killed.lease_after is None
    assert taken == sum(r.killed for r in chain.runs) == 6
    assert chain.runs[-1].lease_after is None


def test_no_url_lost_and_every_status_as_in_the_uninterrupted_crawl(chain: Chain) -> None:
    for name in ("urls", "statuses", "crawldb_rows", "hostdb", "content"):
        assert chain.verdict.problems[name] == [], name
    assert len(table(chain.root, "SELECT url FROM crawldb")) > 15


def test_no_fetch_row_event_or_warc_record_doubled(chain: Chain) -> None:
    for name in ("fetch_unique", "fetch_rows", "events_unique", "events", "warc_responses"):
        assert chain.verdict.problems[name] == [], name


def test_no_segment_half_merged(chain: Chain) -> None:
    for name in ("counters", "last_segment", "lease"):
        assert chain.verdict.problems[name] == [], name


def test_every_warc_file_whole_and_every_reference_into_it_exact(chain: Chain) -> None:
    """Also crawldb's ``stored_capture``: a run killed after updatedb's MERGE
    committed used to fetch the segment again on its re-run, rewriting the
    WARC files crawldb already pointed into (a segment fetched whole now
    keeps its fetch, ``trawl.runner.fetch``)."""
    for name in ("warc_files", "warc_refs", "captures"):
        assert chain.verdict.problems[name] == [], name
    assert chain.verdict.notes["warc_refs"] > 20 and chain.verdict.notes["captures"] > 5


def test_the_checks_find_what_a_broken_crawl_has(chain: Chain, tmp_path: Path) -> None:
    """The reference crawl with one fetch file doubled, one WARC file cut
    short and a lease left behind fails the checks that say so."""
    broken = tmp_path / "broken"
    shutil.copytree(chain.reference.uri, broken)
    fetch = sorted((broken / "segments" / segment_of(AT) / "fetch").glob("part-*.parquet"))[0]
    shutil.copy(fetch, fetch.with_name("part-99999-doubled.parquet"))
    warc = broken / warc_rel(
        segment_of(AT + STEP), warc_files(chain.reference, segment_of(AT + STEP))[0]
    )
    warc.write_bytes(warc.read_bytes()[:-40])
    (broken / LEASE_FILE).write_text('{"pid": 1}')
    verdict = check_crawl(CrawlRoot.of(str(broken)), chain.reference)
    assert {"fetch_unique", "fetch_rows", "warc_files", "lease"} <= set(verdict.failed)
    assert check_crawl(chain.reference, chain.reference).failed == []
