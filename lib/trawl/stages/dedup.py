"""dedup: exact copies and near-duplicates of a segment's pages, incrementally.

Runs after updatedb for a segment (``trawl dedup --segment S``):

1. **Contents.** The segment's successful page fetches with a body give
   (sha256, simhash or MinHash, WARC reference). Contents not yet in the
   ``content`` table are *new*; they are MERGEd into it (first URL, first
   segment, WARC reference).
2. **Pairs.** New fingerprints are joined against themselves and against the
   stored ones only -- never the whole store against itself -- on the keys of
   ``trawl.dedup.neardup`` (permuted blocks for simhash, LSH bands for MinHash), and
   the candidates checked exactly (popcount of the XOR <= ``max_distance``;
   estimated Jaccard >= ``minhash_threshold``). When the new side is small it
   is broadcast and the store is only scanned. When both sides are large the
   join is a shuffle, and a key shared by more than ``hot_key_rows`` rows
   (a template, an empty page) is *salted*: its rows on one side are spread
   over ``n / hot_key_rows`` sub-keys and the other side's rows copied to
   each, so one task never holds the whole key and no pair is lost. The pairs
   are written to the ``neardup`` table under the segment.
3. **Clusters** are the connected components of all pairs so far (min-label
   propagation; the pair graph is small next to the content table). Only the
   clusters the segment touched are revisited: those of its pages, and those
   whose canonical page it fetched.
4. **Marking.** Each touched cluster's canonical page is chosen by
   ``dedup.compare_order`` (``trawl.dedup.neardup.canonical_key``); the others get
   status ``duplicate`` and ``duplicate_of``, and their score is multiplied by
   ``score_factor`` (recrawls of duplicates lose priority); a page no longer
   in a cluster is restored. One MERGE into crawldb. URLs that only newly
   marked duplicates linked to in this segment are taken out of crawldb
   again (their outlinks are not followed), and updatedb skips the outlinks
   of a known duplicate refetched unchanged.

Re-running dedup for a segment gives the same tables: a content first seen in
this segment still counts as new for it, the segment's pairs are replaced, and
marking the same cluster twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from trawl.config import DedupConfig
from trawl.crawldb.status import HAS_CONTENT, CrawlStatus
from trawl.dedup.neardup import canonical_key, key_masks, marking
from trawl.stages.common import StageContext, map_records, materialize
from trawl.stages.updatedb import admitted_links, discovered_links
from trawl.store.tables import Merge

# New fingerprints up to this many are broadcast to a scan of the store; more
# (a first big batch, the benchmark) go through the salted shuffle join.
BROADCAST_NEW_ROWS = 100_000
MAX_LABEL_ROUNDS = 50
# The share of a join side's key rows sampled to find its hot keys
# (``salted_join``), and the sample's seed (the same split on every run).
HOT_SAMPLE = 0.05
HOT_SEED = 29
# The fetch columns a content keeps from its first fetch, earliest first.
FIRST_FETCH = ("fetched_at", "url", "host", "simhash", "minhash", "text_words",
               "warc_file", "warc_offset", "warc_length")  # fmt: skip
KEY = ["host_bucket", "url_fp", "url"]
MARK_SCHEMA = StructType(
    [
        StructField("url", StringType(), True),
        StructField("status", StringType(), True),
        StructField("duplicate_of", StringType(), True),
        StructField("score", DoubleType(), True),
    ]
)


@dataclass
class DedupReport:
    contents: int = 0
    new_contents: int = 0
    new_pairs: int = 0
    label_rounds: int = 0
    clusters: int = 0
    marked: int = 0
    restored: int = 0
    unfollowed: int = 0

    def counters(self) -> list[tuple[str, int]]:
        return [
            ("dedup/contents", self.contents),
            ("dedup/contents/new", self.new_contents),
            ("dedup/pairs/new", self.new_pairs),
            ("dedup/label_rounds", self.label_rounds),
            ("dedup/clusters/touched", self.clusters),
            ("dedup/duplicates/marked", self.marked),
            ("dedup/duplicates/restored", self.restored),
            ("dedup/links/unfollowed", self.unfollowed),
        ]


def node_column(method: str, simhash: str = "simhash", sha: str = "content_sha256") -> Column:
    """``trawl.dedup.neardup.node_id`` as a Spark expression."""
    by_content = F.concat(F.lit("c:"), F.col(sha))
    if method != "simhash":
        return by_content
    by_simhash = F.concat(F.lit("s:"), F.col(simhash).cast("string"))
    return F.when(F.col(simhash).isNotNull(), by_simhash).otherwise(by_content)


def segment_contents(fetch: DataFrame, ctx: StageContext) -> DataFrame:
    """One row per distinct content the segment fetched (CONTENT_SCHEMA)."""
    method = ctx.cfg.dedup.method
    pages = fetch.filter(
        (F.col("kind") == "page")
        & (F.col("outcome") == "success")
        & F.col("content_sha256").isNotNull()
        & ~F.coalesce(F.col("is_sitemap"), F.lit(False))
    )
    first = F.struct(*FIRST_FETCH)
    return (
        pages.groupBy("content_sha256")
        .agg(F.min(first).alias("f"))
        .select(
            "content_sha256",
            node_column(method, "f.simhash").alias("node"),
            *[f"f.{c}" for c in FIRST_FETCH[1:]],
            F.lit(ctx.at).cast("timestamp").alias("first_seen_at"),
            F.lit(ctx.segment).alias("first_segment"),
        )
    )


# --- candidate keys and the join ------------------------------------------------


def simhash_keys(nodes: DataFrame, dedup: DedupConfig) -> DataFrame:
    """(t, k, node, simhash): one row per table of ``trawl.dedup.neardup.key_masks``."""
    masks = key_masks(dedup.simhash_blocks, dedup.max_distance)
    keyed = F.array(*[
        F.struct(F.lit(t).alias("t"), F.col("simhash").bitwiseAND(F.lit(m)).alias("k"))
        for t, m in enumerate(masks)
    ])  # fmt: skip
    return (
        nodes.filter(F.col("simhash").isNotNull())
        .select(F.explode(keyed).alias("key"), "node", "simhash")
        .select("key.t", "key.k", "node", "simhash")
    )


def minhash_keys(nodes: DataFrame, dedup: DedupConfig) -> DataFrame:
    """(t, k, nid): one row per LSH band (a hash of the band's values), the
    node named by ``nid``, a 64-bit hash of its id. Neither the signature
    nor the id string is carried: a node has ``minhash_bands`` key rows, and
    copying a ``minhash_perm``-long array (or a 66-character id) into each
    would multiply what the join moves; the candidates get both back once
    they are paired (``_with_signatures``)."""
    rows = dedup.minhash_perm // dedup.minhash_bands
    keyed = F.array(*[
        F.struct(F.lit(t).alias("t"),
                 F.xxhash64(F.slice("minhash", t * rows + 1, rows)).alias("k"))
        for t in range(dedup.minhash_bands)
    ])  # fmt: skip
    return (
        nodes.filter(F.size("minhash") == dedup.minhash_perm)
        .select(F.explode(keyed).alias("key"), F.xxhash64("node").alias("nid"))
        .select("key.t", "key.k", "nid")
    )


def _side(keys: DataFrame, prefix: str) -> DataFrame:
    return keys.select("t", "k", *[F.col(c).alias(prefix + c) for c in keys.columns[2:]])


def salted_join(left: DataFrame, right: DataFrame, hot_key_rows: int) -> DataFrame:
    """Equi-join of key rows on (t, k), hot keys split over salts: a key with n
    rows on the right is spread over ceil(n / hot_key_rows) salts there and
    its left rows are copied to every salt, so each pair meets exactly once.

    The hot keys and their n are estimated from a ``HOT_SAMPLE`` share of the
    right side's rows, not counted over all of them (that would be one more
    shuffle of every key row): any salting gives the same pairs, and an
    estimate off by a few percent only moves the split a little. A key of
    ``hot_key_rows`` rows has about ``HOT_SAMPLE * hot_key_rows`` (100 at the
    defaults) in the sample."""
    sampled = right.sample(fraction=HOT_SAMPLE, seed=HOT_SEED)
    hot = (
        sampled.groupBy("t", "k")
        .agg((F.count("*") / HOT_SAMPLE).alias("n"))
        .filter(F.col("n") > hot_key_rows)
        .select("t", "k", F.ceil(F.col("n") / hot_key_rows).cast("int").alias("salts"))
    )
    salts = F.coalesce(F.col("salts"), F.lit(1))
    spread = F.xxhash64(*right.columns[2:])  # the row's node (its id, or hash, and fingerprint)
    r = right.join(F.broadcast(hot), ["t", "k"], "left").withColumn("salt", F.pmod(spread, salts))
    fan_out = F.explode(F.sequence(F.lit(0).cast("long"), (salts - 1).cast("long")))
    lft = left.join(F.broadcast(hot), ["t", "k"], "left").withColumn("salt", fan_out)
    return lft.drop("salts").join(r.drop("salts"), ["t", "k", "salt"])


def _verified(candidates: DataFrame, dedup: DedupConfig) -> DataFrame:
    """Candidates checked exactly: (a, b, method, distance, similarity), a < b."""
    if dedup.method == "simhash":
        distance = F.bit_count(F.col("a_simhash").bitwiseXOR(F.col("b_simhash")))
        checked = candidates.withColumn("distance", distance.cast("int")).filter(
            F.col("distance") <= dedup.max_distance
        )
        checked = checked.withColumn("similarity", F.lit(None).cast("double"))
    else:
        same = F.zip_with("a_minhash", "b_minhash", lambda x, y: (x == y).cast("int"))
        similarity = F.aggregate(same, F.lit(0), lambda acc, x: acc + x) / F.size("a_minhash")
        checked = candidates.withColumn("similarity", similarity).filter(
            F.col("similarity") >= dedup.minhash_threshold
        )
        checked = checked.withColumn("distance", F.lit(None).cast("int"))
    return checked.select(
        F.least("a_node", "b_node").alias("a"),
        F.greatest("a_node", "b_node").alias("b"),
        F.lit(dedup.method).alias("method"),
        "distance",
        "similarity",
    ).filter(F.col("a") != F.col("b"))


def near_pairs(
    new: DataFrame, stored: DataFrame | None, dedup: DedupConfig,
    broadcast_rows: int = BROADCAST_NEW_ROWS,
) -> DataFrame:  # fmt: skip
    """Pairs of distinct nodes within the threshold with at least one node in
    ``new``. Both frames have ``node`` and ``simhash`` / ``minhash``; ``new``
    has one row per node, ``stored`` holds no node of ``new``'s contents."""
    pairs = candidate_pairs(new, stored, dedup, broadcast_rows)
    if dedup.method == "minhash":
        pairs = _with_signatures(pairs, new, stored)
    return _verified(pairs, dedup).dropDuplicates(["a", "b"])


