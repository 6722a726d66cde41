"""Tests for trawl.warc.archive: a fetch task's WARC files, their names,
subsets and rotation, read back with warcio's reader."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.warc.test_writer import FETCHED_AT, read_records, request_head, warcio_check
from trawl.warc.archive import TaskArchive, warc_filename
from trawl.warc.writer import Stored


def test_warc_filename() -> None:
    assert warc_filename("trawl", "20240506070809", 3) == "trawl-20240506070809-00003-00000.warc.gz"
    assert warc_filename("trawl", "seg-1", 12, 7) == "trawl-seg-1-00012-00007.warc.gz"
    with pytest.raises(ValueError):
        warc_filename("trawl", "a/b", 0)
    with pytest.raises(ValueError):
        warc_filename("", "seg", 0)
    with pytest.raises(ValueError):
        warc_filename("trawl", "seg", -1)


def test_task_archive_rotates_by_size_and_splits_subsets(tmp_path: Path) -> None:
    body = random.Random(5).randbytes(1_000_000)  # 1 MB that gzip cannot shrink
    archive = TaskArchive(
        tmp_path, "20240506070809", 3, software="trawl/0.1", max_file_bytes=1_500_000
    )
    with archive:
        refs = []
        for i in range(5):
            writer = archive.writer("warc")
            refs.append(
                writer.write_exchange(
                    url=f"http://example.com/{i}",
                    ip=None,
                    fetched_at=FETCHED_AT,
                    request_head=request_head(f"/{i}"),
                    status_line="HTTP/1.1 200 OK",
                    response_headers=[],
                    body=body + bytes([i]),
                )
            )
        archive.writer("robotstxt").write_exchange(
            url="http://example.com/robots.txt", ip=None, fetched_at=FETCHED_AT,
            request_head=request_head("/robots.txt"), status_line="HTTP/1.1 404 Not Found",
            response_headers=[], body=b"",
        )  # fmt: skip
        with pytest.raises(ValueError, match="unknown WARC subset"):
            archive.writer("pages")
    names = [p.name for p in archive.files]
    assert names == [
        "trawl-20240506070809-00003-00000.warc.gz",
        "trawl-20240506070809-00003-00001.warc.gz",
        "trawl-20240506070809-00003-00002.warc.gz",
        "trawl-robotstxt-20240506070809-00003-00000.warc.gz",
    ]
    # a file is closed once it reached the limit: two 1 MB records at most each
    assert [r.file for r in refs] == [names[0], names[0], names[1], names[1], names[2]]
    for path in archive.files:
        records = read_records(path)
        assert records[0]["type"] == "warcinfo"
        assert records[0]["headers"]["WARC-Filename"] == path.name
    warcio_check(*archive.files)
    # identical payloads: the task remembers the first copy
    archive.remember("sha1:X", refs[0], "http://example.com/0", FETCHED_AT)
    archive.remember("sha1:X", refs[1], "http://example.com/1", FETCHED_AT)
    assert archive.stored("sha1:X") == Stored(
        refs[0].record_id, "http://example.com/0", "2024-05-06T07:08:09.250000Z"
    )
    assert archive.stored("sha1:Y") is None


def test_each_file_s_index_is_written_before_the_file_is_closed(tmp_path: Path) -> None:
    """With ``index``, closing the archive writes each file's CDXJ lines
    (what ``index_lines`` reads from the file) under ``index_name``, just
    before that file is closed."""
    from io import BytesIO

    from trawl.warc.archive import index_name
    from trawl.warc.cdxj import index_lines

    written: dict[str, bytes] = {}
    order: list[str] = []

    class Sink(BytesIO):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name_ = name

        def close(self) -> None:
            written[self.name_] = self.getvalue()
            order.append(self.name_)
            super().close()

    archive = TaskArchive(tmp_path, "seg-1", 0, software="trawl/0.1", index=Sink)
    with archive:
        for i, subset in enumerate(["warc", "robotstxt", "warc"]):
            archive.writer(subset).write_exchange(
                url=f"http://example.com/{i}", ip=None, fetched_at=FETCHED_AT,
                request_head=request_head(f"/{i}"), status_line="HTTP/1.1 200 OK",
                response_headers=[("Content-Type", "text/html")], body=b"<p>%d</p>" % i,
            )  # fmt: skip
        assert not written  # nothing until the files are closed
    for path in archive.files:
        lines = written[index_name(path.name)].decode().splitlines()
        assert lines == index_lines([path], sort=True) and lines
    assert order == [index_name(p.name) for p in archive.files]


def test_a_file_the_index_cannot_take_is_written_without_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record the index fails on (a bug) is still written; that file gets
    no index at all rather than part of one, so the segment's index reads it."""
    from trawl.warc import cdxj
    from trawl.warc.archive import index_name

    written: dict[str, bytes] = {}

    class Sink:
        def __init__(self, name: str) -> None:
            self.name = name

        def write(self, data: bytes) -> int:
            written[self.name] = data
            return len(data)

        def close(self) -> None:
            pass

    real = cdxj.member_line
    calls = iter(range(100))

    def flaky(member: bytes, filename: str, offset: int) -> str | None:
        if next(calls) == 1:
            raise ValueError("no line")
        return real(member, filename, offset)

    monkeypatch.setattr(cdxj, "member_line", flaky)
    archive = TaskArchive(tmp_path, "seg-1", 0, software="trawl/0.1", index=Sink)
    with archive:
        for i in range(3):
            archive.writer("warc").write_exchange(
                url=f"http://example.com/{i}", ip=None, fetched_at=FETCHED_AT,
                request_head=request_head(f"/{i}"), status_line="HTTP/1.1 200 OK",
                response_headers=[], body=b"x",
            )  # fmt: skip
    (path,) = archive.files
    assert len([r for r in read_records(path) if r["type"] == "response"]) == 3
    assert index_name(path.name) not in written
