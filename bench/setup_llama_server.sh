#!/usr/bin/env bash
# Builds llama.cpp's HTTP server (`llama-server`, the CMake target of
# tools/server) from the llama.cpp sources vendored in PyPI's llama-cpp-python
# sdist, for bench/serve.py:
#   bash bench/setup_llama_server.sh           # -> build/bench/llama-server
#   JOBS=2 LLAMA_CPP_PYTHON=0.3.36 bash bench/setup_llama_server.sh
# Same version as bench/setup_llama_cpp.sh (the Python bindings bench/llm.py runs),
# so both benchmarks run the same llama.cpp.
#
# Built for this CPU (-DGGML_NATIVE=ON), Release, static, CPU backend only, at
# $JOBS parallel jobs (default 2: the machines are shared). The sdist has no web
# UI assets (tools/ui/dist) and the build may not download the prebuilt ones, so
# both UI options are off: the server then embeds an empty UI table and serves
# the API only, which is all the benchmark uses. No OpenSSL (loopback HTTP only),
# no libcurl. The first build took 28 min (14 min of CPU) at -j2 on a 2-core
# machine shared with other builds; ccache is used when present (CCACHE_DIR,
# default build/ccache).
#
# Prints the path and `llama-server --version` at the end. Idempotent: a second
# run rebuilds nothing that is up to date.
#
# If the server target cannot be built, bench/serve.py can fall back to
# llama-cpp-python's own server (`python -m llama_cpp.server`, installed by
# `pip install 'llama-cpp-python[server]'`); this script says so and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSION=${LLAMA_CPP_PYTHON:-0.3.36}
JOBS=${JOBS:-2}
OUT=$ROOT/build/bench
SRC=$OUT/src
BUILD=$OUT/llama-server-build
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$SRC"

SDIST_DIR=$SRC/llama_cpp_python-$VERSION
if [ ! -f "$SDIST_DIR/vendor/llama.cpp/CMakeLists.txt" ]; then
  if ! ls "$SRC"/llama_cpp_python-"$VERSION".tar.gz >/dev/null 2>&1; then
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$VERSION" -d "$SRC"
  fi
  tar xzf "$SRC/llama_cpp_python-$VERSION.tar.gz" -C "$SRC"
fi
LLAMA=$SDIST_DIR/vendor/llama.cpp
[ -f "$LLAMA/tools/server/CMakeLists.txt" ] || {
  echo "setup_llama_server: $LLAMA has no tools/server; fall back to llama_cpp.server" \
       "(pip install 'llama-cpp-python[server]==$VERSION')" >&2
  exit 1
}

launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$ROOT/build/ccache}
  mkdir -p "$CCACHE_DIR"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

start=$(date +%s)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$LLAMA" -B "$BUILD" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$OUT/llama-server-cmake.log" 2>&1 || {
    tail -30 "$OUT/llama-server-cmake.log" >&2
    echo "setup_llama_server: cmake failed (log: $OUT/llama-server-cmake.log); fall back to llama_cpp.server" >&2
    exit 1
  }
fi
if ! cmake --build "$BUILD" --target llama-server -j "$JOBS" >"$OUT/llama-server-build.log" 2>&1; then
  tail -30 "$OUT/llama-server-build.log" >&2
  echo "setup_llama_server: the llama-server target failed (log: $OUT/llama-server-build.log);" \
       "fall back to llama_cpp.server (pip install 'llama-cpp-python[server]==$VERSION')" >&2
  exit 1
fi
cp "$BUILD/bin/llama-server" "$OUT/llama-server.new" && mv "$OUT/llama-server.new" "$OUT/llama-server"
echo "llama-server (the llama-server target, not llama_cpp.server) from llama-cpp-python $VERSION's vendored" \
     "llama.cpp, -j$JOBS, GGML_NATIVE=ON, no web UI; this run's build step: $(( $(date +%s) - start )) s"
echo "$OUT/llama-server"
"$OUT/llama-server" --version 2>&1 | tail -2
