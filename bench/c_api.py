"""What a call costs through the C API (kiln/c_api.h) beside the C++ API and Python: ns per call of
a tiny method (a 4-float add, where the call is all there is) and of the MLP of tests/models.py.

    python bench/c_api.py [--seconds 0.2] [--rounds 3]

bench/c_api_bench.cpp is built against the installed wheel (`kiln --includes`, `kiln --libs`) and
times, in one process on zero inputs, the C API with outputs copied into caller tensors, the C API
with kiln-allocated outputs (allocated and freed per call), and C++ `Method::run` (views, no
copy); a Python worker times `method(*inputs)` (numpy in, numpy out). One pool thread. CPU time per
call, median of batches; the ratios to C++ are the result, the absolute numbers vary with the
machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PYTHON_WORKER = r"""
import sys, time
import numpy as np
import kiln

kiln.set_num_threads(1)
method = kiln.load(sys.argv[1]).method("forward")
inputs = [np.zeros(s.shape, s.dtype) for s in method.input_specs]
seconds = float(sys.argv[2])
per_call = []
for _ in range(5):
    calls, c0, t0 = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        method(*inputs)
        calls += 1
    per_call.append((time.process_time() - c0) / calls)
per_call.sort()
print(f"python_method_call {per_call[2] * 1e9:.0f}")
"""


def export_programs(out: Path) -> dict:
    import torch

    sys.path.insert(0, str(REPO / "tests"))
    from kiln.export import export

    import models

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    paths = {"add (4 floats)": out / "add.kiln", "mlp [4, 32]": out / "mlp.kiln"}
    x = torch.ones(4)
    export(Add(), (x, x), paths["add (4 floats)"])
    model, inputs, kwargs = models.build("mlp")
    export(model, inputs, paths["mlp [4, 32]"], **kwargs)
    return paths


def build(out: Path) -> Path:
    import kiln

    exe = out / "c_api_bench"
    subprocess.run(["c++", "-O2", "-std=c++17", f"-I{kiln.include_dir()}", f"-I{REPO / 'bench'}",
                    str(REPO / "bench" / "c_api_bench.cpp"), "-o", str(exe), kiln.library_path(),
                    f"-Wl,-rpath,{kiln.lib_dir()}"], check=True)
    return exe


def parse(stdout: str) -> dict:
    return {name: float(value) for name, value in (line.split() for line in stdout.splitlines() if line.strip())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.2, help="length of one batch of calls")
    parser.add_argument("--rounds", type=int, default=3, help="worker runs per program, alternating C/C++ and Python")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        exe = build(out)
        programs = export_programs(out)
        print(f"{'program':16} {'C into caller':>14} {'C allocating':>13} {'C++ run':>9} {'Python':>9}   "
              "(ns per call; ratio to C++)")
        for label, path in programs.items():
            rows: dict = {}
            for _ in range(args.rounds):
                for cmd in ([str(exe), str(path), str(args.seconds)],
                            [sys.executable, "-c", PYTHON_WORKER, str(path), str(args.seconds)]):
                    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    for name, value in parse(proc.stdout).items():
                        rows.setdefault(name, []).append(value)
            m = {name: statistics.median(values) for name, values in rows.items()}
            cpp = m["cpp_method_run"]
            cells = [f"{m[k]:>6.0f} ({m[k] / cpp:4.2f})" for k in
                     ("c_into_caller_tensors", "c_kiln_allocated_outputs", "cpp_method_run", "python_method_call")]
            print(f"{label:16} {cells[0]:>14} {cells[1]:>13} {cells[2]:>9} {cells[3]:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
