#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
# Run from the tests directory's parent but never import the source tree:
# tests/conftest.py checks that `kiln` comes from site-packages.
"$PYTHON" -m pytest tests "$@"
