"""A fetch task whose egress is a proxy (``http.proxy``): the test web on
127.0.1.x reached only through ``tests/net/test_proxy.py``'s proxy on
127.0.0.1, which resolves the web's names from its hosts file as a real
proxy would from DNS.

What must hold, end to end: every request goes through the proxy with its
credentials; politeness still counts per target host and address; the WARC
records the exchange with the target (origin-form request, no
Proxy-Authorization, the target's WARC-IP-Address); the SSRF guard still
judges the target's address while the proxy's own loopback address is
allowed; a dead proxy is a "proxy" error, not a crash.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.archiveiterator import ArchiveIterator

from tests.fetch.test_task import MIN_GAP, config, items_for, read_log
from tests.net.test_proxy import BASIC, PASSWORD, USERINFO, dead_port, running_proxy
from trawl.fetch.task import run_fetch_task
from trawl.net.resolver import parse_hosts
from trawl.testweb import TestWeb, WebModel, politeness_audit
from trawl.url.keys import host_bucket, url_fingerprint

SEED = 34
WEB_ONLY = 'fetch.allow_networks=["127.0.1.0/24"]'  # the web's addresses, not the proxy's
PRIVATE = "private.test"  # pinned to 127.0.0.1: loopback outside allow_networks


def small_web() -> WebModel:
    return WebModel.generate(SEED, hosts=4, ips=2, pages_per_host=(3, 6))


def private_item(port: int) -> dict[str, Any]:
    url = f"http://{PRIVATE}:{port}/"
    return {"url": url, "url_fp": url_fingerprint(url), "host": PRIVATE,
            "host_bucket": host_bucket(PRIVATE, 8), "task": 0, "depth": 1}  # fmt: skip


def warc_records(directory: Path) -> tuple[list[Any], bytes]:
    """The request records of every WARC file, and all the files' bytes, decompressed."""
    requests, raw = [], b""
    for path in sorted(directory.glob("*.warc.gz")):
        raw += gzip.decompress(path.read_bytes())
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "request":
                    requests.append(
                        (record.rec_headers, record.http_headers.protocol,
                         record.http_headers.statusline, record.http_headers.headers)
                    )  # fmt: skip
    return requests, raw


def test_a_fetch_task_through_the_proxy_records_the_exchange_with_the_target(
    tmp_path: Path,
) -> None:
    model = small_web()
    with TestWeb(model, tmp_path / "web") as web:
        with web.hosts_file.open("a", encoding="utf-8") as fh:
            fh.write(f"127.0.0.1 {PRIVATE}\n")
        names = {name: str(ip) for name, ip in parse_hosts(web.hosts_file.read_text()).items()}
        with running_proxy(names=names, credentials=BASIC) as proxy:
            cfg = config(web, f"http.proxy={proxy.url(USERINFO)}", WEB_ONLY, allow=False)
            items = [*items_for(model, web.port), private_item(web.port)]
            rows = list(run_fetch_task(items, cfg, "seg1", 0, str(tmp_path / "warc"), 60))
        port = web.port
    served = read_log(web.access_log)
    assert served and {r["outcome"] for r in rows} >= {"success"}

    # every request the web answered came through the proxy, with the credentials,
    # and the proxy reached each host at its own address
    relayed = Counter((urlsplit(e.target).hostname, e.upstream) for e in proxy.log)
    assert relayed == Counter((r["host"], f"{r['ip']}:{port}") for r in served)
    assert {(e.method, e.authorization) for e in proxy.log} == {("GET", BASIC)}
    for host in {r["host"] for r in served}:
        assert {r["ip"] for r in served if r["host"] == host} == {model.host(host).ip}  # type: ignore[union-attr]

    # the SSRF guard judged the target, not the proxy: private.test is refused
    private = [r for r in rows if r["host"] == PRIVATE]
    assert [(r["outcome"], r["error"]) for r in private] == [("blocked", "address: loopback")]
    assert PRIVATE not in {urlsplit(e.target).hostname for e in proxy.log}

    # politeness per host and per address, as without a proxy
    audit = politeness_audit(web.access_log, MIN_GAP, model=model)
    assert audit.requests == len(served)
    assert audit.gaps_below_min == 0, audit
    assert audit.max_in_flight_per_host <= 1 and audit.max_in_flight_per_ip <= 1

    # WARC: the request as the target saw it, at the target's address
    requests, raw = warc_records(tmp_path / "warc")
    assert len(requests) == len(served)
    for warc_headers, method, line, fields in requests:
        host = urlsplit(warc_headers.get_header("WARC-Target-URI")).hostname
        assert (method, line.split()[0][:1]) == ("GET", "/")  # origin-form, not http://...
        assert fields[0] == ("Host", f"{host}:{port}")
        assert warc_headers.get_header("WARC-IP-Address") == model.host(host).ip  # type: ignore[union-attr]
    assert b"Proxy-Authorization" not in raw and BASIC.split()[1].encode() not in raw
    assert b"GET http://" not in raw


def test_a_dead_proxy_fails_every_request_as_a_proxy_error(tmp_path: Path) -> None:
    model = small_web()
    gone = dead_port()
    with TestWeb(model, tmp_path / "web") as web:
        cfg = config(web, f"http.proxy=http://{USERINFO}@127.0.0.1:{gone}")
        rows = list(run_fetch_task(items_for(model, web.port), cfg, "seg1", 0, None, 60))
    assert read_log(web.access_log) == []
    robots = [r for r in rows if r["kind"] == "robots"]
    assert robots and {r["outcome"] for r in robots} == {"retry"}
    for row in robots:
        assert row["error"].startswith(f"proxy: proxy 127.0.0.1:{gone} unreachable: ")
    # robots.txt unreachable: the pages wait (RFC 9309 2.3.1.4), none is lost
    pages = [r for r in rows if r["kind"] == "page"]
    assert len(pages) == len(items_for(model, web.port))
    assert {r["outcome"] for r in pages} == {"deferred"}
    assert not any(PASSWORD in str(r.get("error")) or "s3cr" in str(r) for r in rows)
