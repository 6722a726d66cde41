"""One fetch task on an executor: the Mercator politeness clock, the rules a
task applies to a host, one visit to one URL, its WARC capture and fetch
row, link following within the segment and new hosts claimed by a task.

No Spark here (the stage calls ``task`` from ``mapPartitions``). May import
every package below it: ``url``, ``config``, ``net``, ``parse``, ``dedup``,
``warc``, ``crawldb`` and ``store`` (for the operator's policy table)."""
