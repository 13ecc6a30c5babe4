#!/usr/bin/env bash
# Sets up, exports a small CNN to a .kiln file, runs it from Python, then builds
# examples/cpp/hello with find_package(kiln) and runs the same file from C++.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
out=build/demo
mkdir -p "$out"
"$PYTHON" examples/python/demo.py "$out"
cmake -S examples/cpp/hello -B "$out/hello" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$("$PYTHON" -m kiln --cmakedir)" >/dev/null
cmake --build "$out/hello" >/dev/null
echo "--- C++ (examples/cpp/hello, linked with kiln::runtime) ---"
env -u LD_LIBRARY_PATH "$out/hello/hello" "$out/model.kiln" --input "$out/input.bin"
