"""What a fetched body says: the HTML page (links, canonical, robots meta,
text), its main text without the template, and sitemaps.

Pure functions of bytes. May import ``trawl.url`` and ``trawl.config``."""
