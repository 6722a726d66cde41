"""An object-store crawl root (``s3a://bucket/prefix``): the settings every
client of it needs, and the two writes a filesystem API does not give.

One ``S3Store`` value (frozen, picklable: it travels to the executors with
the fetch tasks) says how to reach the store, from ``[storage]`` and the
standard AWS environment (``trawl.config.load``). It turns into each
client's own settings: Spark's S3A (``spark_conf``), delta-rs
(``delta_options``) and boto3 (``client``), so all three agree on the
endpoint, the region and path-style access, and each takes the credentials
from the AWS SDK chain itself. No key or secret is ever copied into a
setting, a log line or a table: ``describe`` names what is configured,
never a credential.

Why boto3, not ``pyarrow.fs`` or fsspec, for the files (WARC, CDXJ, the
lease, claims). A WARC file must appear under its final name only when it
is complete, and a failed or killed task must leave nothing a reader lists:
a multipart upload does exactly that (an upload not completed is never an
object), but ``pyarrow``'s S3 output stream completes its upload on
``close`` with no way to abort it from Python, and fsspec's s3fs brings
aiobotocore for the same calls. The lease and new-host claims need a write
that fails when the object exists (S3's conditional ``If-None-Match: *``,
2024), which neither exposes. boto3 is AWS's own SDK: the same credential
chain as the JVM's, every S3-compatible store speaks to it, and it is one
small dependency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trawl.config import StorageConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

SCHEMES = ("s3a", "s3", "s3n")
_URI = re.compile(r"^(?P<scheme>[a-z0-9]+)://(?P<bucket>[^/]+)(?:/(?P<prefix>.*))?$")
PART_BYTES = 8 * 2**20  # multipart parts: S3 wants >= 5 MiB for all but the last
# S3A credentials provider for the SDK's default chain: environment, system
# properties, web identity, shared files (with the profile), container and
# instance roles, as boto3 and delta-rs take them.
DEFAULT_PROVIDER = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
ANONYMOUS_PROVIDER = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"


class StoreError(RuntimeError):
    """An object store refused or could not be reached; the message names
    the setting to look at."""


def is_object_store(root: str) -> bool:
    return root.split("://", 1)[0].lower() in SCHEMES if "://" in root else False


def split_uri(uri: str) -> tuple[str, str]:
    """``s3a://bucket/a/b`` -> ("bucket", "a/b")."""
    match = _URI.match(uri)
    if match is None or match["scheme"].lower() not in SCHEMES:
        raise ValueError(f"not an S3 URI (s3a://bucket/prefix): {uri!r}")
    return match["bucket"], (match["prefix"] or "").strip("/")


@dataclass(frozen=True)
class S3Store:
    endpoint: str = ""
    region: str = ""
    path_style: bool = False
    anonymous: bool = False
    profile: str = ""

    @classmethod
    def from_config(cls, storage: StorageConfig) -> S3Store:
        endpoint = storage.endpoint.rstrip("/")
        auto = endpoint.startswith("http://")
        path_style = {"auto": auto, "true": True, "false": False}[storage.path_style]
        return cls(
            endpoint=endpoint,
            region=storage.region,
            path_style=path_style,
            anonymous=storage.credentials == "anonymous",
            profile=storage.profile,
        )

    def describe(self) -> str:
        """The settings in a message, without a credential."""
        parts = [f"endpoint {self.endpoint or '(AWS)'}", f"region {self.region or '(default)'}"]
        if self.path_style:
            parts.append("path-style")
        if self.profile:
            parts.append(f"profile {self.profile}")
        return ", ".join(parts)

    def spark_conf(self) -> dict[str, str]:
        """``spark.hadoop.fs.s3a.*`` for these settings (no credential: S3A
        asks the SDK chain, ``DEFAULT_PROVIDER``)."""
        pre = "spark.hadoop.fs.s3a."
        out = {
            f"{pre}aws.credentials.provider": ANONYMOUS_PROVIDER
            if self.anonymous
            else DEFAULT_PROVIDER,
            f"{pre}path.style.access": str(self.path_style).lower(),
            # fail within seconds, not the SDK's minutes of retries, when the
            # endpoint is wrong or down: a crawl job retries as a whole
            f"{pre}attempts.maximum": "3",
            f"{pre}retry.limit": "3",
            f"{pre}connection.establish.timeout": "5s",
        }
        if self.endpoint:
            out[f"{pre}endpoint"] = self.endpoint
            out[f"{pre}connection.ssl.enabled"] = str(self.endpoint.startswith("https")).lower()
        if self.region:
            out[f"{pre}endpoint.region"] = self.region
        return out

    def delta_options(self) -> dict[str, str]:
        """delta-rs storage options (its object_store reads the credentials
        from the environment itself)."""
        out = {"AWS_REGION": self.region or "us-east-1"}
        if self.endpoint:
            out["AWS_ENDPOINT_URL"] = self.endpoint
            if self.endpoint.startswith("http://"):
                out["AWS_ALLOW_HTTP"] = "true"
        out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = str(not self.path_style).lower()
        if self.anonymous:
            out["AWS_SKIP_SIGNATURE"] = "true"
        if self.profile:
            out["AWS_PROFILE"] = self.profile
        return out

    def client(self) -> Any:
        """A boto3 S3 client (the SDK's credential chain), with short
        timeouts and few retries."""
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config as BotoConfig

        session = boto3.session.Session(profile_name=self.profile or None)
        config = BotoConfig(
            s3={"addressing_style": "path" if self.path_style else "auto"},
            signature_version=UNSIGNED if self.anonymous else None,
            connect_timeout=5,
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
        )
        return session.client(
            "s3",
            endpoint_url=self.endpoint or None,
            region_name=self.region or "us-east-1",
            config=config,
        )


