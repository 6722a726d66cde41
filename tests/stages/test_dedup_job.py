"""The dedup job on a crawl directory: contents, pairs, marking, unfollowed
links, idempotent re-runs, and a duplicate restored when its content moves.

The crawldb and the segment's fetch table are written directly (the rows a
fetch and updatedb would leave), so the test is about dedup alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trawl.config import load_config
from trawl.crawldb.admission import admit, url_filter
from trawl.dedup.simhash import to_signed

pytestmark = pytest.mark.crawl  # Spark crawls of the test web

T1 = datetime(2026, 3, 1, tzinfo=UTC)
S1, S2 = "20260301T000000Z", "20260302T000000Z"
X = to_signed(0x0123_4567_89AB_CDEF)
STORY = "https://a.example/story"
COPY = "http://b.example/copy"  # byte-identical to STORY
NEAR = "https://c.example/near"  # 2 bits from STORY's simhash
OTHER = "https://d.example/other"
SHORT = "https://e.example/short"  # too little text for a simhash
ONLY_DUP = "http://b.example/only-from-the-copy"
SHARED = "http://b.example/shared"


def crawldb_row(url: str, cfg: Any, **fields: Any) -> dict[str, Any]:
    row, _ = admit(url, cfg, url_filter(cfg), source="outlink", depth=1, score=1.0,
                   at=T1, segment=S1)  # fmt: skip
    assert row is not None
    return {**row, **fields}


def page(url: str, sha: str, simhash: int | None, score: float = 1.0) -> dict[str, Any]:
    return {"url": url, "sha": sha, "simhash": simhash, "score": score}


PAGES = [
    page(STORY, "A", X, score=2.0),
    page(COPY, "A", X),
    page(NEAR, "C", X ^ 0b101),
    page(OTHER, "D", to_signed(0xFFFF_0000_FFFF_0000)),
    page(SHORT, "E", None),
]
LINKS = {COPY: [ONLY_DUP, SHARED], OTHER: [SHARED]}


def write_crawl(spark: Any, root: str, cfg: Any, pages: list[dict[str, Any]], segment: str,
                at: datetime, fresh: bool) -> None:  # fmt: skip
    from trawl.store.schemas import CRAWLDB_SCHEMA, FETCH_SCHEMA
    from trawl.store.tables import ensure_all, table_path, write_segment_table

    ensure_all(spark, root)
    fetch, crawl = [], []
    for p in pages:
        fields = {"status": "fetched", "content_sha256": p["sha"], "simhash": p["simhash"],
                  "score": p["score"], "last_fetch_at": at, "modified_at": at,
                  "last_segment": segment}  # fmt: skip
        base = crawldb_row(p["url"], cfg, **fields)
        crawl.append(base)
        links = [{"url": u, "anchor": "", "nofollow": False} for u in LINKS.get(p["url"], [])]
        fetch.append({k: base.get(k) for k in ("url", "url_fp", "host", "host_bucket", "depth")}
                     | {"kind": "page", "outcome": "success", "http_status": 200,
                        "fetched_at": at, "content_sha256": p["sha"], "simhash": p["simhash"],
                        "warc_file": "w.warc.gz", "warc_offset": 0, "warc_length": 100,
                        "text_words": 300, "outlinks": links, "score": p["score"]})  # fmt: skip
    if fresh:
        crawl += [crawldb_row(u, cfg, discovered_segment=segment) for u in (ONLY_DUP, SHARED)]
        spark.createDataFrame(crawl, CRAWLDB_SCHEMA).write.format("delta").mode("append").save(
            table_path(root, "crawldb")
        )
    else:  # a later segment: update the rows of the pages it fetched
        from delta.tables import DeltaTable

        new = spark.createDataFrame(crawl, CRAWLDB_SCHEMA)
        (DeltaTable.forPath(spark, table_path(root, "crawldb")).alias("t")
         .merge(new.alias("s"), "t.url = s.url")
         .whenMatchedUpdate(set={c: f"s.{c}" for c in
                                 ("content_sha256", "simhash", "last_segment", "modified_at")})
         .execute())  # fmt: skip
    write_segment_table(spark.createDataFrame(fetch, FETCH_SCHEMA), root, segment, "fetch")


def crawldb(spark: Any, root: str) -> dict[str, dict[str, Any]]:
    from trawl.store.tables import read_table

    cols = ["url", "status", "duplicate_of", "score"]
    return {
        r["url"]: r.asDict() for r in read_table(spark, root, "crawldb").select(*cols).collect()
    }


@pytest.fixture(scope="module")
def first_segment(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Any, dict[str, Any]]:
    """One crawl for the module (dedup jobs are slow to start): the tests
    below read it, and the last two run further jobs on it, in file order."""
    from trawl.runner import JobContext, run_dedup

    cfg = load_config(None, ['dedup.method="simhash"'], environ={})  # nodes by simhash
    root = str(tmp_path_factory.mktemp("dedup") / "crawl")
    write_crawl(spark, root, cfg, PAGES, S1, T1, fresh=True)
    result = run_dedup(JobContext(spark, cfg, root, S1, T1))
    return root, cfg, result


def test_exact_and_near_copies_point_at_the_canonical_page(
    spark: Any, first_segment: tuple[str, Any, dict[str, Any]]
) -> None:
    root, _, result = first_segment
    rows = crawldb(spark, root)
    assert rows[COPY]["status"] == rows[NEAR]["status"] == "duplicate"
    assert rows[COPY]["duplicate_of"] == rows[NEAR]["duplicate_of"] == STORY
    assert rows[COPY]["score"] == pytest.approx(0.1)  # recrawls lose priority
    for url in (STORY, OTHER, SHORT):
        assert rows[url]["status"] == "fetched" and rows[url]["duplicate_of"] is None
    assert rows[STORY]["score"] == pytest.approx(2.0)
    assert result["dedup/duplicates/marked"] == 2
    assert result["dedup/contents/new"] == 4
    assert result["dedup/pairs/new"] == 1


def test_contents_and_pairs_are_stored(
    spark: Any, first_segment: tuple[str, Any, dict[str, Any]]
) -> None:
    from trawl.store.tables import read_table

    root, _, _ = first_segment
    content = {r["content_sha256"]: r for r in read_table(spark, root, "content").collect()}
    assert sorted(content) == ["A", "C", "D", "E"]
    assert content["A"]["url"] in (STORY, COPY) and content["A"]["first_segment"] == S1
    assert content["E"]["node"] == "c:E" and content["A"]["node"] == f"s:{X}"
    pairs = [r.asDict() for r in read_table(spark, root, "neardup").collect()]
    assert [(p["a"], p["b"], p["distance"]) for p in pairs] == [
        (*sorted((f"s:{X}", f"s:{X ^ 0b101}")), 2)
    ]


def test_links_only_a_duplicate_gave_are_not_followed(
    spark: Any, first_segment: tuple[str, Any, dict[str, Any]]
) -> None:
    root, _, result = first_segment
    rows = crawldb(spark, root)
    assert ONLY_DUP not in rows
    assert SHARED in rows  # a page that is no duplicate links to it too
    assert result["dedup/links/unfollowed"] == 1


def test_events_carry_duplicate_of_and_warc_refs_once(
    spark: Any, first_segment: tuple[str, Any, dict[str, Any]]
) -> None:
    from trawl.runner import JobContext, run_events
    from trawl.store.tables import table_path

    root, cfg, _ = first_segment
    ctx = JobContext(spark, cfg, root, S1, T1)
    assert run_events(ctx) == {"segment": S1, "events/crawl.fetched": 5}
    path = table_path(root, "events")
    feed = spark.read.format("delta").option("readChangeFeed", "true")
    inserted = feed.option("startingVersion", 0).load(path).collect()
    by_url = {r["url"]: r for r in inserted}
    assert {r["_change_type"] for r in inserted} == {"insert"} and len(inserted) == 5
    assert by_url[COPY]["duplicate_of"] == STORY and by_url[COPY]["status"] == "duplicate"
    assert by_url[STORY]["duplicate_of"] is None and by_url[STORY]["checksum"] == "A"
    assert by_url[OTHER]["out_links"] == [SHARED]
    assert by_url[STORY]["warc_ref"]["file"] == "w.warc.gz"
    import pyarrow as pa
    from deltalake import DeltaTable  # docs/events.md's consumer, without a JVM

    cdf = pa.table(DeltaTable(path).load_cdf(starting_version=0).read_all()).to_pylist()
    assert sorted(r["url"] for r in cdf) == sorted(by_url)

    def latest() -> int:
        return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).first()[0])

    version = latest()
    run_events(ctx)  # a re-run inserts nothing: the feed has nothing new
    if latest() > version:
        assert feed.option("startingVersion", version + 1).load(path).count() == 0
    assert spark.read.format("delta").load(path).count() == 5


def test_rerun_changes_nothing(spark: Any, first_segment: tuple[str, Any, dict[str, Any]]) -> None:
    from trawl.runner import JobContext, run_dedup
    from trawl.store.tables import read_table

    root, cfg, result = first_segment
    before = crawldb(spark, root)
    tables = {n: read_table(spark, root, n).count() for n in ("content", "neardup")}
    again = run_dedup(JobContext(spark, cfg, root, S1, T1))
    assert crawldb(spark, root) == before
    assert {n: read_table(spark, root, n).count() for n in ("content", "neardup")} == tables
    assert again["dedup/pairs/new"] == result["dedup/pairs/new"]
    assert again["dedup/duplicates/marked"] == 0  # already marked


def test_a_page_whose_content_moved_away_is_restored(
    spark: Any, first_segment: tuple[str, Any, dict[str, Any]]
) -> None:
    from trawl.runner import JobContext, run_dedup

    root, cfg, _ = first_segment
    at = T1 + timedelta(days=1)
    changed = [page(NEAR, "C2", to_signed(0x5555_5555_0000_0000))]
    write_crawl(spark, root, cfg, changed, S2, at, fresh=False)
    result = run_dedup(JobContext(spark, cfg, root, S2, at))
    rows = crawldb(spark, root)
    assert rows[NEAR] == {"url": NEAR, "status": "fetched", "duplicate_of": None,
                          "score": pytest.approx(1.0)}  # fmt: skip
    assert rows[COPY]["duplicate_of"] == STORY  # untouched
    assert result["dedup/duplicates/restored"] == 1