def candidate_pairs(
    new: DataFrame, stored: DataFrame | None, dedup: DedupConfig,
    broadcast_rows: int = BROADCAST_NEW_ROWS,
) -> DataFrame:  # fmt: skip
    """The wide first stage of ``near_pairs``: every two nodes sharing a
    search key, the first from ``new``; a pair sharing several keys is here
    once per key. Under simhash (a_node, a_simhash, b_node, b_simhash); under
    MinHash (a_nid, b_nid), the nodes' hashes (``minhash_keys``).

    The key rows of ``new`` and ``stored`` are one frame, each row flagged
    new or not, joined once with ``new``'s: up to ``broadcast_rows`` new
    nodes, their key rows are broadcast to one scan of all of them; above,
    the join is a shuffle with hot keys salted (``salted_join``)."""
    keys: Callable[[DataFrame, DedupConfig], DataFrame]
    keys = simhash_keys if dedup.method == "simhash" else minhash_keys
    new_keys = keys(new, dedup).withColumn("new", F.lit(True))
    every = new_keys
    if stored is not None:
        every = every.unionByName(keys(stored, dedup).withColumn("new", F.lit(False)))
    if new.count() <= broadcast_rows:
        joined = _side(every, "b_").join(F.broadcast(_side(new_keys, "a_")), ["t", "k"])
    else:
        joined = salted_join(_side(new_keys, "a_"), _side(every, "b_"), dedup.hot_key_rows)
    paired = [c for c in joined.columns if c.startswith(("a_", "b_")) and c[2:] != "new"]
    first, second = (c for c in paired if c.endswith(("_node", "_nid")))
    # a pair of two new nodes is found from both sides: kept once
    once = ~F.col("b_new") | (F.col(first) < F.col(second))
    return joined.filter(once).select(*paired)


