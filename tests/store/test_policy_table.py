"""The policy table is shared by deltalake (operator commands, fetch tasks) and
Spark (generate, ``trawl sql``): each must read and append what the other made."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    TimestampType,
)

from trawl.crawldb.policy import PolicyRule, RuleChange
from trawl.store.policy import POLICY_ARROW_SCHEMA, PolicyStore, load_in_force
from trawl.store.schemas import POLICY_SCHEMA
from trawl.store.tables import ensure_table, read_table, table_path

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
WHO = {"set_by": "alice", "reason": "too many 503s"}
ARROW_OF_SPARK: list[tuple[type[DataType], Any]] = [
    (StringType, pa.string()),
    (BooleanType, pa.bool_()),
    (DoubleType, pa.float64()),
    (IntegerType, pa.int32()),
    (TimestampType, pa.timestamp("us", tz="UTC")),
]


def arrow_type(dtype: DataType) -> Any:
    return next(arrow for spark, arrow in ARROW_OF_SPARK if type(dtype) is spark)


def test_arrow_schema_is_the_policy_schema() -> None:
    spark_cols = [(f.name, arrow_type(f.dataType), f.nullable) for f in POLICY_SCHEMA.fields]
    arrow_cols = [(f.name, f.type, f.nullable) for f in POLICY_ARROW_SCHEMA]
    assert arrow_cols == spark_cols


def spark_rows(spark: Any, root: str) -> list[dict[str, Any]]:
    """Rows as Spark reads them, timestamps as UTC microseconds (no local-zone guessing)."""
    df = read_table(spark, root, "policy")
    cols = [
        F.unix_micros(c).alias(c) if c in ("paused_until", "set_at") else F.col(c)
        for c in df.columns
    ]
    return [r.asDict() for r in df.select(*cols).orderBy("set_at").collect()]


def micros(when: datetime | None) -> int | None:
    return (
        None
        if when is None
        else round((when - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))
    )


def as_spark_row(rule: PolicyRule) -> dict[str, Any]:
    row = rule.as_row()
    return {**row, "paused_until": micros(rule.paused_until), "set_at": micros(rule.set_at)}


def test_table_made_by_deltalake_is_read_and_appended_by_spark(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path)
    store = PolicyStore(root)
    block = store.set(
        "host", "a.example.com", RuleChange(blocked=True, min_delay_s=2.5), at=T0, **WHO
    )
    change = RuleChange(paused_until=T0 + timedelta(hours=2), max_pages_per_cycle=7)
    pause = store.set("domain", "example.com", change, at=T0 + timedelta(seconds=1), **WHO)

    assert ensure_table(spark, root, "policy") == table_path(root, "policy")  # schema accepted
    assert spark_rows(spark, root) == [as_spark_row(block), as_spark_row(pause)]

    later = T0 + timedelta(minutes=5)
    row = ("host", "a.example.com", "unblock", False, 2.5, None, None, "spark", later, "fixed")
    spark.createDataFrame([row], POLICY_SCHEMA).write.format("delta").mode("append").save(
        table_path(root, "policy")
    )
    unblock = load_in_force(root)[("host", "a.example.com")]
    assert unblock == PolicyRule(*row[:8], set_at=later, reason="fixed")  # type: ignore[arg-type]
    assert [r.action for r in store.rules()] == ["set", "set", "unblock"]
    # and deltalake appends again after Spark's commit
    slower = store.set("host", "a.example.com", RuleChange(min_delay_s=9.0), at=later, **WHO)
    assert (slower.blocked, slower.min_delay_s, slower.set_at) == (
        False,
        9.0,
        later + timedelta(microseconds=1),
    )
    assert spark_rows(spark, root)[-1] == as_spark_row(slower)


def test_table_made_by_spark_is_appended_by_deltalake(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path)
    ensure_table(spark, root, "policy")
    rule = PolicyStore(root).set(
        "host", "b.example.com", RuleChange(max_pages_per_cycle=0), at=T0, **WHO
    )
    assert spark_rows(spark, root) == [as_spark_row(rule)]
    assert load_in_force(root) == {("host", "b.example.com"): rule}
