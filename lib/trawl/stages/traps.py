"""updatedb's defences against crawler traps, as Spark transforms.

The rules are in the pure modules (``trawl.crawldb.budgets``, ``trawl.url.sessionparams``);
here they meet the segment's links: one candidate per URL after admission,
the new-URL caps per path pattern and per host, the ``rejected`` table that
keeps every link left out with its reason, the session-id parameters learned
per host (``hostparams``), and the domain link graph (``domainlinks``) that
earns domains their budgets in generate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from trawl.crawldb.admission import NAMED_SOURCES
from trawl.crawldb.budgets import COUNTER_DIGITS, ORIGIN_PREFIX
from trawl.stages.common import StageContext, map_records, materialize, sql_in
from trawl.store.schemas import DOMAINLINKS_SCHEMA, HOSTPARAMS_SCHEMA
from trawl.url.keys import host_bucket, registered_domain
from trawl.url.sessionparams import param_variants

KEY = ["host_bucket", "url_fp", "url"]
PAIR_SCHEMA = StructType(DOMAINLINKS_SCHEMA.fields[:2])
VARIANT_SCHEMA = StructType(
    [StructField(n, StringType(), True) for n in ("host", "param", "value", "rest", "content")]
)


def new_url_order() -> list[Column]:
    """Which new URLs a cap keeps first: the best link score, then the fingerprint."""
    return [F.col("score").desc(), F.col("url_fp")]


def counter_key_col(url: Column) -> Column:
    """``trawl.crawldb.budgets.counter_key`` as a Spark column (the same patterns)."""
    origin = F.regexp_extract(url, ORIGIN_PREFIX, 0)
    rest = F.regexp_replace(url, ORIGIN_PREFIX, "")
    return F.concat(origin, F.regexp_replace(rest, COUNTER_DIGITS, "0"))


def counter_run_col(source: Column, target: Column, run: Column) -> Column:
    """The counter run of a link's target (``trawl.crawldb.budgets.counter_step``):
    its source's run plus one when the link is a step, else 0."""
    step = (source != target) & (counter_key_col(source) == counter_key_col(target))
    return F.when(step, F.coalesce(run, F.lit(0)) + 1).otherwise(F.lit(0))


def one_per_url(admitted: DataFrame) -> DataFrame:
    """One candidate per URL: links spelled apart can normalise to one URL
    (a learned session parameter dropped), and crawldb must get it once.
    The best-scored, then shallowest, spelling stands for it."""
    first = Window.partitionBy(*KEY).orderBy(F.col("score").desc(), "depth", "raw")
    return admitted.withColumn("_n", F.row_number().over(first)).filter("_n = 1").drop("_n")


def query_columns(url: Column) -> tuple[Column, Column, Column]:
    """(resource, names, pairs) of a URL with a query, as Spark columns: the
    URL up to its query (scheme, authority and path), the distinct parameter
    names sorted and joined by ``&``, and its ``name=value`` pairs sorted and
    joined by ``&``. Null pairs and names for a URL without a query.

    ``/search?size=xl&color=red`` and ``/search?color=red&size=xl`` share
    all three: one search spelled in two click orders. ``?color=red`` and
    ``?color=blue`` share resource and names: one kind of search."""
    query = F.regexp_extract(url, r"\?([^#]*)", 1)
    pairs = F.array_sort(F.filter(F.split(query, "&"), lambda p: p != ""))
    names = F.array_sort(F.array_distinct(F.transform(pairs, lambda p: F.split(p, "=")[0])))
    some = F.size(pairs) > 0
    return (
        F.regexp_extract(url, r"^[^?#]*", 0),
        F.when(some, F.concat_ws("&", names)),
        F.when(some, F.concat_ws("&", pairs)),
    )


