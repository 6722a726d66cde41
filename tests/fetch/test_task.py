"""Tests for trawl.fetch.task (+ trawl.fetch.visit) against the real test web on loopback.

A small synthetic web (12 hosts on 3 loopback addresses, one host whose
robots.txt answers 5xx, hosts with robots rules for ``*`` and for our agent,
404/410/500/301 pages) is served by ``trawl.testweb``; a fetch task crawls
every page of it, and the access log is audited for politeness and robots.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawl.config import Config, load_config
from trawl.dedup.soft404 import PROBE_SUFFIX
from trawl.fetch.rules import policy_source
from trawl.fetch.task import ROBOTS_ATTEMPTS, run_fetch_task
from trawl.store.files import CrawlRoot
from trawl.testweb import TestWeb, WebModel, politeness_audit, robots_audit
from trawl.testweb.audit import gaps
from trawl.testweb.model import make_url
from trawl.url.keys import host_bucket, host_of, url_fingerprint
from trawl.url.normalize import normalize
from trawl.warc.writer import ArchiveFailed

SEED = 34  # 12 hosts / 3 IPs: one 5xx robots.txt, no slow host, no Crawl-delay
MIN_GAP = 0.05
AGENT = "trawl"


@pytest.fixture(scope="module")
def model() -> WebModel:
    m = WebModel.generate(SEED, hosts=12, ips=3, pages_per_host=(5, 15))
    # The properties the tests below rely on (a different generator would need a new seed).
    assert not any(h.slow or h.crawl_delay for h in m.hosts)
    assert any(h.robots_status >= 500 for h in m.hosts)
    assert any(m.is_disallowed(h.name, p.path) for h in m.hosts for p in h.pages)
    assert {p.status for h in m.hosts for p in h.pages} >= {200, 301, 404, 410, 500}
    return m


def config(web: TestWeb, *extra: str, allow: bool = True) -> Config:
    overrides = [
        f"dns.hosts_file={web.hosts_file}",
        f"politeness.min_delay_s={MIN_GAP}",
        "fetch.threads_per_task=8",
    ]
    if allow:
        overrides.append('fetch.allow_networks=["127.0.0.0/8"]')
    return load_config(None, [*overrides, *extra], environ={})


def items_for(model: WebModel, port: int) -> list[dict[str, Any]]:
    out = []
    for host in model.hosts:
        for page in host.pages:
            # every page of the model, its session-id URLs too (which the
            # crawl's normaliser would fold into their originals)
            url = normalize(f"http://{host.name}:{port}{page.path}", session_params=())
            out.append(
                {
                    "url": url,
                    "url_fp": url_fingerprint(url),
                    "host": host.name,
                    "host_bucket": host_bucket(host.name, 8),
                    "task": 0,
                    "depth": 1,
                    "etag": None,
                    "last_modified": None,
                    "delay_s": None,
                    "crawl_delay_s": None,
                    "robots_url": None,
                    "robots_status": None,
                    "robots_http_status": None,
                    "robots_body": None,
                    "robots_fetched_at": None,
                }
            )
    return out


def expected_outcome(model: WebModel, host: str, path: str) -> str:
    info = model.host(host)
    assert info is not None
    if info.robots_status >= 500:
        return "deferred"
    if model.is_disallowed(host, path, AGENT):
        return "robots_denied"
    status = model.expected_status(host, path)
    return {200: "success", 301: "redir_perm", 404: "gone", 410: "gone", 500: "retry"}[status]


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def page_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pages = [r for r in rows if r["kind"] == "page"]
    counts = Counter(r["url"] for r in pages)
    assert not [u for u, n in counts.items() if n != 1], "a URL came out more than once"
    return {r["url"]: r for r in pages}


def test_fetch_task_crawls_the_test_web_politely(model: WebModel, tmp_path: Path) -> None:
    with TestWeb(model, tmp_path / "web") as web:
        items = items_for(model, web.port)
        cfg = config(web)
        rows = list(run_fetch_task(items, cfg, "seg1", 0, str(tmp_path / "warc"), time_limit_s=60))
        port = web.port
    log = read_log(web.access_log)

    # exactly one page row per input URL, with the item's keys carried over
    by_url = page_rows(rows)
    assert set(by_url) == {i["url"] for i in items}
    for item in items:
        row = by_url[item["url"]]
        assert (row["url_fp"], row["host"], row["task"]) == (item["url_fp"], item["host"], 0)

    # every outcome as the model says
    got = {u: r["outcome"] for u, r in by_url.items()}
    want = {u: expected_outcome(model, host_of(u), "/" + u.split("/", 3)[3]) for u in by_url}
    assert got == want
    assert set(got.values()) >= {"success", "gone", "retry", "redir_perm", "robots_denied"}
    assert "deferred" in got.values()

    # robots.txt asked once per host (an unreachable one ROBOTS_ATTEMPTS
    # times, with back-off), and never a disallowed path
    assert robots_audit(web.access_log, model, AGENT) == []
    robots_requests = Counter(r["host"] for r in log if r["path"] == "/robots.txt")
    tries = {h.name: ROBOTS_ATTEMPTS if h.robots_status >= 500 else 1 for h in model.hosts}
    assert robots_requests == Counter(tries)
    assert sum(1 for r in rows if r["kind"] == "robots") == sum(tries.values())
    assert all(r["user_agent"].startswith("trawl/") for r in log)

    # a 5xx robots.txt: nothing else requested from that host
    unreachable = {h.name for h in model.hosts if h.robots_status >= 500}
    assert [r for r in log if r["host"] in unreachable and r["path"] != "/robots.txt"] == []
    for row in by_url.values():
        if row["host"] in unreachable:
            assert row["robots_decision"] == "robots_unreachable"

    # each page requested exactly once if it was to be requested at all
    probing = [r for r in log if r["path"].endswith(PROBE_SUFFIX)]
    requested = Counter(
        (r["host"], r["path"]) for r in log if r["path"] != "/robots.txt" and r not in probing
    )
    asked = {
        (r["host"], "/" + u.split("/", 3)[3])
        for u, r in by_url.items()
        if r["outcome"] in ("success", "gone", "retry", "redir_perm")
    }
    assert set(requested) == asked
    assert set(requested.values()) == {1}

    # one soft-404 probe per host with a page to request, before that page;
    # the test web answers it 404, so no page is compared with anything
    assert Counter(r["host"] for r in probing) == Counter({h: 1 for h, _ in asked})
    for probe in probing:
        pages = [r for r in log if (r["host"], r["path"]) in asked and r["host"] == probe["host"]]
        assert probe["end"] <= min(r["start"] for r in pages)
    probe_rows = [r for r in rows if r["kind"] == "probe"]
    assert sorted(r["host"] for r in probe_rows) == sorted(r["host"] for r in probing)
    assert {r["http_status"] for r in probe_rows} == {404}
    assert all(r.get("soft404") is None for r in by_url.values())

    # politeness: one request at a time per host and per address, gaps >= min
    audit = politeness_audit(web.access_log, MIN_GAP, model=model)
    assert audit.requests == len(log)
    assert audit.hosts_with_overlap == 0
    # (<= 1: the audit pulls each end in by its tolerance, so a request shorter
    # than that counts as zero in flight)
    assert audit.max_in_flight_per_host <= 1
    assert audit.max_in_flight_per_ip <= 1
    assert audit.gaps_below_min == 0, audit
    assert audit.min_gap_s is not None
    assert audit.min_gap_s >= MIN_GAP - audit.tolerance_s
    # hosts sharing an address share its clock: the same end-to-start gap per IP
    by_ip: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for rec in log:
        by_ip[rec["ip"]].append((rec["start"], rec["end"]))
    assert len(by_ip) == 3
    for ip, intervals in by_ip.items():
        assert min(gaps(intervals)) >= MIN_GAP - audit.tolerance_s, ip

    # redirects and errors
    for url, row in by_url.items():
        host, path = row["host"], "/" + url.split("/", 3)[3]
        page = model.host(host).page(path)  # type: ignore[union-attr]
        assert page is not None
        if row["outcome"] == "redir_perm":
            assert row["http_status"] == 301
            assert row["redirect_to"] == normalize(f"http://{host}:{port}{page.redirect_to}")
        elif row["outcome"] == "gone":
            assert row["http_status"] in (404, 410)
        elif row["outcome"] == "retry":
            assert row["http_status"] == 500

    # success rows: digest, WARC position, absolute normalised outlinks
    successes = [r for r in by_url.values() if r["outcome"] == "success"]
    for row in successes:
        assert row["http_status"] == 200
        assert len(row["content_sha256"]) == 64
        assert row["warc_file"] and row["warc_offset"] >= 0 and row["warc_length"] > 0
        host, path = row["host"], "/" + row["url"].split("/", 3)[3]
        links = {normalize(u) for u, _ in model.page_links(host, path, port)}
        outlinks = {o["url"] for o in row["outlinks"]}
        assert outlinks == links - {row["url"]}, row["url"]
        for link in outlinks:
            assert link == normalize(link)
            assert link.startswith("http://")
        assert row["title"] == model.host(host).page(path).title  # type: ignore[union-attr]
    assert {r["warc_file"] for r in successes} == {"trawl-seg1-00000-00000.warc.gz"}

    # the WARC reads back: a response record for the URL at the recorded offset
    warc = tmp_path / "warc" / successes[0]["warc_file"]
    data = warc.read_bytes()
    for row in successes[:5]:
        chunk = data[row["warc_offset"] : row["warc_offset"] + row["warc_length"]]
        record = next(iter(ArchiveIterator(io.BytesIO(chunk))))
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]
        assert record.http_headers.get_statuscode() == "200"
        body = record.content_stream().read()
        assert hashlib.sha256(body).hexdigest() == row["content_sha256"]
    # three files, as Common Crawl splits a segment: pages, robots.txt, the rest
    files = sorted(p.name for p in (tmp_path / "warc").iterdir())
    assert files == [
        "trawl-crawldiagnostics-seg1-00000-00000.warc.gz",
        "trawl-robotstxt-seg1-00000-00000.warc.gz",
        "trawl-seg1-00000-00000.warc.gz",
    ]
    total: Counter[str] = Counter()
    for name in files:
        with (tmp_path / "warc" / name).open("rb") as fh:
            records = list(ArchiveIterator(fh))
        assert records[0].rec_type == "warcinfo"
        kinds = Counter(r.rec_type for r in records)
        total.update(kinds)
        assert kinds["warcinfo"] == 1
        answers = [r for r in records if r.rec_type in ("response", "revisit")]
        urls = [r.rec_headers.get_header("WARC-Target-URI") for r in answers]
        statuses = {r.http_headers.get_statuscode() for r in answers}
        if "robotstxt" in name:
            assert all(u.endswith("/robots.txt") for u in urls)
        elif "crawldiagnostics" in name:
            assert not any(u.endswith("/robots.txt") for u in urls)
            assert all(not code.startswith("2") for code in statuses)
            assert sum(u.endswith(PROBE_SUFFIX) for u in urls) == len(probing)
        else:
            assert statuses == {"200"} and kinds["revisit"] == 0
            # every page has its metadata record, concurrent to the response
            ids = {r.rec_headers.get_header("WARC-Record-ID") for r in answers}
            meta = [r for r in records if r.rec_type == "metadata"]
            assert {m.rec_headers.get_header("WARC-Concurrent-To") for m in meta} == ids
    assert total["response"] == total["request"] == len(log)  # robots.txt included


def test_without_allow_networks_everything_is_blocked(model: WebModel, tmp_path: Path) -> None:
    with TestWeb(model, tmp_path / "web") as web:
        items = items_for(model, web.port)
        cfg = config(web, allow=False)
        assert cfg.fetch.allow_networks == ()
        rows = list(run_fetch_task(items, cfg, "seg1", 0, None, time_limit_s=60))
    by_url = page_rows(rows)
    assert set(by_url) == {i["url"] for i in items}
    assert {r["outcome"] for r in rows} == {"blocked"}
    assert all(r["kind"] == "page" for r in rows)
    assert all(r["error"] == "address: loopback" for r in rows)
    assert read_log(web.access_log) == []  # the SSRF guard: not one request


def test_time_limit_releases_the_rest_as_not_reached(model: WebModel, tmp_path: Path) -> None:
    with TestWeb(model, tmp_path / "web") as web:
        items = items_for(model, web.port)
        cfg = config(web, "politeness.min_delay_s=0.2")
        rows = list(run_fetch_task(items, cfg, "seg1", 0, str(tmp_path / "warc"), time_limit_s=1.5))
    by_url = page_rows(rows)
    assert set(by_url) == {i["url"] for i in items}
    outcomes = Counter(r["outcome"] for r in by_url.values())
    assert outcomes["not_reached"] > len(items) // 2
    assert outcomes["not_reached"] < len(items)  # but something was done in the time
    for row in by_url.values():
        if row["outcome"] == "not_reached":
            assert row["error"] == "time_limit"
    # what was not reached was never requested
    log = read_log(web.access_log)
    requested = {(r["host"], r["path"]) for r in log}
    for url, row in by_url.items():
        if row["outcome"] == "not_reached":
            assert (row["host"], "/" + url.split("/", 3)[3]) not in requested
    audit = politeness_audit(web.access_log, 0.2)
    assert audit.hosts_with_overlap == 0
    assert audit.gaps_below_min == 0


def test_cached_robots_copy_is_used_while_fresh(model: WebModel, tmp_path: Path) -> None:
    usable = [h for h in model.hosts if h.robots_status < 500]
    cached, stale, elsewhere = [h.name for h in usable if h.robots != "none"][:3]
    allow = next(h.name for h in usable if h.robots == "none")
    now = datetime.now(UTC)
    deny_all = "User-agent: trawl\nDisallow: /\n"
    with TestWeb(model, tmp_path / "web") as web:
        port = web.port
        copies = {
            cached: (f"http://{cached}:{port}/robots.txt", "parsed", deny_all, now),
            stale: (f"http://{stale}:{port}/robots.txt", "parsed", deny_all,
                    now - timedelta(days=2)),
            elsewhere: (f"http://{elsewhere}:{port + 1}/robots.txt", "parsed", deny_all, now),
            allow: (f"http://{allow}:{port}/robots.txt", "status_4xx", None, now),
        }  # fmt: skip
        items = [i for i in items_for(model, port) if i["host"] in copies]
        for item in items:
            url, status, body, fetched_at = copies[item["host"]]
            item.update(robots_url=url, robots_status=status, robots_body=body,
                        robots_fetched_at=fetched_at)  # fmt: skip
        rows = list(run_fetch_task(items, config(web), "seg1", 0, None, time_limit_s=60))
    log = read_log(web.access_log)
    by_url = page_rows(rows)
    assert set(by_url) == {i["url"] for i in items}
    robots_asked = Counter(r["host"] for r in log if r["path"] == "/robots.txt")
    # fresh copies are used as they are: no robots.txt request ...
    assert cached not in robots_asked
    assert allow not in robots_asked
    # ... a stale copy, or one for another origin, is fetched again
    assert robots_asked[stale] == 1
    assert robots_asked[elsewhere] == 1
    # the cached "Disallow: /" is obeyed: not one request to that host
    assert [r for r in log if r["host"] == cached] == []
    assert {r["outcome"] for r in by_url.values() if r["host"] == cached} == {"robots_denied"}
    # the cached allow-all copy lets every page through
    for row in by_url.values():
        if row["host"] == allow:
            assert row["outcome"] != "robots_denied"
    assert robots_audit(web.access_log, model, AGENT) == []


# --- robots.txt outages -------------------------------------------------------------------------
def _unreachable_host(model: WebModel) -> str:
    return next(h.name for h in model.hosts if h.robots_status >= 500)


def test_unreachable_robots_falls_back_on_the_stored_copy(model: WebModel, tmp_path: Path) -> None:
    host = _unreachable_host(model)
    two_days_ago = datetime.now(UTC) - timedelta(days=2)
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host]
        for item in items:
            item.update(
                robots_url=f"http://{host}:{web.port}/robots.txt", robots_status="parsed",
                robots_body="User-agent: *\nDisallow: /p/\n", robots_fetched_at=two_days_ago,
            )  # fmt: skip
        rows = list(run_fetch_task(items, config(web), "seg1", 0, None, time_limit_s=60))
    log = read_log(web.access_log)
    robots = [r for r in rows if r["kind"] == "robots"]
    # the stale copy is fetched again, fails (5xx), and stays in force (RFC 9309 2.4)
    assert len(robots) == 1 and robots[0]["robots_decision"] == "stale_copy_status_5xx"
    by_url = page_rows(rows)
    for url, row in by_url.items():
        path = "/" + url.split("/", 3)[3]
        if path.startswith("/p/"):
            assert row["outcome"] == "robots_denied"
            assert row["robots_decision"] == "robots_denied_stale_copy_status_5xx"
        else:
            assert row["outcome"] not in ("deferred", "robots_denied")
            assert row["robots_decision"] == "allowed_stale_copy_status_5xx"
    assert not [r for r in log if r["path"].startswith("/p/")]


@pytest.mark.parametrize(("days", "fetched"), [(31, True), (29, False)])
def test_a_long_outage_without_a_copy_counts_as_no_robots_txt(
    model: WebModel, tmp_path: Path, days: int, fetched: bool
) -> None:
    host = _unreachable_host(model)
    since = datetime.now(UTC) - timedelta(days=days)
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host]
        for item in items:
            item["robots_unreachable_since"] = since
        rows = list(run_fetch_task(items, config(web), "seg1", 0, None, time_limit_s=60))
    outcomes = {r["outcome"] for r in page_rows(rows).values()}
    if fetched:  # RFC 9309 2.3.1.4 "reasonably long period": then unavailable
        assert "deferred" not in outcomes
        assert {r["robots_decision"] for r in rows if r["kind"] == "robots"} == {
            "unreachable_long_status_5xx"
        }
    else:
        assert outcomes == {"deferred"}
        assert len([r for r in rows if r["kind"] == "robots"]) == ROBOTS_ATTEMPTS


def test_a_failing_host_is_paused_after_max_failures(model: WebModel, tmp_path: Path) -> None:
    host = _unreachable_host(model)
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host]
        cfg = config(web, "politeness.max_failures=2")
        rows = list(run_fetch_task(items, cfg, "seg1", 0, None, time_limit_s=60))
    assert len([r for r in rows if r["kind"] == "robots"]) == 2
    pages = page_rows(rows)
    assert {r["outcome"] for r in pages.values()} == {"deferred"}
    assert {r["error"] for r in pages.values()} == {"host_failing"}


def run_in_thread(
    items: list[dict[str, Any]], cfg: Config, time_limit_s: float
) -> list[dict[str, Any]]:
    """The task's rows; it must end well before ``time_limit_s`` (a task
    still waiting for a host it cannot visit in time would not)."""
    rows: list[dict[str, Any]] = []
    task = threading.Thread(
        target=lambda: rows.extend(run_fetch_task(items, cfg, "seg1", 0, None, time_limit_s)),
        daemon=True,  # on failure, left to wait out its time limit
    )
    task.start()
    task.join(120)
    assert not task.is_alive(), "the task waited for a host it cannot visit in time"
    return rows


@pytest.mark.parametrize(
    ("carried_gap", "extra", "time_limit_s", "tries"),
    [
        # hostdb's back-off of 128 s doubles to 256 s: past robots.max_crawl_delay_s
        (128.0, (), 900.0, 1),
        # 16 s is within the cap, but the next try would start after the time limit
        (8.0, (), 10.0, 1),
        # 1 s to the second try is within a cap of 1.5 s, 2 s to the third is not
        (0.5, ("robots.max_crawl_delay_s=1.5",), 900.0, 2),
    ],
)
def test_an_unreachable_robots_txt_is_not_waited_for_past_the_cap_or_the_time_limit(
    model: WebModel,
    tmp_path: Path,
    carried_gap: float,
    extra: tuple[str, ...],
    time_limit_s: float,
    tries: int,
) -> None:
    # A 5xx robots.txt with a back-off carried over in hostdb: when the next
    # try cannot come within the cap or before the time limit, the host is
    # deferred at once (RFC 9309 2.3.1.4: complete disallow meanwhile), and
    # the task ends with its other hosts instead of holding the segment open.
    host = _unreachable_host(model)
    other = next(h for h in model.hosts if h.robots_status == 200 and len(h.pages) > 3)
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] in (host, other.name)]
        for item in items:
            if item["host"] == host:
                item["delay_s"] = carried_gap
        rows = run_in_thread(items, config(web, *extra), time_limit_s)
    log = read_log(web.access_log)
    assert [r["path"] for r in log if r["host"] == host] == ["/robots.txt"] * tries
    robots = [r for r in rows if r["kind"] == "robots" and r["host"] == host]
    assert len(robots) == tries
    assert robots[-1]["delay_s"] == pytest.approx(carried_gap * 2**tries)  # hostdb's next gap
    pages = page_rows(rows)
    assert set(pages) == {i["url"] for i in items}
    mine = [r for r in pages.values() if r["host"] == host]
    assert {(r["outcome"], r["robots_decision"]) for r in mine} == {
        ("deferred", "robots_unreachable")
    }
    # the other host is fetched as ever
    theirs = [r for r in pages.values() if r["host"] == other.name]
    assert theirs and not {r["outcome"] for r in theirs} & {"deferred", "not_reached"}


def test_a_host_due_after_the_time_limit_is_released_without_waiting(
    model: WebModel, tmp_path: Path
) -> None:
    # hostdb says the host may not be visited for two hours, the time limit
    # is 15 minutes: its URLs are not reached, and the task ends as soon as
    # the other host is done rather than at the time limit.
    late, other = [h for h in model.hosts if h.robots_status == 200 and len(h.pages) > 3][:2]
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] in (late.name, other.name)]
        for item in items:
            if item["host"] == late.name:
                item["next_allowed_at"] = datetime.now(UTC) + timedelta(hours=2)
        rows = run_in_thread(items, config(web), time_limit_s=900.0)
    assert [r for r in read_log(web.access_log) if r["host"] == late.name] == []
    pages = page_rows(rows)
    assert set(pages) == {i["url"] for i in items}
    mine = [r for r in pages.values() if r["host"] == late.name]
    assert {(r["outcome"], r["error"]) for r in mine} == {("not_reached", "time_limit")}
    theirs = [r for r in pages.values() if r["host"] == other.name]
    assert theirs and "not_reached" not in {r["outcome"] for r in theirs}


# --- Crawl-delay above the cap ------------------------------------------------------------------
def test_crawl_delay_over_the_cap_gets_one_request_and_defers_the_rest(
    model: WebModel, tmp_path: Path
) -> None:
    host = next(h for h in model.hosts if h.robots_status == 200 and len(h.pages) > 3)
    now = datetime.now(UTC)
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host.name]
        for item in items:
            item.update(
                robots_url=f"http://{host.name}:{web.port}/robots.txt", robots_status="parsed",
                robots_body="User-agent: *\nCrawl-delay: 40\n", robots_fetched_at=now,
            )  # fmt: skip
        cfg = config(web, "robots.max_crawl_delay_s=30")
        rows = list(run_fetch_task(items, cfg, "seg1", 0, None, time_limit_s=60))
    pages = page_rows(rows)
    done = [r for r in pages.values() if r["outcome"] != "deferred"]
    assert len(done) == 1
    assert done[0]["delay_s"] >= 40  # hostdb carries the full Crawl-delay to the next visit
    deferred = [r for r in pages.values() if r["outcome"] == "deferred"]
    assert len(deferred) == len(items) - 1
    assert {r["error"] for r in deferred} == {"crawl_delay_over_cap"}
    assert len([r for r in read_log(web.access_log) if r["host"] == host.name]) == 1
    # the soft-404 probe would be a second request: not sent, and said so
    probes = [r for r in rows if r["kind"] == "probe"]
    assert [(r["outcome"], r["error"]) for r in probes] == [
        ("deferred", "probe: crawl_delay_over_cap")
    ]


# --- operator policy mid-segment ----------------------------------------------------------------
def test_a_policy_block_stops_a_host_mid_segment(model: WebModel, tmp_path: Path) -> None:
    host = max(model.hosts, key=lambda h: len(h.pages) if h.robots_status < 500 else 0)
    started = time.monotonic()
    block_after = 0.8

    def source() -> Any:
        blocked = time.monotonic() - started > block_after

        def verdict(name: str, domain: str, now: datetime) -> tuple[str, float | None] | None:
            if name == host.name and blocked:
                return "blocked (host x: test)", None
            return None

        return verdict

    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host.name]
        cfg = config(web, "politeness.min_delay_s=0.2", "fetch.policy_refresh_s=0.3")
        rows = list(run_fetch_task(items, cfg, "seg1", 0, None, 60, source))
    log = [r for r in read_log(web.access_log) if r["host"] == host.name]
    assert log, "the host was fetched before the block"
    # no request started later than one refresh after the block (plus one in flight)
    latest = max(r["start"] for r in log)
    first = min(r["start"] for r in log)
    assert latest - first < block_after + 0.3 + 0.5
    pages = page_rows(rows)
    assert set(pages) == {i["url"] for i in items}
    stopped = [r for r in pages.values() if r["outcome"] == "deferred"]
    assert stopped, "the block took some URLs out"
    assert {r["error"] for r in stopped} == {"policy: blocked (host x: test)"}


def test_a_policy_min_delay_applies_from_the_next_request(model: WebModel, tmp_path: Path) -> None:
    host = max(model.hosts, key=lambda h: len(h.pages) if h.robots_status < 500 else 0)

    def source() -> Any:
        return lambda name, domain, now: ("", 0.4) if name == host.name else None

    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host.name][:5]
        rows = list(run_fetch_task(items, config(web), "seg1", 0, None, 60, source))
    assert all(r["delay_s"] >= 0.4 for r in rows if r["kind"] == "page")
    intervals = [(r["start"], r["end"]) for r in read_log(web.access_log)]
    assert min(gaps(intervals)) >= 0.4 - 0.005


# --- redirects ----------------------------------------------------------------------------------
def test_redirects_are_followed_on_the_same_task_when_configured(
    model: WebModel, tmp_path: Path
) -> None:
    sources = [(h.name, p) for h in model.hosts if h.robots_status < 500 for p in h.pages
               if p.redirect_to and not model.is_disallowed(h.name, p.redirect_to)
               and not model.is_disallowed(h.name, p.path)]  # fmt: skip
    assert sources
    with TestWeb(model, tmp_path / "web") as web:
        wanted = {f"http://{h}:{web.port}{p.path}" for h, p in sources}
        items = [i for i in items_for(model, web.port) if i["url"] in wanted]
        followed = list(run_fetch_task(items, config(web, "fetch.follow_redirects=1"),
                                       "seg1", 0, None, 60))  # fmt: skip
        recorded = list(run_fetch_task(items, config(web), "seg2", 0, None, 60))
    targets = {normalize(f"http://{h}:{web.port}{p.redirect_to}") for h, p in sources}
    got = page_rows(followed)
    assert targets <= set(got)
    assert {got[t]["outcome"] for t in targets} == {"success"}
    # Nutch's default (0): the target is only recorded, for a later cycle
    assert set(page_rows(recorded)) == {i["url"] for i in items}
    assert {r["redirect_to"] for r in page_rows(recorded).values()} == targets


def test_trawl_policy_set_block_reaches_a_running_fetch(model: WebModel, tmp_path: Path) -> None:
    # The whole path: the operator's command writes the policy table, the
    # running task re-reads it (every fetch.policy_refresh_s) and stops the host.
    from trawl.cli import main

    host = max(model.hosts, key=lambda h: len(h.pages) if h.robots_status < 500 else 0)
    root = tmp_path / "crawl"
    refresh = 0.5
    rows: list[dict[str, Any]] = []
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host.name]
        cfg = config(web, "politeness.min_delay_s=0.25", f"fetch.policy_refresh_s={refresh}")
        task = threading.Thread(
            target=lambda: rows.extend(
                run_fetch_task(
                    items, cfg, "seg1", 0, None, 60, policy_source(CrawlRoot.of(str(root)))
                )
            )
        )
        task.start()
        time.sleep(1.0)
        argv = ["policy", "set", "--crawl", str(root), "--host", host.name, "--block"]
        assert main([*argv, "--reason", "site owner asked", "--by", "ops"]) == 0
        blocked_at = time.time()
        task.join(60)
        assert not task.is_alive()
    log = [r for r in read_log(web.access_log) if r["host"] == host.name]
    late = [r for r in log if r["start"] > blocked_at + refresh + 0.1]
    assert late == [], "requests started after the block was read"
    pages = page_rows(rows)
    stopped = [r for r in pages.values() if r["outcome"] == "deferred"]
    assert stopped, "the host still had work when the block came"
    assert len(stopped) >= len(items) - len(log)
    assert all(r["error"].startswith("policy: blocked") for r in stopped)
    assert all("site owner asked (ops)" in r["error"] for r in stopped)


def warc_by_type(directory: Path) -> dict[str, list[Any]]:
    """(headers, http headers) of every record in the directory's WARC files, by type."""
    out: dict[str, list[Any]] = defaultdict(list)
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh, check_digests="raise"):
                record.content_stream().read()
                out[record.rec_type].append((dict(record.rec_headers.headers), record.http_headers))
    return out


