"""inject: the seed files read, the stage run, crawldb MERGEd, counted."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trawl.runner.common import JobContext, small_job, tables_ready
from trawl.stages.common import release
from trawl.stages.inject import inject
from trawl.store.tables import merge, read_seed_lines, read_table, write_counters


def run_inject(
    ctx: JobContext, seeds: Sequence[str], sitemaps: Sequence[str] = ()
) -> dict[str, Any]:
    missing = [s for s in [*seeds, *sitemaps] if "://" not in s and not Path(s).exists()]
    if missing:
        raise FileNotFoundError(f"seed file not found: {', '.join(missing)}")
    tables_ready(ctx)
    with small_job(ctx, input_bytes=seed_bytes([*seeds, *sitemaps])):
        lines = read_seed_lines(ctx.spark, seeds, sitemaps)
        injected = inject(lines, read_table(ctx.spark, ctx.root, "crawldb"), ctx.stage)
        merge(ctx.spark, ctx.root, injected.merge)
        release(*injected.held)
    report = injected.report
    write_counters(ctx.files, ctx.segment, "inject", report.counters())
    return {
        "lines": report.lines,
        "accepted": report.accepted,
        "duplicates": report.duplicates,
        "named": report.named,
        "rejected": dict(report.rejected),
    }


def seed_bytes(sources: Sequence[str]) -> int:
    """Bytes of the local seed files and folders; a remote one (``s3a://``,
    a sitemap URL) counts as big, its size unknown here."""
    total = 0
    for source in sources:
        if "://" in source:
            return sys.maxsize
        path = Path(source)
        files = path.rglob("*") if path.is_dir() else [path]
        total += sum(p.stat().st_size for p in files if p.is_file())
    return total
