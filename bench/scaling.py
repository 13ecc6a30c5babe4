"""Predicted thread scaling of kiln per model and operator, from virtual workers, beside the measured 2T speedup.

    python bench/scaling.py [MODEL ...] [--threads 2,4,8,16,32] [--rounds 7] [--keep DIR]

MODEL: mlp, residual_cnn, mobilenet_v2, mobilenet_v3_small, efficientnet_like, resnet18,
minilm_128, smollm2_prefill (default: all but mobilenet_v3_small and efficientnet_like).

How it predicts (docs/kernels.md, "How work is partitioned"; docs/profiling.md, "Beyond the
machine's cores"):

1. For every N (1 included), profiled calls with KILN_SIMULATE_THREADS=N on a one-thread pool: each kernel
   partitions its work as it would on N threads (it sees num_threads() == N, and the pool splits
   each parallel_for into the chunks it would make for N), and every chunk runs on the calling
   thread, timed. The instruction's time outside its chunks is its serial part.
2. Each parallel_for is replayed on N workers with the pool's policy: one chunk per claim, taken
   in order by whichever worker is free (the pool's shared counter), every worker free at the
   start; its time is the last worker's finish plus a fixed dispatch overhead (post, wake, join),
   measured on this machine by the first section of the run (a chain of small elementwise
   operators at 2 real threads: instruction time minus its longest chunk minus its serial part).
3. Predicted time at N = serial parts + replayed parallel_fors + the call's time between
   instructions; the speedup is the 1-thread profiled time over that. Each instruction's numbers
   chunk and serial part is taken at its median over the rounds.

The profiled times of virtual workers are the calling thread's CPU time (kiln/profile.h): on a
shared machine another process's time slice does not land in a chunk. Its caches and memory
bandwidth are still shared, so chunk times are only as quiet as the machine.

The measured 2-thread speedup comes from plain (unprofiled) calls, 1 and 2 real threads
alternating sample by sample, the fastest sample of each (the medians beside it); it is the check
on the prediction at 2. What the model
leaves out: memory bandwidth and shared caches (chunks run one at a time here, each with the
whole last-level cache and memory bus to itself), SMT, frequency changes with more active cores
and the wake-up of sleeping workers after a long serial stretch (workers spin 100 us). It is an
upper bound where operators are bandwidth-bound.

An operator "stops scaling" at N when its predicted speedup from N to 2N grows by less than
15%; the reason is read off its partition at 2N: serial (no parallel_for, or most of its time
outside them), too few chunks (fewer than 2N per parallel_for), imbalance (the longest chunk well
above the mean) or dispatch overhead. The load average is printed at the start and the end;
numbers from a loaded machine are not worth comparing.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import io
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

import kiln
from kiln.export import export

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from zoo import minilm, smollm2, vision  # noqa: E402

DEFAULT_MODELS = ("mlp", "residual_cnn", "mobilenet_v2", "resnet18", "minilm_128", "smollm2_prefill")
ALL_MODELS = (*DEFAULT_MODELS, "mobilenet_v3_small", "efficientnet_like")
STOP_GROWTH = 1.15   # a speedup growing by less than this from N to 2N has stopped
MIN_SHARE = 0.01     # operators below this share of the 1-thread time are not listed


# --------------------------------------------------------------------------- models


class MLP(nn.Module):
    """The issue's MLP: 8 rows, 512 -> 1024 -> 512."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))

    def forward(self, x):
        return self.net(x)


class ResidualBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = vision.ConvBNAct(c, c, 3)
        self.b = vision.ConvBNAct(c, c, 3, act=None)

    def forward(self, x):
        return torch.relu(x + self.b(self.a(x)))


