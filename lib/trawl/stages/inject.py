"""inject: seed files -> normalised, filtered URLs MERGEd into crawldb.

Idempotent: a URL already in crawldb is left as it is (counted as a
duplicate), so injecting the same file twice changes nothing the second time
-- except that a URL crawldb knew from a link becomes a seed (``source`` and
depth 0, counted as ``named``): the operator named its host, which lifts the
host's domain budget (``trawl.stages.traps.trusted_hosts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from trawl.crawldb.admission import (
    NAMED_SOURCES,
    SeedError,
    admit,
    parse_seed_line,
    url_filter,
)
from trawl.stages.common import StageContext, map_records, materialize
from trawl.store.schemas import CRAWLDB_SCHEMA
from trawl.store.tables import Merge

KEY = ["host_bucket", "url_fp", "url"]

# Candidate rows carry the crawldb columns plus a rejection reason.
CANDIDATE_SCHEMA = StructType(
    [
        *CRAWLDB_SCHEMA.fields,
        StructField("rejected", StringType(), True),
        StructField("raw", StringType(), True),
    ]
)


@dataclass
class InjectReport:
    lines: int = 0
    accepted: int = 0
    duplicates: int = 0
    named: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    def counters(self) -> list[tuple[str, int]]:
        out = [
            ("inject/lines", self.lines),
            ("inject/accepted", self.accepted),
            ("inject/duplicates", self.duplicates),
            ("inject/named", self.named),
        ]
        out += [(f"inject/rejected/{k}", v) for k, v in sorted(self.rejected.items())]
        return out


def seed_candidates(ctx: StageContext, lines: DataFrame) -> DataFrame:
    """Seed-file lines (columns ``value`` and ``sitemap``: the line names a
    sitemap, from ``--sitemaps``) -> candidate rows (one per line)."""
    cfg, at, segment = ctx.cfg, ctx.at, ctx.segment

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        flt = url_filter(cfg)
        for row in rows:
            raw = row["value"] or ""
            try:
                seed = parse_seed_line(raw)
            except SeedError as exc:
                yield {"rejected": f"seed/{exc}", "raw": raw}
                continue
            if seed is None:
                continue
            sitemap = bool(row["sitemap"])
            record, reason = admit(
                seed.url,
                cfg,
                flt,
                source="sitemap" if sitemap else "seed",
                depth=0,
                score=seed.score,
                at=at,
                segment=segment,
                reason=seed.reason,
                is_sitemap=sitemap,
            )
            yield {**(record or {}), "rejected": reason, "raw": seed.url}

    return map_records(lines, fn, CANDIDATE_SCHEMA)


@dataclass
class Injected:
    """inject's result: the report, and crawldb's MERGE of the new URLs
    (``held``: frames to free once it ran)."""

    report: InjectReport
    merge: Merge
    held: list[DataFrame]


def inject(lines: DataFrame, crawldb: DataFrame, ctx: StageContext) -> Injected:
    """Seed-file lines (``value``, and ``sitemap``: the line names a sitemap
    URL, read as a sitemap when fetched) -> the URLs crawldb lacks, as a MERGE."""
    candidates = materialize(seed_candidates(ctx, lines))
    report = InjectReport()
    for row in candidates.groupBy("rejected").count().collect():
        report.lines += row["count"]
        if row["rejected"] is not None:
            report.rejected[row["rejected"]] = row["count"]
    accepted = (
        candidates.filter(F.col("rejected").isNull())
        .dropDuplicates(["url"])
        .select(*CRAWLDB_SCHEMA.fieldNames())
    )
    buckets = [r[0] for r in accepted.select("host_bucket").distinct().collect()]
    existing = crawldb.filter(F.col("host_bucket").isin(buckets))
    known = existing.select(
        *KEY, F.lit(True).alias("known"), F.col("source").alias("was"),
        F.coalesce(F.col("depth"), F.lit(0)).alias("was_depth"),
    )  # fmt: skip
    named = F.coalesce(F.col("was").isin(*NAMED_SOURCES), F.lit(False)) & (F.col("was_depth") == 0)
    joined = accepted.join(known, KEY, "left").withColumn(
        "known", F.coalesce(F.col("known"), F.lit(False))
    )
    # new URLs, and known ones the operator names now (found by a link before)
    source = materialize(joined.filter(~F.col("known") | ~named).drop("was", "was_depth"))
    counts = source.groupBy("known").count().collect()
    report.accepted = sum(r["count"] for r in counts if not r["known"])
    report.named = sum(r["count"] for r in counts if r["known"])
    report.duplicates = report.lines - sum(report.rejected.values()) - report.accepted
    merge = Merge(
        "crawldb",
        source.drop("known"),
        "t.host_bucket = s.host_bucket AND t.url_fp = s.url_fp AND t.url = s.url",
        updates=((None, {"source": "s.source", "depth": "0"}),),
        inserts=((None, None),),
    )
    return Injected(report, merge, [candidates, source])