def test_copies_and_304s_are_archived_as_revisits(tmp_path: Path) -> None:
    model = WebModel.generate(SEED, hosts=6, ips=2, pages_per_host=(3, 6), dup_families=4)
    assert model.exact_copies(), "the seed needs byte-identical copies"
    with TestWeb(model, tmp_path / "web") as web:
        items = items_for(model, web.port)
        first = page_rows(
            list(run_fetch_task(items, config(web), "s1", 0, str(tmp_path / "w1"), 60))
        )
        # the second visit sends the validators the first one stored
        again = []
        for item in items:
            row = first[item["url"]]
            if row["outcome"] == "success":
                again.append({**item, "etag": row["etag"], "content_sha256": row["content_sha256"],
                              "last_modified": row["last_modified"],
                              "stored_capture": row["stored_capture"]})  # fmt: skip
        second = page_rows(
            list(run_fetch_task(again, config(web), "s2", 0, str(tmp_path / "w2"), 60))
        )
        # a third visit without validators gets 200s: the same payloads as the
        # stored copies (the fetch list's stored_capture), so revisits of them
        blind = [{**item, "stored_capture": first[item["url"]]["stored_capture"]}
                 for item in items if first[item["url"]]["outcome"] == "success"]  # fmt: skip
        third = page_rows(
            list(run_fetch_task(blind, config(web), "s3", 0, str(tmp_path / "w3"), 60))
        )
    records = warc_by_type(tmp_path / "w1")
    responses = {h["WARC-Record-ID"]: h for h, _ in records["response"]}
    by_uri = {h["WARC-Target-URI"]: h for h, _ in records["response"] + records["revisit"]}
    copies = [[normalize(u, session_params=()) for u in g] for g in model.exact_copies(web.port)]
    revisited = 0
    for urls in copies:
        kinds = [by_uri[u]["WARC-Type"] for u in urls]
        assert kinds.count("response") == 1, urls  # one copy stored, the others refer to it
        for u in urls:
            head = by_uri[u]
            if head["WARC-Type"] == "revisit":
                revisited += 1
                stored = responses[head["WARC-Refers-To"]]
                assert head["WARC-Profile"].endswith("/identical-payload-digest")
                assert head["WARC-Payload-Digest"] == stored["WARC-Payload-Digest"]
                assert head["WARC-Refers-To-Target-URI"] == stored["WARC-Target-URI"]
                assert head["WARC-Refers-To-Date"] == stored["WARC-Date"]
    assert revisited == sum(len(g) - 1 for g in copies) > 0
    # a copy's fetch row is a success like any other, and points at its record
    for u in (u for g in copies for u in g):
        assert first[u]["outcome"] == "success" and first[u]["warc_length"] > 0
    # second visit: every stored page answers 304, archived as server-not-modified revisits
    assert {r["outcome"] for r in second.values()} == {"notmodified"}
    again_records = warc_by_type(tmp_path / "w2")
    stored_again = [h["WARC-Target-URI"] for h, _ in again_records["response"]]
    # no page stored twice: only robots.txt and each host's soft-404 probe
    assert all(u.endswith(("/robots.txt", PROBE_SUFFIX)) for u in stored_again)
    not_modified = [h for h, _ in again_records["revisit"]]
    assert len(not_modified) == len(second)
    assert all(h["WARC-Profile"].endswith("/server-not-modified") for h in not_modified)
    metadata = [h for h, _ in again_records["metadata"]]
    assert {h["WARC-Concurrent-To"] for h in metadata} >= {
        h["WARC-Record-ID"] for h in not_modified
    }
    # 304s name the stored copy they confirm
    first_ids = {h["WARC-Record-ID"] for h, _ in records["response"]}
    assert {h.get("WARC-Refers-To") for h in not_modified} <= first_ids
    # unchanged 200s are identical-payload revisits of the first visit's records
    blind_records = warc_by_type(tmp_path / "w3")
    assert {r["outcome"] for r in third.values()} == {"success"}
    pages_stored = [h for h, _ in blind_records["response"] if h["WARC-Target-URI"] in third]
    assert pages_stored == []
    for head, _ in blind_records["revisit"]:
        assert head["WARC-Profile"].endswith("/identical-payload-digest")
        original = responses[head["WARC-Refers-To"]]
        assert head["WARC-Payload-Digest"] == original["WARC-Payload-Digest"]
        assert third[head["WARC-Target-URI"]]["stored_capture"]["record_id"] in first_ids
    assert len(blind_records["revisit"]) == len(third)
    # every stored_capture names a response of the first visit with the same payload
    for row in first.values():
        capture = row.get("stored_capture")
        if row["outcome"] == "success":
            original = responses[capture["record_id"]]
            assert capture["digest"] == original["WARC-Payload-Digest"]
            assert capture["date"] == original["WARC-Date"]


