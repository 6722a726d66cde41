"""Page requisites on Spark (``requisites.capture``, the archive preset): a
crawl of a test web whose pages need images (srcset too), a stylesheet with
an ``@import`` and ``url()``s, a font, a script, an icon and a banner on
another host captures every requisite of the pages it fetched exactly once,
requests none that robots.txt disallows, stays polite, records them in
crawldb as requisites (never crawled as pages) and archives a copy already
stored as a revisit record. With the switch off nothing of this happens."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.browser import Browser
from tests.warc.pywb import pywb_serving
from tests.warc.replaywebpage import open_replayed, viewer_serving
from tests.warc.test_wacz import wacz_validate
from trawl.config import Config, load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.runner.archive import run_wacz_export
from trawl.stages.export import Selection
from trawl.store.tables import read_segment_table, read_table, segment_path
from trawl.testweb import TestWeb, WebModel, politeness_audit
from trawl.testweb.audit import read_log

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SEED = 44  # 8 hosts: a CDN host, hosts whose robots.txt disallows a requisite
MIN_GAP = 0.05


def settings(web: TestWeb, *extra: str) -> Config:
    return load_config(
        None,
        [
            f"dns.hosts_file={web.hosts_file}",
            'fetch.allow_networks=["127.0.0.0/8"]',
            f"politeness.min_delay_s={MIN_GAP}",
            "politeness.delay_factor=1.0",
            "fetch.time_limit_s=120",
            "generate.max_per_host=40",
            "crawl.host_buckets=4",
            *extra,
        ],
        environ={},
    )


@pytest.fixture(scope="module")
def archived(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three cycles of the archive preset, shared by the module's tests."""
    return crawl(spark, tmp_path_factory.mktemp("archive"), 3, "requisites.capture=true")


def crawl(spark: Any, tmp_path: Path, cycles: int, *extra: str) -> dict[str, Any]:
    """``cycles`` cycles an hour apart over the whole web (every host seeded)."""
    model = WebModel.generate(SEED, hosts=8, ips=3, pages_per_host=(3, 6), requisites=True)
    root = str(tmp_path / "crawl")
    with TestWeb(model, tmp_path / "web", n_seeds=len(model.hosts)) as web:
        cfg = settings(web, *extra)
        segments = []
        for i in range(cycles):
            at = AT + timedelta(hours=i)
            ctx = JobContext(spark, cfg, root, segment_id(at), at)
            if i == 0:
                run_inject(ctx, [str(web.seeds_file)])
            run_generate(ctx)
            run_fetch(ctx)
            run_updatedb(ctx)
            segments.append(ctx.segment)
        port = web.port
        log = read_log(web.access_log)
        access_log = web.access_log
    rows = [
        r.asDict(recursive=True)
        for seg in segments
        for r in read_segment_table(spark, root, seg, "fetch").collect()
    ]
    return {
        "model": model, "port": port, "log": log, "access_log": access_log, "rows": rows,
        "root": root, "segments": segments, "cfg": cfg,
    }  # fmt: skip


def requested(log: list[dict[str, Any]], port: int) -> Counter[str]:
    """GET requests by URL, as the test web's URLs are spelled."""
    return Counter(f"http://{r['host']}:{port}{r['path']}" for r in log if r.get("method") == "GET")


def test_a_crawl_captures_every_requisite_once_politely(
    spark: Any, archived: dict[str, Any]
) -> None:
    done = archived
    model, port, rows = done["model"], done["port"], done["rows"]
    pages = {
        r["url"]
        for r in rows
        if r["kind"] == "page" and r["outcome"] == "success" and "html" in (r["content_type"] or "")
    }
    assert len(pages) >= 20
    needed = {}
    for url in pages:
        for req in model.requisites_of(url, port):
            needed.setdefault(req.url, req)
    allowed = {u for u, req in needed.items() if req.allowed}
    denied = set(needed) - allowed
    assert denied, "the web has requisites robots.txt disallows (model seed)"
    assert model.cdn_host and any(urlsplit(u).hostname == model.cdn_host for u in allowed)
    asked = requested(done["log"], port)
    # every requisite of a fetched page captured, once in three cycles
    assert {u: asked[u] for u in allowed if asked[u] != 1} == {}
    # nothing robots.txt disallows was requested, by anyone
    assert not denied & set(asked)
    # kinds: every requisite came out as a requisite row, never as a page
    by_kind: dict[str, set[str]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], set()).add(r["url"])
    assert allowed <= by_kind["requisite"]
    assert not by_kind["requisite"] & by_kind["page"]
    denied_rows = {
        r["url"] for r in rows if r["kind"] == "requisite" and r["outcome"] == "robots_denied"
    }
    assert denied <= denied_rows  # recorded, unrequested
    # their fetch rows: no links, a stylesheet's url()s and @imports
    ok = [r for r in rows if r["kind"] == "requisite" and r["outcome"] == "success"]
    assert all(not r["outlinks"] for r in ok)
    css = [r for r in ok if (r["content_type"] or "").startswith("text/css")]
    assert css and all(r["requisites"] for r in css)
    # crawldb: each requisite once, source requisite, fetched and not due for hours
    crawldb = {r["url"]: r for r in read_table(spark, done["root"], "crawldb").collect()}
    for url in allowed:
        assert crawldb[url]["source"] == "requisite", url
        assert crawldb[url]["status"] == "fetched" and crawldb[url]["fetches"] == 1, url
    # the politeness audit is clean over pages and requisites alike
    audit = politeness_audit(done["access_log"], MIN_GAP, model=model)
    assert audit.hosts_with_overlap == 0 and audit.max_in_flight_per_ip <= 1
    assert audit.gaps_below_min == 0 and audit.ip_gaps_below_min == 0
    # a byte-identical copy under another URL is a revisit of the stored one
    copies = [group for group in model.identical_requisites(port) if set(group) <= allowed]
    assert copies
    records = warc_records(done["root"], done["segments"])
    for group in copies:
        types = sorted(records[url] for url in group)
        assert types == ["response", "revisit"], (group, types)


