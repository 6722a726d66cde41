"""Property-based fuzz tests of the parsers that face the open web (issue 30):
URL normalisation, robots.txt, sitemaps and HTML, WARC reading, the HTTP
client. ``properties.py`` says how they are run, here and in bench/bench_fuzz.py."""
