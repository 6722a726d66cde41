"""``trawl catalog``: the crawl's tables registered in the session catalog
(``trawl.store.catalog``), and the ``spark-sql`` command line that sees them."""

from __future__ import annotations

import shlex
from typing import Any

from trawl.runner.common import JobContext, say
from trawl.store.catalog import register_crawl
from trawl.store.session import spark_sql_command


def run_catalog(ctx: JobContext) -> dict[str, Any]:
    """Register (idempotently) every table of the crawl in its database."""
    done = register_crawl(ctx.spark, ctx.files, ctx.cfg.catalog.database)
    db = done["database"]
    query = f"SELECT status, count(*) FROM {db}.crawldb GROUP BY 1"
    command = [*spark_sql_command(ctx.cfg, ctx.files.s3 is not None), "-e", query]
    say(f"catalog: database {db}; query it with\n  {shlex.join(command)}")
    return {**done, "made": ",".join(done["made"]), "kept": ",".join(done["kept"])}
