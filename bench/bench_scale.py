"""Benchmark: generate and updatedb on large synthetic crawldbs -- time, memory, bytes.

    .venv/bin/python bench/bench_scale.py [--sizes 1000000 3000000 10000000]
        [--hosts 100000] [--segment-urls 100000] [--driver-memory 4g]
        [--workdir /tmp/trawl-scale] [--event-log DIR] [--no-deletion-vectors]
        [--set section.key=value ...]
    smoke check (its line is marked "smoke": true):
    .venv/bin/python bench/bench_scale.py --sizes 100000 300000 --smoke

For each size N a crawl root is synthesised under ``--workdir``: the tables
are created by ``trawl.store.tables`` (the real schemas and partitioning), then
crawldb gets N URLs over ``--hosts`` hosts (host popularity skewed, host
``floor(H u^2)``; 70% fetched, 20% unfetched, the rest gone, redirected or
304; fetch times, intervals of 1, 7 or 30 days so about a third of the
fetched rows are due; exponential scores; registered domains of three
hosts each), hostdb one row per host (a fresh robots.txt, an address shared
by five hosts) and domainlinks a link graph that gives domains budgets of 20
to 1,000 pages. Rows are built with Spark SQL expressions from
``spark.range``; ``url_fp``, ``host_bucket`` and ``domain`` come from the
Python functions updatedb recomputes for new links (``trawl.url.keys``; a
pandas UDF for url_fp, a Python-built host table for the others), and a
sample of rows is checked against them (the run stops if one differs).
crawldb is written one file per host bucket, the layout a MERGE leaves
(Delta repartitions by the partition column before it writes).

Then, on ``local[2]`` in one Spark session (``spark.driver_jit = "tiered"``:
the one JVM does the executors' work), timed with the peak resident
memory of the whole process tree (driver JVM and every Python process,
sampled from /proc every 0.2 s; RSS summed, so pages shared by forked
Python workers count more than once):

- ``generate``: ``trawl.runner.run_generate`` at the crawl's logical time
  (``generate.top_n`` as configured), with the MERGE that marks the chosen
  rows and defers those over their domain's budget;
- ``admit`` and ``antijoin``: updatedb's new-URL detection on its own --
  the segment's links discovered and admitted (``admitted_links``, Python
  over Arrow), cached, then the anti-join against crawldb's touched host
  buckets, in admitted URLs per second;
- ``updatedb``: ``trawl.runner.run_updatedb`` on a synthetic segment of
  ``--segment-urls`` successful fetches of known URLs (40% changed content),
  each with ``--outlinks`` links: 3 to known URLs (any host), the rest new
  (one on the page's host, one elsewhere).

Bytes come from the Delta log: crawldb's size before each stage (DESCRIBE
DETAIL) and, per MERGE, ``operationMetrics`` (bytes and files added and
removed, rows updated, inserted and copied, deletion vectors). The growth
exponent is the least-squares slope of log(seconds) over log(N). With
``--event-log`` Spark's event log is written there and the slowest stages
of each phase are recorded too. One JSON line per run is appended to
bench/results/scale.jsonl (or ``--results``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from bench_politeness import append_line, commit, machine
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf

from trawl.config import Config, load_config
from trawl.crawldb.budgets import path_pattern
from trawl.runner import JobContext, run_generate, run_updatedb, segment_id
from trawl.stages.common import sql_in
from trawl.stages.traps import one_per_url
from trawl.stages.updatedb import admitted_links, discovered_links, link_sources, look_up
from trawl.store.schemas import CRAWLDB_SCHEMA, DOMAINLINKS_SCHEMA, FETCH_SCHEMA, HOSTDB_SCHEMA
from trawl.store.session import build_spark
from trawl.store.tables import (
    ensure_all,
    read_segment_table,
    read_table,
    table_path,
    write_segment_table,
)
from trawl.url.keys import host_bucket, host_of, registered_domain, url_fingerprint
from trawl.url.normalize import normalize

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "scale.jsonl"
T0 = datetime(2026, 12, 1, tzinfo=UTC)  # the crawl's logical time at generate
DAY = 86_400
SUBS = ("www", "blog", "shop")
TLDS = ("com", "org", "net", "co.uk", "de", "fr")
SECTIONS = ("news", "p", "item", "blog", "shop")
HOSTS_PER_IP = 5


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--segment-urls", type=int, default=100_000)
    ap.add_argument("--outlinks", type=int, default=5, help="links per page (3 known, rest new)")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/trawl-scale"))
    ap.add_argument("--keep", action="store_true", help="keep the crawl roots")
    ap.add_argument(
        "--no-deletion-vectors",
        dest="deletion_vectors",
        action="store_false",
        help="never turn deletion vectors on (crawl.deletion_vectors_min_mb = -1): MERGEs "
        "then rewrite every file they touch",
    )
    ap.add_argument("--event-log", type=Path, help="write Spark's event log here, and read it")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--smoke", action="store_true", help="mark the line as a smoke run")
    ap.add_argument("--results", type=Path, default=RESULTS)
    return ap.parse_args()


def config(args: argparse.Namespace) -> Config:
    # one local JVM does the executors' work on millions of rows: the JVM's
    # own tiered JIT, as executors on a cluster have (docs/scale.md, "The driver's JIT")
    extra = [f"spark.conf.spark.driver.memory={args.driver_memory}", "spark.driver_jit=tiered"]
    if not args.deletion_vectors:
        extra.append("crawl.deletion_vectors_min_mb=-1")
    if args.event_log:
        args.event_log.mkdir(parents=True, exist_ok=True)
        extra += [
            "spark.conf.spark.eventLog.enabled=true",
            f"spark.conf.spark.eventLog.dir=file://{args.event_log}",
            "spark.conf.spark.eventLog.compress=false",
            "spark.conf.spark.eventLog.rolling.enabled=false",
        ]
    return load_config(None, ["spark.master=local[2]", *extra, *args.overrides], environ={})


# --------------------------------------------------------------------------- memory


class TreeMemory:
    """Peak memory and CPU seconds of this process and all its descendants
    (the driver JVM, this Python, the Python workers), sampled from /proc in
    a thread. RSS sums resident pages (pages shared by forked workers count
    more than once); PSS splits them. CPU is kept per process as last seen,
    so a worker that exits keeps its share. On a shared machine CPU seconds
    are the fairer measure of work."""

    def __init__(self, interval_s: float = 0.5, pss_every: int = 4) -> None:
        self.interval_s, self.pss_every = interval_s, pss_every
        self.peak = self.peak_pss = 0
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, CPU seconds)
        self._page, self._tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
        self._lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def _tree(self) -> dict[int, list[str]]:
        stats: dict[int, list[str]] = {}
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    text = Path(f"/proc/{entry.name}/stat").read_text()
                except OSError:
                    continue
                name, fields = text.split("(", 1)[1].rsplit(")", 1)
                stats[int(entry.name)] = [name, *fields.split()]
                children.setdefault(int(stats[int(entry.name)][2]), []).append(int(entry.name))
        tree, todo = {}, [os.getpid()]
        while todo:
            pid = todo.pop()
            if pid in stats:
                tree[pid] = stats[pid]
            todo += children.get(pid, [])
        return tree

    def sample(self, with_pss: bool = False) -> None:
        tree = self._tree()
        rss = sum(int(f[22]) for f in tree.values()) * self._page  # stat field 24: rss pages
        with self._lock:
            self.peak = max(self.peak, rss)
            for pid, f in tree.items():
                kind = (
                    "driver_py" if pid == os.getpid() else "jvm" if f[0] == "java" else "workers_py"
                )
                self.cpu[pid] = (kind, (int(f[12]) + int(f[13])) / self._tick)  # utime + stime
        if with_pss:
            pss = 0
            for pid in tree:
                try:
                    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                except OSError:
                    continue
                pss += next(
                    (int(x.split()[1]) for x in rollup.splitlines() if x.startswith("Pss:")), 0
                )
            self.peak_pss = max(self.peak_pss, pss * 1024)

    def _run(self) -> None:
        n = 0
        while True:
            time.sleep(self.interval_s)
            n += 1
            self.sample(with_pss=n % self.pss_every == 0)

    def reset(self) -> dict[int, tuple[str, float]]:
        """Start a phase: peaks from now; returns the CPU reading to subtract."""
        self.peak = self.peak_pss = 0
        self.sample(with_pss=True)
        with self._lock:
            return dict(self.cpu)

    def cpu_since(self, start: dict[int, tuple[str, float]]) -> dict[str, float]:
        self.sample()
        out = {"jvm": 0.0, "driver_py": 0.0, "workers_py": 0.0}
        with self._lock:
            for pid, (kind, seconds) in self.cpu.items():
                out[kind] += seconds - (start[pid][1] if pid in start else 0.0)
        return {k: round(v, 1) for k, v in out.items()}

    def peak_mb(self) -> int:
        return round(self.peak / 2**20)


class StackSampler:
    """Where the driver's main thread waits, by trawl source line: a sampling
    profiler of wall time (each Spark action blocks the line that calls it)."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s, self.counts = interval_s, Counter[str]()
        self._main = threading.main_thread().ident
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            frame = sys._current_frames().get(self._main or 0)
            where = []
            while frame is not None:
                name = frame.f_code.co_filename
                if "/lib/trawl/" in name:
                    where.append(f"{name.split('/lib/trawl/')[1]}:{frame.f_lineno}")
                frame = frame.f_back
            if where:  # innermost trawl line, and the stage line that led there
                self.counts[" < ".join(dict.fromkeys([where[0], where[-1]]))] += 1

    def take(self, top: int = 12) -> list[tuple[str, float]]:
        out = [(k, round(v * self.interval_s, 1)) for k, v in self.counts.most_common(top)]
        self.counts.clear()
        return out


