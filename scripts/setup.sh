#!/usr/bin/env bash
# One-time setup on a fresh machine: a virtualenv in .venv with trawl and its
# dependencies (among the dev ones moto's S3 server, for the object-store
# tests, and py-wacz, whose `wacz validate` checks `trawl export wacz`), the
# Delta Lake and S3A jars in jars/lib/ (fetched with Maven once, then loaded
# from disk by every Spark session), pywb in .venv-pywb for the replay test,
# Airflow in .venv-airflow for the DAG test, and Debian's chromium with
# ReplayWeb.page's viewer (.replaywebpage/) for the browser tests. Safe to run
# again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# Headless Chromium (Debian's package), for the browser tests: the report's
# page (tests/test_crawlreport.py) and archived pages replayed by pywb
# (tests/warc/test_browser_replay.py, tests/stages/test_requisites.py,
# driven over the DevTools protocol by tests/browser.py). Installed once, as
# root or through sudo.
if ! command -v chromium > /dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q chromium || {
    $SUDO apt-get update -q && $SUDO apt-get install -y -q chromium
  }
fi

# ReplayWeb.page (Webrecorder's in-browser WACZ viewer, AGPL-3.0, used by the
# tests only), for archived pages replayed from a WACZ the way its readers
# open one (tests/warc/replaywebpage.py): of npm's package only the built
# ui.js and sw.js, and its LICENSE, in .replaywebpage/. The tarball must have
# the sha512 pinned beside the version (npm's integrity for it, in hex); the
# marker names the version, so changing RWP_VERSION (and RWP_SHA512 with it)
# fetches again.
RWP_VERSION=2.5.3
RWP_SHA512=9c28f63d238ddc1c5e489284f00b183f250bbf45cf64a2567f2e25f4fc90adef52ab02d9f9629956cfec7cba8f390e06ac7fb46248dbc0e86bf1c4931f4f20b1
if [ "$(cat .replaywebpage/.installed 2>/dev/null)" != "replaywebpage@$RWP_VERSION" ] \
   || [ ! -s .replaywebpage/ui.js ] || [ ! -s .replaywebpage/sw.js ]; then
  command -v npm > /dev/null || { echo "setup: ReplayWeb.page needs npm (Node.js)" >&2; exit 1; }
  rwp_tmp=$(mktemp -d)
  trap 'rm -rf "$rwp_tmp"' EXIT
  (cd "$rwp_tmp" && npm pack --silent "replaywebpage@$RWP_VERSION" > /dev/null)
  rwp_tgz="$rwp_tmp/replaywebpage-$RWP_VERSION.tgz"
  echo "$RWP_SHA512  $rwp_tgz" | sha512sum --check --quiet - || {
    echo "setup: replaywebpage@$RWP_VERSION is not the tarball RWP_SHA512 pins" >&2; exit 1;
  }
  tar -xzf "$rwp_tgz" -C "$rwp_tmp" package/ui.js package/sw.js package/LICENSE
  rm -rf .replaywebpage
  mkdir .replaywebpage
  mv "$rwp_tmp"/package/{ui.js,sw.js,LICENSE} .replaywebpage/
  echo "replaywebpage@$RWP_VERSION" > .replaywebpage/.installed
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c 'import trawl, pyspark, delta, pytest, xdist, boto3, moto, wacz, websocket' 2>/dev/null \
   || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  touch .venv/.installed
fi

# The marker holds the pom's checksum: a changed pom fetches the jars again.
jars_sum=$(sha256sum jars/pom.xml | cut -d' ' -f1)
if [ "$(cat jars/lib/.complete 2>/dev/null)" != "$jars_sum" ]; then
  rm -rf jars/lib jars/all
  mvn -q -B -f jars/pom.xml dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$PWD/jars/all"
  # Keep only what pyspark does not already ship: two copies of one library
  # (jackson, hadoop, parquet, scala) on one classpath is a classic Spark crash.
  spark_jars=$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  mkdir -p jars/lib
  for jar in jars/all/*.jar; do
    name=$(basename "$jar" .jar | sed -E 's/-[0-9][^-]*(-[0-9]+)?$//')
    if ! compgen -G "$spark_jars/${name}-[0-9]*" > /dev/null; then
      cp "$jar" jars/lib/
    fi
  done
  rm -rf jars/all
  echo "$jars_sum" > jars/lib/.complete
fi

# pywb, for tests/warc/test_pywb_replay.py, in a virtualenv of its own: it pins
# redis, werkzeug and gevent, and its brotlipy installs a `brotli` module over
# the Brotli that trawl decodes with. The marker names the version, so changing
# PYWB_VERSION here rebuilds it.
PYWB_VERSION=2.10.0
if [ "$(cat .venv-pywb/.installed 2>/dev/null)" != "pywb==$PYWB_VERSION" ] \
   || [ ! -x .venv-pywb/bin/wayback ]; then
  rm -rf .venv-pywb
  "$PY" -m venv .venv-pywb
  .venv-pywb/bin/pip install -q --disable-pip-version-check "pywb==$PYWB_VERSION"
  echo "pywb==$PYWB_VERSION" > .venv-pywb/.installed
fi

# Airflow 3, for airflow_dags/ and tests/airflow_dags/test_crawl_cycle.py, in a
# virtualenv of its own: its pins (sqlalchemy, pydantic, fastapi, ...) are not
# ours, and the DAG runs trawl through .venv/bin/trawl (local mode) or
# spark-submit (cluster mode), so trawl is not installed here. Airflow's
# constraints files live outside the package registry, so the two packages are
# pinned and pip resolves the rest. The marker names the versions.
AIRFLOW_PINS="apache-airflow==3.3.2 apache-airflow-providers-apache-spark==6.3.4"
if [ "$(cat .venv-airflow/.installed 2>/dev/null)" != "$AIRFLOW_PINS" ] \
   || [ ! -x .venv-airflow/bin/airflow ]; then
  rm -rf .venv-airflow
  "$PY" -m venv .venv-airflow
  # shellcheck disable=SC2086  # the pins are two words on purpose
  .venv-airflow/bin/pip install -q --disable-pip-version-check $AIRFLOW_PINS
  echo "$AIRFLOW_PINS" > .venv-airflow/.installed
fi

# The driver JVM's class archive (trawl.store.classcache): Spark's classes
# mapped at every JVM start instead of read from the jars. Written once per
# JVM and set of jars, by one small crawl on loopback; trawl runs without it.
if ! .venv/bin/python -m trawl.devtools.classcache; then
  echo "setup: no class archive; trawl starts its JVM without one"
fi

echo "setup: .venv, .venv-pywb, .venv-airflow, .replaywebpage and jars/lib ready ($(ls jars/lib/*.jar | wc -l) jars)"