def _with_signatures(candidates: DataFrame, new: DataFrame, stored: DataFrame | None) -> DataFrame:
    """Each MinHash candidate pair once, as (a_node, a_minhash, b_node,
    b_minhash): ``a_nid`` names a new node, ``b_nid`` a new or a stored one.

    Only the signatures of nodes in a candidate pair are joined: their ids
    (at most one per node, 8 bytes each) are broadcast to pick them out of
    ``new`` and ``stored``, so the join moves a signature per paired node
    rather than every node's. The pairs are computed once (a local
    checkpoint, freed with the frame). Two nodes whose ids hash alike (about one pair
    in 10**7 among a million nodes) both come back, and the check drops the
    wrong pairing."""
    # computed once here: the ids and both joins read it
    pairs = candidates.select("a_nid", "b_nid").distinct().localCheckpoint(eager=True)
    ids = pairs.select(F.col("a_nid").alias("nid")).unionByName(
        pairs.select(F.col("b_nid").alias("nid"))
    )
    signed = new.select("node", "minhash")
    if stored is not None:
        signed = signed.unionByName(stored.select("node", "minhash"))
    paired = signed.withColumn("nid", F.xxhash64("node")).join(
        F.broadcast(ids.distinct()), "nid", "left_semi"
    )
    a = paired.select(
        F.col("nid").alias("a_nid"),
        F.col("node").alias("a_node"),
        F.col("minhash").alias("a_minhash"),
    )
    b = paired.select(
        F.col("nid").alias("b_nid"),
        F.col("node").alias("b_node"),
        F.col("minhash").alias("b_minhash"),
    )
    return pairs.join(a, "a_nid").join(b, "b_nid").drop("a_nid", "b_nid")


