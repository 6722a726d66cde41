"""The driver JVM's class archive: named by the JVM and the jars it was
made for, used when there, and really mapped by the JVM trawl starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trawl.config import load_config
from trawl.devtools.classcache import prune
from trawl.store import classcache
from trawl.store.session import spark_conf

LIB = Path(__file__).resolve().parents[2] / "lib"


def test_the_archive_is_named_by_the_jvm_and_every_jar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    (jars / "b.jar").write_bytes(b"b")
    monkeypatch.setattr(classcache, "spark_jars", lambda: jars)
    first = classcache.fingerprint()
    assert first is not None and classcache.fingerprint() == first
    os.utime(jars / "b.jar", ns=(1, 1))  # a jar replaced by one of the same size
    second = classcache.fingerprint()
    assert second != first
    (jars / "c.jar").write_bytes(b"c")
    assert classcache.fingerprint() not in (first, second)
    monkeypatch.setattr(classcache, "java_binary", lambda: None)
    assert classcache.fingerprint() is None and classcache.archive_file() is None


def test_a_build_removes_the_archives_it_replaces_and_keeps_another_checkouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = tmp_path / "ours" / "jars", tmp_path / "theirs" / "jars"
    ours.mkdir(parents=True)
    theirs.mkdir(parents=True)
    monkeypatch.setattr(classcache, "spark_jars", lambda: ours)
    cache = tmp_path / "cache"
    cache.mkdir()

    def archive(name: str, jars: Path | None) -> Path:
        path = cache / f"spark-{name}.jsa"
        path.write_bytes(b"x")
        classcache.size_file(path).write_text("1")
        if jars is not None:
            classcache.source_file(path).write_text(str(jars))
        return path

    kept = archive("new", ours)
    older = archive("old", ours)  # this checkout's, before its jars changed
    other = archive("other", theirs)  # a second checkout's, in use
    gone = archive("gone", tmp_path / "deleted" / "jars")  # a checkout since removed
    unknown = archive("unknown", None)  # written before archives named their jars
    classcache.size_file(cache / "spark-lost.jsa").write_text("1")  # its archive gone
    assert prune(kept) == sorted([older, gone, unknown])
    left = sorted(p.name for p in cache.iterdir())
    assert left == sorted(
        f"spark-{n}.{ext}" for n in ("new", "other") for ext in ("jsa", "size", "src")
    )
    assert prune(kept) == [] and other.exists()


def test_the_driver_maps_the_archive_only_when_there_and_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = load_config(None, [], environ={})
    assert classcache.driver_options(cfg) == []
    path = classcache.archive_file()
    assert path is not None and path.parent == tmp_path / "trawl" / "jvm"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"classes")
    assert classcache.driver_options(cfg) == []  # no size written: not known whole
    classcache.size_file(path).write_text("7")
    options = spark_conf(cfg)["spark.driver.extraJavaOptions"].split()
    assert f"-XX:SharedArchiveFile={path}" in options and "-Xlog:cds=off" in options
    with path.open("ab") as cut:  # a copy cut short would crash the JVM: not used
        cut.truncate(3)
    assert classcache.driver_options(cfg) == []
    classcache.size_file(path).write_text("3")
    assert classcache.driver_options(cfg) != []
    off = load_config(None, ["spark.class_archive=false"], environ={})
    assert "SharedArchiveFile" not in spark_conf(off)["spark.driver.extraJavaOptions"]


@pytest.mark.crawl
def test_the_jvm_trawl_starts_loads_spark_from_the_archive(tmp_path: Path) -> None:
    """``scripts/setup.sh`` wrote the archive (``trawl.devtools.classcache``);
    a session trawl builds loads Spark's classes from it, as the JVM's class
    loading log says."""
    archive = classcache.archive_file()
    if archive is None or not archive.is_file():
        pytest.skip("no class archive: scripts/setup.sh writes it")
    log = tmp_path / "classes.log"
    script = (
        "from trawl.config import load_config\n"
        "from trawl.store.session import build_spark\n"
        "spark = build_spark(load_config(None, ['spark.master=local[1]'], environ={}))\n"
        "assert spark.range(3).count() == 3\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(LIB)}
    env["JAVA_TOOL_OPTIONS"] = f"-Xlog:class+load:file={log}"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    loaded = [line for line in log.read_text().splitlines() if "org.apache.spark.sql." in line]
    shared = [line for line in loaded if "shared objects file (top)" in line]
    assert loaded and len(shared) > len(loaded) // 2, loaded[:5]


def test_the_session_leaves_out_pysparks_per_call_query_context() -> None:
    """Each Column and DataFrame call would record its Python call site in
    the JVM first (py4j round trips; docs/benchmarks.md, "Stages")."""
    conf = spark_conf(load_config(None, [], environ={}))
    assert conf["spark.python.sql.dataFrameDebugging.enabled"] == "false"


def test_the_session_runs_without_query_contexts_or_icu_case_mapping(spark: Any) -> None:
    """The settings reach a session built from them: no stack captured per
    Column, and lower() by the JVM's case mapping (ICU's first call costs a
    JVM seconds), which lowers host names as expected."""
    for key in ("spark.sql.dataFrameQueryContext.enabled", "spark.sql.icu.caseMappings.enabled"):
        assert spark.conf.get(key) == "false"
    row = spark.sql("SELECT lower(parse_url('http://WWW.Example.ORG/A', 'HOST')) AS h").first()
    assert row is not None and row["h"] == "www.example.org"
