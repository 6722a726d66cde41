"""The crawl's state, record by record: statuses and the one transition
table, what a fetch does to a URL's row, change rates and revisit times, a
host's row in hostdb, admission of a URL to the frontier, budgets against
traps, the operator's policy rules (``trawl policy``; their table is
``trawl.store.policy``), and packing host groups into fetch tasks.

Pure per-record logic, called by the Spark stages. May import ``trawl.url``,
``trawl.config``, ``trawl.net``, ``trawl.parse``, ``trawl.dedup`` and
``trawl.warc``."""
