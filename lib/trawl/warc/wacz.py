"""WACZ 1.1.1 packages: exported WARC files, their CDXJ index and page list in one ZIP.

A WACZ (Web Archive Collection Zipped, Webrecorder's specification 1.1.1)
is what ReplayWeb.page opens in a browser and what ``wacz validate``
checks. ``write_wacz`` packs files trawl already made -- the WARC files of
an export (``trawl.warc.lookup``) and their sorted index
(``trawl.warc.cdxj``) -- with the page list and the manifest:

* ``archive/<name>.warc.gz``: the WARC files, ZIP ``STORE``d ("already
  compressed files MUST NOT be compressed again", section "Zip
  Compression"), so a reader can range-request one gzip member.
* ``indexes/index.cdx``: the CDXJ index, as is ("Index files MUST contain
  CDXJ data and MAY be gzip compressed"); its ``filename`` fields are the
  WARC base names, as the archive folder holds them. Named ``.cdx`` as
  py-wacz names its (``index.cdx.gz``): pywb 2.10's ``--unpack-wacz`` reads
  an index by that ending only, and ignores a package whose index ends
  ``.cdxj`` (ReplayWeb.page takes either).
* ``pages/pages.jsonl``: a ``json-pages-1.0`` header line, then one object
  per captured HTML page with the required ``url`` and ``ts`` (RFC 3339:
  the capture's WARC-Date) and ``title`` where the fetch read one
  (``pages``, ``Page``).
* ``datapackage.json``: the Frictionless Data Package manifest with
  ``profile``, ``wacz_version`` and every other entry's path, sha256 hash and
  size (``resources``), then ``created`` and ``software``.
* ``datapackage-digest.json``: the sha256 of ``datapackage.json``, so one
  hash covers the whole package; with a key (``WaczSigner``), also the
  anonymous signature of WACZ Signing and Verification 0.1.0
  (``signedData``: ECDSA with SHA-256 over that hash, and the public key),
  which anyone can check against the key the operator publishes. The
  domain-identity form needs a signing server and a time-stamping authority
  and is not written.

Why our own packing and not ``wacz create`` (py-wacz): it indexes the WARC
files again with cdxj-indexer and would be a second index writer beside
``trawl.warc.cdxj``; it takes page titles from a text extractor where the
fetch already read them; and it pulls Frictionless into the crawler's
runtime. The ZIP layout here follows py-wacz 0.6.0's, and the tests run its
``wacz validate`` on what we write.

ZIP entries are dated with the package's ``created`` time (the export's
logical time), not the wall clock, so the same export gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from trawl.warc.fields import target_uri, warc_date

__all__ = [
    "HTML_TYPES",
    "WACZ_VERSION",
    "Package",
    "Page",
    "PageCapture",
    "WaczSigner",
    "pages",
    "pages_jsonl",
    "wacz_target",
    "write_wacz",
]

WACZ_VERSION = "1.1.1"
SIGNATURE_VERSION = "0.1.0"  # WACZ Signing and Verification
HASH = "sha256"  # the hash of every resource and of the manifest (py-wacz's default)
HTML_TYPES = ("text/html", "application/xhtml+xml")
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
ARCHIVE, INDEX, PAGES = "archive", "indexes/index.cdx", "pages/pages.jsonl"
MANIFEST, DIGEST = "datapackage.json", "datapackage-digest.json"
_CHUNK = 1 << 20
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a ZIP entry can hold


def wacz_target(out: str) -> tuple[str, str]:
    """``--out`` split into its folder (a local path or object-store URI)
    and file name; the name must end in ``.wacz`` ("Zip Format File
    Extension": a WACZ "MUST use the extension .wacz")."""
    folder, _, name = out.rstrip("/").rpartition("/")
    if not name.endswith(".wacz") or name == ".wacz":
        raise ValueError(f"export wacz: --out wants a file name ending in .wacz, got {out!r}")
    if not folder:
        folder = "/" if out.startswith("/") else "."
    if "://" not in out:  # a local file: its place must be able to hold one
        if Path(out).is_dir():
            raise ValueError(
                f"export wacz: --out {out!r} is a folder; give a file name ending in .wacz"
            )
        existing = next(p for p in (Path(folder), *Path(folder).parents) if p.exists())
        if not existing.is_dir():
            raise ValueError(f"export wacz: --out {out!r}: {str(existing)!r} is not a folder")
    return folder, name


# --- the page list -------------------------------------------------------------------


@dataclass(frozen=True)
class PageCapture:
    """What the fetch table says of one exported capture."""

    url: str
    fetched_at: datetime  # timezone-aware: the capture's WARC-Date
    http_status: int | None
    content_type: str | None
    title: str | None = None


@dataclass(frozen=True)
class Page:
    """One line of ``pages.jsonl``."""

    url: str
    ts: str  # RFC 3339
    title: str | None = None

    @property
    def id(self) -> str:
        """Stable across exports of the same capture (py-wacz draws a random one)."""
        return hashlib.sha1(f"{self.ts} {self.url}".encode()).hexdigest()[:20]

    def as_json(self) -> dict[str, str]:
        out = {"id": self.id, "url": self.url, "ts": self.ts}
        if self.title:
            out["title"] = self.title
        return out


def is_html_page(capture: PageCapture) -> bool:
    """A page a person would open: a 2xx answer of HTML (py-wacz's page
    detection takes HTML and leaves redirects out; errors are no pages)."""
    status = capture.http_status or 0
    mime = (capture.content_type or "").split(";", 1)[0].strip().lower()
    return 200 <= status < 300 and mime in HTML_TYPES


def pages(captures: Iterable[PageCapture]) -> list[Page]:
    """The HTML pages among ``captures``, one per capture, by time then URL.
    ``ts`` is the capture's WARC-Date (``trawl.warc.fields.warc_date``), so
    a page names its record exactly."""
    found = {
        Page(target_uri(c.url), warc_date(c.fetched_at), " ".join((c.title or "").split()) or None)
        for c in captures
        if is_html_page(c)
    }
    return sorted(found, key=lambda p: (p.ts, p.url, p.title or ""))


def pages_jsonl(listed: Sequence[Page]) -> bytes:
    """``pages.jsonl``: the header line, then one JSON object per page."""
    lines = [PAGES_HEADER, *(p.as_json() for p in listed)]
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()


# --- the package ---------------------------------------------------------------------


@dataclass
class Package:
    """What ``write_wacz`` wrote: the manifest's resources, and the file."""

    path: Path
    resources: list[dict[str, Any]] = field(default_factory=list)
    pages: int = 0

    @property
    def size(self) -> int:
        return self.path.stat().st_size


class WaczSigner:
    """Signs packages anonymously (WACZ Signing and Verification 0.1.0,
    "Anonymous Signature"): ECDSA with SHA-256 over the UTF-8 of the
    manifest's hash string (``sha256:<hex>``), the signature as r || s
    (IEEE P1363, as WebCrypto verifies it) and the public key as DER
    SubjectPublicKeyInfo, both base64. The key is the operator's, a PEM EC
    private key (P-256 or P-384, unencrypted); who holds it is for the
    operator to publish."""

    def __init__(self, key: Any) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in (
            "secp256r1",
            "secp384r1",
        ):
            raise ValueError("a WACZ signing key must be an EC private key on P-256 or P-384")
        self.key = key

    @classmethod
    def from_pem(cls, path: str | Path) -> WaczSigner:
        """The key in the PEM file ``path``; a clear error for anything else."""
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ValueError(f"--sign-key {path}: {exc.strerror or exc}") from None
        try:
            key = load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"--sign-key {path}: not an unencrypted PEM private key ({exc}); make one with "
                "`openssl ecparam -name secp384r1 -genkey -noout -out key.pem`"
            ) from None
        try:
            return cls(key)
        except ValueError as exc:
            raise ValueError(f"--sign-key {path}: {exc}") from None

    def signed_data(self, digest: str, created: str, software: str) -> dict[str, str]:
        """The ``signedData`` object of ``datapackage-digest.json``."""
        import base64

        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        r, s = decode_dss_signature(self.key.sign(digest.encode(), ec.ECDSA(hashes.SHA256())))
        size = (self.key.curve.key_size + 7) // 8
        public = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
        return {
            "hash": digest,
            "created": created,
            "software": software,
            "version": SIGNATURE_VERSION,
            "signature": base64.b64encode(signature).decode(),
            "publicKey": base64.b64encode(public).decode(),
        }


