#!/usr/bin/env bash
# The test command: set up if needed (idempotent), then lint, type-check and
# run the whole suite. CI runs exactly this (see .ci/run).
#
# pytest runs the test files on parallel workers (pytest-xdist), one file's
# tests on one worker so a module's crawl fixture runs once: a crawl is
# mostly one core of driver work (planning, Delta's log, Python) and waits
# on politeness delays, so two workers on two cores take about a quarter
# off the suite (docs/benchmarks.md, "The test suite"). Each worker has its
# own Spark session, 2 GB of heap; hence one worker a core, at most four.
# TRAWL_TEST_WORKERS sets the number (0: one process, as plain pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check lib jobs tests bench airflow_dags
.venv/bin/ruff format --check lib jobs tests bench airflow_dags
.venv/bin/mypy
cores=$(nproc 2>/dev/null || echo 1)
workers=${TRAWL_TEST_WORKERS:-$((cores < 4 ? cores : 4))}
.venv/bin/pytest -q -n "$workers" --dist loadfile "$@"
