"""The crawl root's files on a real S3-protocol server (moto's, on loopback):
uploads that appear only whole, create-if-absent, the lease and the claims,
and the errors a user meets, without Spark."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from trawl.config import StorageConfig, load_config
from trawl.store.files import Claims, CrawlRoot, warc_files, warc_rel
from trawl.store.lease import CrawlLease, LeaseHeld
from trawl.store.objectstore import MultipartUpload, S3Store, StoreError


def root_of(endpoint: str, bucket: str, prefix: str = "crawl") -> CrawlRoot:
    return CrawlRoot.of(f"s3a://{bucket}/{prefix}", StorageConfig(endpoint=endpoint))


def keys(endpoint: str, bucket: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_the_aws_environment_fills_storage_and_config_overrides_it() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-3"}
    assert load_config(None, [], environ=env).storage.endpoint == "http://127.0.0.1:9"
    env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:10"  # the S3-specific one wins
    cfg = load_config(None, [], environ=env)
    assert (cfg.storage.endpoint, cfg.storage.region) == ("http://127.0.0.1:10", "eu-west-3")
    cfg = load_config(None, ["storage.region=us-west-2"], environ=env)
    assert cfg.storage.region == "us-west-2"
    store = S3Store.from_config(cfg.storage)
    assert store.path_style  # an http:// endpoint: path-style
    assert store.spark_conf()["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:10"
    assert store.delta_options()["AWS_ALLOW_HTTP"] == "true"


def test_no_setting_carries_a_credential() -> None:
    cfg = load_config(None, [], environ={"AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_REGION": "x"})
    store = S3Store.from_config(cfg.storage)
    text = repr(cfg) + repr(store.spark_conf()) + repr(store.delta_options()) + store.describe()
    assert "s3cr3t" not in text


def test_an_upload_appears_whole_on_close_and_never_on_abort(s3_server: str, bucket: str) -> None:
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    with MultipartUpload(client, bucket, "a.bin", part_bytes=5 * 2**20) as up:
        for _ in range(3):
            up.write(b"x" * (4 * 2**20))
            assert keys(s3_server, bucket) == []  # parts sent, no object yet
        assert up.tell() == 12 * 2**20
    assert keys(s3_server, bucket) == ["a.bin"]
    body = client.get_object(Bucket=bucket, Key="a.bin")["Body"].read()
    assert body == b"x" * (12 * 2**20)
    up = MultipartUpload(client, bucket, "b.bin", part_bytes=5 * 2**20)
    up.write(b"y" * (6 * 2**20))
    up.abort()
    assert keys(s3_server, bucket) == ["a.bin"]
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_a_process_killed_mid_upload_leaves_no_object(s3_server: str, bucket: str) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        from trawl.config import StorageConfig
        from trawl.store.files import CrawlRoot
        root = CrawlRoot.of("s3a://{bucket}/crawl", StorageConfig(endpoint="{s3_server}"))
        sink = root.open_write("segments/s1/warc/t.warc.gz")
        sink.write(b"z" * (9 * 2**20))  # one part uploaded
        print("written", flush=True)
        time.sleep(60)
    """)
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    root = root_of(s3_server, bucket)
    assert keys(s3_server, bucket) == []
    assert warc_files(root, "s1") == []
    # its stored part is kept (and billed) until the upload is aborted
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    assert len(client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])) == 1
    assert root.drop_unfinished("segments/s2") == 0  # another segment's: none
    assert root.drop_unfinished("segments/s1") == 1
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_root_files_on_s3(s3_server: str, bucket: str) -> None:
    root = root_of(s3_server, bucket)
    root.write_bytes(warc_rel("s1", "a.warc.gz"), b"0123456789")
    root.write_bytes(warc_rel("s1", "b.warc.gz"), b"b")
    root.write_bytes("segments/s1/index.cdxj", b"i")
    assert warc_files(root, "s1") == ["a.warc.gz", "b.warc.gz"]
    assert root.dirs("segments") == ["s1"]
    assert root.read_range(warc_rel("s1", "a.warc.gz"), 3, 4) == b"3456"
    assert root.read_bytes("nothing/here") is None
    assert root.create_exclusive("once", b"1") and not root.create_exclusive("once", b"2")
    assert root.read_bytes("once") == b"1"
    root.delete_tree("segments/s1")
    assert warc_files(root, "s1") == [] and root.read_bytes("once") == b"1"


def test_claims_on_s3_one_owner_and_a_retry_keeps_its_own(s3_server: str, bucket: str) -> None:
    claims = Claims(root_of(s3_server, bucket), "s1")
    assert claims.claim("10.0.0.1", 3)
    assert not claims.claim("10.0.0.1", 5)
    assert claims.claim("10.0.0.1", 3)  # the same task again (a Spark retry)
    claims.clear()
    assert claims.claim("10.0.0.1", 5)


