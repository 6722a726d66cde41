"""The crawl's tables by name, for SQL: every table of ``TABLES`` as a view
of its own name (``crawldb``, ``hostdb``, ``policy``, ``counters``,
``rejected``, ``domainlinks``, ...), and ``fetch`` / ``fetchlist`` over all
segments (with a ``segment`` column). Reading never creates a table
(``read_existing``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trawl.store.tables import TABLES, list_segments, read_existing, read_segments, segment_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register_views(spark: SparkSession, root: str) -> list[str]:
    names = []
    for name in TABLES:
        read_existing(spark, root, name).createOrReplaceTempView(name)
        names.append(name)
    segments = list_segments(spark, root)
    for name in ("fetchlist", "fetch"):
        having = [seg for seg in segments if segment_exists(spark, root, seg, name)]
        if having:
            read_segments(spark, root, having, name).createOrReplaceTempView(name)
            names.append(name)
    return names