class ResidualCNN(nn.Module):
    """A small residual CNN on 64x64 images at 32 channels (batch 2)."""

    def __init__(self):
        super().__init__()
        self.stem = vision.ConvBNAct(3, 32, 3)
        self.blocks = nn.Sequential(ResidualBlock(32), ResidualBlock(32), ResidualBlock(32))
        self.down = vision.ConvBNAct(32, 64, 3, stride=2)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        y = self.down(self.blocks(self.stem(x)))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [] if expand == 1 else [vision.ConvBNAct(cin, hidden, 1, act=nn.ReLU6)]
        layers += [vision.ConvBNAct(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   vision.ConvBNAct(hidden, cout, 1, act=None)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018, table 2), width 1.0, random weights."""

    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]  # expansion, channels, repeats, first stride

    def __init__(self):
        super().__init__()
        layers: list[nn.Module] = [vision.ConvBNAct(3, 32, 3, 2, act=nn.ReLU6)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(vision.ConvBNAct(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class AddChain(nn.Module):
    """Many small elementwise operators, each split in two at 2 threads: the dispatch probe."""

    def forward(self, x):
        for _ in range(64):
            x = x + 1.0
        return x


@dataclass
class Case:
    label: str
    model: nn.Module
    example: tuple
    inputs: list
    dynamic_shapes: tuple | None = None


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def build_case(name: str) -> Case:
    torch.manual_seed(0)
    if name == "mlp":
        x = torch.randn(8, 512, generator=seeded(1))
        return Case("8 x 512", MLP().eval(), (x,), [x.numpy()])
    if name in ("residual_cnn", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_like", "resnet18"):
        shape = (2, 3, 64, 64) if name == "residual_cnn" else (1, 3, 224, 224)
        net = {"residual_cnn": ResidualCNN, "mobilenet_v2": MobileNetV2, "mobilenet_v3_small": vision.MobileNetV3Small,
               "efficientnet_like": vision.EfficientNetLike, "resnet18": vision.ResNet18}[name]()
        vision._randomize(net, seed=0)  # seeded weights, BN statistics measured on random images
        x = torch.randn(shape, generator=seeded(1))
        return Case("x".join(map(str, shape)), net, (x,), [x.numpy()])
    if name == "minilm_128":
        ids = torch.randint(1000, 30000, (1, 128), generator=seeded(1))
        return Case("128 tokens", minilm.load_minilm(), (ids, torch.ones_like(ids)), [ids.numpy(),
                                                                                        np.ones_like(ids.numpy())])
    if name == "smollm2_prefill":
        llm = smollm2.load_smollm2(capacity=128)
        prompt = torch.randint(0, llm.cfg.vocab_size, (1, 64), generator=seeded(1))
        pos = torch.arange(64)
        tokens = torch.export.Dim("tokens", max=128)
        return Case("prefill 64 tokens", llm, (prompt, pos), [prompt.numpy(), pos.numpy()],
                    ({1: tokens}, {0: tokens}))
    if name == "add_chain":
        x = torch.randn(2 * 32768 + 64, generator=seeded(1))  # just over two elementwise grains
        return Case("64 adds of 65,600 floats", AddChain(), (x,), [x.numpy()])
    raise SystemExit(f"unknown model {name!r}; choose from {', '.join(ALL_MODELS)}")


def exported(name: str, case: Case, workdir: Path) -> Path:
    path = workdir / f"{name}.kiln"
    if not path.exists():
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export(case.model, case.example, path, dynamic_shapes=case.dynamic_shapes)
    return path


# --------------------------------------------------------------------------- one profiled call


@dataclass
class Instruction:
    """One instruction of one profiled call: its time, its parallel_fors' chunk times, and the
    profiler's own time between its chunks (not the kernel's: left out of the serial part)."""

    ns: float
    jobs: list[list[float]] = field(default_factory=list)  # chunk durations, in range order
    recording_ns: float = 0.0

    @property
    def serial_ns(self) -> float:
        return max(0.0, self.ns - sum(sum(j) for j in self.jobs) - self.recording_ns)


@dataclass
class Call:
    instructions: dict[int, Instruction]
    between_ns: float  # the call's time outside its instructions


def profiled_call(method, inputs, simulate: int | None) -> Call:
    if simulate is None:
        os.environ.pop("KILN_SIMULATE_THREADS", None)
    else:
        os.environ["KILN_SIMULATE_THREADS"] = str(simulate)
    try:
        profile = method.profile(*inputs)
    finally:
        os.environ.pop("KILN_SIMULATE_THREADS", None)
    instructions = {r.index: Instruction(r.ns) for r in profile.instructions}
    jobs: dict[int, list] = defaultdict(list)
    for c in profile.chunks:
        jobs[c.job].append(c)
    # Virtual workers run a parallel_for's chunks back to back: the gap between two is the
    # profiler's (two reads of the thread's CPU clock, a system call each, and the record).
    gaps = [b.start_ns - a.end_ns for chunks in jobs.values() for a, b in zip(chunks, chunks[1:])]
    gap = statistics.median(gaps) if simulate and gaps else 0.0
    for chunks in jobs.values():
        chunks.sort(key=lambda c: c.begin)
        ins = instructions[chunks[0].index]
        ins.jobs.append([c.ns for c in chunks])
        ins.recording_ns += gap * len(chunks)
    return Call(instructions, profile.call_ns - profile.instruction_ns)


def replay(chunks: list[int], workers: int) -> int:
    """The pool's schedule: chunks claimed in order, each by the first worker free."""
    free = [0] * min(workers, len(chunks))
    for ns in chunks:
        heapq.heappush(free, heapq.heappop(free) + ns)
    return max(free)


def predicted_ns(ins: Instruction, workers: int, overhead_ns: float) -> float:
    return ins.serial_ns + sum(replay(j, workers) + overhead_ns for j in ins.jobs)


