"""Telling copies apart: simhash, the main-text fingerprints (simhash and
MinHash), the near-duplicate search keys, and soft 404s (a 2xx page that is a
copy of its host's not-found page).

Pure per-record logic; the Spark join is ``trawl.stages.dedup``. May import
``trawl.url`` and ``trawl.config``."""