def write_wacz(
    path: Path,
    warcs: Sequence[Path],
    index: Path,
    listed: Sequence[Page],
    *,
    created: datetime,
    software: str,
    title: str | None = None,
    description: str | None = None,
    signer: WaczSigner | None = None,
) -> Package:
    """Pack ``warcs``, their CDXJ ``index`` and the pages ``listed`` into the
    WACZ at ``path``, replaced whole or not at all (a hidden ``.part`` file
    renamed at the end); signed by ``signer`` if given."""
    names = [w.name for w in warcs]
    if len(set(names)) != len(names):
        raise ValueError(f"WARC file names repeat: {sorted(names)}")
    when = _zip_time(created)
    package = Package(path, pages=len(listed))
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.part")
    try:
        with zipfile.ZipFile(part, "w", allowZip64=True) as zf:
            for warc in warcs:  # stored: each gzip member stays addressable
                package.resources.append(_add_file(zf, f"{ARCHIVE}/{warc.name}", warc, when))
            package.resources.append(_add_file(zf, INDEX, index, when, zipfile.ZIP_DEFLATED))
            package.resources.append(_add_bytes(zf, PAGES, pages_jsonl(listed), when))
            manifest = _manifest(package.resources, created, software, title, description)
            _add_bytes(zf, MANIFEST, manifest, when)
            _add_bytes(zf, DIGEST, _digest(manifest, signer, created, software), when)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return package


