"""trawl: a polite batch web crawler for the data lake.

Nutch's generate -> fetch -> updatedb cycle on PySpark and Delta Lake. The
pure per-record logic lives in plain modules (no pyspark import) so it is
unit-tested without a JVM; ``trawl.stages`` holds the Spark transforms.
"""

__version__ = "0.1.0"