# --- clusters ---------------------------------------------------------------------


def components(pairs: DataFrame) -> tuple[DataFrame, int]:
    """(node, label) for every node in a pair, label = the smallest node of its
    connected component (min-label propagation), and the rounds it took."""
    if pairs.isEmpty():
        return pairs.select(F.col("a").alias("node"), F.col("a").alias("label")), 0
    edges = pairs.select(F.col("a").alias("node"), F.col("b").alias("nb")).unionByName(
        pairs.select(F.col("b").alias("node"), F.col("a").alias("nb"))
    )
    edges = edges.localCheckpoint()
    labels = edges.groupBy("node").agg(F.least(F.first("node"), F.min("nb")).alias("label"))
    labels = labels.localCheckpoint()
    for rounds in range(1, MAX_LABEL_ROUNDS + 1):
        seen = labels.select(F.col("node").alias("nb"), F.col("label").alias("nl"))
        best = edges.join(seen, "nb").groupBy("node").agg(F.min("nl").alias("nl"))
        moved = (F.col("nl") < F.col("label")).alias("moved")
        step = (
            labels.join(best, "node")
            .select("node", F.least("label", "nl").alias("label"), moved)
            .localCheckpoint()
        )
        labels = step.select("node", "label")
        if step.filter("moved").isEmpty():
            return labels, rounds
    raise RuntimeError(f"dedup: clusters not settled after {MAX_LABEL_ROUNDS} rounds")