def home_items(model: WebModel, port: int, quota: int | None) -> list[dict[str, Any]]:
    """Each host's homepage as the fetch list, with ``quota`` links to follow."""
    homes = [i for i in items_for(model, port) if i["url"].endswith(f":{port}/")]
    assert len(homes) == len(model.hosts)
    return [{**i, "follow_quota": quota, "follow_known": None} for i in homes]


def followable(row: dict[str, Any], hosts: set[str]) -> set[str]:
    """The links of a fetched page that fetch.follow_depth follows."""
    return {
        link["url"]
        for link in row.get("outlinks") or []
        if not link["nofollow"] and "?" not in link["url"] and host_of(link["url"]) in hosts
    }


def test_links_are_followed_within_the_segment(model: WebModel, tmp_path: Path) -> None:
    # From the homepages alone, one task fetches every page its hosts' links
    # lead to (the closure under followable links), each once, politely, and
    # never a page a perfect crawler would not reach.
    with TestWeb(model, tmp_path / "web") as web:
        items = home_items(model, web.port, quota=1000)
        cfg = config(web, "fetch.follow_depth=20")
        rows = list(run_fetch_task(items, cfg, "seg1", 0, None, time_limit_s=120))
        port = web.port
    by_url = page_rows(rows)
    hosts = {h.name for h in model.hosts}
    homes = {i["url"] for i in items}
    followed = {u: r for u, r in by_url.items() if r["linked_from"] is not None}
    assert len(followed) > 3 * len(homes)
    assert set(by_url) == homes | set(followed)

    def robots_allow(url: str) -> bool:
        host, path = host_of(url), "/" + url.split("/", 3)[3]
        info = model.host(host)
        return (
            info is not None
            and info.robots_status < 500
            and not model.is_disallowed(host, path, AGENT)
        )

    for url, row in followed.items():
        source = by_url[row["linked_from"]]  # the page that led here was fetched here
        assert source["outcome"] == "success" and url in followable(source, hosts)
        assert row["depth"] == source["depth"] + 1
        if row["host"] == source["host"]:  # its robots.txt was read before the source
            # so a disallowed link is recorded as denied there and then
            assert (row["outcome"] == "robots_denied") == (not robots_allow(url))
        if row["outcome"] == "robots_denied":
            assert row.get("http_status") is None  # no request (robots_audit below)

    def robots_5xx(url: str) -> bool:
        info = model.host(host_of(url))
        return info is not None and info.robots_status >= 500

    denied_here = deferred_here = 0
    for row in by_url.values():
        if row["outcome"] == "success":
            # every followable link is settled in the segment: fetched, or
            # without a request, denied or deferred with its stopped host
            assert followable(row, hosts) <= set(by_url), row["url"]
            unreachable = {
                u for u in followable(row, hosts) if model.host(host_of(u)).robots_status >= 500
            }
            for u in unreachable:
                got = by_url[u]
                assert got["outcome"] == "deferred", got
                assert "robots_unreachable" in (got.get("error"), got.get("robots_decision"))
            deferred_here += len(unreachable)
            # same-host links robots.txt disallows: each has its denied row
            refused = {
                u
                for u in followable(row, hosts)
                if host_of(u) == row["host"] and not robots_allow(u)
            }
            assert {u for u in refused if by_url[u]["outcome"] == "robots_denied"} == refused
            denied_here += len(refused)
    assert denied_here and deferred_here  # the web has such links: the rules were exercised
    reachable = {f"http://{h}:{port}{p}" for h, p in model.reachable(sorted(homes), AGENT)}
    answered = {u for u, r in by_url.items() if r.get("http_status") is not None}
    assert answered <= {normalize(u) for u in reachable}
    audit = politeness_audit(web.access_log, MIN_GAP, model=model)
    assert audit.hosts_with_overlap == 0 and audit.max_in_flight_per_ip <= 1
    assert audit.gaps_below_min == 0, audit
    assert robots_audit(web.access_log, model, AGENT) == []