def explain(exc: BaseException, uri: str, store: S3Store) -> StoreError:
    """A boto3 failure as one line that names the setting to fix."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        ProfileNotFound,
    )

    where = f"{uri} ({store.describe()})"
    if isinstance(exc, NoCredentialsError):
        why = (
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "a profile (AWS_PROFILE or storage.profile), or storage.credentials = anonymous"
        )
    elif isinstance(exc, ProfileNotFound):
        why = f"{exc}: check storage.profile or AWS_PROFILE"
    elif isinstance(exc, EndpointConnectionError) or "connect" in type(exc).__name__.lower():
        why = "cannot reach the endpoint: check storage.endpoint (or AWS_ENDPOINT_URL)"
    elif isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchBucket",) or (status == 404 and code in ("404", "NotFound")):
            why = "no such bucket: check the bucket in --crawl, and storage.endpoint"
        elif code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403") or (
            status == 403
        ):
            why = (
                f"the store refused the credentials ({code or status}): check "
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or storage.profile"
            )
        else:
            why = f"{code or status}: {exc.response.get('Error', {}).get('Message', '')}".strip()
    else:
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return StoreError(f"object store {where}: {why}")


class MultipartUpload:
    """A binary sink that uploads to ``bucket/key`` in parts as it is
    written: the object appears (whole, under its name) on ``close``, and
    ``abort`` (or a process killed on the way) leaves none. ``tell`` counts
    the bytes written, so WARC record offsets are exact."""

    def __init__(self, client: Any, bucket: str, key: str, part_bytes: int = PART_BYTES) -> None:
        self._client, self._bucket, self._key = client, bucket, key
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._parts: list[dict[str, Any]] = []
        self._written = 0
        self._upload_id: str | None = None
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self.closed:
            raise ValueError(f"write to a closed upload of {self._key}")
        self._buffer += data
        self._written += len(data)
        while len(self._buffer) >= self._part_bytes:
            self._send(bytes(self._buffer[: self._part_bytes]))
            del self._buffer[: self._part_bytes]
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        """Parts go out as they fill; nothing is visible before ``close``."""

    def close(self) -> None:
        """Complete the upload: the object appears whole."""
        if self.closed:
            return
        self.closed = True
        if self._upload_id is None:  # under one part: a plain PUT
            self._client.put_object(Bucket=self._bucket, Key=self._key, Body=bytes(self._buffer))
            return
        if self._buffer:
            self._send(bytes(self._buffer))
        self._client.complete_multipart_upload(
            Bucket=self._bucket,
            Key=self._key,
            UploadId=self._upload_id,
            MultipartUpload={"Parts": self._parts},
        )

    def abort(self) -> None:
        """Drop what was uploaded: no object appears."""
        if self.closed:
            return
        self.closed = True
        if self._upload_id is not None:
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload_id
            )

    def _send(self, part: bytes) -> None:
        if self._upload_id is None:
            started = self._client.create_multipart_upload(Bucket=self._bucket, Key=self._key)
            self._upload_id = started["UploadId"]
        number = len(self._parts) + 1
        done = self._client.upload_part(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload_id,
            PartNumber=number, Body=part,
        )  # fmt: skip
        self._parts.append({"PartNumber": number, "ETag": done["ETag"]})

    def __enter__(self) -> MultipartUpload:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def create_exclusive(client: Any, bucket: str, key: str, body: bytes) -> bool:
    """Write ``key`` only if it does not exist (``If-None-Match: *``): True
    when this call created it, False when it was there already."""
    from botocore.exceptions import ClientError

    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
            return False
        raise
    return True


def list_keys(client: Any, bucket: str, prefix: str) -> Iterator[tuple[str, int]]:
    """(key, size) of every object under ``prefix``, in key order."""
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            yield item["Key"], int(item["Size"])
