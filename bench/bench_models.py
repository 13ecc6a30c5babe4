"""Median latency of one call of the small test models, eager PyTorch beside kiln, in one process.

    python bench/bench_models.py [--threads N] [--repeat R] [mlp] [cnn] [encoder]

What it runs: the models of tests/models.py (random weights, seed 0), exported with
kiln.export into a temporary directory:

- mlp: three linear layers 32-64-64-10 with ReLU and Tanh, input float32 [4, 32];
- cnn: ResidualCNN, 3x3 convolutions (one dilated and grouped) with batch norm,
  max and average pooling, a residual add and a linear head, input float32 [2, 3, 32, 32];
- encoder: EncoderBlock, a pre-norm transformer encoder block (dim 64, 4 heads,
  attention through matmul + softmax, GELU MLP), input float32 [2, 16, 64].

What it compares: for each model, eager PyTorch (`model(*inputs)` under torch.no_grad)
and kiln (`Method.run` on the same inputs as numpy arrays), both at N threads
(torch.set_num_threads and kiln.set_num_threads, default 1). kiln serves each
instruction with the kernels its registry picks at load: the optimized tier where it
applies, the portable reference otherwise (KILN_KERNELS=portable forces the reference;
the header counts the instructions of each tier). Each runtime gets one warm-up call,
then R timed calls (default 30), torch's first, then kiln's; the table shows the
median of each and kiln / torch (below 1, kiln is faster). A single runtime's
timing is only as quiet as the machine: compare the ratio, not the milliseconds.
bench/compare.py is the benchmark against ONNX Runtime on real models.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
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


def tiers(method) -> str:
    """How many kernel instructions each tier serves, e.g. "optimized 9, portable 2"."""
    names = {0: "portable", 100: "optimized"}
    count = Counter(names.get(i.tier, f"tier {i.tier}") for i in method.instructions if i.kind == "kernel")
    return ", ".join(f"{tier} {n}" for tier, n in count.most_common()) or "no kernels"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads of torch and kiln (default 1)")
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per runtime and model (default 30)")
    parser.add_argument("names", nargs="*", default=["mlp", "cnn", "encoder"], help="models of tests/models.py")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    print(f"eager PyTorch vs kiln on the same inputs, median of {args.repeat} calls each after a warm-up "
          f"(torch's calls, then kiln's), {args.threads} thread(s) for both")
    print(f"torch {torch.__version__}, kiln {kiln.__version__}, ISA {kiln.detected_isa()}, "
          f"KILN_KERNELS={os.environ.get('KILN_KERNELS', '(unset)')}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        methods = {}
        for name in args.names:
            model, inputs, kwargs = models.build(name)
            path = Path(tmp) / f"{name}.kiln"
            export(model, inputs, path, **kwargs)
            methods[name] = (model, inputs, kiln.load(path).method("forward"))
            shapes = ", ".join("x".join(map(str, t.shape)) + f" {t.dtype}".replace("torch.", "") for t in inputs)
            print(f"  {name}: {type(model).__name__}, input {shapes}; kiln kernels: {tiers(methods[name][2])}")
        print(f"{'model':10} {'torch ms':>10} {'kiln ms':>10} {'kiln/torch':>11}")
        for name, (model, inputs, method) in methods.items():
            arrays = [t.numpy() for t in inputs]
            with torch.no_grad():
                t_torch = median_seconds(lambda: model(*inputs), args.repeat)
            t_kiln = median_seconds(lambda: method.run(*arrays), args.repeat)
            print(f"{name:10} {t_torch * 1e3:10.3f} {t_kiln * 1e3:10.3f} {t_kiln / t_torch:11.2f}")


if __name__ == "__main__":
    main()
