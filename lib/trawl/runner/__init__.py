"""The jobs of the cycle, each: read its inputs, call the stage, write, count.

One small runner shared by the CLI (``trawl generate ...``, ``trawl cycle``)
and the spark-submit entry points in ``jobs/``; a module per job. Reading,
writing and MERGEs go through ``trawl.store``; the stages (``trawl.stages``)
only compute. Each job writes its counters (hierarchical names,
``fetch/outcome/success``) to the ``counters`` table under its segment,
replacing a previous run's, so ``trawl stats`` and SQL see them; counters
are written last, so "counted" means "finished".
"""

from __future__ import annotations

from trawl.runner.archive import run_export, run_wacz_export, run_warc_index
from trawl.runner.common import JobContext, say, segment_id
from trawl.runner.cycle import run_cycles
from trawl.runner.dedup import run_dedup
from trawl.runner.events import run_events
from trawl.runner.fetch import run_fetch
from trawl.runner.generate import run_generate
from trawl.runner.inject import run_inject
from trawl.runner.query import run_compact, run_sql, run_stats
from trawl.runner.updatedb import run_updatedb
from trawl.store.lake import QueryError

__all__ = [
    "JobContext",
    "QueryError",
    "run_compact",
    "run_cycles",
    "run_dedup",
    "run_events",
    "run_export",
    "run_fetch",
    "run_generate",
    "run_inject",
    "run_sql",
    "run_stats",
    "run_updatedb",
    "run_wacz_export",
    "run_warc_index",
    "say",
    "segment_id",
]
