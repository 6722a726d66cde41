"""The one I/O layer under the crawl root: the Spark session, the table
schemas, every read, write, MERGE and commit of the Delta tables (the
small-table path through delta-rs in ``deltars``), the Parquet segment
tables, counters, the crawl lease and the operator's policy table.

The stages build frames and MERGE plans; this package executes them. May
import ``trawl.url``, ``trawl.config`` and the pure packages below
``trawl.fetch``; pyspark is imported here, in ``trawl.stages`` and in
``trawl.runner`` only."""
