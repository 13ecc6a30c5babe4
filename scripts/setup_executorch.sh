#!/usr/bin/env bash
# Creates the venv in which scripts/opinfo_sweep.py --runtime executorch runs its workers:
# ExecuTorch 1.5.1 from PyPI, kept out of the project's environment (it brings torchao,
# coremltools and others, and its runtime aborts the process on some samples).
#   VENV=/work/venvs/et scripts/setup_executorch.sh    (the default VENV)
#   python scripts/opinfo_sweep.py --runtime executorch --python "$VENV/bin/python" --json et.json
# torch is pinned and installed first: that CPU build lies on the machines' disk, while an
# unpinned torch would pull a multi-GB CUDA build. executorch's wheel does not pin torch,
# so pip keeps this one; the sweep checks that the workers' torch is its own.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-/work/venvs/et}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" torch==2.13.0
# expecttest: torch.testing._internal (the OpInfo samples) imports it.
"${PIP[@]}" torch==2.13.0 executorch==1.5.1 expecttest==0.3.0 numpy==2.4.6
"$VENV/bin/python" -c "import torch, executorch.runtime, expecttest, importlib.metadata as m; \
print('executorch venv ready: torch', torch.__version__, 'executorch', m.version('executorch'))" 2>/dev/null
