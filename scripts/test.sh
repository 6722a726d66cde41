#!/usr/bin/env bash
# The test command: set up if needed (idempotent), then lint, type-check and
# run the whole suite. CI runs exactly this (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check lib jobs tests bench airflow_dags
.venv/bin/ruff format --check lib jobs tests bench airflow_dags
.venv/bin/mypy
.venv/bin/pytest -q "$@"