def query_caps(pool: DataFrame, known: DataFrame, ctx: StageContext) -> DataFrame:
    """``pool`` with ``rejected`` set where the query rules refuse a URL:
    faceted search, which makes a page of every set of filters in every
    click order. Only rows whose ``_active`` is true are judged or take a
    place.

    - ``trap/query_order``: a URL whose query is another URL's parameters
      in another order, on the same path -- a URL crawldb knows (``known``)
      or a better-ranked one in ``pool``. Servers answer both alike.
    - ``trap/facets``: a URL whose set of parameter names is new to its
      path once the path has ``traps.max_query_sets`` sets (crawldb's and
      the pool's, fewest names first). Pagination and item ids vary
      values, not names, and stay within one set; filters combine names.

    ``known``: crawldb's rows of the pool's buckets; those this segment
    added in an earlier run of updatedb are in ``pool`` instead, so a re-run
    decides alike. Each rule sets a column on the one lineage of rows
    (``cap_new_urls``)."""
    resource, names, pairs = query_columns(F.col("url"))
    tagged = pool.select("*", resource.alias("_res"), names.alias("_names"), pairs.alias("_pairs"))
    queried = tagged.filter(F.col("_pairs").isNotNull())
    older = F.col("discovered_segment").isNull() | (F.col("discovered_segment") != ctx.segment)
    seen = (
        known.filter(older & F.col("url").contains("?"))
        .join(F.broadcast(queried.select("host").distinct()), "host", "left_semi")
        .select(resource.alias("_res"), names.alias("_names"), pairs.alias("_pairs"))
        .filter(F.col("_pairs").isNotNull())
        .join(F.broadcast(queried.select("_res").distinct()), "_res", "left_semi")
    )
    spelled = seen.select("_res", "_pairs").distinct().withColumn("_spelled", F.lit(True))
    rows = tagged.join(spelled, ["_res", "_pairs"], "left")
    judged = F.col("_active") & F.col("_pairs").isNotNull()
    first = F.row_number().over(
        Window.partitionBy("_res", "_pairs", judged).orderBy(*new_url_order())
    )
    reordered = judged & (F.coalesce(F.col("_spelled"), F.lit(False)) | (first > 1))
    rows = _refuse(rows, reordered, "trap/query_order")
    limit = ctx.cfg.traps.max_query_sets
    helpers = ["_res", "_names", "_pairs", "_spelled"]
    if limit:
        sets = seen.select("_res", "_names").distinct()
        counted = sets.groupBy("_res").agg(F.count("*").alias("_had"))
        rows = rows.join(sets.withColumn("_known", F.lit(True)), ["_res", "_names"], "left").join(
            counted, "_res", "left"
        )
        fresh = F.col("_active") & F.col("_pairs").isNotNull() & F.col("_known").isNull()
        by_size = Window.partitionBy("_res", fresh).orderBy(
            F.size(F.split("_names", "&")), "_names"
        )
        over = fresh & (F.coalesce(F.col("_had"), F.lit(0)) + F.dense_rank().over(by_size) > limit)
        rows = _refuse(rows, over, "trap/facets")
        helpers += ["_known", "_had"]
    return rows.drop(*helpers)


def _refuse(rows: DataFrame, condition: Column, reason: str | Column) -> DataFrame:
    """``rows`` with ``rejected`` set to ``reason`` where ``condition`` holds
    (on an active row), and those rows no longer ``_active``."""
    hit = F.coalesce(condition, F.lit(False))
    reason = F.lit(reason) if isinstance(reason, str) else reason
    # one projection: one analysis of the plan, and a window in ``condition``
    # computed once (both columns read the rows as they were)
    return rows.withColumns(
        {
            "rejected": F.when(hit, reason).otherwise(F.col("rejected")),
            "_active": F.col("_active") & ~hit,
        }
    )


def bad_patterns(crawldb: DataFrame, ctx: StageContext) -> DataFrame:
    """(pattern, visits, bad): the path patterns whose pages keep coming back
    duplicates or gone -- a calendar's empty months, a faceted search's
    reorderings, a host's not-found page under many names.

    Of each pattern's ``traps.pattern_window`` newest pages visited (by
    when crawldb learnt of them: a trap's newest URLs tell what its next
    ones will be, and revisits of its first good pages must not clear it),
    ``bad`` were marked duplicate by dedup (exact or near) or are gone (404,
    410, soft 404); a pattern with at least ``pattern_min_visits`` visits
    and a ``pattern_bad_share`` of them bad is returned. The verdict moves
    with the probes it still gets: distinct new pages push the bad ones out
    of the window. Rows without a pattern (kept before trawl stored it)
    count for none."""
    t = ctx.cfg.traps
    visited = crawldb.filter(F.col("pattern").isNotNull() & F.col("last_fetch_at").isNotNull())
    bad = (F.col("status") == "duplicate") | F.col("duplicate_of").isNotNull()
    bad = bad | (F.col("status") == "gone")
    latest = Window.partitionBy("pattern").orderBy(
        F.col("discovered_at").desc_nulls_last(), F.col("url_fp")
    )
    recent = visited.select("pattern", bad.alias("bad"), F.row_number().over(latest).alias("n"))
    return (
        recent.filter(F.col("n") <= t.pattern_window)
        .groupBy("pattern")
        .agg(F.count("*").alias("visits"), F.sum(F.col("bad").cast("int")).alias("bad"))
        .filter(
            (F.col("visits") >= t.pattern_min_visits)
            & (F.col("bad") >= F.col("visits") * F.lit(t.pattern_bad_share))
        )
    )


