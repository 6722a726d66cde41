"""Talking to the web: the HTTP client with its hard limits, content codings,
HTTP dates, the resolver with its SSRF guard, and robots.txt (RFC 9309).

Per-request logic with no Spark and no table in sight. May import
``trawl.url`` and ``trawl.config``."""
