"""Spreading host groups over fetch tasks so every task takes about as long.

A host group is the set of hosts that share an IP address (they share one
politeness clock, so they must be fetched by one task). Its expected duration
is what its politeness gaps force: the sum over its URLs of the host's gap.
Assigning groups to tasks is multiprocessor scheduling; the longest-
processing-time-first greedy rule (Graham 1969) is within 4/3 of optimal and
runs in O(n log n), which is plenty for the fetch-list sizes we generate.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


def assign_tasks(groups: Iterable[tuple[str, float]], tasks: int) -> dict[str, int]:
    """``{group: task}``: each group, longest first, to the least-loaded task."""
    if tasks < 1:
        raise ValueError("tasks must be >= 1")
    loads = [(0.0, task) for task in range(tasks)]
    heapq.heapify(loads)
    out: dict[str, int] = {}
    for key, cost in sorted(groups, key=lambda g: (-g[1], g[0])):
        load, task = heapq.heappop(loads)
        out[key] = task
        heapq.heappush(loads, (load + max(cost, 0.0), task))
    return out
