#!/usr/bin/env bash
# Creates build/bench-venv (or $VENV) for bench/compare.py: the system Python's packages
# (torch 2.13.0, numpy, kiln) plus ONNX Runtime, the ONNX exporter's
# dependencies and threadpoolctl, kept out of the test environment.
# VENV=/path/to/venv adds them to an existing --system-site-packages venv instead, e.g. one
# that holds a development install of kiln, so that the benchmark runs that kiln.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-build/bench-venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
# torch is deliberately absent: the system's torch==2.13.0 (CPU) is seen through
# --system-site-packages; asking pip for torch could pull a multi-GB CUDA build.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2 threadpoolctl==3.8.0
"$VENV/bin/python" -c "import torch, onnxruntime, onnxscript, threadpoolctl, kiln; \
print('bench venv ready: torch', torch.__version__, 'onnxruntime', onnxruntime.__version__, 'kiln', kiln.__version__)"
echo "run: $VENV/bin/python bench/compare.py"
