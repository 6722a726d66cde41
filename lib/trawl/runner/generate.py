"""generate: crawldb, hostdb, policy and the domain links read; the fetch
list written; crawldb marked; counted."""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from trawl.runner.common import JobContext, counted, read_whole, say, sized_job, tables_ready
from trawl.stages.common import concurrently, release
from trawl.stages.generate import abandoned_locks, generate, mark_generated
from trawl.store.tables import (
    merge,
    read_segment_table,
    read_table,
    segment_exists,
    write_counters,
    write_segment_table,
)


@sized_job()
def run_generate(ctx: JobContext) -> dict[str, Any]:
    tables_ready(ctx)
    if segment_exists(ctx.spark, ctx.root, ctx.segment, "fetch"):
        # The segment was fetched from its fetch list: a re-run (Airflow
        # clearing a whole run) keeps it rather than pick what is due now.
        say(f"generate: segment {ctx.segment} is fetched; its fetch list stays")
        stats = fetchlist_stats(read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetchlist"))
        if not counted(ctx, "generate"):  # the first run's counters stand
            write_counters(ctx.files, ctx.segment, "generate", generate_counters(stats))
        return generate_result(ctx, stats)
    spark, root = ctx.spark, ctx.root
    (crawldb, held), (hostdb, held_hosts) = read_whole(ctx, "crawldb"), read_whole(ctx, "hostdb")
    policy, domainlinks = (read_table(spark, root, n) for n in ("policy", "domainlinks"))
    gone = abandoned_locks(crawldb, ctx.files.dirs("segments"), ctx.stage)
    if gone:
        say(
            f"generate: {sum(gone.values())} URLs were generated for segment(s) "
            f"{', '.join(sorted(gone))}, whose folders are gone: they are free to generate again"
        )
    stage = dataclasses.replace(ctx.stage, released_segments=tuple(sorted(gone)))
    generated = generate(crawldb, hostdb, policy, domainlinks, stage)
    write_segment_table(generated.fetchlist, root, ctx.segment, "fetchlist")
    written = read_segment_table(spark, root, ctx.segment, "fetchlist")
    stats, deferred = concurrently(lambda: fetchlist_stats(written), generated.deferred.count)
    if deferred and generated.starved is not None:
        warn_starved(generated.starved.collect())
    marks = mark_generated(written, generated.deferred, stage, rows=stats["urls"] + deferred)
    if marks is not None:
        merge(spark, root, marks)
    generated.release()
    release(*held, *held_hosts)
    counters = [*generate_counters(stats), ("generate/deferred/budget", deferred)]
    if gone:
        counters.append(("generate/released/segment_gone", sum(gone.values())))
    write_counters(ctx.files, ctx.segment, "generate", counters)
    return generate_result(ctx, stats)


def warn_starved(rows: list[Any]) -> None:
    """Tell the operator which seeded domains' other hosts wait on the
    domain's budget (``starved_seed_domains``), and what to set."""
    for r in sorted(rows, key=lambda r: (-r["deferred"], r["domain"])):
        say(
            f"generate: warning: {r['deferred']} of {r['due']} due URLs of {r['domain']}, "
            f"a domain you seeded, were deferred by its budget ({r['budget']} pages a "
            "segment): its hosts the seeds did not name count as discovered. If you run "
            "the whole domain, set budget.trust_seed_domains = true, or give it a budget "
            f"of its own: trawl policy budget --domain {r['domain']} --pages N --reason ..."
        )
        if r["farm_hosts"]:
            say(
                f"generate: warning: {', '.join(r['farm_hosts'])}, named by you, "
                "link out like a link farm (many hosts of their own domain, a different "
                "few on every page) and are budgeted with the domain: see hostdb's "
                "sibling_* columns; budget.farm_min_hosts = 0 turns the test off"
            )


def fetchlist_stats(fetchlist: DataFrame) -> dict[str, int]:
    """URLs, hosts and tasks of a fetch list, and the room it gives hosts to
    follow links (``follow``), in one pass."""
    row = fetchlist.agg(
        F.count("*").alias("urls"),
        F.countDistinct("host").alias("hosts"),
        F.countDistinct("task").alias("tasks"),
        # one row of each host that may have links followed carries its room
        F.sum(F.when(F.col("follow_known").isNotNull(), F.col("follow_quota"))).alias("follow"),
    ).first()
    assert row is not None
    return {k: int(v or 0) for k, v in row.asDict().items()}


def generate_result(ctx: JobContext, stats: dict[str, int]) -> dict[str, Any]:
    return {"segment": ctx.segment, **{k: v for k, v in stats.items() if k != "follow"}}


def generate_counters(stats: dict[str, int]) -> list[tuple[str, int]]:
    counters = [(f"generate/{k}", stats[k]) for k in ("urls", "hosts", "tasks")]
    if stats["follow"]:
        counters.append(("generate/follow_quota", stats["follow"]))
    return counters
