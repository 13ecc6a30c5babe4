#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test against the installed package:
# first the normal build (shared libkiln.so.0), then the static build (G9).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
# tests/conftest.py refuses to run against the source tree: `kiln` must come
# from the installed package.
"$PYTHON" -m pytest tests "$@"
bash scripts/test_static.sh "$@"
