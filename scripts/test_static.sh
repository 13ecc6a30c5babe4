#!/usr/bin/env bash
# G9: builds kiln with KILN_BUILD_SHARED=OFF into its own virtual environment
# (which sees the torch, numpy and pytest of the environment running it) and runs the Python suite
# there; tests of the shared runtime and C++ SDK are skipped, as reported.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
venv=build/static-venv
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
# The static venv sees the packages of the environment running this script
# (torch, pytest, ...), whether that is the system interpreter or a venv: a
# .pth file lists that environment's site directories. They come after the
# static venv's own, so its static kiln shadows the shared one.
"$PYTHON" -c "import sys; print('\n'.join(p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))))" \
  > "$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/kiln_test_parent_env.pth"
KILN_BUILD_SHARED=OFF "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --config-settings=build-dir=build/static \
  --force-reinstall --no-deps .
"$venv/bin/python" -m pytest tests "$@"
