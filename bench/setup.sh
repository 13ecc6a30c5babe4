#!/usr/bin/env bash
# Creates build/bench-venv (or $VENV) for bench/compare.py: the system Python's packages
# (torch 2.13.0, numpy, kiln) plus ONNX Runtime, the ONNX exporter's
# dependencies, threadpoolctl, ExecuTorch with its XNNPACK delegate and matplotlib
# (compare.py --plot), kept out of the test environment.
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
# executorch's wheel does not require torch, but torchao and its other requirements might
# ask for one: the constraint file holds pip to the torch that is installed, so pip fails
# rather than replace it.
TORCH_VERSION=$("$VENV/bin/python" -c "import torch; print(torch.__version__.split('+')[0])")
CONSTRAINTS=$(mktemp)
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==$TORCH_VERSION" >"$CONSTRAINTS"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$CONSTRAINTS" \
  onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2 threadpoolctl==3.8.0 \
  executorch==1.5.1 torchao==0.18.0 matplotlib==3.11.2
"$VENV/bin/python" -c "import torch, onnxruntime, onnxscript, threadpoolctl, executorch.runtime, matplotlib, kiln; \
from importlib.metadata import version; \
assert torch.__version__.startswith('$TORCH_VERSION'), torch.__version__; \
print('bench venv ready: torch', torch.__version__, 'onnxruntime', onnxruntime.__version__, \
'executorch', version('executorch'), 'matplotlib', matplotlib.__version__, 'kiln', kiln.__version__)"
echo "run: $VENV/bin/python bench/compare.py"
