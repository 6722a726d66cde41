"""Scrapy's side of the fetch benchmark: the same seeds, the same work per page.

    .venv-scrapy/bin/python bench/scrapy_bench_spider.py --web DIR/ready.json \
        --warc FILE.warc.gz --out result.json [--min-delay 1.0] [--concurrency N]

Started by ``bench_fetch.py`` in its own virtualenv (``.venv-scrapy``: Scrapy
and warcio, no trawl) as a process of its own. The spider starts from the
test web's ``seeds.txt`` and follows links within the test web's hosts, doing
per page what trawl's fetcher does: extract the links (``LinkExtractor``;
``rel=nofollow`` links are not followed, as trawl does not follow them) and
archive the exchange in WARC with warcio (``WARCWriter(gzip=True)``: one gzip
member per record; a ``response`` and a ``request`` record for every response
received, robots.txt, redirects and errors included, as trawl archives them).

Settings, chosen for parity with trawl's politeness (``politeness.*``):

* ``ROBOTSTXT_OBEY`` with ``ROBOTSTXT_USER_AGENT = "trawl"``, so the spider
  obeys the robots group the test web writes for trawl;
* ``CONCURRENT_REQUESTS_PER_DOMAIN = 1`` (slots are per host name),
  ``DOWNLOAD_DELAY`` = the minimum delay, ``DOWNLOAD_DELAY_JITTER = 0``
  (Scrapy 2.19's replacement of ``RANDOMIZE_DOWNLOAD_DELAY = False``),
  AutoThrottle and the HTTP cache off, ``DEPTH_LIMIT = 0``, retries as by
  default, ``CONCURRENT_REQUESTS`` = the number of hosts;
* ``DelayFromResponseEnd``: Scrapy times ``DOWNLOAD_DELAY`` from the *start*
  of the previous request to a slot (``Slot.lastseen`` is set when a request
  is sent), trawl and the test web's politeness audit from the *end* of the
  previous response; this extension moves ``lastseen`` to the moment the
  response arrived (the ``response_downloaded`` signal, sent before the
  downloader looks at the slot's queue again), so both keep the same gap;
* names resolve from the test web's hosts file (``HostsFileResolver``, the
  ``TWISTED_DNS_RESOLVER``), not from the system's DNS.

Pages are responses that reach the spider's callback with status 200 and an
HTML type (robots.txt never does). The result -- pages, Scrapy's stats,
wall and CPU seconds of this process tree from the crawl's start to its end
(``proctree``), peak memory -- is one JSON object written to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import proctree
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.http import HtmlResponse, Request, Response
from scrapy.linkextractors import LinkExtractor
from twisted.internet import defer
from twisted.internet.base import ThreadedResolver
from twisted.internet.interfaces import IResolverSimple
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter
from zope.interface import implementer


def read_hosts_file(path: str) -> dict[str, str]:
    """hosts(5) lines "IP name [alias ...]" -> {name: IP} (comments skipped)."""
    names: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            names.setdefault(name.lower(), fields[0])
    return names


@implementer(IResolverSimple)
class HostsFileResolver(ThreadedResolver):
    """Names from ``BENCH_HOSTS_FILE`` first, then the system resolver."""

    def __init__(self, reactor: Any, names: dict[str, str]) -> None:
        super().__init__(reactor)
        self.names = names

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> HostsFileResolver:
        return cls(reactor, read_hosts_file(crawler.settings["BENCH_HOSTS_FILE"]))

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        ip = self.names.get(name.lower())
        if ip is not None:
            return defer.succeed(ip)
        return super().getHostByName(name, timeout)


class DelayFromResponseEnd:
    """Time each slot's ``DOWNLOAD_DELAY`` from the end of its last response."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DelayFromResponseEnd:
        return cls(crawler)

    def downloaded(self, response: Response, request: Request, spider: scrapy.Spider) -> None:
        assert self.crawler.engine is not None
        slot = self.crawler.engine.downloader.slots.get(request.meta.get("download_slot", ""))
        if slot is not None:
            slot.lastseen = time.monotonic()  # the clock Scrapy's downloader reads


