#!/usr/bin/env bash
# G9: builds kiln with KILN_BUILD_SHARED=OFF into its own virtual environment
# (which sees the system's torch, numpy and pytest) and runs the Python suite
# there; tests of the shared runtime and C++ SDK are skipped, as reported.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
venv=build/static-venv
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$venv"
KILN_BUILD_SHARED=OFF "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --config-settings=build-dir=build/static \
  --force-reinstall --no-deps .
"$venv/bin/python" -m pytest tests "$@"
