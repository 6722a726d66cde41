"""The fetch task against the hostile hosts of the test web (trawl.testweb.hostile).

Each hostile host is crawled alone in a fetch task with short limits, and its
fetch row must say which limit or guard ended it, within that limit. Then all
of them are crawled in one task together with well-behaved hosts, which must
come back as if nothing had happened. Every timing asserted here is a bound on
a configured limit (total time plus slack), not a speed measurement.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawl.config import Config, load_config
from trawl.fetch.task import run_fetch_task
from trawl.net.client import HttpClient
from trawl.net.response import FetchError
from trawl.testweb import TestWeb, WebModel, hostile
from trawl.testweb.audit import read_log
from trawl.testweb.hostile import BY_NAME, CATALOGUE, HOSTILE_HOSTS, HostileHost
from trawl.url.keys import host_bucket, url_fingerprint
from trawl.url.normalize import normalize

TOTAL_S = 4.0  # http.total_timeout_s
SLACK_S = 3.0  # a bound on a limit, not a benchmark: room for a loaded CI machine
LIMITS = [
    "http.read_timeout_s=2",
    f"http.total_timeout_s={TOTAL_S}",
    "http.min_transfer_rate_bps=512",
    "http.transfer_rate_window_s=2",
    "http.max_content_bytes=1000000",
    "politeness.min_delay_s=0.05",
    "fetch.threads_per_task=8",
    # One exchange per hostile host is what is measured: the soft-404 probe
    # (trawl.dedup.soft404, on by default) would be a second one to each.
    "traps.soft404_probe=false",
]
BY_KIND = {h.kind: h for h in CATALOGUE}
Row = dict[str, Any]


@pytest.fixture(scope="module")
def model() -> WebModel:
    m = WebModel.generate(34, hosts=6, ips=2)
    # the normal hosts answer at once: no slow host, no Crawl-delay, no 5xx robots.txt
    assert not any(h.slow or h.crawl_delay or h.robots_status >= 500 for h in m.hosts)
    return m


@pytest.fixture(scope="module")
def web(model: WebModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    hostile.gzip_bomb()  # the bombs are made once, before any fetch clock runs
    hostile.brotli_bomb()
    with TestWeb(model, tmp_path_factory.mktemp("web"), hostile=True) as served:
        yield served


def config(web: TestWeb) -> Config:
    overrides = [f"dns.hosts_file={web.hosts_file}", 'fetch.allow_networks=["127.0.0.0/8"]']
    return load_config(None, [*overrides, *LIMITS], environ={})


def item(host: str, path: str, port: int) -> Row:
    url = normalize(f"http://{host}:{port}{path}")
    return {
        "url": url,
        "url_fp": url_fingerprint(url),
        "host": host,
        "host_bucket": host_bucket(host, 8),
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


def warc_records(warc_dir: Path) -> list[tuple[str, str | None, int]]:
    """(type, target URI, raw block length) of every record; warcio must read
    them all, and every file (opened when first needed) starts with warcinfo."""
    out = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as fh:
            records = [
                (r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), len(r.raw_stream.read()))
                for r in ArchiveIterator(fh)
            ]
        assert records[0][0] == "warcinfo", path
        out += records
    return out


class Crawl:
    """One fetch task's rows and wall time."""

    def __init__(self, web: TestWeb, items: list[Row], warc_dir: Path, limit_s: float) -> None:
        self.web = web
        self.began = time.time()  # the access log's clock
        started = time.monotonic()
        self.rows = list(run_fetch_task(items, config(web), "seg1", 0, str(warc_dir), limit_s))
        self.took_s = time.monotonic() - started
        self.ended = time.time()
        self.warc_dir = warc_dir

    def requests(self, host: str, wait_for: str | None = "/") -> list[Row]:
        """Access-log records of ``host`` from requests this task made, waiting
        up to SLACK_S for ``wait_for``'s: a hostile writer logs when it ends."""
        give_up = time.monotonic() + SLACK_S
        while True:
            records = [
                r
                for r in read_log(self.web.access_log)
                if r["host"] == host and self.began <= r["start"] <= self.ended
            ]
            done = wait_for is None or any(r["path"] == wait_for for r in records)
            if done or time.monotonic() > give_up:
                return records
            time.sleep(0.05)

    def page(self, url: str) -> Row:
        (row,) = [r for r in self.rows if r["kind"] == "page" and r["url"] == url]
        return row

    def robots(self, host: str) -> list[Row]:
        return [r for r in self.rows if r["kind"] == "robots" and r["host"] == host]