# --------------------------------------------------------------------------- synthesis


def host_name(j: int) -> str:
    k = j // 3
    return f"{SUBS[j % 3]}.site{k}.{TLDS[k % 6]}"


def host_name_col(j: Column) -> Column:
    """``host_name`` as a Spark expression (checked against it on a sample)."""
    k = F.floor(j / 3)
    return F.concat(
        F.element_at(F.array(*[F.lit(s) for s in SUBS]), (j % 3).cast("int") + 1),
        F.lit(".site"),
        k.cast("string"),
        F.lit("."),
        F.element_at(F.array(*[F.lit(t) for t in TLDS]), (k % 6).cast("int") + 1),
    )


def unit(col: Column, salt: int) -> Column:
    """A uniform number in [0, 1) from a hash of ``col`` (deterministic)."""
    return F.pmod(F.xxhash64(col, F.lit(salt)), F.lit(1 << 32)) / float(1 << 32)


def host_id_of(url_id: Column, hosts: int) -> Column:
    """URL id -> host id, skewed: host floor(H u^2) (a few big hosts, a long tail)."""
    u = unit(url_id, 1)
    return F.floor(F.lit(hosts) * u * u).cast("long")


def url_col(url_id: Column, hosts: int) -> Column:
    section = F.element_at(F.array(*[F.lit(s) for s in SECTIONS]), (url_id % 5).cast("int") + 1)
    host = host_name_col(host_id_of(url_id, hosts))
    return F.concat(
        F.lit("https://"), host, F.lit("/"), section, F.lit("/"), url_id, F.lit(".html")
    )


