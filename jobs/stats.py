"""spark-submit entry point: `spark-submit jobs/stats.py --crawl ROOT ...`.

Same arguments as `trawl stats`, on the Spark engine unless `--engine duckdb`
is given; the Spark master and resources come from spark-submit. The trawl
package ships to executors as a zip (`--py-files`; pyspark puts .zip files,
not wheels, on the executors' path), see README.md.
"""

from __future__ import annotations

import sys

from trawl.cli import main

if __name__ == "__main__":
    sys.exit(main(["stats", "--engine", "spark", *sys.argv[1:]], submitted=True))
