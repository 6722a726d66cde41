"""Tests for trawl.warc.wacz: WACZ 1.1.1 packages that py-wacz's ``wacz validate``
accepts, with the page list, hashes and ZIP layout the specification asks for."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.warc.test_writer import FETCHED_AT, write_sample
from trawl.warc.cdxj import write_index
from trawl.warc.wacz import (
    PageCapture,
    WaczSigner,
    pages,
    pages_jsonl,
    wacz_target,
    write_wacz,
)

BIN = Path(sys.executable).parent
CREATED = datetime(2026, 10, 1, 6, 0, tzinfo=UTC)


def wacz_validate(path: Path) -> subprocess.CompletedProcess[str]:
    """py-wacz's validator (a dev dependency), as a user runs it."""
    return subprocess.run(
        [str(BIN / "wacz"), "validate", "-f", str(path)], capture_output=True, text=True
    )


def assert_valid(path: Path) -> None:
    done = wacz_validate(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Version detected as 1.1.1" in done.stdout
    assert "Validation succeeded" in done.stdout


def package(tmp_path: Path, name: str = "crawl.wacz", signer: WaczSigner | None = None) -> Path:
    """A WACZ of the writer's sample WARC (an HTML page, a text file, a
    truncated binary) and its index; two of the captures listed."""
    warc = tmp_path / "sample-00000.warc.gz"
    if not warc.exists():
        write_sample(warc)
        write_index([warc], tmp_path / "index.cdxj", sort=True)
    listed = pages(
        [
            PageCapture("http://example.com/", FETCHED_AT, 200, "text/html; charset=utf-8", "Hi"),
            PageCapture("https://example.com/data.txt", FETCHED_AT, 200, "text/plain", None),
        ]
    )
    out = tmp_path / "out" / name
    write_wacz(
        out, [warc], tmp_path / "index.cdxj", listed, created=CREATED,
        software="trawl test", title="A sample", description="the writer's sample",
        signer=signer,
    )  # fmt: skip
    return out


def test_wacz_validate_accepts_the_package(tmp_path: Path) -> None:
    assert_valid(package(tmp_path))


def test_wacz_validate_refuses_a_package_whose_file_was_changed(tmp_path: Path) -> None:
    """The check the test above relies on can fail: one changed byte in
    pages.jsonl no longer matches its hash in datapackage.json."""
    good = package(tmp_path)
    bad = tmp_path / "bad.wacz"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data.replace(b'"Hi"', b'"Ho"') if "pages" in info.filename else data)
    done = wacz_validate(bad)
    assert done.returncode == 1 and "invalid" in done.stdout


def test_layout_and_compression(tmp_path: Path) -> None:
    with zipfile.ZipFile(package(tmp_path)) as zf:
        entries = {i.filename: i for i in zf.infolist()}
    assert list(entries) == [
        "archive/sample-00000.warc.gz",
        "indexes/index.cdx",
        "pages/pages.jsonl",
        "datapackage.json",
        "datapackage-digest.json",
    ]
    # "Already compressed files MUST NOT be compressed again"
    assert entries["archive/sample-00000.warc.gz"].compress_type == zipfile.ZIP_STORED
    assert {i.date_time for i in entries.values()} == {(2026, 10, 1, 6, 0, 0)}


def test_manifest_holds_each_files_sha256_and_size(tmp_path: Path) -> None:
    with zipfile.ZipFile(package(tmp_path)) as zf:
        manifest_bytes = zf.read("datapackage.json")
        manifest = json.loads(manifest_bytes)
        digest = json.loads(zf.read("datapackage-digest.json"))
        contents = {name: zf.read(name) for name in zf.namelist()}
    assert manifest["profile"] == "data-package" and manifest["wacz_version"] == "1.1.1"
    assert manifest["created"] == "2026-10-01T06:00:00Z" and manifest["title"] == "A sample"
    listed = {r["path"]: r for r in manifest["resources"]}
    assert set(listed) == set(contents) - {"datapackage.json", "datapackage-digest.json"}
    for path, resource in listed.items():
        assert resource["hash"] == "sha256:" + hashlib.sha256(contents[path]).hexdigest()
        assert resource["bytes"] == len(contents[path])
        assert resource["name"] == path.rsplit("/", 1)[1]
    assert digest == {
        "path": "datapackage.json",
        "hash": "sha256:" + hashlib.sha256(manifest_bytes).hexdigest(),
    }
    assert contents["indexes/index.cdx"] == (tmp_path / "index.cdxj").read_bytes()
    assert contents["archive/sample-00000.warc.gz"] == (
        (tmp_path / "sample-00000.warc.gz").read_bytes()
    )


