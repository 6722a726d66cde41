"""URLs as the crawler sees them: resolution and normalisation (RFC 3986),
the keys derived from a URL, the cheap string filters, and the session-id
parameters learned per host.

The bottom layer: pure functions of strings, imported by everything above
and importing nothing of trawl's (not even the config)."""