def test_following_keeps_to_the_room_the_depth_and_the_known_urls(
    model: WebModel, tmp_path: Path
) -> None:
    with TestWeb(model, tmp_path / "web") as web:
        port = web.port
        items = home_items(model, port, quota=2)
        one_step = list(
            run_fetch_task(items, config(web, "fetch.follow_depth=1"), "s1", 0, None, 60)
        )
        # crawldb knows the first homepage's links: none is fetched again
        open_rows = page_rows(one_step)
        first = next(u for u, r in open_rows.items() if r["linked_from"] is None and any(
            x["linked_from"] == u for x in open_rows.values()))  # fmt: skip
        host = host_of(first)
        known = [url_fingerprint(u) for u, r in open_rows.items() if r["linked_from"] == first]
        items = [
            {**i, "follow_known": known} if i["url"] == first else i
            for i in home_items(model, port, quota=2)
        ]
        again = page_rows(
            list(run_fetch_task(items, config(web, "fetch.follow_depth=1"), "s2", 0, None, 60))
        )
        off = page_rows(list(run_fetch_task(items, config(web), "s3", 0, None, 60)))
    # each host's room bounds the links it queues (a link its robots.txt copy
    # disallows is recorded as denied unqueued, and takes none)
    by_host = Counter(
        host_of(u)
        for u, r in open_rows.items()
        if r["linked_from"] and r["outcome"] != "robots_denied"
    )
    assert by_host and max(by_host.values()) <= 2
    # one step from a generated page: a followed page's links are not followed
    assert all(open_rows[r["linked_from"]]["linked_from"] is None
               for r in open_rows.values() if r["linked_from"])  # fmt: skip
    assert {r["linked_from"] for r in open_rows.values()} - {None} <= {i["url"] for i in items}
    refetched = {u for u, r in again.items() if r["linked_from"] and host_of(u) == host}
    assert not refetched & {u for u, r in open_rows.items() if r["linked_from"] == first}
    # off (fetch.follow_depth = 0): the fetch list only
    assert set(off) == {i["url"] for i in items}


