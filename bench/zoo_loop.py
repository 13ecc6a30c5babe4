"""One zoo model call in a loop, for a profiler: where does the time go per kernel?

    python bench/zoo_loop.py NAME [--call I] [--repeat R] [--kernels portable|optimized] [--dir DIR]
                             [--image N] [--threads N]
    python bench/zoo_loop.py --row ROW --dir DIR [--repeat R] [--kernels ...] [--threads N]

Exports NAME (a bench_zoo.py model, or resnet18; vision models on a 1x3xNxN image, default 224
as in compare.py) to DIR/NAME[-N].kiln once (later runs reuse the file and its inputs), loads it,
and runs call I (bench_zoo's calls: MiniLM S=17 and S=128; SmolLM2 prefill and decode; one input
for the CNNs) R times on N threads (default 1), printing the median. With --row,
runs a row of compare.py instead, from the files `compare.py --keep DIR` left in DIR (the model's
.kiln and ROW.npz: the row's inputs, and the prefill a decode row runs once first). Under perf,
with the unstripped runtime of the build directory preloaded so that kernels have their names:

    LD_PRELOAD=build/venv-<you>/libkiln.so.0 perf record -e cpu-clock -c 250000 -- \\
        python bench/zoo_loop.py smollm2 --call 1 --repeat 40
    perf report -n --no-children --sort symbol

(-c 250000: one sample per 0.25 ms of CPU time, so samples * 0.25 / (R + 1) is CPU ms per call;
CPU time, unlike wall time, does not count waiting for a CPU on a shared machine.) To count the
timed calls only (not the import, export, load and packing, nor the warm-up call or a decode row's
prefill), let perf start disabled and this script switch it on around the timed calls:

    mkfifo /tmp/ctl /tmp/ack
    LD_PRELOAD=... perf record -e cpu-clock -c 250000 -D -1 --control fifo:/tmp/ctl,/tmp/ack -- \
        python bench/zoo_loop.py --row smollm2_decode --dir DIR --repeat 40 --perf-ctl /tmp/ctl,/tmp/ack

(then samples * 0.25 / R is CPU ms per call).
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import kiln


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", nargs="?")
    parser.add_argument("--row", help="a compare.py row (minilm_16, smollm2_decode, ...) from DIR")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--perf-ctl", metavar="CTL,ACK",
                        help="perf's --control fifos: enable the events for the timed calls only")
    parser.add_argument("--call", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--kernels", default="optimized", choices=("portable", "optimized"))
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kiln-zoo-loop"))
    parser.add_argument("--image", type=int, default=224, help="image size of the vision models")
    args = parser.parse_args()
    kiln.set_num_threads(args.threads)
    if args.row:
        return run_compare_row(args)
    if not args.name:
        parser.error("give a model NAME or --row ROW")
    vision = args.name not in ("minilm", "smollm2")
    stem = f"{args.name}-{args.image}" if vision else args.name
    path, saved = args.dir / f"{stem}.kiln", args.dir / f"{stem}.inputs.pkl"
    if not path.exists() or not saved.exists():
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_zoo

        from kiln.export import export

        model, example, kwargs, calls = bench_zoo.cases(args.name, args.image)
        args.dir.mkdir(parents=True, exist_ok=True)
        export(model, example, path, **kwargs)
        with open(saved, "wb") as f:
            pickle.dump([(label, [t.numpy() for t in inputs], reset) for label, inputs, reset in calls], f)
    with open(saved, "rb") as f:
        label, arrays, reset = pickle.load(f)[args.call]
    method = kiln.load(path, kernels=args.kernels).load_method("forward")
    run_loop(method, arrays, [] if not reset else None, f"{args.name} {label}", args)


def run_compare_row(args) -> None:
    model = args.row.rsplit("_", 1)[0] if args.row.startswith("minilm") else args.row.split("_")[0]
    saved = np.load(args.dir / f"{args.row}.npz")
    arrays = [saved[f"in{i}"] for i in range(sum(k.startswith("in") for k in saved.files))]
    prefix = [saved[f"pre{i}"] for i in range(sum(k.startswith("pre") for k in saved.files))]
    method = kiln.load(args.dir / f"{model}.kiln", kernels=args.kernels).load_method("forward")
    run_loop(method, arrays, prefix if prefix else [], args.row, args)


def run_loop(method, arrays, prefix, label: str, args) -> None:
    """Runs method(*arrays) once to warm up, then args.repeat timed times. Before each call it
    resets the state if prefix is None; a non-empty prefix runs once first, after a reset."""
    if prefix:
        method.reset_state()
        method(*prefix)
    if prefix is None:
        method.reset_state()
    method(*arrays)  # warm-up
    perf = PerfControl(args.perf_ctl)
    perf.send("enable")
    times = []
    for _ in range(args.repeat):
        if prefix is None:
            method.reset_state()
        start = time.perf_counter()
        method(*arrays)
        times.append(time.perf_counter() - start)
    perf.send("disable")
    print(f"{label} {args.kernels}, {args.threads} thread(s): median {statistics.median(times) * 1e3:.2f} ms "
          f"over {args.repeat} calls (wall time)")


class PerfControl:
    """Writes commands to `perf record --control fifo:CTL,ACK` and waits for each ack."""

    def __init__(self, fifos: str | None):
        self.ctl = self.ack = None
        if fifos:
            ctl, ack = fifos.split(",")
            self.ctl, self.ack = open(ctl, "w"), open(ack)

    def send(self, command: str) -> None:
        if self.ctl is not None:
            self.ctl.write(command + "\n")
            self.ctl.flush()
            self.ack.readline()


if __name__ == "__main__":
    main()
