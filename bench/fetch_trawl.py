"""trawl's side of the fetch benchmark: inject, then cycles until nothing is due.

    .venv/bin/python bench/fetch_trawl.py --web DIR/ready.json --crawl DIR \
        --out result.json [--timings timings.jsonl] [--min-delay 1.0] [--tasks 2]
        [--threads 64] [--max-cycles 20] [--set section.key=value ...]

Started by ``bench_fetch.py`` as a process of its own (so its tree -- this
driver, the JVM, PySpark's Python workers -- is measured alone, without the
test web or the Scrapy run). The crawl is the normal path: ``trawl.runner``'s
inject, then generate -> fetch -> updatedb per cycle on Spark ``local[2]``,
one logical hour apart (nothing fetched is due again within a day, so the
crawl ends when generate finds no new URL), at most ``--max-cycles``.

Measured with ``proctree`` (CPU and memory of this process tree, and the
CPU of the JVM's JIT compiler threads, ``jit_cpu_s``): the whole
run from inject to the last updatedb (``end_to_end``; the Spark session's
start-up is reported apart), and each fetch stage (``run_fetch``: the fetch
tasks, writing the segment's fetch table, its counters and its WARC index)
with the CPU it used and the peak memory while it ran. Pages are the
segment's ``page`` rows answered 200 with an HTML type (robots.txt rows are
of kind ``robots``). The result is one JSON object written to ``--out``.

After the crawl, the crawler's own timing of every request it sent goes to
``--timings`` (default: beside ``--out``, ``<out>.timings.jsonl``) for the
politeness check of ``trawl.testweb.crawlergaps``: host, request-target,
``start`` = the row's ``fetched_at`` (the fetcher's wall clock before the
request) and ``end`` = start + ``elapsed_s`` (the monotonic clock from just
before ``fetched_at`` to the decoded body). Rows that sent a request are
those with an ``elapsed_s`` (pages and probes, answered or failed) and every
``robots`` row (a robots.txt request that failed without a response has no
``elapsed_s``: its end is unknown). A robots.txt row times its first request
only, and would time a redirect chain wrongly; the bench's web serves no
robots.txt redirects, and an unmatched request only ever counts against the
crawler.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from functools import reduce
from pathlib import Path
from typing import Any

import proctree
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from trawl.config import Config, load_config
from trawl.runner import JobContext, run_fetch, run_generate, run_inject, run_updatedb, segment_id
from trawl.store.session import build_spark, spark_conf
from trawl.store.tables import read_segment_table, read_table
from trawl.testweb.crawlergaps import request_timing, write_timings

AT = datetime(2026, 11, 30, tzinfo=UTC)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--web", type=Path, required=True, help="the test web's ready.json")
    ap.add_argument("--crawl", type=Path, required=True, help="crawl root (made fresh)")
    ap.add_argument("--out", type=Path, required=True, help="result JSON file")
    ap.add_argument("--timings", type=Path, help="the crawler's request timings (JSON lines)")
    ap.add_argument("--min-delay", type=float, default=1.0, help="politeness.min_delay_s")
    ap.add_argument("--tasks", type=int, default=2, help="fetch.tasks")
    ap.add_argument("--threads", type=int, default=64, help="fetch.threads_per_task")
    ap.add_argument("--max-cycles", type=int, default=20)
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    return ap.parse_args()


def settings(args: argparse.Namespace, hosts_file: str) -> list[str]:
    """The ``--set`` overrides of the crawl; the first (a temp path) is not recorded."""
    return [
        f"dns.hosts_file={hosts_file}",
        'fetch.allow_networks=["127.0.0.0/8"]',
        f"politeness.min_delay_s={args.min_delay}",
        # parity with Scrapy, which has no Mercator rest after slow responses
        "politeness.delay_factor=0.0",
        # parity: Scrapy sends no soft-404 probe (one extra request per host)
        "traps.soft404_probe=false",
        f"fetch.tasks={args.tasks}",
        f"fetch.threads_per_task={args.threads}",
        "fetch.time_limit_s=600",
        "spark.master=local[2]",
        "spark.shuffle_partitions=4",
        "spark.log_level=ERROR",
        *args.overrides,
    ]


def segment_pages(ctx: JobContext) -> dict[str, int]:
    """HTML pages answered 200, and requests made (robots.txt included), of a segment."""
    rows = read_segment_table(ctx.spark, ctx.root, ctx.segment, "fetch")
    html = F.lower(F.coalesce(F.col("content_type"), F.lit(""))).startswith("text/html")
    page = (F.col("kind") == "page") & (F.col("http_status") == 200) & html
    got = rows.agg(
        F.sum(page.cast("int")).alias("pages"),
        F.sum(F.col("http_status").isNotNull().cast("int")).alias("requests"),
    ).first()
    assert got is not None
    return {"pages": int(got["pages"] or 0), "requests": int(got["requests"] or 0)}


def write_request_timings(spark: SparkSession, root: str, segments: list[str], path: Path) -> int:
    """Every request the crawl sent, as the crawler timed it, to ``path`` (module
    docstring); how many."""
    frames = [read_segment_table(spark, root, s, "fetch") for s in segments]
    if not frames:
        write_timings(path, [])
        return 0
    sent = F.col("elapsed_s").isNotNull() | (F.col("kind") == "robots")
    start = F.col("fetched_at").cast("double").alias("start")  # epoch seconds
    rows = (
        reduce(DataFrame.unionByName, frames)
        .where(sent)
        .select("url", start, "elapsed_s")
        .collect()
    )
    timings = [request_timing(r["url"], r["start"], r["elapsed_s"]) for r in rows]
    write_timings(path, [t for t in timings if t is not None])
    return sum(t is not None for t in timings)


class Meter:
    """Wall and CPU of this process tree between two points, and the part of
    that CPU the JVM spent compiling (``jit_cpu_s``)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.monotonic(), proctree.cpu_s(os.getpid())
        self.jit = proctree.jit_cpu_s(os.getpid())

    def read(self) -> dict[str, float]:
        return {
            "wall_s": round(time.monotonic() - self.wall, 2),
            "cpu_s": round(proctree.cpu_s(os.getpid()) - self.cpu, 2),
            "jit_cpu_s": round(proctree.jit_cpu_s(os.getpid()) - self.jit, 2),
        }