def typical(calls: list[Call]) -> Call:
    """Every serial part and every chunk at its median over the rounds. A partition is the same in
    every round (it depends on sizes and counts only); an instruction whose partition differs
    between rounds keeps its median round whole."""
    out = {}
    for i in calls[0].instructions:
        runs = [c.instructions[i] for c in calls]
        shape = [len(j) for j in runs[0].jobs]
        if any([len(j) for j in r.jobs] != shape for r in runs):
            out[i] = sorted(runs, key=lambda r: r.ns)[len(runs) // 2]
            continue
        jobs = [[statistics.median(r.jobs[j][c] for r in runs) for c in range(n)] for j, n in enumerate(shape)]
        serial = statistics.median(r.serial_ns for r in runs)
        out[i] = Instruction(serial + sum(sum(j) for j in jobs), jobs)  # the recording left out
    return Call(out, statistics.median(c.between_ns for c in calls))


# --------------------------------------------------------------------------- measuring


def plain_speedup(method, inputs, rounds: int) -> tuple[float, float]:
    """1-thread over 2-thread time of plain calls, the thread counts alternating: (fastest samples, medians)."""
    times: dict[int, list[float]] = {1: [], 2: []}
    calls = max(1, int(0.05 / max(timed(method, inputs), 1e-5)))  # about 50 ms per sample
    for r in range(4 * rounds):
        for threads in ((1, 2) if r % 2 == 0 else (2, 1)):
            kiln.set_num_threads(threads)
            method(*inputs)  # warm-up: the workers are awake, the caches warm
            start = time.perf_counter()
            for _ in range(calls):
                method(*inputs)
            times[threads].append((time.perf_counter() - start) / calls)
    kiln.set_num_threads(1)
    return min(times[1]) / min(times[2]), statistics.median(times[1]) / statistics.median(times[2])


def timed(method, inputs) -> float:
    start = time.perf_counter()
    method(*inputs)
    return time.perf_counter() - start


def dispatch_overhead_ns(workdir: Path, rounds: int) -> float:
    """Median per-parallel_for cost of the real pool at 2 threads beyond its longest chunk."""
    case = build_case("add_chain")
    method = kiln.load(exported("add_chain", case, workdir)).load_method("forward")
    samples = []
    for _ in range(rounds):
        kiln.set_num_threads(1)
        virtual = profiled_call(method, case.inputs, 2)
        kiln.set_num_threads(2)
        method(*case.inputs)
        real = profiled_call(method, case.inputs, None)
        for index, ins in real.instructions.items():
            if len(ins.jobs) == 1 and len(ins.jobs[0]) == 2:
                samples.append(ins.ns - max(ins.jobs[0]) - virtual.instructions[index].serial_ns)
    kiln.set_num_threads(1)
    if not samples:
        raise SystemExit("the dispatch probe's operators did not split across 2 threads")
    return statistics.median(samples)


# --------------------------------------------------------------------------- report


def operator_key(info, record) -> str:
    shapes = ", ".join("x".join(map(str, s)) for _, s in record.inputs if len(s) > 0)
    return f"{info.op.replace('.default', '')} [{shapes}]"


def why_it_stops(call: Call, indexes: list[int], workers: int, overhead_ns: float) -> str:
    """Why the instructions `indexes` scale badly at `workers`, from their partition there."""
    serial = replayed = over = 0.0
    chunk_counts, imbalance = [], []
    for i in indexes:
        ins = call.instructions[i]
        serial += ins.serial_ns
        for j in ins.jobs:
            chunk_counts.append(len(j))
            mean = sum(j) / len(j)
            imbalance.append(max(j) / mean if mean > 0 else 1.0)
            replayed += replay(j, workers)
            over += overhead_ns
    total = max(serial + replayed + over, 1.0)
    if not chunk_counts:
        return "serial: never split (too little work for a second thread, or no parallel_for)"
    if serial > 0.5 * total:
        return f"serial: {100 * serial / total:.0f}% of its time outside parallel_for"
    chunks = statistics.median(chunk_counts)
    if chunks < workers:
        return f"too few chunks: {chunks:g} per parallel_for for {workers} workers"
    if over > 0.3 * total:
        return f"dispatch overhead: {100 * over / total:.0f}% of its time"
    return f"imbalance: the longest chunk {statistics.median(imbalance):.2f}x the mean"


def report(name: str, case: Case, method, overhead_ns: float, thread_counts: list[int], rounds: int) -> None:
    infos = method.instructions
    counts = [1, *thread_counts]
    simulated: dict[int, list[Call]] = {n: [] for n in counts}
    real2: list[Call] = []
    keys: dict[int, str] = {}
    for _ in range(rounds):  # interleaved, so that the machine's noise spreads over every count
        kiln.set_num_threads(1)
        for n in counts:
            simulated[n].append(profiled_call(method, case.inputs, n))
        kiln.set_num_threads(2)
        method(*case.inputs)
        real2.append(profiled_call(method, case.inputs, None))
    kiln.set_num_threads(1)
    profile = method.profile(*case.inputs)
    for r in profile.instructions:
        keys[r.index] = operator_key(infos[r.index], r)
    measured2, measured2_median = plain_speedup(method, case.inputs, rounds)
    best = {n: typical(simulated[n]) for n in counts}
    best_real2 = Call({i: min((c.instructions[i] for c in real2), key=lambda r: r.ns) for i in real2[0].instructions},
                      0)

    def total(call: Call, workers: int) -> float:
        return call.between_ns + sum(predicted_ns(ins, workers, overhead_ns) for ins in call.instructions.values())

    t1 = total(best[1], 1)
    speedups = {n: t1 / total(best[n], n) for n in thread_counts}
    print(f"\n## {name} ({case.label}): {t1 / 1e6:.2f} ms per call at 1 thread (profiled), "
          f"{len(infos)} instructions")
    print("threads            " + "".join(f"{n:>7}" for n in thread_counts))
    print("predicted speedup  " + "".join(f"{speedups[n]:7.2f}" for n in thread_counts))
    if 2 in speedups:
        print(f"measured speedup   {measured2:7.2f}   (plain calls at 1 and 2 real threads alternating, fastest "
              f"samples; medians {measured2_median:.2f}); prediction error at 2: "
              f"{100 * (speedups[2] / measured2 - 1):+.0f}%")

    groups: dict[str, list[int]] = defaultdict(list)
    for index, key in keys.items():
        groups[key].append(index)

    def group_ns(call: Call, idx: list[int], workers: int) -> float:
        return sum(predicted_ns(call.instructions[i], workers, overhead_ns) for i in idx)

    rows = []
    for key, idx in groups.items():
        g1 = group_ns(best[1], idx, 1)
        if g1 < MIN_SHARE * t1:
            continue
        pred = {n: g1 / max(group_ns(best[n], idx, n), 1.0) for n in thread_counts}
        meas2 = g1 / max(sum(best_real2.instructions[i].ns for i in idx), 1.0)
        stop = next((n for a, n in zip(thread_counts, thread_counts[1:]) if pred[n] < STOP_GROWTH * pred[a]), None)
        why = why_it_stops(best[stop], idx, stop, overhead_ns) if stop else ""
        rows.append((g1, key, len(idx), pred, meas2, stop, why))
    rows.sort(key=lambda r: -r[0])
    print(f"\noperators with at least {100 * MIN_SHARE:.0f}% of the 1-thread time (speedup of their own time; "
          "measured 2T from profiled calls):")
    print(f"{'share':>6} {'n':>3}  " + "".join(f"{'p' + str(n):>6}" for n in thread_counts)
          + f"{'m2':>6}  operator [input shapes]")
    for g1, key, n, pred, meas2, _, _ in rows:
        print(f"{100 * g1 / t1:5.1f}% {n:>3}  " + "".join(f"{pred[c]:6.2f}" for c in thread_counts)
              + f"{meas2:6.2f}  {key}")
    stopped = [r for r in rows if r[5]]
    if stopped:
        print("\nstop scaling (speedup grows < 15% from N/2 to N):")
        for g1, key, _, _, _, stop, why in stopped:
            print(f"  at {stop:>2}: {100 * g1 / t1:4.1f}%  {key}: {why}")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    parser.add_argument("--threads", default="2,4,8,16,32", help="virtual worker counts to predict")
    parser.add_argument("--rounds", type=int, default=7, help="profiled calls per thread count (medians)")
    parser.add_argument("--keep", type=Path, help="directory for the exported programs (reused when present)")
    args = parser.parse_args()
    thread_counts = sorted({int(t) for t in args.threads.split(",")})
    if not thread_counts or thread_counts[0] < 2:
        raise SystemExit("--threads: counts of 2 or more")
    for name in args.models:
        if name not in ALL_MODELS:
            raise SystemExit(f"unknown model {name!r}; choose from {', '.join(ALL_MODELS)}")
    os.environ.pop("KILN_SIMULATE_THREADS", None)
    with contextlib.ExitStack() as stack:
        workdir = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kiln-scaling-")))
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"# kiln {kiln.__version__} thread scaling; load average at the start {load_average()} "
              f"({os.cpu_count()} cores)")
        overhead = dispatch_overhead_ns(workdir, args.rounds)
        print(f"dispatch overhead: {overhead / 1e3:.1f} us per parallel_for (measured at 2 threads, median)")
        for name in args.models:
            case = build_case(name)
            method = kiln.load(exported(name, case, workdir)).load_method("forward")
            report(name, case, method, overhead, thread_counts, args.rounds)
        print(f"\nload average at the end {load_average()}")


if __name__ == "__main__":
    main()
