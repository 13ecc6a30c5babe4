"""CPU time per operator from a call-graph perf recording of bench/zoo_loop.py.

    mkfifo /tmp/ctl /tmp/ack
    LD_PRELOAD=build/venv-<you>/libkiln.so.0 perf record -e cpu-clock -c 250000 --call-graph=dwarf,16384 \\
        -D -1 --control fifo:/tmp/ctl,/tmp/ack -o perf.data -- \\
        python bench/zoo_loop.py --row smollm2_decode --dir DIR --repeat 20 --perf-ctl /tmp/ctl,/tmp/ack
    perf script -i perf.data | python bench/perf_ops.py --calls 20 [--period-ms 0.25]

Each sample of the calling thread is charged to the kernel run function that the executor
(MethodState::execute) called; samples of pool workers to the parallel_for body they ran (named by
the function that posted it); the rest to "executor", "python / bindings" or "other". Prints CPU ms
per call for each, largest first, and the leaf functions under each with --leaves.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict

EXECUTE = "kiln::internal::MethodState::execute"
WORK_THROUGH = "work_through"


def short(symbol: str) -> str:
    """'kiln::kernels::optimized::(anonymous namespace)::fused_linear_run' -> 'optimized fused_linear_run'."""
    symbol = re.sub(r"\(anonymous namespace\)::", "", symbol)
    symbol = re.sub(r"\+0x[0-9a-f]+$", "", symbol)
    head = symbol.split("(", 1)[0]
    for tier in ("portable", "optimized"):
        if f"::{tier}::" in head:
            return f"{tier} {head.rsplit('::', 1)[-1]}"
    return head.rsplit("::", 1)[-1] if "::" in head else head


def posted_by(lambda_symbol: str) -> str:
    """The function whose parallel_for body a worker ran: 'kiln::parallel_for<kiln::kernels::optimized::gemm(...)
    ::{lambda...}>' -> 'optimized gemm'."""
    inner = lambda_symbol.split("<", 1)[1] if "<" in lambda_symbol else lambda_symbol
    return short(inner.split("::{lambda", 1)[0])


def samples(stream):
    """(thread name, [frame symbols, leaf first]) per sample of `perf script` output."""
    frames: list[str] = []
    header = None
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if header is not None:
                yield header, frames
            header, frames = None, []
        elif not line.startswith(("\t", " ")):
            header = line.split()[0]
        else:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(parts[1].rsplit(" (", 1)[0])
    if header is not None:
        yield header, frames


def charge(frames: list[str]) -> str:
    for i, f in enumerate(frames):
        if f.startswith(EXECUTE):
            return short(frames[i - 1]) if i > 0 else "executor"
        if WORK_THROUGH in f:
            return "worker: " + posted_by(frames[i - 1]) if i > 0 else "worker: pool"
    if any("worker_loop" in f for f in frames):
        return "worker: idle spin"
    if any("_kiln" in f or "nanobind" in f or "kiln::Method" in f for f in frames):
        return "python / bindings"
    if any("_PyEval" in f or "Py_" in f for f in frames):
        return "python / bindings"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, required=True, help="timed calls the recording covers")
    parser.add_argument("--period-ms", type=float, default=0.25, help="CPU ms per sample (perf -c)")
    parser.add_argument("--leaves", action="store_true", help="the leaf functions under each operator")
    args = parser.parse_args()
    per_op: Counter = Counter()
    leaves: dict[str, Counter] = defaultdict(Counter)
    for _, frames in samples(sys.stdin):
        if not frames:
            continue
        op = charge(frames)
        per_op[op] += 1
        leaves[op][short(frames[0])] += 1
    scale = args.period_ms / args.calls
    total = sum(per_op.values())
    print(f"{total * scale:9.2f} ms per call in all ({total} samples, {args.calls} calls)")
    for op, n in per_op.most_common():
        print(f"{n * scale:9.3f}  {100 * n / total:5.1f}%  {op}")
        if args.leaves:
            for leaf, m in leaves[op].most_common(4):
                print(f"{'':20}{m * scale:8.3f}  {leaf}")


if __name__ == "__main__":
    main()