def progress(what: str) -> None:
    print(f"[fetch_trawl {time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def run_cycle(ctx: JobContext, peak: proctree.PeakMemory) -> dict[str, Any]:
    """generate -> fetch -> updatedb; the cycle's numbers (fetch measured apart)."""
    began = time.monotonic()
    gen = run_generate(ctx)
    row: dict[str, Any] = {"segment": ctx.segment, "generated": gen["urls"]}
    row["generate_s"] = round(time.monotonic() - began, 2)
    progress(f"{ctx.segment}: generated {gen['urls']} URLs in {row['generate_s']} s")
    if not gen["urls"]:
        return row
    peak.phase = "fetch"
    meter, window = Meter(), [time.time()]
    got = run_fetch(ctx)
    window.append(time.time())
    progress(f"{ctx.segment}: fetched in {window[1] - window[0]:.1f} s")
    row["fetch"] = meter.read() | segment_pages(ctx) | {"window": window}
    peak.phase = "all"
    row["fetch"]["counters"] = {
        k: v for k, v in got.items() if k.startswith(("fetch/page/", "fetch/status/", "robots/"))
    }
    started = time.monotonic()
    upd = run_updatedb(ctx)
    row["updatedb_s"] = round(time.monotonic() - started, 2)
    row["new_urls"] = upd["new_urls"]
    return row


def crawl(args: argparse.Namespace, cfg: Config, seeds: str, peak: proctree.PeakMemory) -> Any:
    began = time.monotonic()
    spark = build_spark(cfg)
    session_start_s = round(time.monotonic() - began, 1)
    root = str(args.crawl)
    meter = Meter()
    progress("session up")
    run_inject(JobContext(spark, cfg, root, "inject", AT), [seeds])
    progress("injected")
    cycles = []
    for i in range(args.max_cycles):
        at = AT + timedelta(hours=i)
        cycles.append(run_cycle(JobContext(spark, cfg, root, segment_id(at), at), peak))
        fetched = {k: v for k, v in cycles[-1].get("fetch", {}).items() if k != "counters"}
        print(json.dumps(cycles[-1] | {"fetch": fetched}), flush=True)
        if not cycles[-1]["generated"]:
            break
    end_to_end = meter.read()
    budget = read_table(spark, root, "counters").filter("name = 'generate/deferred/budget'")
    deferred = budget.agg(F.sum("value")).first()
    fetched = [c["segment"] for c in cycles if "fetch" in c]
    timed = write_request_timings(spark, root, fetched, timings_path(args))
    progress(f"{timed} request timings written")
    spark.stop()
    return cycles, end_to_end | {
        "deferred_by_budget": int((deferred or [0])[0] or 0),
        "session_start_s": session_start_s,
    }


def timings_path(args: argparse.Namespace) -> Path:
    return args.timings or args.out.with_suffix(".timings.jsonl")


def main() -> None:
    args = parse_args()
    web = json.loads(args.web.read_text(encoding="utf-8"))
    overrides = settings(args, web["hosts_file"])
    cfg = load_config(None, overrides, environ={})
    started = Meter()
    with proctree.PeakMemory(os.getpid()) as peak:
        cycles, end_to_end = crawl(args, cfg, web["seeds_file"], peak)
    fetches = [c["fetch"] for c in cycles if "fetch" in c]
    result = {
        "settings": overrides[1:],
        "user_agent_prefix": f"{cfg.http.agent_name}/",
        # the driver JVM's options as the session got them (spark.driver_jit)
        "driver_java_options": spark_conf(cfg).get("spark.driver.extraJavaOptions", ""),
        "timings": str(timings_path(args)),
        "process": started.read(),  # Spark session start-up included
        "end_to_end": end_to_end
        | {
            "pages": sum(f["pages"] for f in fetches),
            "requests": sum(f["requests"] for f in fetches),
            "cycles": len(cycles),
        }
        | peak.mb("all"),
        "fetch_stage": {
            "wall_s": round(sum(f["wall_s"] for f in fetches), 2),
            "cpu_s": round(sum(f["cpu_s"] for f in fetches), 2),
            "pages": sum(f["pages"] for f in fetches),
            "requests": sum(f["requests"] for f in fetches),
            "windows": [f["window"] for f in fetches],
        }
        | peak.mb("fetch"),
        "cycles": cycles,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