def test_a_link_to_a_host_stopped_in_the_task_is_deferred_with_it(tmp_path: Path) -> None:
    # A page links to a host whose robots.txt answers 5xx and that the task
    # has already stopped for it: the link is deferred there and then, for the
    # same reason as the host's own URLs, with no request, rather than left
    # to be generated next segment only for the host to be stopped again.
    # (A larger web than the module's: it has such a link.)
    model = WebModel.generate(SEED, hosts=20, ips=3, pages_per_host=(5, 15))
    with TestWeb(model, tmp_path / "web") as web:
        port = web.port
        source, target = next(
            (make_url(h.name, p.path, port), url)
            for h in model.hosts
            if h.robots_status == 200 and not h.slow and not h.crawl_delay
            for p in h.pages
            if model.expected_status(h.name, p.path) == 200
            and not model.is_disallowed(h.name, p.path, AGENT)
            for url, nofollow in model.page_links(h.name, p.path, port)
            if not nofollow and "?" not in url and host_of(url) != h.name
            and (model.host(host_of(url)) or h).robots_status >= 500
            and not url.endswith(f":{port}/")
        )  # fmt: skip
        source, target = normalize(source), normalize(target)
        stopped = host_of(target)
        later = datetime.now(UTC) + timedelta(seconds=3)  # after the 5xx host is stopped
        items = []
        for item in items_for(model, port):
            if item["url"] == source:
                items.append({**item, "next_allowed_at": later})
            elif item["host"] == stopped and item["url"] != target:
                # its next robots.txt try is past the cap: stopped at once
                items.append({**item, "delay_s": 128.0})
        items = [{**i, "follow_quota": 5, "follow_known": None} for i in items]
        rows = page_rows(list(run_fetch_task(items, config(web, "fetch.follow_depth=1"),
                                             "s1", 0, None, 60)))  # fmt: skip
    got = rows[target]
    assert (got["outcome"], got.get("error"), got["linked_from"]) == (
        "deferred",
        "robots_unreachable",
        source,
    )
    requested = {(r["host"], r["path"]) for r in read_log(web.access_log)}
    assert (stopped, "/" + target.split("/", 3)[3]) not in requested


