"""One zoo model call in a loop, for a profiler: where does the time go per kernel?

    python bench/zoo_loop.py NAME [--call I] [--repeat R] [--kernels portable|optimized] [--dir DIR]
                                  [--image N] [--threads T]

Exports NAME (a bench_zoo.py model, or resnet18; vision models on a 1x3xNxN image, default 224
as in compare.py) to DIR/NAME[-N].kiln once (later runs reuse the file and its
inputs), loads it, and runs call I (bench_zoo's calls: MiniLM S=17 and S=128; SmolLM2 prefill and
decode; one input for the CNNs) R times on T threads (default 1), printing the median. Under
perf, with the unstripped runtime of the build directory preloaded so that kernels have their names:

    LD_PRELOAD=build/venv-<you>/libkiln.so.0 perf record -e cpu-clock -c 250000 -- \\
        python bench/zoo_loop.py smollm2 --call 1 --repeat 40
    perf report -n --no-children --sort symbol

(-c 250000: one sample per 0.25 ms of CPU time, so samples * 0.25 / (R + 1) is CPU ms per call;
CPU time, unlike wall time, does not count waiting for a CPU on a shared machine.)
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path

import kiln


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--call", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--kernels", default="optimized", choices=("portable", "optimized"))
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kiln-zoo-loop"))
    parser.add_argument("--image", type=int, default=224, help="image size of the vision models")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
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
    kiln.set_num_threads(args.threads)
    method = kiln.load(path, kernels=args.kernels).load_method("forward")
    times = []
    for _ in range(args.repeat + 1):
        if reset:
            method.reset_state()
        start = time.perf_counter()
        method(*arrays)
        times.append(time.perf_counter() - start)
    print(f"{args.name} {label} {args.kernels}: median {statistics.median(times[1:]) * 1e3:.2f} ms "
          f"over {args.repeat} calls (wall time)")


if __name__ == "__main__":
    main()
