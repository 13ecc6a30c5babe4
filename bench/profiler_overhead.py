"""What the profiler and the per-Method turn cost: kiln calls with the profiler
off, the same calls with it on, and (with --baseline) the same calls of another
kiln installation, e.g. one built before the profiler existed.

    python bench/profiler_overhead.py
    python bench/profiler_overhead.py --baseline /path/to/other/venv/bin/python

Each measurement runs in a fresh worker process of the interpreter under test
(the installed kiln there), which times `--calls` back-to-back calls and
reports the median per call; workers of the two interpreters alternate, round
by round, so both meet the same machine load. The table gives the median over
rounds and the ratio to this installation with the profiler off.

Models: a 4-float add (the Python call overhead) and the encoder block of
tests/models.py (instruction-level work); --program adds any .kiln file (its
random inputs as `kiln run` makes them). Off means what every caller gets: no
Profile, so the executor and the pool each test one pointer per instruction or
chunk.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, sys, time
import numpy as np
import kiln

path, calls, profiled = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
kiln.set_num_threads(1)
method = kiln.load(path).method("forward")
rng = np.random.default_rng(0)
inputs = [rng.standard_normal(s.shape).astype(s.dtype) if s.dtype.startswith("float") else np.zeros(s.shape, s.dtype)
          for s in method.input_specs]
for _ in range(max(10, calls // 10)):
    method(*inputs)
times = []
for _ in range(calls):
    start = time.perf_counter()
    if profiled:
        method.profile(*inputs)
    else:
        method(*inputs)
    times.append(time.perf_counter() - start)
times.sort()
print(json.dumps({"median": times[len(times) // 2]}))
"""


def export_models(out: Path) -> dict:
    import torch

    sys.path.insert(0, str(REPO / "tests"))
    from kiln.export import export

    import models

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    paths = {"add (4 floats)": out / "add.kiln", "encoder block": out / "encoder.kiln"}
    x = torch.ones(4)
    export(Add(), (x, x), paths["add (4 floats)"])
    model, inputs, kwargs = models.build("encoder")
    export(model, inputs, paths["encoder block"], **kwargs)
    return paths


def measure(python: str, path: Path, calls: int, profiled: bool) -> float:
    proc = subprocess.run([python, "-c", WORKER, str(path), str(calls), "1" if profiled else "0"],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])["median"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="another interpreter whose installed kiln is the baseline")
    parser.add_argument("--program", type=Path, action="append", default=[], help="more .kiln files to measure")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement (fewer for big models)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        paths = export_models(Path(tmp))
        for p in args.program:
            paths[p.name] = p
        columns = [("off", sys.executable, False), ("on", sys.executable, True)]
        if args.baseline:
            columns.insert(0, ("baseline", args.baseline, False))
        print(f"{'model':<16}" + "".join(f"{name:>14}" for name, _, _ in columns) +
              ("   off/baseline" if args.baseline else "") + "   on/off")
        for label, path in paths.items():
            calls = args.calls if "add" in label else max(50, args.calls // 10)
            results = {name: [] for name, _, _ in columns}
            for r in range(args.rounds):
                order = columns[r % len(columns):] + columns[:r % len(columns)]
                for name, python, profiled in order:
                    results[name].append(measure(python, path, calls, profiled))
            med = {name: statistics.median(v) for name, v in results.items()}
            row = f"{label:<16}" + "".join(f"{med[name] * 1e6:>11.2f} us" for name, _, _ in columns)
            if args.baseline:
                row += f"   {med['off'] / med['baseline']:>13.3f}"
            row += f"   {med['on'] / med['off']:>6.2f}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
