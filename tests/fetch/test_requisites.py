"""Page requisites in one fetch task (``requisites.capture``), without Spark:
what a page needs is fetched right after it, under robots.txt, each URL
once; what crawldb holds (``requisites_known``) waits until due; the same
bytes under another URL are a revisit, in this task or of a copy an
earlier segment stored (``requisites_stored``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.fetch.test_task import config, items_for, warc_by_type
from trawl.fetch.task import run_fetch_task
from trawl.testweb import TestWeb, WebModel
from trawl.testweb.audit import read_log

SEED = 44


def one_host(model: WebModel, port: int) -> tuple[str, list[dict[str, Any]]]:
    """The fetch-list items of the host whose pages show the logo's copy."""
    copies = model.identical_requisites(port)
    assert copies, "the seed needs a byte-identical logo copy"
    host = copies[0][0].split("/")[2].split(":")[0]
    return host, [i for i in items_for(model, port) if i["host"] == host]


def fetch(
    web: TestWeb, items: list[dict[str, Any]], out: Path, capture: bool = True
) -> list[dict[str, Any]]:
    cfg = config(web, f"requisites.capture={str(capture).lower()}")
    return list(run_fetch_task(items, cfg, "seg", 0, str(out), 60))


def test_requisites_come_right_after_their_page_once_each(tmp_path: Path) -> None:
    model = WebModel.generate(SEED, hosts=4, ips=2, pages_per_host=(3, 5), requisites=True)
    with TestWeb(model, tmp_path / "web") as web:
        host, items = one_host(model, web.port)
        items[0]["requisites_known"] = []  # crawldb holds none of the host's
        rows = fetch(web, items, tmp_path / "w")
        log = [r for r in read_log(web.access_log) if r["host"] == host]
    pages = [r for r in rows if r["kind"] == "page" and r["outcome"] == "success"]
    requisites = [r for r in rows if r["kind"] == "requisite"]
    needed = {req.url for p in pages for req in model.requisites_of(p["url"], web.port)}
    on_host = {u for u in needed if f"//{host}:" in u}
    assert on_host and {r["url"] for r in requisites} == on_host
    assert all(r["linked_from"] for r in requisites)
    # each requested once, nothing of another host (the CDN's waits for updatedb)
    paths = Counter(r["path"] for r in log)
    assert all(n == 1 for n in paths.values()), paths
    # a page's requisites not fetched yet are its host's next requests
    order = [r["path"] for r in log]
    checked = 0
    for page in pages:
        at = order.index(page["url"].split(f":{web.port}", 1)[1])
        own = {
            req.url.split(f":{web.port}", 1)[1]
            for req in model.requisites_of(page["url"], web.port)
        }
        if own & set(order[at + 1 :]) - set(order[:at]):
            assert order[at + 1] in own, order[at : at + 3]
            checked += 1
    assert checked


def test_a_copy_an_earlier_segment_stored_is_a_revisit(tmp_path: Path) -> None:
    model = WebModel.generate(SEED, hosts=4, ips=2, pages_per_host=(3, 5), requisites=True)
    with TestWeb(model, tmp_path / "web") as web:
        _, items = one_host(model, web.port)
        items = items[:1]
        items[0]["requisites_known"] = []
        first = fetch(web, items, tmp_path / "w1")
        stored = [
            r["stored_capture"]
            for r in first
            if r["kind"] == "requisite" and r.get("stored_capture")
        ]
        assert stored
        # the same page again, as if crawldb had lost the requisites' rows but
        # kept their copies: every payload is already stored
        again = [{**items[0], "requisites_known": [], "requisites_stored": stored}]
        second = fetch(web, again, tmp_path / "w2")
        # and without the copies, a full capture again
        third = fetch(web, [{**items[0], "requisites_known": []}], tmp_path / "w3")
    ids = {c["record_id"] for c in stored}
    fetched = [r for r in second if r["kind"] == "requisite" and r["outcome"] == "success"]
    assert fetched and all(r["stored_capture"]["record_id"] in ids for r in fetched)
    revisits = warc_by_type(tmp_path / "w2")["revisit"]
    assert len(revisits) == len(fetched)
    assert all(h["WARC-Refers-To"] in ids for h, _ in revisits)
    # without them: captured again (only the task's own copy is a revisit)
    assert all(h["WARC-Refers-To"] not in ids for h, _ in warc_by_type(tmp_path / "w3")["revisit"])
    again_captured = [r for r in third if r["kind"] == "requisite" and r["outcome"] == "success"]
    assert len(again_captured) == len(fetched)
    assert not [r for r in again_captured if r["stored_capture"]["record_id"] in ids]


def test_with_capture_off_pages_are_all_there_is(tmp_path: Path) -> None:
    # the archive preset off (the default): not a requisite asked for or
    # listed, so updatedb has none to add either; a fetch list an archive
    # crawl made (its columns filled) changes nothing
    model = WebModel.generate(SEED, hosts=4, ips=2, pages_per_host=(3, 5), requisites=True)
    with TestWeb(model, tmp_path / "web") as web:
        items = items_for(model, web.port)
        items[0]["requisites_known"] = []
        rows = fetch(web, items, tmp_path / "w", capture=False)
        log = read_log(web.access_log)
    assert {r["kind"] for r in rows} <= {"page", "robots", "probe"}
    assert any(r["kind"] == "page" and r["outcome"] == "success" for r in rows)
    assert not any(r.get("requisites") for r in rows)
    assert not [r["path"] for r in log if r["path"].startswith(("/static/", "/shared/"))]
