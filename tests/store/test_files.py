"""A local file written through ``CrawlRoot.open_write`` appears whole or not at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trawl.store.files import CrawlRoot


class _RefusingClose:
    """A file whose last flush the disk refuses (it is closed all the same)."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh

    @property
    def closed(self) -> bool:
        return bool(self._fh.closed)

    def close(self) -> None:
        self._fh.close()
        raise OSError(28, "No space left on device")


def test_a_file_whose_last_flush_fails_leaves_nothing(tmp_path: Path) -> None:
    root = CrawlRoot.of(str(tmp_path))
    sink: Any = root.open_write("segments/s1/warc/a.warc.gz")
    sink.write(b"part of a record")
    sink._fh = _RefusingClose(sink._fh)
    with pytest.raises(OSError, match="No space left"):
        sink.close()
    assert list((tmp_path / "segments" / "s1" / "warc").iterdir()) == []


def test_an_abort_whose_flush_fails_still_removes_the_file(tmp_path: Path) -> None:
    root = CrawlRoot.of(str(tmp_path))
    sink: Any = root.open_write("segments/s1/warc/b.warc.gz")
    sink.write(b"part of a record")
    sink._fh = _RefusingClose(sink._fh)
    sink.abort()
    assert list((tmp_path / "segments" / "s1" / "warc").iterdir()) == []


def test_what_a_killed_writer_left_is_dropped_and_nothing_else(tmp_path: Path) -> None:
    root = CrawlRoot.of(str(tmp_path))
    root.write_bytes("segments/s1/warc/whole.warc.gz", b"whole")
    killed: Any = root.open_write("segments/s1/warc/half.warc.gz")
    killed.write(b"half")
    killed.flush()  # its process dies here: no close, no abort
    (tmp_path / "segments" / "s1" / "fetch").mkdir()
    spark_own = tmp_path / "segments" / "s1" / "fetch" / ".part-00000.parquet.crc"
    spark_own.write_bytes(b"crc")
    other = root.open_write("segments/s2/warc/other.warc.gz")  # another segment's
    other.write(b"other")
    other.flush()
    assert root.drop_unfinished("segments/s1") == 1
    left = sorted(p.name for p in (tmp_path / "segments" / "s1" / "warc").iterdir())
    assert left == ["whole.warc.gz"]
    assert spark_own.exists()
    assert len(list((tmp_path / "segments" / "s2" / "warc").iterdir())) == 1
    assert root.drop_unfinished("segments/none") == 0
    killed._fh.close()  # the dead process's handles, closed without a rename
    other.abort()