def cap_new_urls(
    new: DataFrame, earlier: DataFrame, fetched: DataFrame, ctx: StageContext,
    bad: DataFrame | None = None, known: DataFrame | None = None,
) -> tuple[DataFrame, DataFrame]:  # fmt: skip
    """(new URLs within the caps, those over a cap with their reason), from
    ``decide_new_urls``."""
    decided = decide_new_urls(new, earlier, fetched, ctx, bad, known)
    return decided.filter(F.col("rejected").isNull()), decided.filter(F.col("rejected").isNotNull())


def decide_new_urls(
    new: DataFrame, earlier: DataFrame, fetched: DataFrame, ctx: StageContext,
    bad: DataFrame | None = None, known: DataFrame | None = None,
) -> DataFrame:  # fmt: skip
    """The new URLs, each with ``rejected``: null within the caps, else the
    cap's reason.

    With ``known`` (crawldb's rows of the links' buckets) the query rules of
    ``query_caps`` apply first. Then ``traps.max_new_per_pattern`` --
    ``pattern_probes`` for a pattern in ``bad`` (``bad_patterns``: reason
    ``cap/pattern_reputation``) -- then ``max_new_per_host`` to what is
    left, each ranked by link score, then URL fingerprint. ``earlier``: URLs
    an earlier run of this updatedb already added (they hold their places,
    so a re-run admits the same set, and are not returned); URLs
    ``fetched`` in the segment (redirect targets the fetcher followed) are
    not capped and take no place.

    Every rule adds columns to one lineage of rows: the rows a rule refuses
    stop being ``_active`` (they take no place in a later rule's ranking)
    rather than being split off and united again, which made a plan of a
    thousand nodes that Spark took seconds to optimise.
    """
    traps = ctx.cfg.traps
    pool = new.withColumn("_earlier", F.lit(False)).unionByName(
        earlier.withColumn("_earlier", F.lit(True))
    )
    if "rejected" not in pool.columns:
        pool = pool.withColumn("rejected", F.lit(None).cast("string"))
    exempt = fetched.select(*KEY).distinct().withColumn("_exempt", F.lit(True))
    pool = pool.join(exempt, KEY, "left").withColumn(
        "_active", F.col("rejected").isNull() & F.col("_exempt").isNull()
    )
    if known is not None:
        pool = query_caps(pool, known, ctx)
    if bad is not None:
        flagged = F.broadcast(bad.select("pattern", F.lit(True).alias("_bad")))
        pool = pool.join(flagged, "pattern", "left")
    else:
        pool = pool.withColumn("_bad", F.lit(None).cast("boolean"))
    pattern_cap = F.when(F.col("_bad"), F.lit(traps.pattern_probes)).otherwise(
        F.lit(traps.max_new_per_pattern)
    )
    pattern_reason = F.when(F.col("_bad"), F.lit("cap/pattern_reputation")).otherwise(
        F.lit("cap/new_per_pattern")
    )
    for column, cap, reason in (
        ("pattern", pattern_cap, pattern_reason),
        ("host", F.lit(traps.max_new_per_host), F.lit("cap/new_per_host")),
    ):
        rank = F.row_number().over(
            Window.partitionBy(column, F.col("_active")).orderBy(*new_url_order())
        )
        pool = _refuse(pool, F.col("_active") & (rank > cap), reason)
    return pool.filter(~F.col("_earlier")).drop("_earlier", "_exempt", "_active", "_bad")


