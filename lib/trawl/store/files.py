"""The files under the crawl root that are not tables: each segment's WARC
files and CDXJ index, the new-host claims, the lease, and finding a WARC
file by its name. Local paths, ``file://`` and ``s3a://`` roots alike.

``CrawlRoot`` is the one place that turns a name under the root into a
path or an object key, so the rest of trawl never joins a path to the root
itself (tables: ``trawl.store.tables``). A root value is small and
picklable: the fetch tasks take it to the executors and write their WARC
files and claims through it. Its operations are the few a crawl needs, each
with the same meaning on a disk and on an object store:

- ``open_write``: a file that appears under its name, complete, on
  ``close`` and not at all on ``abort`` (or when the process dies): a
  hidden ``.<name>.open`` file renamed into place, or a multipart upload
  (``trawl.store.objectstore``); ``drop_unfinished`` removes what a killed
  writer left of one (the hidden file, the upload's stored parts);
- ``create_exclusive``: write only if absent (``O_EXCL``, or S3's
  ``If-None-Match: *``): the lease and the claims rest on it;
- ``read_range``, ``read_bytes``, ``names``, ``download``, ``delete``.

gs:// and abfss:// roots go through the same code once an S3-compatible
endpoint of theirs is configured (GCS's XML API with HMAC keys); their own
connectors are not wired here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from trawl.config import StorageConfig
from trawl.store.objectstore import (
    MultipartUpload,
    S3Store,
    StoreError,
    create_exclusive,
    explain,
    is_object_store,
    list_keys,
    split_uri,
)
from trawl.warc.lookup import get_record
from trawl.warc.record import WarcRecord
from trawl.warc.writer import WarcRef

INDEX_FILE = "index.cdxj"
SEGMENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# what _LocalUpload writes before its rename: .<name>.<pid>.<thread>.open
UNFINISHED = re.compile(r"^\..+\.\d+\.\d+\.open$")
_CLIENTS: dict[S3Store, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def check_segment_id(segment: str) -> str:
    """Segment ids become paths and SQL literals: keep them to a safe alphabet."""
    if not SEGMENT_ID.match(segment):
        raise ValueError(f"bad segment id {segment!r}: use letters, digits, '_', '-', '.'")
    return segment


def local_dir(path: str) -> str | None:
    """``path`` as a local path (a ``file:`` URI's path), or None for a URI
    of another scheme."""
    if path.startswith("file:"):
        return path[len("file:") :].removeprefix("//") or "/"
    return None if "://" in path else path


class _LocalUpload:
    """A local file written under a hidden name and renamed into place on
    ``close`` (``os.replace``: atomic), removed on ``abort``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._final = path
        # unique per writer, so two writers of one name (the lease's renewal
        # and a takeover) never share a half-written file
        self._open = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.open")
        self._fh = self._open.open("wb")

    def write(self, data: bytes) -> int:
        return self._fh.write(data)

    def tell(self) -> int:
        return self._fh.tell()

    def flush(self) -> None:
        self._fh.flush()

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        if not self._fh.closed:
            try:
                self._fh.close()  # the last flush: a full disk may refuse it
            except BaseException:
                self._open.unlink(missing_ok=True)
                raise
            os.replace(self._open, self._final)

    def abort(self) -> None:
        if not self._fh.closed:
            with contextlib.suppress(OSError):  # nothing is kept: a refused flush is moot
                self._fh.close()
            self._open.unlink(missing_ok=True)


@dataclass(frozen=True)
class CrawlRoot:
    """A crawl root: ``uri`` as given, and for an object store how to reach it."""

    uri: str
    s3: S3Store | None = None

    @classmethod
    def of(cls, uri: str, storage: StorageConfig | None = None) -> CrawlRoot:
        uri = uri.rstrip("/") or uri
        if is_object_store(uri):
            split_uri(uri)  # a bucket is named
            return cls(uri, S3Store.from_config(storage or StorageConfig()))
        local = local_dir(uri)
        if local is None:
            scheme = uri.split("://", 1)[0]
            raise StoreError(
                f"crawl root {uri}: {scheme}:// is not supported; use a local path, "
                "file:// or s3a://bucket/prefix (an S3-compatible endpoint in [storage])"
            )
        return cls(str(Path(local).absolute()))

    @property
    def local(self) -> Path | None:
        """The root's local path (None: an object store)."""
        path = local_dir(self.uri)
        return None if self.s3 is not None or path is None else Path(path)

    def child(self, rel: str) -> str:
        """The URI (or path) of ``rel`` under the root."""
        return f"{self.uri}/{rel.strip('/')}"

    def delta_uri(self, rel: str = "") -> str:
        """``rel`` under the root as delta-rs names it (Hadoop's ``s3a://``
        is ``s3://`` there)."""
        uri = self.child(rel) if rel else self.uri
        scheme, sep, rest = uri.partition("://")
        return f"s3://{rest}" if sep and scheme.lower() in ("s3a", "s3n") else uri

    def delta_options(self) -> dict[str, str] | None:
        """delta-rs ``storage_options`` for the root (None: a local root)."""
        return self.s3.delta_options() if self.s3 is not None else None

    def check(self) -> None:
        """Fail now, in one line naming the setting to fix, when an object
        store root cannot be reached, its bucket does not exist or the
        credentials are refused (a local root: nothing to check)."""
        if self.s3 is None:
            return
        bucket, prefix = self._key("")
        try:
            self._client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:  # botocore raises many kinds: each is explained
            raise explain(exc, self.uri, self.s3) from exc

    # --- writing ------------------------------------------------------------------

    def open_write(self, rel: str) -> BinaryIO:
        """A file that appears whole under ``rel`` on ``close``, never before."""
        if self.s3 is None:
            return cast(BinaryIO, _LocalUpload(self._path(rel)))
        bucket, key = self._key(rel)
        return cast(BinaryIO, MultipartUpload(self._client(), bucket, key))

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write (or replace) ``rel`` whole."""
        sink = self.open_write(rel)
        sink.write(data)
        sink.close()

    def upload(self, rel: str, source: Path) -> None:
        """Copy the local file ``source`` to ``rel``, streamed in parts (a
        file of gigabytes is never held whole): it appears complete, or not
        at all when the copy fails."""
        sink = self.open_write(rel)
        try:
            with source.open("rb") as fh:
                shutil.copyfileobj(fh, sink, 1 << 20)
        except BaseException:
            getattr(sink, "abort")()  # noqa: B009  # both sinks have one; BinaryIO does not say so
            raise
        sink.close()

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Write ``rel`` only if it does not exist; True when this call made it.
        A reader never sees it empty or half written: locally the data goes to
        a private file first, hard-linked into place (a link fails when the
        name exists), as the object store's conditional put is whole."""
        if self.s3 is None:
            path = self._path(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            private = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
            private.write_bytes(data)
            try:
                os.link(private, path)
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links: exclusive create
                return _create_excl(path, data)
            finally:
                private.unlink(missing_ok=True)
            return True
        bucket, key = self._key(rel)
        return create_exclusive(self._client(), bucket, key, data)

    def delete(self, rel: str) -> None:
        if self.s3 is None:
            self._path(rel).unlink(missing_ok=True)
            return
        bucket, key = self._key(rel)
        self._client().delete_object(Bucket=bucket, Key=key)

    def drop_unfinished(self, rel: str) -> int:
        """Remove what writers killed on the way left under ``rel``: hidden
        ``.open`` files, uploads never completed (whose parts an object
        store keeps, and bills, until they are aborted). Only for a folder
        nobody writes to now (the lease holder's own segment); returns how
        many were dropped."""
        if self.s3 is None:
            folder = self._path(rel)
            dropped = 0
            for path in folder.rglob(".*.open") if folder.is_dir() else ():
                if UNFINISHED.match(path.name) and path.is_file():
                    path.unlink(missing_ok=True)
                    dropped += 1
            return dropped
        bucket, under = self._folder(rel)
        client = self._client()
        paginator = client.get_paginator("list_multipart_uploads")
        started = [
            (upload["Key"], upload["UploadId"])
            for page in paginator.paginate(Bucket=bucket, Prefix=under)
            for upload in page.get("Uploads", [])
        ]
        for key, upload_id in started:
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        return len(started)

    def delete_tree(self, rel: str) -> None:
        """Remove ``rel`` and everything under it."""
        if self.s3 is None:
            shutil.rmtree(self._path(rel), ignore_errors=True)
            return
        bucket, under = self._folder(rel)
        client = self._client()
        for key, _ in list(list_keys(client, bucket, under)):
            client.delete_object(Bucket=bucket, Key=key)

    # --- reading ------------------------------------------------------------------

    def read_bytes(self, rel: str) -> bytes | None:
        """The whole of ``rel``; None when it does not exist."""
        if self.s3 is None:
            try:
                return self._path(rel).read_bytes()
            except FileNotFoundError:
                return None
        from botocore.exceptions import ClientError

        bucket, key = self._key(rel)
        try:
            return bytes(self._client().get_object(Bucket=bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    def modified_at(self, rel: str) -> float | None:
        """When ``rel`` was last written (epoch seconds); None: absent."""
        if self.s3 is None:
            try:
                return self._path(rel).stat().st_mtime
            except FileNotFoundError:
                return None
        from botocore.exceptions import ClientError

        bucket, key = self._key(rel)
        try:
            head = self._client().head_object(Bucket=bucket, Key=key)
        except ClientError:
            return None
        return float(head["LastModified"].timestamp())

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``rel`` from ``offset`` (0: to the end)."""
        if self.s3 is None:
            with self._path(rel).open("rb") as fh:
                fh.seek(offset)
                return fh.read(length) if length else fh.read()
        bucket, key = self._key(rel)
        span = f"bytes={offset}-{offset + length - 1}" if length else f"bytes={offset}-"
        body = self._client().get_object(Bucket=bucket, Key=key, Range=span)["Body"]
        return bytes(body.read())

    def names(self, rel_dir: str, suffix: str = "") -> list[str]:
        """Names of the files directly in ``rel_dir`` ending in ``suffix``,
        sorted; none when it does not exist. Hidden files (a WARC still being
        written) are left out."""
        if self.s3 is None:
            folder = self._path(rel_dir)
            if not folder.is_dir():
                return []
            found = (p.name for p in folder.iterdir() if p.is_file())
        else:
            bucket, under = self._folder(rel_dir)
            keys = list_keys(self._client(), bucket, under)
            found = (k[len(under) :] for k, _ in keys if "/" not in k[len(under) :])
        return sorted(n for n in found if n.endswith(suffix) and not n.startswith("."))

    def size(self, rel_dir: str) -> int:
        """Bytes of every file under ``rel_dir``, at any depth (0 when it
        does not exist)."""
        if self.s3 is None:
            folder = self._path(rel_dir)
            if not folder.is_dir():
                return 0
            return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        bucket, under = self._folder(rel_dir)
        return sum(size for _, size in list_keys(self._client(), bucket, under))

    def dirs(self, rel_dir: str) -> list[str]:
        """Names of the folders directly in ``rel_dir``, sorted."""
        if self.s3 is None:
            folder = self._path(rel_dir)
            return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        bucket, under = self._folder(rel_dir)
        paginator = self._client().get_paginator("list_objects_v2")
        found: set[str] = set()
        for page in paginator.paginate(Bucket=bucket, Prefix=under, Delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                found.add(common["Prefix"][len(under) :].strip("/"))
        return sorted(found)

    def download(self, rel: str, dest: Path) -> Path:
        """A local copy of ``rel`` at ``dest`` (the file itself when local)."""
        if self.s3 is None:
            return self._path(rel)
        bucket, key = self._key(rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        self._client().download_file(bucket, key, str(dest))
        return dest

    def local_path(self, rel: str) -> Path | None:
        """``rel`` as a local path (None: an object store)."""
        return None if self.s3 is not None else self._path(rel)

    # --- internals ----------------------------------------------------------------

    def _path(self, rel: str) -> Path:
        local = local_dir(self.uri)
        assert local is not None
        return Path(local) / rel.strip("/")

    def _key(self, rel: str) -> tuple[str, str]:
        bucket, prefix = split_uri(self.uri)
        return bucket, "/".join(part for part in (prefix, rel.strip("/")) if part)

    def _folder(self, rel: str) -> tuple[str, str]:
        """(bucket, the key prefix of the folder ``rel``: "" or ending in /)."""
        bucket, key = self._key(rel)
        return bucket, f"{key}/" if key else ""

    def _client(self) -> Any:
        assert self.s3 is not None
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(self.s3)
            if client is None:
                client = _CLIENTS[self.s3] = self.s3.client()
            return client


# --- a segment's places ------------------------------------------------------------


def _create_excl(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return True


def warc_rel(segment: str, name: str = "") -> str:
    base = f"segments/{check_segment_id(segment)}/warc"
    return f"{base}/{name}" if name else base


def index_rel(segment: str) -> str:
    return f"segments/{check_segment_id(segment)}/{INDEX_FILE}"


def file_index_rel(segment: str, name: str = "") -> str:
    """Where the WARC files' own indexes of a segment go (``<file>.cdxj``)."""
    base = f"segments/{check_segment_id(segment)}/warc-index"
    return f"{base}/{name}" if name else base


def warc_files(root: CrawlRoot, segment: str) -> list[str]:
    """The names of the segment's complete WARC files, sorted."""
    return root.names(warc_rel(segment), ".warc.gz")


@dataclass(frozen=True)
class Claims:
    """Where a segment's fetch tasks claim the addresses of new hosts
    (``trawl.fetch.claims``): a file (or object) per address, holding the
    task that made it first."""

    root: CrawlRoot
    segment: str

    def claim(self, address: str, task: int) -> bool:
        """Does ``task`` own ``address``? The first task to create the claim
        does; one that finds it owns the address if it holds its number (a
        Spark retry of a task keeps the addresses it claimed)."""
        rel = self._rel(address.replace(":", "_").replace("%", "_"))
        if self.root.create_exclusive(rel, str(task).encode()):
            return True
        held = self.root.read_bytes(rel)
        return held is not None and held.decode("ascii", "replace").strip() == str(task)

    def clear(self) -> None:
        """A re-run of the fetch claims afresh."""
        self.root.delete_tree(self._rel())

    def _rel(self, name: str = "") -> str:
        base = f"segments/{check_segment_id(self.segment)}/claims"
        return f"{base}/{name}" if name else base


@dataclass(frozen=True)
class FetchPlaces:
    """What a segment's fetch tasks write under the crawl root: its WARC
    files, and its new-host claims; and the root whose policy table they
    re-read (with delta-rs) while they run."""

    root: CrawlRoot
    segment: str

    def open_warc(self, name: str) -> BinaryIO:
        return self.root.open_write(warc_rel(self.segment, name))

    # each WARC file's own CDXJ index, made by the task that wrote it
    # (``trawl.warc.archive.TaskArchive``), for the segment's index
    def open_index(self, name: str) -> BinaryIO:
        return self.root.open_write(file_index_rel(self.segment, name))

    def clear_indexes(self) -> None:
        self.root.delete_tree(file_index_rel(self.segment))

    def drop_unfinished(self) -> int:
        """Drop what fetch tasks killed on the way left of their files (a
        task cancelled when another failed dies without its ``abort``)."""
        return self.root.drop_unfinished(f"segments/{check_segment_id(self.segment)}")

    @property
    def claims(self) -> Claims:
        return Claims(self.root, self.segment)

    # live progress (trawl.fetch.progress): a small JSON file per task
    def write_progress(self, task: int, snapshot: Mapping[str, Any]) -> None:
        self.root.write_bytes(
            f"{self._progress}/task-{task:05d}.json", json.dumps(snapshot).encode()
        )

    def read_progress(self) -> list[dict[str, Any]]:
        """Every task's latest snapshot (one being rewritten is skipped)."""
        out = []
        for name in self.root.names(self._progress, ".json"):
            try:
                data = self.root.read_bytes(f"{self._progress}/{name}")
                out.append(json.loads(data or b"{}"))
            except (OSError, ValueError):
                continue
        return out

    def clear_progress(self) -> None:
        self.root.delete_tree(self._progress)

    @property
    def _progress(self) -> str:
        return f"segments/{check_segment_id(self.segment)}/progress"


# --- reading records back ----------------------------------------------------------


def locate_warc(root: CrawlRoot, file: str) -> str:
    """The path under the root of the WARC file ``file`` (a basename)."""
    if "/" in file or file in ("", ".", ".."):
        raise ValueError(f"not a WARC file name: {file!r}")
    for segment in reversed(root.dirs("segments")):
        if file in root.names(warc_rel(segment), ".warc.gz"):
            return warc_rel(segment, file)
    raise FileNotFoundError(f"no WARC file {file!r} under {root.uri}/segments/*/warc/")


def warc_record(root: CrawlRoot, ref: WarcRef) -> tuple[WarcRecord, bytes]:
    """The record an event's ``warc_ref`` points to (digests checked), and
    its bytes as stored, uncompressed. Reads the record's bytes only."""
    rel = locate_warc(root, ref.file)
    local = root.local_path(rel)
    if local is not None:
        return get_record(local, ref)
    span = root.read_range(rel, ref.offset, ref.length)
    with tempfile.TemporaryDirectory(prefix="trawl-warc-") as tmp:
        path = Path(tmp) / ref.file
        path.write_bytes(span)
        return get_record(path, WarcRef(ref.file, 0, ref.length))