def test_the_lease_on_s3_refuses_a_second_run_naming_the_holder(
    s3_server: str, bucket: str
) -> None:
    root = root_of(s3_server, bucket)
    held = r"in use: .* running 'cycle --segment s1'"
    with CrawlLease(root, "cycle --segment s1", ttl_s=60), pytest.raises(LeaseHeld, match=held):
        CrawlLease(root, "generate", ttl_s=60).acquire()
    with CrawlLease(root, "generate", ttl_s=60) as lease:  # released: free again
        assert lease.holder is not None


def test_an_expired_lease_on_s3_is_taken_over(s3_server: str, bucket: str) -> None:
    root = root_of(s3_server, bucket)
    now = [time.time()]
    CrawlLease(root, "crashed", ttl_s=60, clock=lambda: now[0])._try_take()
    with pytest.raises(LeaseHeld):
        CrawlLease(root, "second", ttl_s=60, clock=lambda: now[0]).acquire()
    now[0] += 61
    lease = CrawlLease(root, "second", ttl_s=60, clock=lambda: now[0])
    holder = lease.acquire()
    assert holder.command == "second"
    lease.release()


@pytest.mark.parametrize(
    ("uri", "endpoint", "fix"),
    [
        ("s3a://no-such-bucket-here/crawl", None, "check the bucket in --crawl"),
        ("s3a://b/crawl", "http://127.0.0.1:9", "check storage.endpoint"),
        ("gs://b/crawl", None, "gs:// is not supported"),
    ],
)
def test_an_unusable_root_is_one_line_naming_the_fix(
    s3_server: str, uri: str, endpoint: str | None, fix: str
) -> None:
    started = time.monotonic()
    with pytest.raises(StoreError, match=fix) as caught:
        CrawlRoot.of(uri, StorageConfig(endpoint=endpoint or s3_server)).check()
    assert "\n" not in str(caught.value)
    assert time.monotonic() - started < 30  # seconds, not the SDK's minutes of retries


def test_the_cli_fails_fast_on_a_missing_bucket_and_writes_nothing(
    s3_server: str, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.com/\n")
    run = subprocess.run(
        [sys.executable, "-m", "trawl.cli", "inject", str(seeds), "--crawl", "s3a://nope/c",
         "--set", f"storage.endpoint={s3_server}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    assert "no such bucket" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_root_at_the_bucket_itself(s3_server: str, bucket: str) -> None:
    root = CrawlRoot.of(f"s3a://{bucket}", StorageConfig(endpoint=s3_server))
    root.write_bytes("top.txt", b"t")
    root.write_bytes(warc_rel("s2", "a.warc.gz"), b"a")
    assert root.names("", ".txt") == ["top.txt"]
    assert root.dirs("") == ["segments"] and root.dirs("segments") == ["s2"]
    assert warc_files(root, "s2") == ["a.warc.gz"]


def test_an_unreadable_policy_on_s3_stops_a_fetch_instead_of_allowing_all(
    s3_server: str, bucket: str
) -> None:
    """Fail closed: on an object store, a policy table that cannot be read
    (here: none where the crawl's jobs would have made one) is an error for
    the fetch tasks, never "no rules"; once it exists, its rules apply."""
    from trawl.crawldb.policy import RuleChange
    from trawl.fetch.rules import policy_source
    from trawl.store.policy import PolicyStore, PolicyTableError

    root = root_of(s3_server, bucket)
    source = policy_source(root)
    with pytest.raises(PolicyTableError, match="cannot read the policy table at s3://"):
        source()
    PolicyStore.of(root).set(
        "host",
        "a.example.com",
        RuleChange(blocked=True),
        reason="t",
        set_by="t",
        at=datetime.now(UTC),
    )
    verdict = source()("a.example.com", "example.com", datetime.now(UTC))
    assert verdict is not None and verdict[0].startswith("blocked")


def test_refused_credentials_are_one_line_naming_the_variables(tmp_path: Path) -> None:
    """A store that checks signatures (moto with its IAM checks on from the
    first request) refuses the run's keys: the CLI says so in one line and
    exits 2 before a JVM starts."""
    from tests.conftest import moto_server

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.com/\n")
    with moto_server(INITIAL_NO_AUTH_ACTION_COUNT="0") as endpoint:
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "trawl.cli", "inject", str(seeds), "--crawl", "s3a://b/c",
             "--set", f"storage.endpoint={endpoint}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert run.returncode == 2
    assert "refused the credentials (InvalidAccessKeyId)" in run.stderr
    assert "AWS_ACCESS_KEY_ID" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 60