def host_table(spark: SparkSession, cfg: Config, hosts: int) -> DataFrame:
    """(host_id, host, host_bucket, domain, ip) from trawl's own functions."""
    rows = []
    for j in range(hosts):
        name, a = host_name(j), j // HOSTS_PER_IP
        ip = f"10.{a >> 16 & 255}.{a >> 8 & 255}.{a & 255}"
        rows.append(
            (j, name, host_bucket(name, cfg.crawl.host_buckets), registered_domain(name), ip)
        )
    schema = "host_id long, host string, host_bucket int, domain string, ip string"
    return spark.createDataFrame(rows, schema)


def fingerprint_col(url: Column) -> Column:
    @pandas_udf("long")  # type: ignore[call-overload, untyped-decorator]
    def fingerprint(urls: pd.Series) -> pd.Series:
        from trawl.url.keys import url_fingerprint as fp

        return pd.Series([fp(u) for u in urls], dtype="int64")

    column: Column = fingerprint(url)
    return column


def ts(offset_s: Column | float) -> Column:
    """The logical time T0 plus ``offset_s`` seconds."""
    return F.timestamp_seconds(F.lit(T0.timestamp()) + offset_s)


def crawldb_frame(spark: SparkSession, hosts: DataFrame, n: int, n_hosts: int) -> DataFrame:
    """N crawldb rows, every column an expression of the URL id."""
    i = F.col("id")
    r = {k: unit(i, 10 + k) for k in range(12)}
    status = (
        F.when(r[0] < 0.70, "fetched")
        .when(r[0] < 0.90, "unfetched")
        .when(r[0] < 0.95, "gone")
        .when(r[0] < 0.98, "redir_perm")
        .otherwise("notmodified")
    )
    interval = F.element_at(
        F.array(F.lit(DAY), F.lit(7 * DAY), F.lit(30 * DAY)), (F.floor(r[1] * 3)).cast("int") + 1
    ).cast("double")
    visited = F.col("status") != "unfetched"
    last_fetch = F.when(visited, ts(-r[2] * F.col("interval") * 1.5))
    fetches = F.when(visited, 1 + F.floor(r[3] * 10)).otherwise(0).cast("int")
    has_content = F.col("status").isin("fetched", "notmodified")
    seg = F.date_format(F.col("last_fetch_at"), "yyyyMMdd'T'000000'Z'")
    base = (
        spark.range(n)
        .withColumn("host_id", host_id_of(i, n_hosts))
        .join(F.broadcast(hosts), "host_id")
        .withColumn("url", url_col(i, n_hosts))
        .withColumn("status", status)
        .withColumn("interval", interval)
        .withColumn("last_fetch_at", last_fetch)
        .withColumn("discovered_at", ts(-180 * DAY * r[4] - F.col("interval") * 1.5))
    )
    cols = {
        "url_fp": fingerprint_col(F.col("url")),
        "ip": F.when(visited, F.col("ip")),
        "source": F.when(r[5] < 0.05, "seed").otherwise("outlink"),
        "reason": F.lit(None).cast("string"),
        "depth": F.floor(r[6] * 6).cast("int"),
        "score": -F.log(1.0 - r[7]),
        "discovered_segment": F.date_format("discovered_at", "yyyyMMdd'T'000000'Z'"),
        "next_fetch_at": F.coalesce(
            F.timestamp_seconds(F.col("last_fetch_at").cast("double") + F.col("interval")),
            F.col("discovered_at"),
        ),
        "fetch_interval_s": F.col("interval"),
        "fetches": fetches,
        "changes": F.floor(fetches * r[8] * 0.5).cast("int"),
        "http_status": F.when(F.col("status") == "gone", 404)
        .when(F.col("status") == "redir_perm", 301)
        .when(F.col("status") == "notmodified", 304)
        .when(visited, 200)
        .cast("int"),
        "etag": F.when(
            has_content & (r[9] < 0.5), F.concat(F.lit('"'), F.hex(F.xxhash64(i)), F.lit('"'))
        ),
        "last_modified": F.when(
            has_content & (r[9] >= 0.5),
            F.concat(
                F.date_format(
                    F.col("last_fetch_at") - F.expr("INTERVAL 1 DAY"), "EEE, dd MMM yyyy HH:mm:ss"
                ),
                F.lit(" GMT"),
            ),
        ),
        "content_sha256": F.when(has_content, F.sha2(F.col("id").cast("string"), 256)),
        "simhash": F.when(has_content, F.xxhash64(i, F.lit(5))),
        "stored_capture": F.when(
            has_content,
            F.struct(
                F.concat(F.lit("<urn:uuid:"), F.md5(F.col("url")), F.lit(">")).alias("record_id"),
                F.col("url").alias("uri"),
                F.date_format("last_fetch_at", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("date"),
                F.concat(
                    F.lit("sha1:"), F.upper(F.substring(F.sha1(F.col("id").cast("string")), 1, 32))
                ).alias("digest"),
            ),
        ),
        "duplicate_of": F.lit(None).cast("string"),
        "retries": F.lit(0),
        "redirect_to": F.when(
            F.col("status") == "redir_perm", F.concat(F.col("url"), F.lit("?moved=1"))
        ),
        "generated_segment": F.lit(None).cast("string"),
        "generated_at": F.lit(None).cast("timestamp"),
        "last_segment": F.when(visited, seg),
        "is_sitemap": F.lit(False),
        "content_seen_at": F.when(has_content, F.col("last_fetch_at")),
        "modified_at": F.when(has_content, F.col("last_fetch_at")),
        "changed": F.when(has_content & (fetches > 1), r[10] < 0.3),
        "change_visits": F.when(has_content, (fetches - 1).cast("double")),
        "change_changed": F.when(has_content, F.floor((fetches - 1) * r[10]).cast("double")),
        "change_unchanged_s": F.when(has_content, (fetches - 1) * F.col("interval") * 0.5),
        "change_inv_interval": F.when(has_content, (fetches - 1) / F.col("interval")),
        "change_inv_changed": F.when(
            has_content, F.floor((fetches - 1) * r[10]) / F.col("interval")
        ),
        "change_dated": F.when(has_content, F.lit(0.0)),
        "change_dated_s": F.when(has_content, F.lit(0.0)),
        "change_rate": F.when(has_content, (0.1 + r[11]) / F.col("interval")),
        "sitemap_lastmod": F.lit(None).cast("timestamp"),
        "gone_count": F.when(F.col("status") == "gone", 2).otherwise(0),
        "removed_at": F.when(F.col("status") == "gone", F.col("last_fetch_at")),
        "deferrals": F.lit(0),
        "deferred_reason": F.lit(None).cast("string"),
        "deferred_at": F.lit(None).cast("timestamp"),
        "counter_run": F.lit(0),
        # trawl.crawldb.budgets.path_pattern of these URLs: every segment's digits masked
        "pattern": F.regexp_replace(
            F.col("url"), r"^https://([^/]+)/([a-z]+)/[0-9]+\.html$", "$1/$2/0.html"
        ),
    }
    return base.withColumns(cols).select(
        *[F.col(f.name).cast(f.dataType) for f in CRAWLDB_SCHEMA.fields]
    )


def hostdb_frame(hosts: DataFrame) -> DataFrame:
    h = F.col("host_id")
    cols = {
        "robots_url": F.concat(F.lit("https://"), F.col("host"), F.lit("/robots.txt")),
        "robots_status": F.lit("parsed"),
        "robots_http_status": F.lit(200),
        "robots_body": F.lit("User-agent: *\nDisallow: /private/\n"),
        "robots_fetched_at": ts(-unit(h, 2) * DAY / 2),  # fresh: within robots.cache_ttl_s
        "robots_unreachable_since": F.lit(None).cast("timestamp"),
        "crawl_delay_s": F.when(unit(h, 3) < 0.02, F.lit(5.0)),
        "delay_s": 1.0 + unit(h, 4),
        "next_allowed_at": ts(-3600.0),
        "consecutive_failures": F.lit(0),
        "backoff_until": F.lit(None).cast("timestamp"),
        "resp_time_avg_s": 0.05 + unit(h, 5) * 0.3,
        "fetches": F.floor(unit(h, 6) * 500).cast("long"),
        "status_counts": F.create_map(F.lit("success"), F.floor(unit(h, 6) * 500).cast("long")),
        "last_segment": F.lit(segment_id(T0 - timedelta(days=1))),
        "soft404_status": F.lit(404),
        "soft404_sha256": F.lit(None).cast("string"),
        "soft404_simhash": F.lit(None).cast("long"),
        "soft404_probed_at": ts(-unit(h, 7) * 10 * DAY),  # within traps.soft404_reprobe_s
        "soft404_location": F.lit(None).cast("string"),
        # no sibling evidence yet (updatedb counts it from a segment's links)
        "sibling_pages": F.lit(None).cast("int"),
        "sibling_hosts": F.lit(None).cast("int"),
        "sibling_links": F.lit(None).cast("int"),
        "sibling_segment": F.lit(None).cast("string"),
    }
    return hosts.withColumns(cols).select(
        *[F.col(f.name).cast(f.dataType) for f in HOSTDB_SCHEMA.fields]
    )


def domainlinks_frame(spark: SparkSession, n_hosts: int) -> DataFrame:
    """Domain d is linked from 1 + floor(100 u^3) other domains (budget 20-1,000)."""
    domains = (n_hosts + 2) // 3
    d = F.col("id")
    linking = (1 + F.floor(100 * unit(d, 20) * unit(d, 20) * unit(d, 20))).cast("int")
    pairs = spark.range(domains).select(
        d.alias("to_id"), F.explode(F.sequence(F.lit(1), linking)).alias("k")
    )
    src = F.pmod(F.col("to_id") + F.col("k") * 7919, F.lit(domains))

    def domain(k: Column) -> Column:
        return F.concat(
            F.lit("site"),
            k.cast("string"),
            F.lit("."),
            F.element_at(F.array(*[F.lit(t) for t in TLDS]), (k % 6).cast("int") + 1),
        )

    seg = F.lit(segment_id(T0 - timedelta(days=30)))
    return (
        pairs.select(
            domain(src).alias("from_domain"),
            domain(F.col("to_id")).alias("to_domain"),
            seg.alias("first_segment"),
            seg.alias("last_segment"),
        )
        .distinct()
        .select(*DOMAINLINKS_SCHEMA.fieldNames())
    )


def check_sample(spark: SparkSession, root: str, cfg: Config, n: int, size: int = 2000) -> int:
    """Sampled rows whose keys differ from trawl's Python functions (must be 0)."""
    rows = read_table(spark, root, "crawldb").sample(min(1.0, 2 * size / n)).limit(size)
    bad = 0
    for r in rows.collect():
        ok = (
            normalize(r["url"]) == r["url"]
            and host_of(r["url"]) == r["host"]
            and url_fingerprint(r["url"]) == r["url_fp"]
            and host_bucket(r["host"], cfg.crawl.host_buckets) == r["host_bucket"]
            and registered_domain(r["host"]) == r["domain"]
            and path_pattern(r["url"]) == r["pattern"]
        )
        bad += not ok
    return bad


def synthesise(spark: SparkSession, cfg: Config, root: str, n: int, n_hosts: int) -> dict[str, Any]:
    ensure_all(spark, root)
    hosts = host_table(spark, cfg, n_hosts).cache()
    crawldb = crawldb_frame(spark, hosts, n, n_hosts).repartition("host_bucket")
    crawldb.write.format("delta").mode("append").save(table_path(root, "crawldb"))
    hostdb_frame(hosts).repartition("host_bucket").write.format("delta").mode("append").save(
        table_path(root, "hostdb")
    )
    domainlinks_frame(spark, n_hosts).coalesce(1).write.format("delta").mode("append").save(
        table_path(root, "domainlinks")
    )
    hosts.unpersist()
    return {"sample_mismatches": check_sample(spark, root, cfg, n), **table_facts(spark, root)}


def fetch_frame(
    spark: SparkSession, root: str, n: int, pages: int, n_hosts: int, outlinks: int
) -> DataFrame:
    """``pages`` successful fetches of known URLs (any status) with their links."""
    crawldb = read_table(spark, root, "crawldb")
    ips = read_table(spark, root, "hostdb").select("host", F.col("ip").alias("host_ip"))
    # the lowest hashes: a uniform sample of every bucket and file (a top-k, no full sort)
    chosen = crawldb.orderBy(unit(F.col("url_fp"), 30)).limit(pages).join(ips, "host")
    i = F.abs(F.col("url_fp"))
    known = [url_col(F.pmod(F.xxhash64(i, F.lit(40 + k)), F.lit(n)), n_hosts) for k in range(3)]
    elsewhere = F.regexp_extract(url_col(F.pmod(i, F.lit(n)) + 1, n_hosts), "^https://[^/]+", 0)
    new = [
        F.concat(
            F.lit("https://"), F.col("host"), F.lit("/new/"), i.cast("string"), F.lit(".html")
        ),
        F.concat(elsewhere, F.lit("/new/"), i.cast("string"), F.lit("-x.html")),
    ]
    links = [*known, *new, *[F.concat(new[0], F.lit(f"?v={k}")) for k in range(outlinks - 5)]]
    link_structs = [
        F.struct(
            u.alias("url"),
            F.lit("a link").alias("anchor"),
            F.lit(False).alias("nofollow"),
            F.lit(False).alias("sitemap"),
            F.lit(None).cast("timestamp").alias("lastmod"),
        )
        for u in links[:outlinks]
    ]
    changed = unit(F.col("url_fp"), 31) < 0.4
    sha = F.when(
        changed | F.col("content_sha256").isNull(), F.sha2(F.concat(F.col("url"), F.lit("v2")), 256)
    ).otherwise(F.col("content_sha256"))
    at = ts(unit(F.col("url_fp"), 32) * 3000.0)
    cols = {
        "kind": F.lit("page"),
        "task": F.pmod(F.col("url_fp"), F.lit(2)).cast("int"),
        "ip": F.col("host_ip"),
        "counter_run": F.lit(0),
        "is_sitemap": F.lit(False),
        "outcome": F.lit("success"),
        "http_status": F.lit(200),
        "fetched_at": at,
        "content_type": F.lit("text/html"),
        "headers": F.array(F.array(F.lit("Content-Type"), F.lit("text/html"))),
        "ttfb_s": F.lit(0.1),
        "elapsed_s": F.lit(0.2),
        "bytes": F.lit(20_000).cast("long"),
        "truncated": F.lit(None).cast("string"),
        "warc_file": F.lit("trawl-00000.warc.gz"),
        "warc_offset": F.abs(F.col("url_fp") % 1_000_000_000),
        "warc_length": F.lit(8_000).cast("long"),
        "stored_capture": F.struct(
            F.concat(F.lit("<urn:uuid:"), F.md5(sha), F.lit(">")).alias("record_id"),
            F.col("url").alias("uri"),
            F.date_format(at, "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("date"),
            F.lit("sha1:AAAA").alias("digest"),
        ),
        "content_sha256": sha,
        "simhash": F.xxhash64(sha),
        "minhash": F.lit(None).cast("array<long>"),
        "text_words": F.lit(400),
        "changed": F.when(F.col("content_sha256").isNotNull(), changed),
        "redirect_to": F.lit(None).cast("string"),
        "canonical": F.lit(None).cast("string"),
        "robots_meta": F.lit(None).cast("string"),
        "title": F.lit("A page"),
        "outlinks": F.array(*link_structs),
        "robots_decision": F.lit("allowed"),
        "robots_body": F.lit(None).cast("string"),
        "crawl_delay_s": F.lit(None).cast("double"),
        "delay_s": F.lit(1.0),
        "error": F.lit(None).cast("string"),
        "soft404": F.lit(False),
        "linked_from": F.lit(None).cast("string"),  # generated, not followed
        "requisites": F.lit(None).cast("array<string>"),  # requisites.capture is off
    }
    return chosen.withColumns(cols).select(
        *[F.col(f.name).cast(f.dataType) for f in FETCH_SCHEMA.fields]
    )


# --------------------------------------------------------------------------- measuring


def table_facts(spark: SparkSession, root: str, name: str = "crawldb") -> dict[str, Any]:
    d = spark.sql(f"DESCRIBE DETAIL delta.`{table_path(root, name)}`").first()
    assert d is not None
    version = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(root, name)}` LIMIT 1").first()
    assert version is not None
    return {"bytes": d["sizeInBytes"], "files": d["numFiles"], "version": version["version"]}


MERGE_KEYS = (
    "numTargetBytesAdded",
    "numTargetBytesRemoved",
    "numTargetFilesAdded",
    "numTargetFilesRemoved",
    "numTargetRowsUpdated",
    "numTargetRowsInserted",
    "numTargetRowsCopied",
    "numTargetDeletionVectorsAdded",
    "numTargetDeletionVectorsRemoved",
    "numSourceRows",
    "executionTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
)


def merges_since(spark: SparkSession, root: str, name: str, version: int) -> list[dict[str, Any]]:
    """operationMetrics of the MERGEs committed to table ``name`` after ``version``."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(root, name)}`")
    rows = history.filter((F.col("version") > version) & (F.col("operation") == "MERGE"))
    out = []
    for r in rows.orderBy("version").collect():
        metrics = r["operationMetrics"] or {}
        out.append(
            {
                "version": r["version"],
                **{k: int(metrics[k]) for k in MERGE_KEYS if metrics.get(k) is not None},
            }
        )
    return out


def written_share(before: dict[str, Any], merges: list[dict[str, Any]]) -> float:
    added = sum(m.get("numTargetBytesAdded", 0) for m in merges)
    return round(added / before["bytes"], 3) if before["bytes"] else 0.0


PHASES: dict[str, dict[str, Any]] = {}  # phase -> cpu_s and where the time went


def timed(mem: TreeMemory, spark: SparkSession, phase: str, fn: Any) -> tuple[Any, float, int]:
    """``fn()``, its wall seconds and peak MB; its CPU seconds and sampled
    trawl lines go to ``PHASES``."""
    spark.sparkContext.setJobGroup(phase, phase)
    cpu, started = mem.reset(), time.perf_counter()
    SAMPLER.take()
    result = fn()
    wall = round(time.perf_counter() - started, 2)
    PHASES[phase] = {
        "cpu_s": mem.cpu_since(cpu),
        "peak_pss_mb": round(mem.peak_pss / 2**20),
        "lines": SAMPLER.take(),
    }
    print(f"[scale] {phase}: {wall} s, {json.dumps(PHASES[phase])}", file=sys.stderr, flush=True)
    return result, wall, mem.peak_mb()


def new_url_detection(ctx: JobContext, mem: TreeMemory) -> dict[str, Any]:
    """updatedb's links admitted (timed), then the anti-join alone (timed)."""
    spark, root = ctx.spark, ctx.root
    fetch = read_segment_table(spark, root, ctx.segment, "fetch")
    buckets = {r[0] for r in fetch.select("host_bucket").distinct().collect()}
    crawldb = read_table(spark, root, "crawldb")
    sources = link_sources(fetch, crawldb.filter(f"host_bucket IN {sql_in(buckets)}"))

    def admit() -> tuple[DataFrame, int, int]:
        candidates = admitted_links(discovered_links(sources), ctx.stage, {}).cache()
        links = candidates.count()
        admitted = one_per_url(candidates.filter(F.col("rejected").isNull())).cache()
        return admitted, links, admitted.count()

    (admitted, links, urls), admit_s, admit_mb = timed(mem, spark, "admit", admit)
    touched = buckets | {r[0] for r in admitted.select("host_bucket").distinct().collect()}

    def antijoin() -> int:
        looked_up = look_up(admitted, crawldb.filter(f"host_bucket IN {sql_in(touched)}"))
        return int(looked_up.filter(F.col("_seen_in").isNull()).count())

    new, join_s, join_mb = timed(mem, spark, "antijoin", antijoin)
    admitted.unpersist()
    return {
        "links": links,
        "admitted_urls": urls,
        "new_urls": new,
        "buckets_touched": len(touched),
        "admit_s": admit_s,
        "admit_peak_mb": admit_mb,
        "antijoin_s": join_s,
        "antijoin_peak_mb": join_mb,
        "antijoin_urls_per_s": round(urls / join_s) if join_s else None,
    }


def merged(
    mem: TreeMemory, ctx: JobContext, phase: str, job: Any, facts: list[str]
) -> dict[str, Any]:
    """Run a job that MERGEs into crawldb (and hostdb): time, peak memory,
    the facts of its result, and what the MERGEs wrote against crawldb's size."""
    spark, root = ctx.spark, ctx.root
    before = {name: table_facts(spark, root, name) for name in ("crawldb", "hostdb")}
    result, seconds, peak = timed(mem, spark, phase, lambda: job(ctx))
    merges = merges_since(spark, root, "crawldb", before["crawldb"]["version"])
    return {
        "s": seconds,
        "peak_mb": peak,
        **{k: result[k] for k in facts},
        "crawldb_before": before["crawldb"],
        "written_share": written_share(before["crawldb"], merges),
        "merges": merges,
        "hostdb_merges": merges_since(spark, root, "hostdb", before["hostdb"]["version"]),
        "crawldb_after": table_facts(spark, root),
    }


def run_size(
    spark: SparkSession, cfg: Config, args: argparse.Namespace, n: int, mem: TreeMemory
) -> dict[str, Any]:
    root = str(args.workdir / f"crawl-{n}")
    shutil.rmtree(root, ignore_errors=True)
    synth, synth_s, synth_mb = timed(
        mem, spark, "synthesise", lambda: synthesise(spark, cfg, root, n, args.hosts)
    )
    if synth["sample_mismatches"]:
        raise SystemExit(f"{synth['sample_mismatches']} sampled rows differ from trawl.url.keys")
    out: dict[str, Any] = {"urls": n, "synthesise_s": synth_s, "synthesise_peak_mb": synth_mb}
    out["crawldb"] = synth
    gen_ctx = JobContext(spark, cfg, root, segment_id(T0), T0)
    out["generate"] = merged(mem, gen_ctx, "generate", run_generate, ["urls", "hosts"])
    at = T0 + timedelta(hours=1)
    upd_ctx = JobContext(spark, cfg, root, segment_id(at), at)
    pages = fetch_frame(spark, root, n, args.segment_urls, args.hosts, args.outlinks)
    write_segment_table(pages, root, upd_ctx.segment, "fetch")
    out["detect"] = new_url_detection(upd_ctx, mem)
    out["updatedb"] = merged(
        mem, upd_ctx, "updatedb", run_updatedb, ["fetch_rows", "new_urls", "hosts"]
    )
    out["cycle_s"] = round(out["generate"]["s"] + out["updatedb"]["s"], 2)
    out["phases"] = dict(PHASES)
    PHASES.clear()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return out


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) over log(x)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / den, 2) if den else None


