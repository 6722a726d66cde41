"""``trawl report`` (``trawl.crawlreport``) on tiny crawl roots made here
with delta-rs and pyarrow, as ``tests/store/test_lake.py`` makes them: no
Spark. The fast tests read the HTML; the ``crawl`` one renders it in
headless Chromium and looks at what a reader would see."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from trawl.config import load_config
from trawl.crawlreport import NO_DATA, write_report
from trawl.store.files import CrawlRoot
from trawl.store.schemas import FETCH_SCHEMA, arrow_schema
from trawl.store.tables import SEGMENT_COMPLETE, TABLES

AT = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SEGMENTS = ("20261130T120000Z", "20261130T130000Z")
EVIL = "<b>evil.test"  # a host name that is markup, to be shown as text
SECTIONS = ("cycles", "politeness", "response-times", "robots", "duplicates", "freshness", "hosts")
PLOTS = ("outcomes", "new-urls", "kept-out", "requests-per-address", "gaps",
         "response-times-histogram", "robots-status", "duplicate-groups",
         "duplicates-per-segment", "change-rate", "revisits-changed")  # fmt: skip
CFG = load_config(None, ["politeness.min_delay_s=1.0"], environ={})


def _delta(root: Path, name: str, rows: list[dict[str, object]]) -> None:
    schema = arrow_schema(TABLES[name][0])
    write_deltalake(str(root / name), pa.Table.from_pylist(rows, schema=schema))


def _segment(root: Path, segment: str, rows: list[dict[str, object]]) -> None:
    folder = root / "segments" / segment / "fetch"
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(rows, schema=arrow_schema(FETCH_SCHEMA))
    pq.write_table(table, folder / "part-0.parquet")
    (folder / SEGMENT_COMPLETE).write_text('{"table": "fetch", "format": "parquet"}\n')


def _crawldb(root: Path, injected_only: bool) -> None:
    hosts = ["a.test", "b.test", EVIL]
    rows: list[dict[str, object]] = []
    for i in range(12):
        host = hosts[i % 3]
        row: dict[str, object] = {
            "url": f"http://{host}/{i}", "host": host, "host_bucket": i % 3, "domain": host,
            "status": "unfetched", "source": "seed", "depth": 0, "fetches": 0,
        }  # fmt: skip
        if not injected_only:
            row.update(status="fetched", fetches=1, change_rate=(i + 1) / 86400.0,
                       next_fetch_at=T0 + timedelta(hours=i))  # fmt: skip
            if i in (4, 7, 10):  # three copies of b.test/1
                row.update(status="duplicate", duplicate_of="http://b.test/1")
        rows.append(row)
    _delta(root, "crawldb", rows)


def _page(segment_start: datetime, ip: str, at_s: float, **extra: object) -> dict[str, object]:
    return {"kind": "page", "url": f"http://a.test/{at_s}", "host": "a.test", "ip": ip,
            "outcome": "success", "http_status": 200, "elapsed_s": 0.2,
            "fetched_at": segment_start + timedelta(seconds=at_s), **extra}  # fmt: skip


def _fetches(root: Path) -> None:
    """Segment 1: three requests to 10.0.0.1 (gaps 0.3 s, below the 1 s
    minimum, and 1.5 s) around a page robots.txt denied (no request), and one
    to 10.0.0.2. Segment 2: two requests to 10.0.0.1 2.8 s apart, one a
    revisit that saw a change, one a revisit that did not, and a retry.
    Gaps are within a segment: 3 in all, 1 too short."""
    first, second = T0, T0 + timedelta(hours=1)
    _segment(root, SEGMENTS[0], [
        _page(first, "10.0.0.1", 0.0),
        _page(first, "10.0.0.1", 0.4, outcome="robots_denied", elapsed_s=None),
        _page(first, "10.0.0.1", 0.5),
        _page(first, "10.0.0.1", 2.2, kind="robots", elapsed_s=0.05),
        _page(first, "10.0.0.2", 0.1, elapsed_s=3.5, outcome="gone", http_status=404),
    ])  # fmt: skip
    _segment(root, SEGMENTS[1], [
        _page(second, "10.0.0.1", 0.0, changed=True),
        _page(second, "10.0.0.1", 3.0, changed=False, outcome="retry", elapsed_s=0.01),
    ])  # fmt: skip


def _tables(root: Path) -> None:
    _delta(root, "hostdb", [
        {"host": "a.test", "host_bucket": 0, "domain": "a.test", "ip": "10.0.0.1",
         "robots_status": "parsed", "delay_s": 1.0},
        {"host": EVIL, "host_bucket": 2, "domain": EVIL, "ip": "10.0.0.2",
         "robots_status": "status_4xx", "delay_s": 1.0},
    ])  # fmt: skip
    counters = [
        (SEGMENTS[0], "updatedb", "updatedb/new_urls", 9),
        (SEGMENTS[1], "updatedb", "updatedb/new_urls", 4),
        (SEGMENTS[1], "generate", "generate/deferred/budget", 2),
        (SEGMENTS[1], "updatedb", "updatedb/rejected/filter/<suffix>", 5),
        (SEGMENTS[1], "dedup", "dedup/duplicates/marked", 3),
    ]
    _delta(root, "counters", [dict(zip(("segment", "job", "name", "value"), c, strict=True))
                              for c in counters])  # fmt: skip
    _delta(root, "neardup", [{"a": "n1", "b": "n2", "method": "simhash", "distance": 2,
                              "segment": SEGMENTS[1]}])  # fmt: skip


@pytest.fixture
def crawl(tmp_path: Path) -> Path:
    root = tmp_path / "crawl"
    _crawldb(root, injected_only=False)
    _tables(root)
    _fetches(root)
    return root


@pytest.fixture
def injected(tmp_path: Path) -> Path:
    root = tmp_path / "injected"
    _crawldb(root, injected_only=True)
    return root


class _Page(HTMLParser):
    """What the tests look at in a page: section and figure ids, attributes
    that could load something, and whether every figure holds a drawn SVG."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.figures: dict[str, int] = {}  # figure id -> <path d="..."> inside it
        self.loads: list[str] = []
        self._figure: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        at = dict(attrs)
        if tag == "section":
            self.sections.append(at["id"] or "")
        if tag == "figure" and "plot" in (at.get("class") or "").split():
            self._figure = at["id"] or ""
            self.figures[self._figure] = 0
        if tag == "path" and self._figure is not None and at.get("d"):
            self.figures[self._figure] += 1
        if tag in ("script", "img", "link", "iframe", "object") or "src" in at:
            self.loads.append(tag)
        if tag == "a" and not (at.get("href") or "").startswith("#"):
            self.loads.append(f"a href={at.get('href')}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None


def _read(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def test_a_crawl_gives_every_section_and_plot_and_escapes_its_strings(
    crawl: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "report.html"
    summary = write_report(CrawlRoot.of(str(crawl)), CFG, out, at=AT)
    text = out.read_text(encoding="utf-8")
    assert summary.path == out and summary.bytes == len(text.encode("utf-8"))
    assert summary.sections == SECTIONS
    page = _read(text)
    assert tuple(page.sections) == SECTIONS
    assert tuple(page.figures) == PLOTS and summary.plots == len(PLOTS)
    assert text.count("<svg") == summary.plots
    assert all(page.figures.values()), page.figures  # every figure draws paths
    assert NO_DATA not in text
    assert page.loads == []  # nothing to fetch: one self-contained file
    assert not list(out.parent.glob(".*"))  # no temporary file left behind
    # markup from the crawl is text, in the tables and in the plots alike
    assert EVIL not in text and "&lt;b&gt;evil.test" in text
    assert "filter/<suffix>" not in text and "filter/&lt;suffix&gt;" in text


def test_the_header_counts_and_the_gaps_are_the_crawls(crawl: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    write_report(CrawlRoot.of(str(crawl)), CFG, out, at=AT)
    text = out.read_text(encoding="utf-8")
    totals = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]+)</dd>", text))
    assert totals == {"URLs": "12", "hosts": "3", "domains": "3", "segments": "2",
                      "pages fetched": "3", "requests": "6"}  # fmt: skip
    assert "2026-11-30 14:00:00 UTC" in text
    # requests 2.8 s apart in two segments are not a gap; the denied page sent none
    assert "3 gaps, 1 shorter than politeness.min_delay_s" in text
    assert "URLs marked duplicate: <b>3</b>" in text and "near-duplicate pairs: <b>1</b>" in text


def test_a_crawl_after_inject_only_is_a_valid_report_of_no_data(
    injected: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    summary = write_report(CrawlRoot.of(str(injected)), CFG, out, at=AT)
    text = out.read_text(encoding="utf-8")
    page = _read(text)
    assert tuple(page.sections) == SECTIONS == summary.sections
    assert summary.plots == 0 and "<svg" not in text and page.figures == {}
    assert text.count(NO_DATA) >= len(PLOTS)
    assert "&lt;b&gt;evil.test" in text  # the hosts table still lists the hosts
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


# -- in a browser ------------------------------------------------------------------------


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on the page; every compositor stage runs before the
    screenshot, or its lower part can come out half painted."""
    return subprocess.run(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
         "--run-all-compositor-stages-before-draw", "--hide-scrollbars", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip


def _console_lines(stderr: str) -> list[str]:
    """What the page logged: a page without script logs nothing, and
    Chromium logs a blocked load (the report's Content-Security-Policy) at
    INFO, so any console line counts, not only those that say "error"."""
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.mark.crawl
def test_the_report_renders_in_a_browser(crawl: Path, tmp_path: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("no chromium binary: scripts/setup.sh installs the Debian package")
    import numpy as np
    from matplotlib.image import imread

    out = tmp_path / "report.html"
    summary = write_report(CrawlRoot.of(str(crawl)), CFG, out, at=AT)
    png = tmp_path / "report.png"
    shot = _chromium("--window-size=1280,4000", f"--screenshot={png}", out.as_uri(),
                     profile=tmp_path / "profile-shot")  # fmt: skip
    dom = _chromium("--dump-dom", out.as_uri(), profile=tmp_path / "profile-dom")
    assert _console_lines(shot.stderr + dom.stderr) == []
    page = _read(dom.stdout)
    assert tuple(page.sections) == SECTIONS
    assert len(page.figures) == summary.plots == len(PLOTS)
    assert all(page.figures.values()), page.figures  # every figure's svg has drawn paths
    pixels = imread(png)
    assert pixels.shape[:2] == (4000, 1280)
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 16  # text, bars in several colours, axes: not a blank page