def rejected_rows(rejected: DataFrame, ctx: StageContext) -> DataFrame:
    """Rows of the ``rejected`` table: the URL as admitted, or as linked when
    it did not get that far."""
    return rejected.select(
        F.lit(ctx.segment).alias("segment"),
        F.lit("updatedb").alias("stage"),
        F.coalesce(F.col("url"), F.col("raw")).alias("url"),
        "host",
        F.col("rejected").alias("reason"),
        "source",
    )


def learn_session_params(pages: DataFrame, crawldb: DataFrame) -> DataFrame:
    """(host, param) pairs ``trawl.url.sessionparams`` calls session ids, from the
    segment's pages with a query and their hosts' earlier ones in
    ``crawldb``; content is the main-text simhash, or the body's sha256."""
    content = F.coalesce(F.col("simhash").cast("string"), F.col("content_sha256"))
    has_query = F.col("url").contains("?") & content.isNotNull()
    now = pages.filter((F.col("outcome") == "success") & has_query)
    hosts = now.select("host").distinct()
    before = crawldb.filter((F.col("status") == "fetched") & has_query).join(
        F.broadcast(hosts), "host", "left_semi"
    )
    rows = (
        now.select("host", "url", content.alias("content"))
        .unionByName(before.select("host", "url", content.alias("content")))
        .distinct()
    )

    def fn(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for r in records:
            for name, value, rest in param_variants(r["url"]):
                yield {"host": r["host"], "param": name, "value": value, "rest": rest,
                       "content": r["content"]}  # fmt: skip

    groups = (
        map_records(rows, fn, VARIANT_SCHEMA)
        .groupBy("host", "param", "rest")
        .agg(F.countDistinct("value").alias("values"), F.countDistinct("content").alias("contents"))
        .filter(F.col("values") >= 2)
    )
    verdict = groups.groupBy("host", "param").agg(
        F.sum(F.when(F.col("contents") == 1, 1).otherwise(0)).alias("same"),
        F.sum(F.when(F.col("contents") > 1, 1).otherwise(0)).alias("differ"),
    )
    return verdict.filter((F.col("same") > 0) & (F.col("differ") == 0)).select("host", "param")


def session_params(
    pages: DataFrame, crawldb: DataFrame, hostparams: DataFrame, ctx: StageContext
) -> tuple[dict[str, list[str]], DataFrame]:
    """Every session parameter known, host -> names (``hostparams``'s and
    this segment's newly learned ones), and the new ones as ``hostparams``
    rows to append (a re-run finds them known)."""
    known = hostparams.select("host", "param").collect()
    added = learn_session_params(pages, crawldb).join(hostparams, ["host", "param"], "left_anti")
    rows = added.withColumn("segment", F.lit(ctx.segment)).collect()
    out: dict[str, list[str]] = {}
    for r in [*known, *rows]:
        out.setdefault(r["host"], []).append(r["param"])
    return out, pages.sparkSession.createDataFrame(rows, HOSTPARAMS_SCHEMA)


def domain_pairs(sources: DataFrame) -> DataFrame:
    """Distinct (from_domain, to_domain) of the segment's followed page links
    between different registered domains."""
    links = (
        sources.filter((F.col("outcome") == "success") & F.col("outlinks").isNotNull())
        .select("host", F.explode("outlinks").alias("l"))
        .filter(~F.coalesce(F.col("l.nofollow"), F.lit(False)))
        .select(F.col("host").alias("src"), F.expr("lower(parse_url(l.url, 'HOST'))").alias("dst"))
        .filter(F.col("dst").isNotNull() & (F.col("dst") != F.col("src")))
        .distinct()
    )

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            a, b = registered_domain(row["src"]), registered_domain(row["dst"])
            if a != b:
                yield {"from_domain": a, "to_domain": b}

    return map_records(links, fn, PAIR_SCHEMA).distinct()


def new_domain_links(pairs: DataFrame, domainlinks: DataFrame, ctx: StageContext) -> DataFrame:
    """The ``domainlinks`` rows to append: the pairs it does not have yet (a
    re-run finds none left to add)."""
    known = domainlinks.select("from_domain", "to_domain")
    return (
        pairs.join(known, ["from_domain", "to_domain"], "left_anti")
        .withColumn("first_segment", F.lit(ctx.segment))
        .withColumn("last_segment", F.lit(ctx.segment))
        .select(*DOMAINLINKS_SCHEMA.fieldNames())
    )


def trusted_hosts(crawldb: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The hosts the operator named and the registered domains they are in:
    ((host), (domain)). A host is named by a seed or a sitemap URL given to
    ``inject`` (depth 0), or is where such a URL redirected within its
    registered domain (``http://example.org/`` to ``https://www.example.org/``:
    the site the operator meant). Links never name a host, whichever host they
    come from: trust does not spread by links (``budget.trust_seed_domains``
    extends it to the seeds' registered domains)."""
    roots = crawldb.filter(F.coalesce(F.col("depth"), F.lit(0)) == 0)
    named = roots.filter(F.col("source").isin(*NAMED_SOURCES)).select("host", "domain")
    domains = named.select("domain").distinct()
    redirected = roots.filter(F.col("source") == "redirect").select("host", "domain")
    hosts = named.unionByName(redirected.join(domains, "domain", "left_semi")).select("host")
    return hosts.distinct(), domains


SIBLING_SCHEMA = StructType(
    [StructField("host", StringType(), False), StructField("dst", StringType(), False)]
)


def sibling_evidence(
    sources: DataFrame, crawldb: DataFrame, ctx: StageContext, held: list[DataFrame]
) -> DataFrame:
    """(host, sibling_pages, sibling_hosts, sibling_links) of every host whose
    pages of the segment have links (``trawl.crawldb.budgets.farm_like``):
    its pages with followed links, the other hosts of its registered domain
    the operator did not name (``trusted_hosts``) that they link but for a
    menu's (linked from more than half of the pages), and the (page, such
    host) pairs. Cheap where nothing links a sibling: the pairs
    are found by SQL on the links' last two labels, confirmed by the
    registered domain, and crawldb is read only for the hosts so linked.
    The pairs are kept (``materialize``) and added to ``held``, for the
    caller to ``release`` once the result is written."""
    pages = sources.filter(
        (F.col("kind") == "page")
        & (F.col("outcome") == "success")
        & (F.size(F.coalesce(F.col("outlinks"), F.array())) > 0)
    )
    links = (
        pages.select("host", "url", F.explode("outlinks").alias("l"))
        .filter(~F.coalesce(F.col("l.nofollow"), F.lit(False)))
        .select("host", "url", F.expr("lower(parse_url(l.url, 'HOST'))").alias("dst"))
        .filter(F.col("dst").isNotNull() & (F.col("dst") != F.col("host")))
        # a host of the same registered domain shares at least its last two labels
        .filter(F.substring_index("dst", ".", -2) == F.substring_index("host", ".", -2))
        .distinct()
    )
    hosts = links.select("host", "dst").distinct()

    def same_domain(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            if registered_domain(row["host"]) == registered_domain(row["dst"]):
                yield row

    siblings = materialize(map_records(hosts, same_domain, SIBLING_SCHEMA))
    held.append(siblings)
    linked = sorted({r["dst"] for r in siblings.select("dst").distinct().collect()})
    per_host = pages.groupBy("host").agg(F.countDistinct("url").cast("int").alias("sibling_pages"))
    if not linked:
        return per_host.withColumn("sibling_hosts", F.lit(0)).withColumn("sibling_links", F.lit(0))
    buckets = {host_bucket(h, ctx.cfg.crawl.host_buckets) for h in linked}
    named, _ = trusted_hosts(crawldb.filter(f"host_bucket IN {sql_in(buckets)}"))
    unnamed = siblings.join(named.withColumnRenamed("host", "dst"), "dst", "left_anti")
    # a menu names its siblings on more than half of the pages: left out
    per_sibling = (
        links.join(unnamed, ["host", "dst"], "left_semi")
        .groupBy("host", "dst")
        .agg(F.count("*").alias("n"))
        .join(per_host, "host")
        .filter(F.col("n") * 2 <= F.col("sibling_pages"))
    )
    counted = per_sibling.groupBy("host").agg(
        F.count("*").alias("sibling_hosts"), F.sum("n").cast("int").alias("sibling_links")
    )
    return (
        per_host.join(counted, "host", "left")
        .withColumn("sibling_hosts", F.coalesce("sibling_hosts", F.lit(0)).cast("int"))
        .withColumn("sibling_links", F.coalesce("sibling_links", F.lit(0)))
    )