def content_pages(crawldb: DataFrame, method: str) -> DataFrame:
    """crawldb rows that hold content, with their graph node."""
    statuses = [s.value for s in HAS_CONTENT]
    return crawldb.filter(
        F.col("status").isin(statuses) & F.col("content_sha256").isNotNull()
    ).withColumn("node", node_column(method))


def touched_labels(
    pages: DataFrame, labels: DataFrame, fetched: DataFrame, new_pairs: DataFrame
) -> DataFrame:
    """Labels of the clusters this segment touched: those of the pages it
    fetched, of pages that named one of them as canonical, and of new pairs."""
    urls = fetched.select("url").distinct()
    mine = pages.join(urls, "url", "left_semi")
    named = pages.join(urls.withColumnRenamed("url", "duplicate_of"), "duplicate_of", "left_semi")
    nodes = (
        mine.select("node")
        .unionByName(named.select("node"))
        .unionByName(new_pairs.select(F.col("a").alias("node")))
    )
    with_label = nodes.distinct().join(labels, "node", "left")
    return with_label.select(F.coalesce("label", "node").alias("label")).distinct()


def markings(clusters: DataFrame, dedup: DedupConfig) -> DataFrame:
    """crawldb changes (url, status, duplicate_of, score) of touched clusters."""
    order, factor = dedup.compare_order, dedup.score_factor

    def fn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            members = sorted(row["pages"], key=lambda p: canonical_key(p, order))
            canonical = members[0]["url"] if len(members) > 1 else None
            for page in members:
                change = marking(page, None if page["url"] == canonical else canonical, factor)
                if change is not None:
                    yield {"url": page["url"], **change}

    return map_records(clusters, fn, MARK_SCHEMA)


def cluster_rows(pages: DataFrame, labels: DataFrame, touched: DataFrame) -> DataFrame:
    fetch_time = F.coalesce("modified_at", "last_fetch_at").alias("fetch_time")
    member = F.struct("url", "score", fetch_time, "status", "duplicate_of")
    labelled = pages.join(labels, "node", "left").withColumn("label", F.coalesce("label", "node"))
    return (
        labelled.join(F.broadcast(touched), "label", "left_semi")
        .groupBy("label")
        .agg(F.collect_list(member).alias("pages"))
    )


# --- the job ----------------------------------------------------------------------


@dataclass
class NewContents:
    """dedup's first step: the segment's contents, the new ones as a MERGE
    into ``content``, and their near-duplicate pairs (``neardup``'s rows of
    this segment). ``held``: frames to free at the end of the job."""

    fetch: DataFrame
    pairs: DataFrame
    neardup_rows: DataFrame
    content: Merge | None
    held: list[DataFrame]


def new_contents(
    fetch: DataFrame, content: DataFrame, ctx: StageContext, report: DedupReport
) -> NewContents:
    """The segment's contents (``fetch``: its fetch rows) against the stored
    ones of earlier segments (``content``), and the new ones' pairs."""
    cfg = ctx.cfg.dedup
    fetch = materialize(fetch)
    earlier = content.filter(F.col("first_segment") != ctx.segment)
    seen = earlier.select("content_sha256", F.lit(False).alias("is_new"))
    seg = segment_contents(fetch, ctx).join(seen, "content_sha256", "left")
    seg = materialize(seg.withColumn("is_new", F.coalesce("is_new", F.lit(True))))
    totals = seg.agg(F.count("*"), F.sum(F.col("is_new").cast("int"))).first()
    assert totals is not None
    report.contents, report.new_contents = totals[0], totals[1] or 0
    new = seg.filter("is_new").drop("is_new")
    # a node is one content under MinHash; under simhash several contents
    # can share one
    nodes = new.dropDuplicates(["node"]) if cfg.method == "simhash" else new
    pairs = materialize(near_pairs(nodes, earlier, cfg))
    report.new_pairs = pairs.count()
    cols = {c: f"s.{c}" for c in new.columns}
    merge = Merge("content", new, "t.content_sha256 = s.content_sha256", inserts=((None, cols),))
    rows = pairs.withColumn("segment", F.lit(ctx.segment))
    return NewContents(
        fetch, pairs, rows, merge if report.new_contents else None, [fetch, seg, pairs]
    )


