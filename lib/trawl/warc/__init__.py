"""WARC 1.1 files: the writer the fetch tasks append to, the reader and
checker, CDXJ indexes, and getting records back out by reference or for an
export.

Pure record building and framing. May import ``trawl.url`` and
``trawl.config``."""
