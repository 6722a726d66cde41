"""Checks of the code base itself, run by the test suite (``imports``: the
layering rule). Nothing here is imported by the crawler."""
