"""Tests for trawl.crawldb.packing: host groups onto fetch tasks (LPT) and the per-host cap."""

from __future__ import annotations

import itertools
import random

import pytest

from trawl.crawldb.packing import assign_tasks

Groups = list[tuple[str, float]]


def loads(groups: Groups, assignment: dict[str, int], tasks: int) -> list[float]:
    out = [0.0] * tasks
    for key, cost in groups:
        out[assignment[key]] += max(cost, 0.0)
    return out


def optimum(groups: Groups, tasks: int) -> float:
    """Smallest possible makespan, by brute force (small tables only)."""
    costs = [max(c, 0.0) for _, c in groups]
    best = float("inf")
    for combo in itertools.product(range(tasks), repeat=len(costs)):
        per = [0.0] * tasks
        for task, cost in zip(combo, costs, strict=True):
            per[task] += cost
        best = min(best, max(per))
    return best


TABLES: dict[str, tuple[Groups, int]] = {
    "graham-worst-case": ([("a", 5), ("b", 5), ("c", 4), ("d", 4), ("e", 3), ("f", 3), ("g", 3)],
                          3),
    "one-big-many-small": ([("big", 100.0)] + [(f"s{i}", 1.0) for i in range(8)], 3),
    "equal": ([(f"g{i}", 2.0) for i in range(9)], 3),
    "skewed": ([("a", 7), ("b", 6), ("c", 5), ("d", 4), ("e", 3), ("f", 2), ("g", 1)], 2),
    "more-tasks-than-groups": ([("a", 3.0), ("b", 2.0)], 4),
    "one-task": ([("a", 3.0), ("b", 2.0), ("c", 0.5)], 1),
    "zero-and-negative-cost": ([("a", 0.0), ("b", -4.0), ("c", 2.0), ("d", 2.0)], 2),
    "random": ([(f"r{i}", c) for i, c in enumerate(random.Random(3).sample(range(1, 60), 9))], 3),
}  # fmt: skip


@pytest.mark.parametrize("name", list(TABLES))
def test_every_group_assigned_to_a_valid_task(name: str) -> None:
    groups, tasks = TABLES[name]
    out = assign_tasks(groups, tasks)
    assert set(out) == {key for key, _ in groups}
    assert all(0 <= task < tasks for task in out.values())


@pytest.mark.parametrize("name", list(TABLES))
def test_loads_within_the_lpt_bound(name: str) -> None:
    groups, tasks = TABLES[name]
    per_task = loads(groups, assign_tasks(groups, tasks), tasks)
    opt = optimum(groups, tasks)
    # Graham 1969: LPT's makespan is at most (4/3 - 1/(3m)) x optimal ...
    assert max(per_task) <= (4 / 3 - 1 / (3 * tasks)) * opt + 1e-9
    # ... and never more than the average load plus the largest group.
    largest = max(max(c, 0.0) for _, c in groups)
    assert max(per_task) <= sum(per_task) / tasks + largest + 1e-9


@pytest.mark.parametrize(
    ("groups", "tasks", "expected"),
    [
        # longest first, each to the least-loaded task, ties to the lower task id
        ([("a", 5), ("b", 4), ("c", 3), ("d", 3), ("e", 3)], 2,
         {"a": 0, "b": 1, "c": 1, "d": 0, "e": 1}),
        ([("x", 1), ("y", 1), ("z", 1)], 3, {"x": 0, "y": 1, "z": 2}),  # equal: by name
        ([("z", 1), ("y", 1), ("x", 1)], 3, {"x": 0, "y": 1, "z": 2}),
        ([("a", 3), ("b", 3), ("c", 3), ("d", 3)], 2, {"a": 0, "b": 1, "c": 0, "d": 1}),
        ([("small", 1), ("big", 10), ("mid", 5)], 2, {"big": 0, "mid": 1, "small": 1}),
        ([], 3, {}),
    ],
)  # fmt: skip
def test_assignment_table(groups: Groups, tasks: int, expected: dict[str, int]) -> None:
    assert assign_tasks(groups, tasks) == expected


def test_graham_worst_case_is_the_known_lpt_schedule() -> None:
    groups, tasks = TABLES["graham-worst-case"]
    per_task = loads(groups, assign_tasks(groups, tasks), tasks)
    # LPT gives 11 on this instance where 9 is optimal: exactly the 4/3 - 1/9 bound.
    assert max(per_task) == 11
    assert optimum(groups, tasks) == 9


@pytest.mark.parametrize("name", list(TABLES))
def test_deterministic_whatever_the_input_order(name: str) -> None:
    groups, tasks = TABLES[name]
    first = assign_tasks(groups, tasks)
    for seed in range(5):
        shuffled = list(groups)
        random.Random(seed).shuffle(shuffled)
        assert assign_tasks(shuffled, tasks) == first
    assert assign_tasks(iter(groups), tasks) == first  # any iterable


def test_more_tasks_than_groups_spreads_them_out() -> None:
    out = assign_tasks([("a", 3.0), ("b", 2.0), ("c", 1.0)], 5)
    assert len(set(out.values())) == 3


@pytest.mark.parametrize("tasks", [0, -1, -10])
def test_tasks_below_one_raise(tasks: int) -> None:
    with pytest.raises(ValueError, match="tasks must be >= 1"):
        assign_tasks([("a", 1.0)], tasks)
