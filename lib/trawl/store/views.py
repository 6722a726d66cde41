"""The crawl's tables by name, for SQL: every table of ``TABLES`` as a view
of its own name (``crawldb``, ``hostdb``, ``policy``, ``counters``,
``rejected``, ``domainlinks``, ...), and ``fetch`` / ``fetchlist`` over all
segments (with a ``segment`` column)."""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from trawl.store.tables import TABLES, list_segments, read_segment_table, read_table, segment_exists

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def register_views(spark: SparkSession, root: str) -> list[str]:
    from pyspark.sql import functions as F

    names = []
    for name in TABLES:
        read_table(spark, root, name).createOrReplaceTempView(name)
        names.append(name)
    segments = list_segments(spark, root)
    for name in ("fetchlist", "fetch"):
        frames: list[DataFrame] = [
            read_segment_table(spark, root, seg, name).withColumn("segment", F.lit(seg))
            for seg in segments
            if segment_exists(spark, root, seg, name)
        ]
        if frames:
            reduce(lambda a, b: a.unionByName(b), frames).createOrReplaceTempView(name)
            names.append(name)
    return names