def test_links_of_hosts_without_room_are_left_to_updatedb(
    model: WebModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # With following on but no room from generate (follow_quota 0, no known
    # URLs), no link of the page is settled in the task, not even one its
    # host's robots.txt disallows: whether crawldb knows it cannot be told,
    # so updatedb decides, and the page's links are followed without error.
    with TestWeb(model, tmp_path / "web") as web:
        items = home_items(model, web.port, quota=0)
        rows = list(run_fetch_task(items, config(web, "fetch.follow_depth=3"), "s1", 0, None, 60))
    by_url = page_rows(rows)
    assert set(by_url) == {i["url"] for i in items}
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    # the homepages do link to pages their robots.txt disallows
    hosts = {h.name for h in model.hosts}
    assert any(
        model.is_disallowed(host_of(u), "/" + u.split("/", 3)[3], AGENT)
        for r in by_url.values()
        if r["outcome"] == "success"
        for u in followable(r, hosts)
        if host_of(u) == r["host"]
    )


def test_rows_are_handed_out_while_the_task_still_fetches(model: WebModel, tmp_path: Path) -> None:
    # The fetch stage converts and writes rows as the task makes them: the
    # first comes out while the task still has requests to send (one host,
    # a page every 0.3 s, so the task lasts seconds past its first batch).
    host = max(
        (h for h in model.hosts if h.robots_status == 200),
        key=lambda h: sum(model.expected_status(h.name, p.path) == 200 for p in h.pages),
    )
    with TestWeb(model, tmp_path / "web") as web:
        items = [i for i in items_for(model, web.port) if i["host"] == host.name]
        cfg = config(web, "politeness.min_delay_s=0.3")
        rows = run_fetch_task(items, cfg, "seg1", 0, None, time_limit_s=120)
        first = next(rows)
        requests_then = len(read_log(web.access_log))
        rest = list(rows)
        requests_at_end = len(read_log(web.access_log))
    assert len(items) >= 8
    assert requests_then < requests_at_end
    assert len(page_rows([first, *rest])) == len(items)


def test_a_full_disk_fails_the_task_and_keeps_no_warc_file(model: WebModel, tmp_path: Path) -> None:
    """A WARC write that fails does not become a page to retry, with more
    records appended after a torn one: the workers stop, the task fails (its
    re-run writes its files again) and every file it opened is dropped."""
    room = [30_000]  # bytes left on the "disk", shared by the task's files
    opened: list[Any] = []

    class Disk(io.BytesIO):
        aborted = False

        def write(self, data: Any) -> int:
            if len(data) > room[0]:
                raise OSError(28, "No space left on device")
            room[0] -= len(data)
            return super().write(data)

        def abort(self) -> None:
            self.aborted = True

    def open_file(name: str) -> Disk:
        opened.append(Disk())
        return opened[-1]

    with TestWeb(model, tmp_path / "web") as web:
        items = items_for(model, web.port)
        rows: list[dict[str, Any]] = []
        with pytest.raises(ArchiveFailed, match="No space left on device"):
            rows.extend(run_fetch_task(items, config(web), "seg1", 0, open_file, time_limit_s=60))
    assert opened and all(f.aborted for f in opened)
    assert not any(str(r.get("error") or "").startswith("internal:") for r in rows)
    assert len(rows) < len(items)  # it stopped, not fetched on