def mark_duplicates(
    found: NewContents, neardup: DataFrame, crawldb: DataFrame, ctx: StageContext,
    report: DedupReport,
) -> tuple[Merge | None, list[DataFrame]]:  # fmt: skip
    """crawldb's changes for the clusters the segment touched, from every
    stored pair (``neardup``, this segment's included): a MERGE (None: no
    change), and the frames to free once it ran."""
    cfg = ctx.cfg.dedup
    labels, report.label_rounds = components(neardup)
    pages = materialize(content_pages(crawldb, cfg.method))
    touched = touched_labels(pages, labels, found.fetch.filter("kind = 'page'"), found.pairs)
    clusters = materialize(cluster_rows(pages, labels, touched))
    marks = materialize(markings(clusters, cfg).join(pages.select(*KEY), "url"))
    for row in marks.groupBy("status").count().collect():
        if row["status"] == CrawlStatus.DUPLICATE.value:
            report.marked = row["count"]
        else:
            report.restored += row["count"]
    report.clusters = clusters.filter(F.size("pages") > 1).count()
    held = [pages, clusters, marks]
    if not (report.marked or report.restored):
        return None, held
    cols = {c: f"s.{c}" for c in ("status", "duplicate_of", "score")}
    return Merge("crawldb", marks, ON_KEY, updates=((None, cols),)), held


ON_KEY = "t.host_bucket = s.host_bucket AND t.url_fp = s.url_fp AND t.url = s.url"


def unfollowed_links(fetch: DataFrame, crawldb: DataFrame, ctx: StageContext) -> DataFrame | None:
    """The URLs that this segment's updatedb added to crawldb only because a
    page now a duplicate linked to them (``crawldb`` as dedup marked it):
    they are still unfetched, ungenerated and discovered in this segment.
    Their keys (``removal`` deletes them); None when no page of the segment
    is a duplicate."""
    pages = fetch.filter("kind = 'page'")
    dups = crawldb.filter(F.col("duplicate_of").isNotNull()).join(
        pages.select("url"), "url", "left_semi"
    )
    dups = dups.select("url", F.lit(True).alias("dup"))
    if dups.isEmpty():
        return None
    tagged = pages.join(dups, "url", "left").withColumn("dup", F.coalesce("dup", F.lit(False)))
    raw = (
        tagged.select("dup", F.explode("outlinks").alias("l"))
        .filter(~F.coalesce(F.col("l.nofollow"), F.lit(False)))
        .select("dup", "l.url")
    )
    links = admitted_links(discovered_links(pages), ctx).filter(F.col("rejected").isNull())
    only = (
        links.join(raw.withColumnRenamed("url", "raw"), "raw")
        .groupBy(*KEY)
        .agg(F.min(F.col("dup").cast("int")).alias("only_dups"))
        .filter("only_dups = 1")
    )
    victims = (
        crawldb.filter(
            (F.col("discovered_segment") == ctx.segment)
            & (F.col("status") == CrawlStatus.UNFETCHED.value)
            & (F.col("source") == "outlink")
            & F.col("generated_segment").isNull()
            & (F.coalesce(F.col("fetches"), F.lit(0)) == 0)
        )
        .join(only, KEY, "left_semi")
        .select(*KEY)
    )
    return victims


def removal(urls: DataFrame) -> Merge:
    """The MERGE that deletes crawldb's rows of ``urls`` (their keys)."""
    return Merge("crawldb", urls, ON_KEY, delete_matched=True)
