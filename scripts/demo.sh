#!/usr/bin/env bash
# Sets up what the demo needs (scripts/setup.sh demo), exports a small CNN to a .kiln file, runs it
# from Python, then builds examples/cpp/hello with find_package(kiln), runs the same file from C++,
# and says whether the two runs agree.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh demo
out=build/demo
mkdir -p "$out"
"$PYTHON" examples/python/demo.py "$out"
cmake -S examples/cpp/hello -B "$out/hello" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$("$PYTHON" -m kiln --cmakedir)" >/dev/null
cmake --build "$out/hello" >/dev/null
echo "--- C++ (examples/cpp/hello, linked with kiln::runtime) ---"
env -u LD_LIBRARY_PATH "$out/hello/hello" "$out/model.kiln" --input "$out/input.bin" | tee "$out/cpp.txt"
# The C++ program prints float32 values with 9 significant digits, which read back exactly.
"$PYTHON" - "$out/output.bin" "$out/cpp.txt" <<'PY'
import sys
import numpy as np
python = np.fromfile(sys.argv[1], np.float32)
line = next(l for l in open(sys.argv[2]) if l.strip().startswith("values"))
cpp = np.array([float(v) for v in line.split()[1:] if v != "..."], np.float32)
same = np.array_equal(cpp, python[:cpp.size])
print(f"verdict: Python and C++ {'agree' if same else 'DIFFER'} "
      f"({cpp.size} of {python.size} values compared, max difference {np.abs(cpp - python[:cpp.size]).max():.3g})")
sys.exit(0 if same else 1)
PY