def growth(sizes: list[dict[str, Any]]) -> dict[str, float | None]:
    def of(get: Any) -> float | None:
        return slope([(s["urls"], get(s)) for s in sizes])

    return {
        "generate_s": of(lambda s: s["generate"]["s"]),
        "cycle_s": of(lambda s: s["generate"]["s"] + s["updatedb"]["s"]),
        "updatedb_s": of(lambda s: s["updatedb"]["s"]),
        "antijoin_s": of(lambda s: s["detect"]["antijoin_s"]),
        "updatedb_bytes_written": of(
            lambda s: sum(m.get("numTargetBytesAdded", 0) for m in s["updatedb"]["merges"])
        ),
    }


def stage_summary(log_dir: Path, top: int = 6) -> dict[str, list[dict[str, Any]]]:
    """The slowest Spark stages of each job group (phase), from the event log."""
    files = sorted(log_dir.glob("local-*"), key=lambda p: p.stat().st_mtime)
    if not files:
        return {}
    group_of: dict[int, str] = {}
    stages: dict[str, list[dict[str, Any]]] = {}
    for line in files[-1].read_text().splitlines():
        ev = json.loads(line)
        if ev["Event"] == "SparkListenerJobStart":
            group = (ev.get("Properties") or {}).get("spark.jobGroup.id", "?")
            group_of.update({s: group for s in ev["Stage IDs"]})
        elif ev["Event"] == "SparkListenerStageCompleted":
            info = ev["Stage Info"]
            acc = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}

            def mb(key: str, acc: dict[str, Any] = acc) -> float:
                return round(int(acc.get(key) or 0) / 2**20, 1)

            stages.setdefault(group_of.get(info["Stage ID"], "?"), []).append(
                {
                    "stage": info["Stage ID"],
                    "name": info["Stage Name"][:60],
                    "s": round((info["Completion Time"] - info["Submission Time"]) / 1000, 1),
                    "tasks": info["Number of Tasks"],
                    "run_s": round(int(acc.get("internal.metrics.executorRunTime") or 0) / 1000, 1),
                    "input_mb": mb("internal.metrics.input.bytesRead"),
                    "output_mb": mb("internal.metrics.output.bytesWritten"),
                    "shuffle_read_mb": mb("internal.metrics.shuffle.read.remoteBytesRead")
                    + mb("internal.metrics.shuffle.read.localBytesRead"),
                    "shuffle_write_mb": mb("internal.metrics.shuffle.write.bytesWritten"),
                    "spill_mb": mb("internal.metrics.diskBytesSpilled"),
                }
            )
    return {g: sorted(v, key=lambda s: -s["s"])[:top] for g, v in stages.items()}


