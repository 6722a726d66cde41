"""A failed Spark job told as one line, its full report kept in a file.

When a task dies -- a disk full under the WARC writer, an object store
refusing a write, a worker out of memory -- Spark raises in the driver with
two stack traces folded into one message (the JVM's, and inside it the
Python worker's), hundreds of lines that bury the one that names the cause.
``spark_failure`` finds that line; ``report`` prints it with what to do and
where the whole text went. Every job is safe to re-run, so the advice is
always the same: fix the cause and run the same command again.
"""

from __future__ import annotations

import os
import re
import tempfile
import traceback

__all__ = ["report", "spark_failure"]

_TRACEBACK = "Traceback (most recent call last):"
_CAUSED_BY = re.compile(r"^\s*Caused by: (.+)$", re.M)
_QUALIFIED = re.compile(r"^(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*(?::|$))")


def spark_failure(exc: BaseException) -> str | None:
    """The root cause of a failed Spark job as one line, or None when
    ``exc`` is no error of Spark's (pyspark's or py4j's exceptions)."""
    module = type(exc).__module__ or ""
    if not module.startswith(("pyspark", "py4j")):
        return None
    text = str(exc)
    if _TRACEBACK in text:  # a Python worker's exception: its last line
        tail = text[text.rindex(_TRACEBACK) + len(_TRACEBACK) :].splitlines()
        for line in tail:
            if line.strip() and not line[0].isspace():
                return _QUALIFIED.sub(r"\1", line.strip())  # the class, not its module
    causes = _CAUSED_BY.findall(text)
    if causes:  # the JVM's innermost cause
        return str(causes[-1]).strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)


def report(command: str, cause: str, exc: BaseException) -> str:
    """What to print for a failed Spark job: the cause, the fix, and the
    file that keeps Spark's whole report (written here)."""
    fd, path = tempfile.mkstemp(prefix=f"trawl-{command}-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(traceback.format_exception(exc)))
    return (
        f"{command} failed in Spark: {cause}\n"
        "Fix the cause and run the same command again: every job is safe to re-run, "
        "and what this run did not finish is done then.\n"
        f"Spark's full report: {path}"
    )
