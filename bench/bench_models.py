"""Latency of kiln's portable kernels beside eager PyTorch, in one process.

    python bench/bench_models.py [--threads N] [--repeat R]

Exports the test models (tests/models.py), then times eager PyTorch and kiln on
the same inputs, interleaved, and prints the median latency of each and the
ratio kiln / torch (below 1 means kiln is faster). Both use N threads.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import kiln
from kiln.export import export

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import models  # noqa: E402


def median_seconds(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("names", nargs="*", default=["mlp", "cnn", "encoder"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    print(f"threads={args.threads} repeat={args.repeat} torch={torch.__version__} kiln={kiln.__version__}")
    print(f"{'model':10} {'torch ms':>10} {'kiln ms':>10} {'kiln/torch':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            model, inputs, kwargs = models.build(name)
            path = Path(tmp) / f"{name}.kiln"
            export(model, inputs, path, **kwargs)
            method = kiln.load(path).method("forward")
            arrays = [t.numpy() for t in inputs]
            with torch.no_grad():
                t_torch = median_seconds(lambda: model(*inputs), args.repeat)
            t_kiln = median_seconds(lambda: method.run(*arrays), args.repeat)
            print(f"{name:10} {t_torch * 1e3:10.3f} {t_kiln * 1e3:10.3f} {t_kiln / t_torch:11.2f}")


if __name__ == "__main__":
    main()