def warc_records(root: str, segments: list[str]) -> dict[str, str]:
    """WARC-Target-URI -> record type of every response and revisit record."""
    out: dict[str, str] = {}
    for seg in segments:
        for path in Path(segment_path(root, seg, "warc")).rglob("*.warc.gz"):
            with path.open("rb") as fh:
                for record in ArchiveIterator(fh):
                    if record.rec_type in ("response", "revisit"):
                        out[record.rec_headers.get_header("WARC-Target-URI")] = record.rec_type
    return out


def test_the_export_replays_whole_in_a_browser(
    spark: Any, archived: dict[str, Any], tmp_path: Path
) -> None:
    # The crawl's WACZ passes py-wacz's validator, pywb serves it, and a page
    # opened in headless Chromium loads every requisite from the archive
    # (each once, 200, dated by pywb: Memento-Datetime), runs its script,
    # paints its images and logs no error; and so it does in ReplayWeb.page,
    # which reads the package in the browser (tests.warc.replaywebpage).
    done = archived
    model, port, rows = done["model"], done["port"], done["rows"]
    at = AT + timedelta(days=1)
    ctx = JobContext(spark, done["cfg"], done["root"], segment_id(at), at)
    wacz = tmp_path / "crawl.wacz"
    made = run_wacz_export(ctx, Selection(statuses=("2xx",)), str(wacz))
    assert made["pages"] >= 20 and not made["missing"]
    checked = wacz_validate(wacz)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the page needing most, the CDN's banner among it (captured in a later
    # segment), all of it allowed by robots.txt (a disallowed image was
    # never captured, and would rightly fail in replay)
    fetched = {
        r["url"]: r for r in rows
        if r["kind"] == "page" and r["outcome"] == "success"
        and "html" in (r["content_type"] or "")
    }  # fmt: skip
    needs = {url: model.requisites_of(url, port) for url in fetched}
    url = max(
        (u for u, reqs in needs.items() if all(req.allowed for req in reqs)),
        key=lambda u: (any("/shared/" in req.url for req in needs[u]), len(needs[u]), u),
    )
    assert len(needs[url]) >= 9  # stylesheet, import, font, image in CSS, icon, script, images
    stamp = fetched[url]["fetched_at"].astimezone(UTC).strftime("%Y%m%d%H%M%S")
    with (
        pywb_serving(tmp_path / "pywb", {"crawl": [wacz]}) as replay,
        viewer_serving(wacz) as viewer,
        Browser(tmp_path / "browser", reach=[replay.base_url, viewer.base_url]) as browser,
    ):
        visit = browser.open(replay.url("crawl", url, stamp))
        assert visit.navigation_error is None
        assert [r.url for r in visit.requests if not r.url.startswith(replay.base_url)] == []
        assert visit.failed() == []
        got = archived_requests(visit.requests, replay.base_url)
        for req in needs[url]:
            if req.url.endswith("-2x.png"):
                continue  # a srcset candidate the browser (pixel ratio 1) does not pick
            assert got.get(req.url) == 1, (req, sorted(got))
        images = visit.evaluate(
            "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
        )
        assert images and all(images)
        assert visit.evaluate("document.documentElement.dataset.appRan") == "1"
        assert (visit.errors, visit.exceptions) == ([], [])
        shot = visit.screenshot(tmp_path / "replay.png")
        # the same page in ReplayWeb.page: every requisite answered from the
        # package (by the viewer's worker, which may ask for one twice: the
        # icon, for its tab), nothing failed but the viewer's own
        replayed = open_replayed(browser, viewer, url, stamp)
        assert replayed.failed() == []
        answers = replayed.archived()
        for req in needs[url]:
            if not req.url.endswith("-2x.png"):
                statuses = {r.status for r in answers.get(req.url, [])}
                assert statuses == {200}, (req, sorted(answers))
        images = replayed.evaluate(
            "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
        )
        assert images and all(images)
        assert replayed.evaluate("document.documentElement.dataset.appRan") == "1"
        assert (replayed.errors, replayed.visit.exceptions) == ([], [])
        viewed = replayed.screenshot(tmp_path / "replaywebpage.png")
    assert shot.stat().st_size > 1000 and viewed.stat().st_size > 1000
    if keep := os.environ.get("TRAWL_KEEP_SCREENSHOT"):
        shutil.copyfile(shot, keep)


def archived_requests(requests: list[Any], base: str) -> Counter[str]:
    """Requests answered from pywb's archive (Memento-Datetime), by the
    archived URL (``<base>/<coll>/<timestamp><modifier>/<url>``)."""
    form = re.compile(re.escape(base) + r"/[^/]+/\d*(?:[a-z]{2}_)?/(.+)")
    out: Counter[str] = Counter()
    for request in requests:
        match = form.fullmatch(request.url)
        if match and request.status == 200 and "memento-datetime" in request.headers:
            out[match.group(1)] += 1
    return out
