"""What archive builders get from a crawl: WARC files the usual tools accept,
CDXJ indexes equal to cdxj-indexer's, events whose warc_ref opens the right
record, exports that hold exactly the selected captures, and WACZ packages
that ``wacz validate`` accepts.

A module-scoped crawl of a test web with byte-identical copies (so some
pages are archived as identical-payload revisits) runs two whole cycles
(generate -> fetch -> updatedb -> dedup -> events) a day apart.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.warc.test_wacz import assert_valid
from trawl.cli import main
from trawl.config import Config, load_config
from trawl.runner import (
    JobContext,
    run_cycles,
    run_export,
    run_inject,
    run_wacz_export,
    run_warc_index,
    segment_id,
)
from trawl.runner.fetch import write_segment_index
from trawl.stages.export import Selection
from trawl.store.files import CrawlRoot, warc_record
from trawl.store.tables import read_segment_table, read_table, segment_path
from trawl.testweb import TestWeb, WebModel
from trawl.warc.archive import index_name
from trawl.warc.lookup import parse_ref
from trawl.warc.reader import check_file, iter_records
from trawl.warc.writer import REVISIT_IDENTICAL, REVISIT_NOT_MODIFIED

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

AT = datetime(2026, 10, 1, 6, 0, tzinfo=UTC)
BIN = Path(sys.executable).parent


@dataclass
class Crawl:
    spark: Any
    cfg: Config
    root: str
    segments: list[str]

    def ctx(self, at: datetime = AT) -> JobContext:
        return JobContext(self.spark, self.cfg, self.root, segment_id(at), at)

    def warc_files(self, segment: str) -> list[Path]:
        return sorted(Path(segment_path(self.root, segment, "warc")).glob("*.warc.gz"))


@pytest.fixture(scope="module")
def crawl(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    out = tmp_path_factory.mktemp("archive")
    model = WebModel.generate(5, hosts=8, ips=2, pages_per_host=(3, 8), dup_families=3)
    assert model.exact_copies()
    with TestWeb(model, out / "web", n_seeds=8) as web:
        cfg = load_config(
            None,
            [
                f"dns.hosts_file={web.hosts_file}",
                'fetch.allow_networks=["127.0.0.0/8"]',
                "politeness.min_delay_s=0.05",
                "politeness.delay_factor=0",
                "fetch.time_limit_s=60",
                # every page due again a day later: the revisits are what is tested
                "schedule.due_change_prob=0",
                "crawl.host_buckets=2",
            ],
            environ={},
        )
        state = Crawl(spark, cfg, str(out / "crawl"), [])
        run_inject(state.ctx(), [str(web.seeds_file)])
        for row in run_cycles(state.ctx(), 2, timedelta(days=1)):
            state.segments.append(row["segment"])
        yield state


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(BIN / "trawl"), *args], capture_output=True, check=False)


def cdxj_indexer(files: list[Path], *, sort: bool = True) -> bytes:
    command = [str(BIN / "cdxj-indexer"), *(["-s"] if sort else []), *map(str, files)]
    return subprocess.run(command, capture_output=True, check=True).stdout


def test_no_fetch_failed_inside_trawl(crawl: Crawl) -> None:
    counters = read_table(crawl.spark, crawl.root, "counters")
    internal = counters.filter("name LIKE 'fetch/why/%/internal'").collect()
    assert not internal, [(r["segment"], r["value"]) for r in internal]


def test_every_warc_passes_warcio_check_and_ours(crawl: Crawl) -> None:
    files = [f for s in crawl.segments for f in crawl.warc_files(s)]
    names = {f.name.split("-")[1] for f in files}
    assert {"robotstxt", "crawldiagnostics"} <= names  # the three subsets are there
    done = subprocess.run(
        [str(BIN / "warcio"), "check", "-v", *map(str, files)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "digest fail" not in done.stdout
    assert all(check_file(f) == [] for f in files)
    types = {r.rec_type for f in files for r in iter_records(f)}
    assert types >= {"warcinfo", "response", "request", "metadata", "revisit"}


def test_an_unchanged_recrawl_is_a_revisit_of_the_earlier_segments_record(crawl: Crawl) -> None:
    """The fetch list carries each URL's stored capture: a page fetched again
    a day later that is unchanged (a 304, or a 200 with the same payload) is
    archived as a revisit naming the record of the first segment."""
    first = {
        r.header("WARC-Record-ID"): r
        for f in crawl.warc_files(crawl.segments[0])
        for r in iter_records(f)
        if r.rec_type == "response"
    }
    revisits = [
        r for f in crawl.warc_files(crawl.segments[1]) for r in iter_records(f)
        if r.rec_type == "revisit"
    ]  # fmt: skip
    earlier = [r for r in revisits if r.header("WARC-Refers-To") in first]
    assert earlier
    for record in earlier:
        original = first[record.header("WARC-Refers-To")]
        assert record.header("WARC-Refers-To-Target-URI") == original.target_uri
        assert record.header("WARC-Refers-To-Date") == original.header("WARC-Date")
        if record.header("WARC-Profile") == REVISIT_IDENTICAL:
            assert record.header("WARC-Payload-Digest") == original.header("WARC-Payload-Digest")
        else:
            assert record.header("WARC-Profile") == REVISIT_NOT_MODIFIED
            assert record.http_head() is not None and record.http_head().status == "304"


def test_segment_index_equals_cdxj_indexer(crawl: Crawl) -> None:
    for segment in crawl.segments:
        index = Path(segment_path(crawl.root, segment, "index.cdxj"))
        assert index.read_bytes() == cdxj_indexer(crawl.warc_files(segment))
        # made from the indexes the fetch tasks wrote of their files
        own = Path(segment_path(crawl.root, segment, "warc-index"))
        assert sorted(p.name for p in own.glob("*.cdxj")) == sorted(
            index_name(f.name) for f in crawl.warc_files(segment)
        )


def test_a_file_without_its_own_index_is_indexed_from_its_records(
    crawl: Crawl, tmp_path: Path
) -> None:
    """A segment fetched before the tasks indexed their files (or whose
    file's index was not written) gets the same index, read from the WARC
    files; the per-file indexes left are used as they are."""
    import shutil

    segment = crawl.segments[0]
    root = tmp_path / "root"
    shutil.copytree(crawl.root, root)
    own = Path(segment_path(str(root), segment, "warc-index"))
    first = sorted(own.glob("*.cdxj"))[0]
    first.unlink()
    Path(segment_path(str(root), segment, "index.cdxj")).unlink()
    ctx = crawl.ctx()
    lines = write_segment_index(JobContext(ctx.spark, ctx.cfg, str(root), segment, ctx.at))
    index = Path(segment_path(str(root), segment, "index.cdxj"))
    assert index.read_bytes() == cdxj_indexer(crawl.warc_files(segment))
    assert lines == len(index.read_bytes().splitlines())


def test_merged_index_equals_indexing_every_segment_at_once(crawl: Crawl, tmp_path: Path) -> None:
    out = tmp_path / "all.cdxj"
    result = run_warc_index(crawl.ctx(), [], str(out))
    files = [f for s in crawl.segments for f in crawl.warc_files(s)]
    assert result["segments"] == len(crawl.segments)
    assert out.read_bytes() == cdxj_indexer(files)


def test_every_event_warc_ref_opens_its_record(crawl: Crawl) -> None:
    events = read_table(crawl.spark, crawl.root, "events").filter("event = 'crawl.fetched'")
    rows = events.collect()
    assert rows
    for segment in crawl.segments:
        fetched = read_segment_table(crawl.spark, crawl.root, segment, "fetch")
        stored = fetched.filter("kind = 'page' AND outcome = 'success'").count()
        assert sum(1 for r in rows if r["segment"] == segment) == stored
    for row in rows:
        ref = row["warc_ref"]
        record, raw = warc_record(CrawlRoot.of(crawl.root), parse_ref(json.dumps(ref.asDict())))
        assert record.rec_type in ("response", "revisit")
        assert record.target_uri == row["url"]
        assert record.http_head() is not None and record.http_head().status == "200"
        assert raw.startswith(b"WARC/1.1\r\n") and raw.endswith(b"\r\n\r\n")


def test_warc_get_prints_the_record(crawl: Crawl) -> None:
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    row = fetch.filter("kind = 'page' AND http_status = 200").orderBy("url").first()
    assert row is not None
    ref = f"{row['warc_file']}:{row['warc_offset']}:{row['warc_length']}"
    whole = cli("warc", "get", "--crawl", crawl.root, ref)
    assert whole.returncode == 0, whole.stderr
    assert f"WARC-Target-URI: {row['url']}\r\n".encode() in whole.stdout
    payload = cli("warc", "get", "--crawl", crawl.root, "--payload", ref)
    assert payload.returncode == 0 and whole.stdout.endswith(payload.stdout + b"\r\n\r\n")
    bad = cli("warc", "get", "--crawl", crawl.root, f"{row['warc_file']}:1:{row['warc_length']}")
    assert bad.returncode == 2 and b"record at offset 1" in bad.stderr
    missing = cli("warc", "get", "--crawl", crawl.root, "nothing.warc.gz:0:10")
    assert missing.returncode == 2 and b"no WARC file" in missing.stderr


def test_export_holds_exactly_the_selection(crawl: Crawl, tmp_path: Path) -> None:
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    pages = fetch.filter("kind = 'page' AND warc_file IS NOT NULL").collect()
    host = sorted({r["host"] for r in pages if r["http_status"] == 200})[0]
    selection = Selection(segments=(crawl.segments[0],), hosts=(host,), statuses=("2xx", "404"))
    result = run_export(crawl.ctx(), selection, str(tmp_path), "picked")
    wanted = {
        (r["url"], r["warc_file"], r["warc_offset"])
        for r in pages
        if r["host"] == host and (r["http_status"] // 100 == 2 or r["http_status"] == 404)
    }
    files = sorted(tmp_path.glob("picked-*.warc.gz"))
    assert result["captures"] == len(wanted) and result["missing"] == 0
    exported = [r for f in files for r in iter_records(f)]
    captures = [r for r in exported if r.rec_type in ("response", "revisit")]
    assert sorted(r.target_uri for r in captures) == sorted(u for u, _, _ in wanted)
    # byte for byte: each exported capture is its source record's gzip member
    sources = {(u, f, o) for u, f, o in wanted}
    for url, file, offset in sources:
        src = Path(segment_path(crawl.root, crawl.segments[0], "warc")) / file
        original = next(r for r in iter_records(src) if r.offset == offset)
        copy = next(r for r in captures if r.target_uri == url)
        assert copy.headers == original.headers and copy.block == original.block
    # each capture with its request and metadata; a warcinfo of ours, then the source's
    kinds = [r.rec_type for r in exported]
    assert kinds.count("request") == len(captures)
    assert exported[0].rec_type == "warcinfo" and "export" in exported[0].block.decode()
    done = subprocess.run(
        [str(BIN / "warcio"), "check", *map(str, files)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "picked.cdxj").read_bytes() == cdxj_indexer(files)


def test_export_without_duplicates_and_by_time(crawl: Crawl, tmp_path: Path) -> None:
    crawldb = read_table(crawl.spark, crawl.root, "crawldb")
    duplicates = {r["url"] for r in crawldb.filter("duplicate_of IS NOT NULL").collect()}
    assert duplicates, "dedup should have marked the copies"
    every = run_export(crawl.ctx(), Selection(), str(tmp_path / "all"), "all")
    kept = run_export(crawl.ctx(), Selection(duplicates=False), str(tmp_path / "nodup"), "nodup")
    urls = {
        r.target_uri
        for f in (tmp_path / "nodup").glob("*.warc.gz")
        for r in iter_records(f)
        if r.rec_type in ("response", "revisit")
    }
    assert not urls & duplicates and kept["captures"] < every["captures"]
    # capture time is the WARC-Date: the wall clock of the fetch, not the cycle's
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[1], "fetch")
    pages = fetch.filter("kind = 'page' AND warc_file IS NOT NULL")
    since = pages.agg({"fetched_at": "min"}).first()[0]
    second = run_export(crawl.ctx(), Selection(since=since), str(tmp_path / "late"), "late")
    assert second["captures"] == pages.count()


def test_export_cli_rejects_bad_input(crawl: Crawl, tmp_path: Path) -> None:
    base = ["export", "warc", "--crawl", crawl.root, "--out", str(tmp_path)]
    assert main([*base, "--status", "6xx"]) == 2
    assert main([*base, "--segments", "nosuch"]) == 2


# --- WACZ ---------------------------------------------------------------------------


def unpack(wacz: Path, into: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wacz) as zf:
        assert all(
            i.compress_type == zipfile.ZIP_STORED
            for i in zf.infolist()
            if i.filename.startswith("archive/")
        )
        zf.extractall(into)
        return {name: zf.read(name) for name in zf.namelist()}


def html_pages(files: list[Path]) -> set[tuple[str, str]]:
    """(url, WARC-Date) of every 2xx HTML response or revisit in ``files``."""
    found = set()
    for record in (r for f in files for r in iter_records(f)):
        head = record.http_head()
        if record.rec_type not in ("response", "revisit") or head is None:
            continue
        mime = (head.header("Content-Type") or "").split(";")[0].strip().lower()
        if head.status.startswith("2") and mime == "text/html":
            found.add((str(record.target_uri), str(record.header("WARC-Date"))))
    return found


def test_wacz_export_passes_wacz_validate_and_lists_every_html_page(
    crawl: Crawl, tmp_path: Path
) -> None:
    out = tmp_path / "exports" / "crawl.wacz"
    result = run_wacz_export(crawl.ctx(), Selection(), str(out))
    assert_valid(out)
    contents = unpack(out, tmp_path / "x")
    warcs = sorted((tmp_path / "x" / "archive").glob("*.warc.gz"))
    fetch = read_segment_table(crawl.spark, crawl.root, crawl.segments[0], "fetch")
    for segment in crawl.segments[1:]:
        fetch = fetch.unionByName(read_segment_table(crawl.spark, crawl.root, segment, "fetch"))
    captured = fetch.filter("kind = 'page' AND warc_file IS NOT NULL").collect()
    assert result["captures"] == len(captured) and result["missing"] == 0
    assert result["warc_files"] == len(warcs) and result["bytes"] == out.stat().st_size
    # the index is the one trawl writes for the archive's files: cdxj-indexer's
    assert contents["indexes/index.cdx"] == cdxj_indexer(warcs)
    # pages.jsonl: its header, then each HTML page captured, at its record's WARC-Date
    lines = [json.loads(line) for line in contents["pages/pages.jsonl"].splitlines()]
    assert lines[0]["format"] == "json-pages-1.0" and "url" not in lines[0]
    listed = lines[1:]
    assert result["pages"] == len(listed) > 5
    assert {(p["url"], p["ts"]) for p in listed} == html_pages(warcs)
    # titles are the fetch's, where it read one
    titles = {(r["url"], " ".join((r["title"] or "").split()) or None) for r in captured}
    assert {(p["url"], p.get("title")) for p in listed} <= titles
    assert sum(1 for p in listed if p.get("title")) > len(listed) // 2
    # the manifest: each file's sha256 and size; the digest file: the manifest's
    manifest = json.loads(contents["datapackage.json"])
    assert manifest["wacz_version"] == "1.1.1" and manifest["created"] == "2026-10-01T06:00:00Z"
    assert {r["path"] for r in manifest["resources"]} == set(contents) - {
        "datapackage.json",
        "datapackage-digest.json",
    }
    for resource in manifest["resources"]:
        data = contents[resource["path"]]
        assert resource["hash"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
        assert resource["bytes"] == len(data)
    digest = json.loads(contents["datapackage-digest.json"])
    assert digest["hash"] == f"sha256:{hashlib.sha256(contents['datapackage.json']).hexdigest()}"


def test_wacz_export_from_the_command_line(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same flags as ``export warc``; the result as JSON; a selection
    that matches nothing is one line and exit 2, and no file."""
    out = tmp_path / "picked.wacz"
    base = ["export", "wacz", "--crawl", crawl.root, "--at", "2026-10-03T00:00:00Z"]
    argv = [*base, "--out", str(out), "--status", "2xx", "--no-duplicates", "--json"]
    assert main([*argv, "--title", "Picked pages"]) == 0
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert said["wacz"] == str(out) and said["captures"] > 0 and said["pages"] > 0
    assert_valid(out)
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("datapackage.json"))
        names = zf.namelist()
    assert manifest["title"] == "Picked pages"
    assert "statuses 2xx" in manifest["description"]
    assert "duplicates excluded" in manifest["description"]
    warcs = [n for n in names if n.startswith("archive/")]
    assert warcs and all(n.startswith("archive/trawl-export-20261003T000000Z-") for n in warcs)
    nothing = tmp_path / "nothing.wacz"
    assert main([*base, "--out", str(nothing), "--host", "no-such-host.test"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "trawl: export wacz: no captures match the selection "
        "(hosts no-such-host.test, duplicates included)\n"
    )
    assert not nothing.exists()