@pytest.fixture(scope="module")
def crawls(web: TestWeb, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Crawl]:
    """Each hostile host's "/" crawled alone, in its own task (run on first use)."""

    class Lazy(dict[str, Crawl]):
        def __missing__(self, kind: str) -> Crawl:
            host = BY_KIND[kind].name
            warc_dir = tmp_path_factory.mktemp(f"warc-{kind}")
            self[kind] = crawl = Crawl(web, [item(host, "/", web.port)], warc_dir, 30)
            return crawl

    return Lazy()


def home(web: TestWeb, h: HostileHost) -> str:
    return normalize(f"http://{h.name}:{web.port}/")


# -- the catalogue ------------------------------------------------------------------


def test_catalogue_names_addresses_and_hosts_file(web: TestWeb, model: WebModel) -> None:
    assert len(HOSTILE_HOSTS) == len(set(HOSTILE_HOSTS.values())) == len(CATALOGUE)
    assert all(name.endswith(".hostile.test") for name in HOSTILE_HOSTS.values())
    served = [h for h in CATALOGUE if h.served]
    addresses = [h.address for h in served]
    assert len(set(addresses)) == len(served)  # one address each: no shared politeness clock
    assert not set(addresses) & set(model.ips)
    pinned = {
        line.split()[1]: line.split()[0]
        for line in web.hosts_file.read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert HOSTILE_HOSTS["unresolvable"] not in pinned
    assert pinned[HOSTILE_HOSTS["private"]] == hostile.PRIVATE_ADDRESS
    assert {name: ip for name, ip in pinned.items() if name in BY_NAME} == {
        h.name: h.address for h in CATALOGUE if h.address is not None
    }
    for h in model.hosts:
        assert pinned[h.name] == h.ip  # the model's hosts are still there


# -- one host at a time -------------------------------------------------------------


@pytest.mark.parametrize("kind", list(BY_KIND))
def test_each_hostile_host_ends_within_its_limit(
    web: TestWeb, crawls: dict[str, Crawl], kind: str
) -> None:
    h = BY_KIND[kind]
    crawl = crawls[kind]
    row = crawl.page(home(web, h))
    assert (row["outcome"], row.get("truncated")) == (h.outcome, h.truncated), row
    if h.error is None:
        assert row.get("error") is None
    else:
        assert (row.get("error") or "").startswith(h.error), row.get("error")
    # within the limits: the page's own exchange, and the task around it
    if row.get("elapsed_s") is not None:
        assert row["elapsed_s"] <= TOTAL_S + SLACK_S
    assert crawl.took_s <= TOTAL_S + SLACK_S
    robots = crawl.robots(h.name)
    if h.robots is None:
        assert robots == []
    else:
        assert [r["robots_decision"] for r in robots] == [h.robots]
    # what reached the server, and what was archived
    records = warc_records(crawl.warc_dir)
    responses = [r for r in records if r[0] == "response"]
    if not h.served:
        assert crawl.requests(h.name, wait_for=None) == []
        assert responses == []
        return
    log = [r for r in crawl.requests(h.name) if r["path"] == "/"]
    assert len(log) == 1 and log[0]["hostile"]  # the writer ended: the client left
    assert log[0]["end"] - log[0]["start"] <= TOTAL_S + SLACK_S
    archived = [r for r in responses if r[1] == row["url"]]
    if row.get("http_status") is None:  # no response head: nothing to archive
        assert archived == []
    else:
        assert len(archived) == 1
        assert (row.get("warc_length") or 0) > 0


def test_drip_is_cut_by_the_transfer_rate_not_the_total_time(
    web: TestWeb, crawls: dict[str, Crawl]
) -> None:
    row = crawls["drip"].page(home(web, BY_KIND["drip"]))
    # 1 byte/s against 512 bytes/s over a 2 s window: cut after about a window
    assert 2.0 <= row["elapsed_s"] - row["ttfb_s"] < TOTAL_S
    assert 0 < row["bytes"] < 10


def test_fast_endless_and_huge_bodies_stop_at_time_and_length(
    web: TestWeb, crawls: dict[str, Crawl]
) -> None:
    endless = crawls["endless"].page(home(web, BY_KIND["endless"]))
    assert endless["elapsed_s"] >= TOTAL_S - 0.5  # fast enough for the rate, so the total
    assert 10_000 < endless["bytes"] < 1_000_000
    huge = crawls["huge"].page(home(web, BY_KIND["huge"]))
    assert huge["bytes"] == 1_000_000


@pytest.mark.parametrize("kind", ["gzip_bomb", "brotli_bomb"])
def test_bombs_stop_at_the_decoded_cap(web: TestWeb, crawls: dict[str, Crawl], kind: str) -> None:
    row = crawls[kind].page(home(web, BY_KIND[kind]))
    cap = config(web).http.max_decompressed_bytes
    assert row["bytes"] < 300_000  # small on the wire ...
    assert row["content_sha256"] == hashlib.sha256(bytes(cap)).hexdigest()  # ... cap on decoding


@pytest.mark.parametrize(
    ("kind", "first_hop", "robots_paths"),
    [
        ("redirect_loop", "/loop", ["/robots.txt", "/robots-loop.txt"] * 3),
        ("redirect_chain", "/r/1", ["/robots.txt", "/r/1", "/r/2", "/r/3", "/r/4", "/r/5"]),
    ],
)
def test_redirect_traps_end_robots_after_five_hops(
    web: TestWeb, crawls: dict[str, Crawl], kind: str, first_hop: str, robots_paths: list[str]
) -> None:
    h = BY_KIND[kind]
    crawl = crawls[kind]
    # RFC 9309 2.3.1.2: five redirects followed, then "unavailable" (allow all)
    (robots,) = crawl.robots(h.name)
    assert robots["robots_decision"] == "too_many_redirects"
    assert [r["path"] for r in crawl.requests(h.name)] == [*robots_paths, "/"]
    # the page itself: the redirect is recorded, not followed
    row = crawl.page(home(web, h))
    assert row.get("redirect_to") == normalize(f"http://{h.name}:{web.port}{first_hop}")


def test_content_that_is_not_what_it_says(web: TestWeb, crawls: dict[str, Crawl]) -> None:
    png = crawls["html_as_png"].page(home(web, BY_KIND["html_as_png"]))
    assert png["content_type"] == "image/png"
    assert png.get("outlinks") == []  # links in the bytes, but an image is not parsed
    binary = crawls["binary_as_html"].page(home(web, BY_KIND["binary_as_html"]))
    assert binary["bytes"] == 65_536 and binary.get("outlinks") == []
    garbage = crawls["garbage_html"].page(home(web, BY_KIND["garbage_html"]))
    base = f"http://{BY_KIND['garbage_html'].name}:{web.port}"
    found = {o["url"] for o in garbage.get("outlinks", [])}
    assert {f"{base}/a", f"{base}/b", f"{base}/cd"} <= found  # NUL dropped from the href


def test_reset_mid_body_keeps_what_came(web: TestWeb, crawls: dict[str, Crawl]) -> None:
    row = crawls["reset_mid_body"].page(home(web, BY_KIND["reset_mid_body"]))
    assert row["bytes"] == 10_000


def test_broken_headers_keep_the_body(web: TestWeb, crawls: dict[str, Crawl]) -> None:
    # http.client stops reading fields at the line without a colon, so the
    # Content-Length after it is not seen and the body ends with the connection.
    row = crawls["broken_headers"].page(home(web, BY_KIND["broken_headers"]))
    assert row.get("http_status") == 200 and row["bytes"] > 0
    assert ["Content-Length", "999999"] not in row["headers"]


# -- all at once --------------------------------------------------------------------


def test_hostile_hosts_do_not_disturb_the_others(
    web: TestWeb, model: WebModel, tmp_path: Path
) -> None:
    port = web.port
    normal = []
    for h in model.hosts:  # up to 6 pages a host: enough to see a disturbance, quick to fetch
        fine = [p.path for p in h.pages if p.status == 200 and p.redirect_to is None]
        allowed = [path for path in fine if not model.is_disallowed(h.name, path)]
        normal += [item(h.name, path, port) for path in allowed[:6]]
    normal += [item(BY_KIND["calm"].name, path, port) for path in BY_KIND["calm"].paths]
    hostile_items = [
        item(h.name, path, port) for h in CATALOGUE if h.kind != "calm" for path in h.paths
    ]
    limit_s = 15.0
    crawl = Crawl(web, normal + hostile_items, tmp_path / "warc", limit_s)
    assert crawl.took_s <= limit_s + 1.0
    # every normal page fetched as if the hostile hosts were not there
    for want in normal:
        row = crawl.page(want["url"])
        assert row["outcome"] == "success", row
        assert row.get("truncated") is None and row.get("error") is None
    # each hostile "/" ends as it does alone
    for h in CATALOGUE:
        row = crawl.page(home(web, h))
        assert (row["outcome"], row.get("truncated")) == (h.outcome, h.truncated), row
        assert row.get("elapsed_s") is None or row["elapsed_s"] <= TOTAL_S + SLACK_S
    pages = [r for r in crawl.rows if r["kind"] == "page"]
    assert len(pages) == len(normal) + len(hostile_items)
    assert not [r for r in pages if r["outcome"] == "not_reached"]
    # the task's WARC files read back whole
    records = warc_records(tmp_path / "warc")
    archived = {uri for kind, uri, _ in records if kind in ("response", "revisit")}
    assert {r["url"] for r in pages if r.get("warc_file")} <= archived


def test_a_task_cut_by_its_time_limit_mid_transfer_ends_on_time(
    web: TestWeb, tmp_path: Path
) -> None:
    # slow_head and endless would each run to the 4 s total timeout; the task's
    # 1.5 s limit comes first and cuts the requests in flight, not after them.
    kinds = ("slow_head", "endless", "drip")
    items = [item(BY_KIND[k].name, "/", web.port) for k in kinds]
    limit_s = 1.5
    crawl = Crawl(web, items, tmp_path / "warc", limit_s)
    assert crawl.took_s <= limit_s + 1.0
    for k in kinds:
        row = crawl.page(home(web, BY_KIND[k]))
        # cut mid-body (truncated: time), or before a head came (retry)
        assert row["outcome"] in ("success", "retry"), row
        assert row["outcome"] == "retry" or row["truncated"] == "time", row


def test_stop_ends_hostile_writers_promptly(model: WebModel, tmp_path: Path) -> None:
    web = TestWeb(model, tmp_path / "web", hostile=True).start()
    results: dict[str, str | None] = {}

    def fetch(kind: str) -> None:
        h = BY_KIND[kind]
        assert h.address is not None
        with HttpClient("trawl-test/1", read_timeout_s=30, total_timeout_s=60) as client:
            try:
                results[kind] = client.get(f"http://{h.name}:{web.port}/", h.address).truncated
            except FetchError as exc:
                results[kind] = exc.kind

    kinds = ("drip", "endless", "slow_head")
    clients = [threading.Thread(target=fetch, args=(kind,)) for kind in kinds]
    for thread in clients:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    web.stop()
    stop_s = time.monotonic() - started
    for thread in clients:
        thread.join(timeout=10)
    assert stop_s < 2.0  # every writer noticed; no thread was left to its socket timeout
    # the clients saw the connections cut, not a limit of their own
    assert results == {"drip": "disconnect", "endless": "disconnect", "slow_head": "read"}
