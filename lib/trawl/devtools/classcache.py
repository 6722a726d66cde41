"""Write the driver JVM's class archive (``trawl.store.classcache``) for this
JVM and these jars, if it is not there yet:

    python -m trawl.devtools.classcache [--force]

A JVM started with ``-XX:ArchiveClassesAtExit`` runs one crawl cycle of a
five-host test web on loopback (a fresh process, so the archive holds the
classes a cycle loads), and writes the archive as it exits; it is moved into
place only when whole. ``scripts/setup.sh`` runs this; without an archive
trawl starts as before.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trawl.store import classcache
from trawl.store.session import spark_conf

DUMP_TIMEOUT_S = 900.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--force", action="store_true", help="write it again even if it is there")
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)  # the child's own run
    args = ap.parse_args(argv)
    if args.dump:
        return dump(args.dump)
    target = classcache.archive_file()
    if target is None:
        print("class archive: no java to start (JAVA_HOME or PATH)", file=sys.stderr)
        return 1
    if classcache.usable(target) and not args.force:
        print(f"class archive: {target} is up to date", file=sys.stderr)
        return 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"class archive: cannot write {target.parent}: {exc}", file=sys.stderr)
        return 1
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    began = time.monotonic()
    try:
        log = target.parent / "last-build.log"
        with log.open("wb") as out:
            run = subprocess.run(
                [sys.executable, "-m", "trawl.devtools.classcache", "--dump", str(partial)],
                timeout=DUMP_TIMEOUT_S,
                check=False,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if run.returncode != 0 or not partial.is_file():
            print(f"class archive: not written (exit {run.returncode}); see {log}", file=sys.stderr)
            return 1
        classcache.size_file(target).unlink(missing_ok=True)
        os.replace(partial, target)
        classcache.size_file(target).write_text(str(target.stat().st_size))
        classcache.source_file(target).write_text(str(classcache.spark_jars()))
    finally:
        partial.unlink(missing_ok=True)
    prune(target)
    took = time.monotonic() - began
    size = target.stat().st_size / 2**20
    print(f"class archive: {target} ({size:.0f} MB, {took:.0f} s)", file=sys.stderr)
    return 0


def prune(kept: Path) -> list[Path]:
    """Remove the archives ``kept`` replaces, and those no checkout can use;
    the removed archives. An archive is for one jars folder: the one made
    for this folder before (older jars, another JVM) goes, as does one
    whose folder is gone or that does not say which it was for. Another
    checkout's stays: two checkouts on one machine (a clone CI checks
    beside a working one) would otherwise remove each other's at every
    build, and the other would start without one (about 180 MB each here)."""
    ours = str(classcache.spark_jars())
    removed = []
    for archive in sorted(kept.parent.glob("spark-*.jsa")):
        if archive == kept:
            continue
        source = classcache.source_file(archive)
        try:
            jars = source.read_text().strip()
        except OSError:
            jars = ""
        if jars and jars != ours and Path(jars).is_dir():
            continue
        for path in (archive, classcache.size_file(archive), source):
            path.unlink(missing_ok=True)
        removed.append(archive)
    for note in [*kept.parent.glob("spark-*.size"), *kept.parent.glob("spark-*.src")]:
        if not note.with_suffix(".jsa").exists():  # its archive is gone
            note.unlink(missing_ok=True)
    return removed


def dump(path: Path) -> int:
    """One cycle of a small test web on a JVM that writes its classes to
    ``path`` as it exits; wait for that exit."""
    from trawl.cli import main as trawl
    from trawl.config import load_config
    from trawl.devtools.kills import settings, small_web
    from trawl.testweb import TestWeb

    with tempfile.TemporaryDirectory(prefix="trawl-classcache-") as tmp:
        with TestWeb(small_web(), Path(tmp) / "web", n_seeds=5) as web:
            sets = [*settings(web), "spark.class_archive=false", "fetch.time_limit_s=30"]
            options = spark_conf(load_config(None, sets, environ={}))
            dump_to = f"-XX:ArchiveClassesAtExit={path}"
            java = " ".join([options["spark.driver.extraJavaOptions"], dump_to, *classcache.QUIET])
            sets.append(f"spark.conf.spark.driver.extraJavaOptions={java}")
            argv = ["cycle", "--crawl", str(Path(tmp) / "crawl"), "--quiet"]
            argv += ["--seeds", str(web.seeds_file), "--cycles", "1"]
            code = trawl([*argv, *[a for s in sets for a in ("--set", s)]])
        classcache.end_jvm(DUMP_TIMEOUT_S)  # it writes the archive as it leaves
    return code


if __name__ == "__main__":
    sys.exit(main())
