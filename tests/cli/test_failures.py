"""A failed Spark job is told as its cause, one line, with the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trawl.cli.failures import report, spark_failure


def _error(module: str, text: str) -> Exception:
    kind = type("Py4JJavaError", (Exception,), {"__module__": module})
    return kind(text)  # type: ignore[no-any-return]


JVM = """An error occurred while calling o123.save.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2672)
Caused by: org.apache.hadoop.fs.s3a.AWSBadRequestException: PUT 0-byte object on crawl/x
\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:249)
Caused by: java.io.IOException: No space left on device
\tat java.io.FileOutputStream.writeBytes(Native Method)
"""

WORKER = """Job aborted due to stage failure: Task 1 in stage 7.0 failed 1 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/lib/trawl/fetch/task.py", line 210, in _work
    writer.write(record)
  File "/lib/trawl/warc/writer.py", line 88, in write
    self._fh.write(data)
trawl.warc.writer.ArchiveFailed: WARC file x.warc.gz could not be written: [Errno 28] No space
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException
"""


def test_the_innermost_jvm_cause_is_the_line() -> None:
    cause = spark_failure(_error("py4j.protocol", JVM))
    assert cause == "java.io.IOException: No space left on device"


def test_a_python_worker_error_is_its_exception_line() -> None:
    cause = spark_failure(_error("pyspark.errors.exceptions.captured", WORKER))
    assert cause == "ArchiveFailed: WARC file x.warc.gz could not be written: [Errno 28] No space"


def test_errors_of_our_own_are_not_spark_failures() -> None:
    assert spark_failure(ValueError("bad --at")) is None
    assert spark_failure(_error("trawl.store.objectstore", JVM)) is None


def test_the_report_names_the_fix_and_keeps_the_whole_text() -> None:
    exc = _error("py4j.protocol", JVM)
    text = report("fetch", "java.io.IOException: No space left on device", exc)
    lines = text.splitlines()
    assert lines[0] == "fetch failed in Spark: java.io.IOException: No space left on device"
    assert "run the same command again" in lines[1]
    kept = Path(lines[2].removeprefix("Spark's full report: "))
    try:
        assert "S3AUtils.translateException" in kept.read_text(encoding="utf-8")
    finally:
        kept.unlink()


def test_a_real_worker_failure_is_found(spark: Any) -> None:
    """What pyspark really raises when a Python task fails in a worker."""
    from pyspark.sql import functions as F

    def full(x):  # type: ignore[no-untyped-def]  # no hints: pyspark reads them
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception) as info:
        spark.range(1).select(F.udf(full, "string")("id")).collect()
    assert spark_failure(info.value) == "OSError: [Errno 28] No space left on device"
