#!/usr/bin/env bash
# Builds llama.cpp from PyPI's llama-cpp-python into build/llama-venv (never into
# the system Python) so that bench/llm.py can run it beside kiln:
#   bash bench/setup_llama_cpp.sh
#   build/llama-venv/bin/python bench/llm.py
# The venv sees the system's packages (torch, numpy, the installed kiln). The
# build compiles llama.cpp for this CPU; it takes minutes. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/llama-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  "$VENV/bin/pip" install "llama-cpp-python==0.3.36"
fi
"$VENV/bin/python" -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__)"