class WarcArchive:
    """Downloader middleware next to the downloader: every response and its
    request go to one WARC file, one gzip member per record."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.file = open(crawler.settings["BENCH_WARC_FILE"], "wb")  # noqa: SIM115
        self.writer = WARCWriter(self.file, gzip=True, warc_version="WARC/1.1")
        info = {"software": f"Scrapy/{scrapy.__version__}", "robots": "obey"}
        self.writer.write_record(self.writer.create_warcinfo_record(self.file.name, info))
        crawler.signals.connect(self.close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcArchive:
        return cls(crawler)

    def process_response(
        self, request: Request, response: Response, spider: scrapy.Spider | None = None
    ) -> Response:
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = ""
        head = StatusAndHeaders(
            f"{response.status} {reason}".strip(), _header_pairs(response.headers), "HTTP/1.1"
        )
        record = self.writer.create_warc_record(
            response.url, "response", payload=BytesIO(response.body), http_headers=head
        )
        if response.ip_address is not None:
            record.rec_headers.add_header("WARC-IP-Address", str(response.ip_address))
        parts = urlsplit(request.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        asked = StatusAndHeaders(
            f"GET {target} HTTP/1.1",
            [("Host", parts.netloc), *_header_pairs(request.headers)],
            is_http_request=True,
        )
        sent = self.writer.create_warc_record(
            request.url, "request", payload=BytesIO(b""), http_headers=asked
        )
        sent.rec_headers.add_header("WARC-Concurrent-To", record.rec_headers["WARC-Record-ID"])
        self.writer.write_record(record)
        self.writer.write_record(sent)
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("bench/warc_records", 2)
        return response

    def close(self) -> None:
        self.file.close()


def _header_pairs(headers: Any) -> list[tuple[str, str]]:
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, values in headers.items()
        for value in values
    ]


class FetchBenchSpider(scrapy.Spider):
    """Seeds from the test web, links followed within its hosts."""

    name = "fetchbench"

    def __init__(self, seeds: list[str], hosts: set[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = seeds
        self.hosts = hosts
        # unique=False: a URL linked both with and without rel=nofollow is
        # followed (the default keeps only its first link, maybe the nofollow one)
        self.links = LinkExtractor(unique=False)
        self.pages = 0

    async def start(self) -> AsyncIterator[Request]:
        # Not the default start(): that sends seeds with dont_filter=True, which
        # leaves them out of the duplicate filter, so a later link to a seed
        # would fetch it a second time.
        for url in self.seeds:
            yield Request(url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[Request]:
        if not isinstance(response, HtmlResponse) or response.status != 200:
            return
        self.pages += 1
        follow = {
            link.url
            for link in self.links.extract_links(response)
            if not link.nofollow and urlsplit(link.url).hostname in self.hosts
        }
        for url in sorted(follow):
            yield Request(url, callback=self.parse)


def settings(args: argparse.Namespace, hosts_file: str, hosts: int) -> dict[str, Any]:
    return {
        "BOT_NAME": "fetchbench",
        "USER_AGENT": f"scrapy-fetchbench/{scrapy.__version__}",
        "ROBOTSTXT_OBEY": True,
        "ROBOTSTXT_USER_AGENT": "trawl",
        "CONCURRENT_REQUESTS": args.concurrency or max(16, hosts),
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": args.min_delay,
        "DOWNLOAD_DELAY_JITTER": 0.0,
        "AUTOTHROTTLE_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",  # DEBUG, the default, logs a line per response
        "TWISTED_DNS_RESOLVER": HostsFileResolver,
        "DOWNLOADER_MIDDLEWARES": {WarcArchive: 950},
        "EXTENSIONS": {DelayFromResponseEnd: 0},
        "BENCH_HOSTS_FILE": hosts_file,
        "BENCH_WARC_FILE": str(args.warc),
    }


def recorded(value: Any) -> Any:
    """A setting as it goes into the result (classes by name)."""
    if isinstance(value, dict):
        return {recorded(k): v for k, v in value.items()}
    return value.__name__ if isinstance(value, type) else value


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--web", type=Path, required=True, help="the test web's ready.json")
    ap.add_argument("--warc", type=Path, required=True, help="WARC file to write")
    ap.add_argument("--out", type=Path, required=True, help="result JSON file")
    ap.add_argument("--min-delay", type=float, default=1.0, help="DOWNLOAD_DELAY")
    ap.add_argument("--concurrency", type=int, default=0, help="CONCURRENT_REQUESTS (0: hosts)")
    args = ap.parse_args()
    web = json.loads(args.web.read_text(encoding="utf-8"))
    names = read_hosts_file(web["hosts_file"])
    seeds = Path(web["seeds_file"]).read_text(encoding="utf-8").split()
    config = settings(args, web["hosts_file"], len(names))
    process = CrawlerProcess(config, install_root_handler=True)
    crawler = process.create_crawler(FetchBenchSpider)
    wall, cpu = time.monotonic(), proctree.cpu_s(os.getpid())
    with proctree.PeakMemory(os.getpid()) as peak:
        process.crawl(crawler, seeds=seeds, hosts=set(names))
        process.start()
    spent = {
        "wall_s": round(time.monotonic() - wall, 2),
        "cpu_s": round(proctree.cpu_s(os.getpid()) - cpu, 2),
    }
    assert crawler.stats is not None and crawler.spider is not None
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, int | float)}
    result = {
        "settings": {k: recorded(v) for k, v in config.items() if not k.startswith("BENCH_")},
        "scrapy": scrapy.__version__,
        "python": sys.version.split()[0],
        "user_agent_prefix": config["USER_AGENT"],
        "crawl": spent
        | {"pages": crawler.spider.pages, "requests": stats.get("downloader/response_count", 0)}
        | peak.mb("all"),
        "warc_records": stats.get("bench/warc_records", 0),
        "stats": stats,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
