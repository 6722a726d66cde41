"""Spark stage transforms: functions over the crawl's frames, calling the
pure per-record logic below them from ``mapInArrow``.

A stage takes DataFrames, the config, the segment id and the logical time
(``common.StageContext``) and returns DataFrames, MERGE plans
(``trawl.store.tables.Merge``) or plain values. It never reads, writes or
opens a table or a file: the runner reads its inputs through ``trawl.store``
and writes what it returns. May import everything below ``trawl.fetch``
included; pyspark is imported here, in ``trawl.store`` and in
``trawl.runner`` only."""