SAMPLER: StackSampler


def main() -> None:
    global SAMPLER
    args = parse_args()
    SAMPLER = StackSampler()
    cfg = config(args)
    mem = TreeMemory()
    spark = build_spark(cfg)
    started = time.time()
    sizes = []
    for n in args.sizes:
        sizes.append(run_size(spark, cfg, args, n, mem))
        print(json.dumps(sizes[-1]), flush=True)
    line = {
        "bench": "scale",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "smoke": args.smoke,
        "settings": {
            "hosts": args.hosts,
            "segment_urls": args.segment_urls,
            "outlinks": args.outlinks,
            "driver_memory": args.driver_memory,
            "master": cfg.spark.master,
            "host_buckets": cfg.crawl.host_buckets,
            "shuffle_partitions": cfg.spark.shuffle_partitions,
            "top_n": cfg.generate.top_n,
            "spark_conf": dict(cfg.spark.conf),
            "overrides": args.overrides,
            "deletion_vectors": args.deletion_vectors,
        },
        "sizes": sizes,
        "growth": growth(sizes),
        "seconds": round(time.time() - started, 1),
    }
    spark.stop()
    if args.event_log:
        line["stages"] = stage_summary(args.event_log)
    append_line(args.results, line)
    print(json.dumps({k: line[k] for k in ("growth", "seconds")}))


if __name__ == "__main__":
    main()
