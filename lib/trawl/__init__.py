"""trawl: a polite batch web crawler for the data lake.

Nutch's generate -> fetch -> updatedb cycle on PySpark and Delta Lake, in
packages that follow the architecture, lowest first: ``url`` and ``config``;
the per-record logic of ``net``, ``parse``, ``dedup``, ``warc`` and
``crawldb`` (no pyspark: unit-tested without a JVM, run in executors' Python
workers); ``store``, the one I/O layer under the crawl root; ``fetch``, one
fetch task; ``stages``, the Spark transforms; ``runner``, the jobs; and
``cli``. Imports point down only (``trawl.devtools.imports`` checks it).
"""

__version__ = "0.1.0"