def _manifest(
    resources: Sequence[dict[str, Any]],
    created: datetime,
    software: str,
    title: str | None,
    description: str | None,
) -> bytes:
    """``datapackage.json``: the required ``profile``, ``wacz_version`` and
    ``resources``, then the context the specification asks for."""
    manifest: dict[str, Any] = {
        "profile": "data-package",
        "wacz_version": WACZ_VERSION,
        "resources": list(resources),
    }
    if title:
        manifest["title"] = title
    if description:
        manifest["description"] = description  # Markdown; plain text is Markdown
    manifest["created"] = _iso(created)
    manifest["software"] = software
    return json.dumps(manifest, indent=2).encode()


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest(manifest: bytes, signer: WaczSigner | None, created: datetime, software: str) -> bytes:
    digest = f"{HASH}:{hashlib.new(HASH, manifest).hexdigest()}"
    out: dict[str, Any] = {"path": MANIFEST, "hash": digest}
    if signer is not None:
        out["signedData"] = signer.signed_data(digest, _iso(created), software)
    return json.dumps(out, indent=2).encode()


def _resource(arcname: str, hasher: Any, size: int) -> dict[str, Any]:
    # Frictionless names are lower-case ([a-z0-9._/-]); py-wacz uses the base name
    return {
        "name": os.path.basename(arcname).lower(),
        "path": arcname,
        "hash": f"{HASH}:{hasher.hexdigest()}",
        "bytes": size,
    }


def _entry(
    arcname: str, when: tuple[int, int, int, int, int, int], compress: int
) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, when)
    info.compress_type = compress
    info.external_attr = 0o100644 << 16
    return info


def _add_file(
    zf: zipfile.ZipFile,
    arcname: str,
    source: Path,
    when: tuple[int, int, int, int, int, int],
    compress: int = zipfile.ZIP_STORED,
) -> dict[str, Any]:
    """Copy ``source`` into the ZIP, hashing it on the way (read once)."""
    info = _entry(arcname, when, compress)
    info.file_size = source.stat().st_size  # lets zipfile choose ZIP64 up front
    hasher, size = hashlib.new(HASH), 0
    with source.open("rb") as src, zf.open(info, "w") as dst:
        for chunk in _chunks(src):
            hasher.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    return _resource(arcname, hasher, size)


def _add_bytes(
    zf: zipfile.ZipFile, arcname: str, data: bytes, when: tuple[int, int, int, int, int, int]
) -> dict[str, Any]:
    zf.writestr(_entry(arcname, when, zipfile.ZIP_DEFLATED), data)
    return _resource(arcname, hashlib.new(HASH, data), len(data))


def _chunks(fh: IO[bytes]) -> Iterator[bytes]:
    while chunk := fh.read(_CHUNK):
        yield chunk


def _zip_time(moment: datetime) -> tuple[int, int, int, int, int, int]:
    utc = moment.astimezone(UTC) if moment.tzinfo else moment
    return max(_ZIP_EPOCH, (utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second))
