"""Spark stage transforms: ``DataFrame -> DataFrame`` functions over the crawl
tables, calling the pure per-record logic of ``trawl`` from ``mapInArrow``.
Jobs (``jobs/*.py``) and the CLI only parse arguments, read, call, write."""
