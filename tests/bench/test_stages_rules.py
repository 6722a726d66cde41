"""bench_stages reads Spark's rule times from ``RuleExecutor.dumpTimeSpent``:
the total and the costliest rules by name, seconds and runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_stages import top_rules

# the layout Spark 4's RuleExecutor prints (nanoseconds and runs: effective / total)
DUMP = "\n".join(
    [
        "=== Metrics of Analyzer/Optimizer Rules ===",
        "Total number of runs: 138438",
        "Total time: 6.158924118 seconds",
        "",
        "Rule    Effective Time / Total Time    Effective Runs / Total Runs",
        "",
        "org.apache.spark.sql.catalyst.analysis.Analyzer$ResolveReferences"
        "   195067756 / 525895004     320 / 1048",
        "org.apache.spark.sql.catalyst.analysis.DeduplicateRelations"
        "   199933645 / 991424640     40 / 1048",
        "org.apache.spark.sql.catalyst.optimizer.PruneFilters   0 / 304867014   0 / 268",
    ]
)


def test_the_costliest_rules_come_first_with_their_runs() -> None:
    got = top_rules(DUMP, top=2)
    assert got["total_s"] == 6.158924118
    assert got["top"] == [
        {"rule": "DeduplicateRelations", "s": 0.991, "effective_s": 0.2, "runs": 1048,
         "effective_runs": 40},
        {"rule": "Analyzer$ResolveReferences", "s": 0.526, "effective_s": 0.195, "runs": 1048,
         "effective_runs": 320},
    ]  # fmt: skip


def test_a_dump_without_rules_gives_no_total_and_none() -> None:
    assert top_rules("") == {"total_s": None, "top": []}