def test_pages_jsonl_has_the_header_then_the_html_pages(tmp_path: Path) -> None:
    with zipfile.ZipFile(package(tmp_path)) as zf:
        lines = [json.loads(line) for line in zf.read("pages/pages.jsonl").splitlines()]
    assert lines[0] == {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
    assert [(p["url"], p["ts"], p.get("title")) for p in lines[1:]] == [
        ("http://example.com/", "2024-05-06T07:08:09.250000Z", "Hi")  # the record's WARC-Date
    ]
    assert len(lines[1]["id"]) == 20


def test_only_html_answers_of_2xx_are_pages() -> None:
    at = FETCHED_AT
    listed = pages(
        [
            PageCapture("http://a.test/", at, 200, "text/html", "  Two\n  words "),
            PageCapture("http://a.test/x", at + timedelta(seconds=1), 200, "APPLICATION/XHTML+XML"),
            PageCapture("http://a.test/moved", at, 301, "text/html", "Moved"),
            PageCapture("http://a.test/gone", at, 404, "text/html", "Not found"),
            PageCapture("http://a.test/style.css", at, 200, "text/css"),
            PageCapture("http://a.test/none", at, 200, None),
            PageCapture("http://a.test/304", at, 304, None),
        ]
    )
    assert [(p.url, p.title) for p in listed] == [
        ("http://a.test/", "Two words"),
        ("http://a.test/x", None),
    ]
    assert "title" not in listed[1].as_json()
    again = PageCapture("http://a.test/", at + timedelta(days=1), 200, "text/html", "Two words")
    assert len(pages([again, again])) == 1  # one line per capture, a capture once
    header = json.loads(pages_jsonl([]).decode())
    assert header["format"] == "json-pages-1.0"


def test_the_same_export_gives_the_same_bytes(tmp_path: Path) -> None:
    first = package(tmp_path, "one.wacz").read_bytes()
    assert package(tmp_path, "two.wacz").read_bytes() == first
    assert not list((tmp_path / "out").glob(".*"))  # no part file left behind


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("demo/crawl.wacz", ("demo", "crawl.wacz")),
        ("crawl.wacz", (".", "crawl.wacz")),
        ("/crawl.wacz", ("/", "crawl.wacz")),
        ("s3a://lake/exports/news.wacz", ("s3a://lake/exports", "news.wacz")),
    ],
)
def test_wacz_target_splits_folder_and_name(out: str, expected: tuple[str, str]) -> None:
    assert wacz_target(out) == expected


def test_wacz_target_wants_a_wacz_file(tmp_path: Path) -> None:
    for out in ("crawl.zip", "exports/", ".wacz"):
        with pytest.raises(ValueError, match=r"ending in \.wacz"):
            wacz_target(out)
    folder = tmp_path / "x.wacz"
    folder.mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        wacz_target(str(folder))
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match="is not a folder"):
        wacz_target(str(tmp_path / "file" / "deeper" / "x.wacz"))


def new_key(tmp_path: Path, curve: str = "secp384r1") -> Path:
    """A PEM EC private key, as `openssl ecparam -genkey` writes one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(getattr(ec, curve.upper())())
    path = tmp_path / f"{curve}.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return path


def verify(digest: dict[str, Any]) -> bool:
    """WebCrypto's check of an anonymous signature: ECDSA/SHA-256, r || s,
    over the hash string, by the SPKI public key the package carries."""
    import base64

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    signed = digest["signedData"]
    public = serialization.load_der_public_key(base64.b64decode(signed["publicKey"]))
    assert isinstance(public, ec.EllipticCurvePublicKey)
    raw = base64.b64decode(signed["signature"])
    half = len(raw) // 2
    der = encode_dss_signature(int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big"))
    try:
        public.verify(der, signed["hash"].encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


@pytest.mark.parametrize("curve", ["secp384r1", "secp256r1"])
def test_a_signed_package_carries_a_signature_its_public_key_verifies(
    tmp_path: Path, curve: str
) -> None:
    signer = WaczSigner.from_pem(new_key(tmp_path, curve))
    out = package(tmp_path, signer=signer)
    assert_valid(out)
    with zipfile.ZipFile(out) as zf:
        manifest = zf.read("datapackage.json")
        digest = json.loads(zf.read("datapackage-digest.json"))
    signed = digest["signedData"]
    assert signed["hash"] == digest["hash"] == "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert set(signed) == {"hash", "created", "software", "version", "signature", "publicKey"}
    assert (signed["created"], signed["software"], signed["version"]) == (
        "2026-10-01T06:00:00Z", "trawl test", "0.1.0"
    )  # fmt: skip
    assert len(base64.b64decode(signed["signature"])) == (96 if curve == "secp384r1" else 64)
    assert verify(digest)
    # the signature covers the hash: another manifest's hash does not verify
    forged = {**digest, "signedData": {**signed, "hash": "sha256:" + "0" * 64}}
    assert not verify(forged)
    # unsigned by default
    with zipfile.ZipFile(package(tmp_path, "plain.wacz")) as zf:
        assert "signedData" not in json.loads(zf.read("datapackage-digest.json"))


def test_a_key_that_cannot_sign_is_a_clear_error(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    with pytest.raises(ValueError, match=r"(?i)no such file"):
        WaczSigner.from_pem(tmp_path / "missing.pem")
    (tmp_path / "junk.pem").write_text("not a key\n")
    with pytest.raises(ValueError, match=r"not an unencrypted PEM private key.*openssl ecparam"):
        WaczSigner.from_pem(tmp_path / "junk.pem")
    other = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "ed.pem").write_bytes(other)
    with pytest.raises(ValueError, match="EC private key on P-256 or P-384"):
        WaczSigner.from_pem(tmp_path / "ed.pem")
