"""SmolLM2-135M decode and prefill tokens per second: kiln with float32, int8 and the GGUF's own
4-bit weights, beside llama.cpp (llama-cpp-python) on the same GGUF file, at 1 and 2 threads.

    bash bench/setup.sh && build/bench-venv/bin/pip install llama-cpp-python   # llama.cpp, built from source
    build/bench-venv/bin/python bench/quantized.py [--tokens 64] [--rounds 5] [--threads 1 2]

Programs are exported once into build/bench-quantized/ (the zoo's SmolLM2 with a 256-position KV
cache and a dynamic token count): "float32" (the GGUF's weights dequantized), "int8"
(kiln.export.quantize "int8": q8_0 per output channel, embedding per row) and "gguf" (the file's
Q4_1 linear layers and Q8_0 embedding / tied output projection kept in their bits,
tests/zoo/smollm2_gguf.py). Each (runtime, program, threads) runs in a fresh subprocess: load, then
`rounds` times a prefill of `tokens` prompt tokens from position 0 followed by `tokens` greedy decode
steps; the table shows the medians over rounds (wall clock: the machine is shared, so a busy
machine shows up as noise in both runtimes alike), the ratio to llama.cpp on the same weights
(gguf: its Q4_1 file; int8: none, llama.cpp runs this file only) and the peak RSS growth of the
subprocess. llama.cpp runs with n_batch = tokens, n_ctx = 256, no mmap lock, its default flash
attention setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "build" / "bench-quantized"
CAPACITY = 256


def export_programs() -> dict:
    """{name: path} of the kiln programs, exported unless present and newer than the GGUF."""
    sys.path.insert(0, str(REPO / "tests"))
    from zoo import smollm2 as zoo

    gguf = zoo.gguf_path()
    WORK.mkdir(parents=True, exist_ok=True)
    paths = {name: WORK / f"smollm2-{name}.kiln" for name in ("float32", "int8", "gguf")}
    if all(p.exists() and p.stat().st_mtime > gguf.stat().st_mtime for p in paths.values()):
        return paths
    import torch
    from kiln.export import export
    from zoo import smollm2_gguf

    tokens = torch.export.Dim("tokens", max=CAPACITY)
    example = (torch.zeros(1, 4, dtype=torch.int64), torch.arange(4))
    dims = ({1: tokens}, {0: tokens})
    model = smollm2_gguf.load_smollm2_float(capacity=CAPACITY)
    export(model, example, paths["float32"], dynamic_shapes=dims)
    export(model, example, paths["int8"], dynamic_shapes=dims, quantize="int8")
    export(smollm2_gguf.load_smollm2_gguf(capacity=CAPACITY), example, paths["gguf"], dynamic_shapes=dims)
    return paths


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def child(spec: dict) -> dict:
    """One runtime, one program, one thread count: prefill and decode timings."""
    import numpy as np

    base = rss_kb()
    n, rounds = spec["tokens"], spec["rounds"]
    prompt = [int(t) for t in np.random.default_rng(0).integers(100, 40000, n)]
    prefill, decode = [], []
    if spec["runtime"] == "kiln":
        import kiln

        kiln.set_num_threads(spec["threads"])
        method = kiln.load(spec["path"]).method("forward")
        for _ in range(rounds):
            t0 = time.perf_counter()
            (logits,) = method(np.array([prompt]), np.arange(n))
            prefill.append(time.perf_counter() - t0)
            token, steps = int(logits[0, -1].argmax()), []
            for i in range(n):
                t0 = time.perf_counter()
                (logits,) = method(np.array([[token]]), np.array([n + i]))
                steps.append(time.perf_counter() - t0)
                token = int(logits[0, -1].argmax())
            decode.append(statistics.median(steps))
    else:
        from llama_cpp import Llama

        llm = Llama(model_path=spec["path"], n_ctx=CAPACITY, n_batch=n, n_threads=spec["threads"],
                    n_threads_batch=spec["threads"], verbose=False)
        for _ in range(rounds):
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(prompt)
            prefill.append(time.perf_counter() - t0)
            token, steps = int(np.argmax(llm.scores[llm.n_tokens - 1])), []
            for _ in range(n):
                t0 = time.perf_counter()
                llm.eval([token])
                steps.append(time.perf_counter() - t0)
                token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            decode.append(statistics.median(steps))
    return {"prefill_tps": n / statistics.median(prefill), "decode_tps": 1.0 / statistics.median(decode),
            "rss_mb": (rss_kb() - base) / 1024}


def run(spec: dict) -> dict | None:
    env = {**os.environ, "KILN_NUM_THREADS": str(spec["threads"]), "OMP_NUM_THREADS": str(spec["threads"])}
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True,
                          env=env, timeout=1800)
    if proc.returncode != 0:
        print(f"  {spec['runtime']} {Path(spec['path']).name}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0

    paths = export_programs()
    sys.path.insert(0, str(REPO / "tests"))
    from zoo import smollm2 as zoo

    try:
        import llama_cpp  # noqa: F401

        llama = str(zoo.gguf_path())
    except ImportError:
        llama = None
        print("llama-cpp-python is not installed in this environment: kiln only")
    print(f"SmolLM2-135M-Instruct, prefill {args.tokens} tokens then {args.tokens} greedy decode steps, "
          f"median of {args.rounds} rounds (wall clock; load average {os.getloadavg()[0]:.1f} at the start)")
    header = f"{'weights':<9} {'thr':>3} {'runtime':<9} {'prefill tok/s':>14} {'decode tok/s':>13} " \
             f"{'vs llama.cpp':>13} {'rss+ MB':>8}"
    print(header)
    print("-" * len(header))
    for threads in args.threads:
        reference = None
        if llama is not None:
            reference = run({"runtime": "llama.cpp", "path": llama, "threads": threads, "tokens": args.tokens,
                             "rounds": args.rounds})
            if reference:
                print(f"{'Q4_1 gguf':<9} {threads:>3} {'llama.cpp':<9} {reference['prefill_tps']:>14.1f} "
                      f"{reference['decode_tps']:>13.1f} {'':>13} {reference['rss_mb']:>8.0f}")
        for name, path in paths.items():
            r = run({"runtime": "kiln", "path": str(path), "threads": threads, "tokens": args.tokens,
                     "rounds": args.rounds})
            if r is None:
                continue
            ratio = ""
            if reference and name == "gguf":
                ratio = f"{r['prefill_tps'] / reference['prefill_tps']:.2f}x / " \
                        f"{r['decode_tps'] / reference['decode_tps']:.2f}x"
            print(f"{name:<9} {threads:>3} {'kiln':<9} {r['prefill_tps']:>14.1f} {r['decode_tps']:>13.1f} "
                  f"{ratio:>13} {r['rss_mb']:>8.0f}")
    print("vs llama.cpp: kiln / llama.cpp tokens per second (prefill / decode), same GGUF weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
