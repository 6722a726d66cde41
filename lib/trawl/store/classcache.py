"""The driver JVM's class archive (``spark.class_archive``): Spark's classes
mapped from one file at start instead of read, parsed and verified from
some 250 jars by every process that starts a JVM.

Java's class-data sharing (CDS): a JVM started with
``-XX:ArchiveClassesAtExit=F`` writes the classes it loaded to ``F`` when it
exits, and one started with ``-XX:SharedArchiveFile=F`` maps them from there.
Every ``trawl`` command, every Airflow task and the test session start a JVM
whose first seconds go to loading those classes. The archive is valid for
one JVM build and one class path (the JVM checks each jar's path, size and
time, and falls back to loading from the jars on any mismatch), so its file
is named by a fingerprint of both; ``scripts/setup.sh`` writes it with
``python -m trawl.devtools.classcache``. Classes loaded from ``spark.jars``
(Delta's) come through Spark's own class loader and are not archived.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from trawl.config import Config

# The JVM's notes on the archive (a mismatch after an upgrade, classes it
# skipped) are for whoever builds it, not for every command's output.
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trawl" / "jvm"


def java_binary() -> Path | None:
    """The ``java`` PySpark starts: ``$JAVA_HOME/bin/java``, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def fingerprint() -> str | None:
    """What the archive depends on: the JVM binary and the jars on the
    driver's class path (each one's name, size and time); None without a
    ``java`` to start."""
    java = java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    for path in [java, *sorted(spark_jars().glob("*.jar"))]:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_file() -> Path | None:
    """Where the archive for this JVM and these jars is (or would be)."""
    key = fingerprint()
    return cache_dir() / f"spark-{key}.jsa" if key else None


def size_file(archive: Path) -> Path:
    """The archive's whole size, written once the archive is in place."""
    return archive.with_suffix(".size")


def source_file(archive: Path) -> Path:
    """The jars folder the archive was written for (one line), so that a
    build for one checkout does not remove another's (``prune``)."""
    return archive.with_suffix(".src")


def usable(archive: Path) -> bool:
    """The archive is there and whole: the JVM checks an archive's header
    and falls back to the jars on a mismatch, but one cut short (a full
    disk, a partial copy) crashes it with SIGBUS when a class is read."""
    try:
        return archive.stat().st_size == int(size_file(archive).read_text())
    except (OSError, ValueError):
        return False


def driver_options(cfg: Config) -> list[str]:
    """The driver JVM's options for the archive: none when
    ``spark.class_archive`` is off or no whole archive was written for this
    JVM and these jars."""
    if not cfg.spark.class_archive:
        return []
    path = archive_file()
    if path is None or not usable(path):
        return []
    return [f"-XX:SharedArchiveFile={path}", *QUIET]


def end_jvm(timeout_s: float) -> None:
    """End this process's driver JVM and wait until it has exited (a JVM
    started with ``-XX:ArchiveClassesAtExit`` writes the archive then).
    PySpark's JVM leaves when its stdin closes."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is not None and proc.stdin is not None:
        proc.stdin.close()
        proc.wait(timeout=timeout_s)
