#!/usr/bin/env bash
# The long form of the service's load tests (TESTING.md load cases 1 and 8):
# saturation at twice capacity and a steady run, each for SECONDS (default
# 60), with RSS sampled throughout. Usage: bench/serve_soak.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
EDGERUN_SOAK_SECONDS=${1:-60} EDGERUN=${EDGERUN:-build/edgerun} \
  .venv/bin/python -W ignore::ResourceWarning tests/serve/test_load.py -v Saturation
