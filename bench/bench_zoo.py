"""The real models of tests/zoo through kiln, beside eager PyTorch, in one process.

    python bench/bench_zoo.py [--threads N] [--repeat R] [names ...]

For each model: export time, file size, operator count, load time (program +
method), and the median latency of one call in eager PyTorch and in kiln on the
same inputs, with the ratio kiln / torch (below 1: kiln is faster). The SmolLM2
calls are a prefill of a chat prompt and a single-token decode step (the KV
cache is reset before each timed call so every call does the same work).
"""

from __future__ import annotations

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
from zoo import minilm, smollm2, vision  # noqa: E402

NAMES = ("minilm", "smollm2", "mobilenet_v3_small", "efficientnet_like")


def median_seconds(fn, repeat: int, before=None) -> float:
    if before:
        before()
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        if before:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cases(name: str, image: int = vision.INPUT_SHAPE[-1]):
    """(model, example inputs, export kwargs, [(label, inputs, reset)]) for a zoo model
    (vision models, including "resnet18", on 1 x 3 x image x image)."""
    if name == "minilm":
        model = minilm.load_minilm()
        ids, mask = minilm.encode_inputs("kiln exports PyTorch models and runs them on the CPU.")
        seq = torch.export.Dim("seq", max=128)
        long_ids = torch.randint(1000, 30000, (1, 128))
        return model, (ids, mask), {"dynamic_shapes": ({1: seq}, {1: seq})}, [
            (f"S={ids.shape[1]}", (ids, mask), None),
            ("S=128", (long_ids, torch.ones_like(long_ids)), None)]
    if name == "smollm2":
        model = smollm2.load_smollm2(capacity=128)
        tok = smollm2.load_tokenizer()
        prompt = torch.tensor([tok.chat_prompt("What is the capital of France?")])
        tokens = torch.export.Dim("tokens", max=128)
        n = prompt.shape[1]
        return model, (prompt, torch.arange(n)), {"dynamic_shapes": ({1: tokens}, {0: tokens})}, [
            (f"prefill T={n}", (prompt, torch.arange(n)), True),
            ("decode T=1", (prompt[:, :1], torch.tensor([n])), False)]
    model, x = vision.build(name, shape=(1, 3, image, image))
    return model, (x,), {}, [(f"{list(x.shape)}", (x,), None)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("names", nargs="*", default=list(NAMES))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kiln.set_num_threads(args.threads)
    print(f"threads={args.threads} repeat={args.repeat} torch={torch.__version__} kiln={kiln.__version__}")
    header = (f"{'model':20} {'export s':>8} {'file MB':>8} {'ops':>4} {'instr':>6} {'load ms':>8}  "
              f"{'call':16} {'torch ms':>9} {'kiln ms':>9} {'kiln/torch':>10}")
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            model, example, kwargs, calls = cases(name)
            path = Path(tmp) / f"{name}.kiln"
            start = time.perf_counter()
            report = export(model, example, path, **kwargs)
            export_s = time.perf_counter() - start
            start = time.perf_counter()
            method = kiln.load(path).load_method("forward")
            load_ms = (time.perf_counter() - start) * 1e3
            info = report.methods["forward"]
            for i, (label, inputs, reset) in enumerate(calls):
                arrays = [t.numpy() for t in inputs]
                # A decode step runs after a prefill has filled the cache; reset=True
                # starts every timed prefill from an empty cache (eager and kiln alike).
                eager_reset = (lambda: smollm2.reset_cache(model)) if reset else None
                kiln_reset = method.reset_state if reset else None
                with torch.no_grad():
                    t_torch = median_seconds(lambda: model(*inputs), args.repeat, eager_reset)
                t_kiln = median_seconds(lambda: method(*arrays), args.repeat, kiln_reset)
                lead = (f"{name:20} {export_s:8.2f} {report.file_size / 1e6:8.1f} {len(info.operators):4d} "
                        f"{info.num_instructions:6d} {load_ms:8.1f}") if i == 0 else " " * 59
                print(f"{lead}  {label:16} {t_torch * 1e3:9.2f} {t_kiln * 1e3:9.2f} {t_kiln / t_torch:10.2f}")
            method = None  # its arenas go before the next model loads


if __name__ == "__main__":
    main()
