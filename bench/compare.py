"""kiln beside ONNX Runtime (CPU provider), ExecuTorch+XNNPACK and eager PyTorch, interleaved in one process.

    bash bench/setup.sh                                   # once: build/bench-venv with onnxruntime
    build/bench-venv/bin/python bench/compare.py          # full run, 1 and 2 threads
    build/bench-venv/bin/python bench/compare.py --quick  # smoke test: small subset, 3 rounds
    build/bench-venv/bin/python bench/compare.py --keep build/compare --plot build/compare  # + PNG charts

bench/README.md lists the targets it judges (the TARGET_* constants below), says how it
measures and keeps the results of past runs.

What it measures, for each thread count (kiln.set_num_threads and KILN_NUM_THREADS,
torch.set_num_threads, ORT intra_op_num_threads with inter_op 1, ExecuTorch's threadpool
through _unsafe_reset_threadpool before its programs load):

- Models: MobileNetV3-small, the EfficientNet-like net and a ResNet-18 (random
  weights) at 1x3x224x224, MiniLM at 16 and 128 tokens (ORT also after its
  transformer optimizer), SmolLM2-135M prefill of 64 tokens and one decode step
  after it (ORT through IO binding, its KV caches bound once). Every round runs
  each runtime once on the same inputs (the order rotates from round to round,
  and each timed call starts once the previous runtime's worker threads have stopped
  spinning and the runtime's own untimed lead-in call has woken its threads); the
  tables show medians, kiln/ORT and kiln/torch, the verdict against kiln <= 0.85x ORT,
  each runtime's error against eager torch (max abs difference / max abs of the
  output) and the peak RSS growth of loading and
  running the model, measured in a fresh subprocess per runtime so that no
  runtime's memory hides another's.
- ExecuTorch 1.5.1 with its XNNPACK delegate (bench/peers.py), fp32, in the same rounds and
  columns as the others for the CNNs and MiniLM (one program per row, static shapes; not
  SmolLM2, whose in-place KV cache it would not delegate); skipped with the reason printed
  when executorch does not import.
- int8: ExecuTorch's XNNPACKQuantizer flow (static for the CNNs, dynamic for MiniLM) and ONNX
  Runtime's quantize_static / quantize_dynamic beside their fp32 and kiln's fp32, with each int8
  output's error and cosine against eager fp32; and for MiniLM kiln's own int8_dynamic beside
  kiln fp32, its bf16 GEMMs (gemm_precision="bfloat16"), ORT fp32 and ORT's quantize_dynamic (the dynamic int8
  table; no ExecuTorch needed).
- Every runtime's speedup from the fewest to the most threads, per row; --plot DIR draws the
  fp32 and int8 latency tables as PNG charts (bench/charts.py).
- Python call overhead: x + y on 4 floats through kiln, torch eager and ORT.
- The SmolLM2 decode step as a share of the memory-bandwidth bound: the fp32
  weight and KV-cache bytes a step reads / the bandwidth of a read-only sum over
  a buffer far larger than the caches, timed in the decode row's rounds with the
  same clock as the step.
- A GEMM sweep (square 64..2048 and the models' shapes): kiln's a @ b with both
  operands as inputs against numpy's OpenBLAS and torch (like for like), and
  kiln's F.linear with a constant weight prepacked at load, labelled as such; the
  decode shapes (M <= 8) also with cold weights (sets larger than the last-level
  cache, rotated call by call). GFLOP/s and shares of the peak FMA rate.

Verdicts are withheld when the machine is loaded: when the 1-minute load average at
the start or end of a section exceeds the section's thread count + a quarter of
the cores, the numbers are printed and the verdict reads "withheld: machine
loaded (load average X)".

Peak FMA rate comes from a small C++ probe compiled with g++ -march=native at the
start of the run. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (set on these machines for
old OpenBLAS builds) slow a current numpy, so this process drops them before numpy
loads OpenBLAS.

ONNX models come from torch.onnx.export (dynamo). SmolLM2 keeps its KV cache in
module buffers updated in place; ORT gets a functional copy of the same forward
that takes the caches as inputs and returns the updated caches.
"""

from __future__ import annotations

import os
import sys

# OpenBLAS reads these when it loads, i.e. when numpy is first imported: drop them
# for this process (and its subprocesses) before that, re-executing if too late.
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in OPENBLAS_VARS):
    dropped = " ".join(f"{v}={os.environ[v]}" for v in OPENBLAS_VARS if v in os.environ)
    for v in OPENBLAS_VARS:
        os.environ.pop(v, None)
    os.environ["KILN_BENCH_DROPPED"] = dropped  # for the header, across the re-exec
    if "numpy" in sys.modules:
        os.execv(sys.executable, [sys.executable, *sys.argv])

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import zlib  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import kiln  # noqa: E402
from kiln.export import export as kiln_export  # noqa: E402
from kiln.llm.model import RMSNorm, rotate_half  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from zoo import minilm, smollm2, vision  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import charts  # noqa: E402
import peers  # noqa: E402  (ExecuTorch + XNNPACK, the int8 flows)

RUNTIMES = ("kiln", "ort", "torch")
ET_MISSING: str | None = "not checked"  # why ExecuTorch is skipped (None: it runs); set in main
CNNS = ("mobilenet_v3_small", "efficientnet_like", "resnet18")
TARGET_VS_ORT = 0.85      # kiln latency / ORT latency, every model
TARGET_PEAK_SHARE = 0.85  # GEMM with M, N, K >= 256 on one thread
TARGET_BANDWIDTH = 0.85   # SmolLM2 decode step / memory-bandwidth bound
TARGET_CALL_US = 2.0      # Python call of a tiny method
WRONG = 1e-3              # relative error past which a result is marked wrong
LOAD_SHARE = 0.25         # verdicts withheld when other work loads more than this share of the cores
IMAGE = (1, 3, 224, 224)
LLM_CAPACITY = 128        # KV cache positions: a 64-token prefill and the steps after it
PREFILL = 64
DECODE_M = 8              # GEMMs with at most this many rows are decode shapes: also timed with cold weights


def need_ort():
    try:
        import onnxruntime
        import onnxscript  # noqa: F401  (torch.onnx.export's dynamo exporter needs it)
        import threadpoolctl  # noqa: F401
    except ImportError as e:
        sys.exit(f"compare.py needs onnxruntime, onnxscript, onnx and threadpoolctl ({e}).\n"
                 "Set up its venv and run it from there:\n"
                 "    bash bench/setup.sh\n"
                 "    build/bench-venv/bin/python bench/compare.py")
    return onnxruntime


@contextlib.contextmanager
def quiet():
    """Silence the exporters' progress lines and warnings; show them if the export fails."""
    buf = io.StringIO()
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except BaseException:
        sys.stderr.write(buf.getvalue())
        raise
    finally:
        logging.disable(logging.NOTSET)


# --------------------------------------------------------------------------- machine probe

PROBE_SOURCE = r"""
// probe fma THREADS     -> GFLOP/s of THREADS threads each running independent FMA chains
// probe copy THREADS MB -> GB/s of memcpy over MB-sized buffers, read + write bytes counted
// Rates are per second of each thread's CPU time, summed over threads: what the
// cores do while they run, even when other processes share the machine.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

typedef float vec __attribute__((vector_size(64)));  // one zmm, or two ymm without AVX-512

static double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// 12 chains cover FMA latency x throughput on current cores; distinct starting
// values keep the compiler from merging them.
static float fma_chains(long iters, float seed) {
  vec a0 = vec{} + seed, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5;
  vec a6 = a0 + 6, a7 = a0 + 7, a8 = a0 + 8, a9 = a0 + 9, a10 = a0 + 10, a11 = a0 + 11;
  vec m = vec{} + 0.999999f, c = vec{} + 1e-6f;
  for (long i = 0; i < iters; ++i) {
    a0 = a0 * m + c; a1 = a1 * m + c; a2 = a2 * m + c; a3 = a3 * m + c;
    a4 = a4 * m + c; a5 = a5 * m + c; a6 = a6 * m + c; a7 = a7 * m + c;
    a8 = a8 * m + c; a9 = a9 * m + c; a10 = a10 * m + c; a11 = a11 * m + c;
  }
  vec s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  return s[0];
}

// Best over 3 tries of the summed per-thread rate of work(t) (which returns its units of work).
template <class F>
static double best_rate(int threads, F work) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<double> rate(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        double start = cpu_now();
        double units = work(t);
        rate[t] = units / (cpu_now() - start);
      });
    for (auto& th : pool) th.join();
    double sum = 0;
    for (double r : rate) sum += r;
    if (sum > best) best = sum;
  }
  return best;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int threads = std::atoi(argv[2]);
  float seed = (float)argc;
  volatile float sink = 0;
  double rate;
  if (!std::strcmp(argv[1], "fma")) {
    long iters = 1 << 20;
    double start = cpu_now();
    sink = sink + fma_chains(iters, seed);
    iters = (long)(iters * 0.2 / (cpu_now() - start));  // ~0.2 s per measurement
    double flops = (double)iters * 12 * (sizeof(vec) / sizeof(float)) * 2;
    rate = best_rate(threads, [&](int) { sink = sink + fma_chains(iters, seed); return flops; });
  } else if (!std::strcmp(argv[1], "copy") && argc == 4) {
    size_t bytes = (size_t)std::atol(argv[3]) << 20, slice = bytes / threads;
    char* src = (char*)std::malloc(bytes);
    char* dst = (char*)std::malloc(bytes);
    std::memset(src, 1, bytes);
    std::memset(dst, 2, bytes);  // fault every page in before timing
    rate = best_rate(threads, [&](int t) {
      std::memcpy(dst + t * slice, src + t * slice, slice);
      return 2.0 * slice;
    });
  } else {
    return 2;
  }
  std::printf("%.3f\n", rate / 1e9);
  return 0;
}
"""


STREAM_SOURCE = r"""
// stream.so, loaded through ctypes: stream_sum(buf, n, threads) reads n floats once, split
// into `threads` slices summed in parallel. It is the read-only traffic of a decode step
// (weights and caches streamed in), and its caller times it with the clock that times the
// decode step, so bytes / time share one clock with the step it bounds.
#include <cstdlib>
#include <thread>
#include <vector>

typedef float vec __attribute__((vector_size(64)));

extern "C" float* stream_buffer(size_t n) {
  float* buf = (float*)std::aligned_alloc(64, n * sizeof(float));
  if (buf)
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;  // fault every page in before timing
  return buf;
}

// Four accumulators keep the adds off the critical path: memory, not add latency, limits it.
static float sum_slice(const float* p, size_t n) {
  vec s0 = {}, s1 = {}, s2 = {}, s3 = {};
  const vec* v = (const vec*)p;
  size_t blocks = n / 64;
  for (size_t i = 0; i < blocks; ++i) {
    s0 += v[4 * i]; s1 += v[4 * i + 1]; s2 += v[4 * i + 2]; s3 += v[4 * i + 3];
  }
  vec s = s0 + s1 + s2 + s3;
  float total = 0;
  for (int i = 0; i < 16; ++i) total += s[i];
  return total;
}

extern "C" float stream_sum(const float* buf, size_t n, int threads) {
  size_t slice = n / threads / 64 * 64;  // whole 256-byte blocks, 64-byte aligned slices
  std::vector<float> part(threads);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] { part[t] = sum_slice(buf + t * slice, slice); });
  part[0] = sum_slice(buf, slice);
  for (auto& th : pool) th.join();
  float total = 0;
  for (float x : part) total += x;
  return total;
}
"""


def last_level_cache_bytes() -> int:
    """The largest CPU cache this machine reports (sysfs), 32 MiB if it reports none."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        with contextlib.suppress(ValueError):
            sizes.append(int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG"
                         else int(text))
    return max(sizes, default=32 << 20)


class Probe:
    """Peak FMA GFLOP/s of this machine, measured now (best of a few tries); a read-only
    streaming sum to time beside the decode step; memcpy GB/s per CPU second (bench/llm.py's
    bound, which compare.py no longer uses)."""

    def __init__(self, workdir: Path):
        src = workdir / "probe.cc"
        src.write_text(PROBE_SOURCE)
        self.exe = workdir / "probe"
        # -ffp-contract=fast: a * m + c must become one FMA instruction.
        subprocess.run(["g++", "-O2", "-march=native", "-ffp-contract=fast", "-pthread",
                        "-o", str(self.exe), str(src)], check=True)
        self.workdir = workdir
        self._stream = None

    def _run(self, *args) -> float:
        return float(subprocess.run([str(self.exe), *map(str, args)], check=True,
                                    capture_output=True, text=True).stdout)

    def peak_gflops(self, threads: int) -> float:
        return self._run("fma", threads)

    def copy_gbs(self, threads: int) -> float:
        return self._run("copy", threads, 512)

    def stream(self, threads: int):
        """(call, bytes): a callable that reads `bytes` once in `threads` threads. The buffer
        is at least 16x the last-level cache (and 512 MiB), so every call streams from memory."""
        if self._stream is None:
            import ctypes

            src, lib = self.workdir / "stream.cc", self.workdir / "stream.so"
            src.write_text(STREAM_SOURCE)
            subprocess.run(["g++", "-O2", "-march=native", "-shared", "-fPIC", "-pthread",
                            "-o", str(lib), str(src)], check=True)
            so = ctypes.CDLL(str(lib))
            so.stream_buffer.restype = ctypes.c_void_p
            so.stream_buffer.argtypes = [ctypes.c_size_t]
            so.stream_sum.restype = ctypes.c_float
            so.stream_sum.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            n = max(512 << 20, 16 * last_level_cache_bytes()) // 4 // 4096 * 4096
            buf = so.stream_buffer(n)
            if not buf:
                raise MemoryError(f"stream probe: cannot allocate {4 * n >> 20} MiB")
            self._stream = (so, buf, n)
        so, buf, n = self._stream
        per_thread = n // threads // 64 * 64
        return (lambda: so.stream_sum(buf, n, threads)), 4 * per_thread * threads


# --------------------------------------------------------------------------- models


class FunctionalLlama(nn.Module):
    """smollm2.Llama.forward with the KV caches as inputs and outputs instead of buffers
    updated in place (what torch.onnx.export and ORT handle): same weights, same math,
    index_copy instead of index_copy_."""

    def __init__(self, llama: smollm2.Llama):
        super().__init__()
        self.llama = llama

    def forward(self, tokens, input_pos, k_caches: list[torch.Tensor], v_caches: list[torch.Tensor]):
        m = self.llama
        x = m.tok_embeddings(tokens)
        cos, sin = m.rope_cos[input_pos], m.rope_sin[input_pos]
        mask = torch.arange(m.capacity, device=tokens.device)[None, :] <= input_pos[:, None]
        new_k, new_v = [], []
        for layer, k_cache, v_cache in zip(m.layers, k_caches, v_caches):
            a = layer.attention
            h = layer.attention_norm(x)
            b = h.shape[0]
            q = a.wq(h).reshape(b, -1, a.n_heads, a.head_dim).transpose(1, 2)
            k = a.wk(h).reshape(b, -1, a.n_kv_heads, a.head_dim).transpose(1, 2)
            v = a.wv(h).reshape(b, -1, a.n_kv_heads, a.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k_cache = k_cache.index_copy(2, input_pos, k)
            v_cache = v_cache.index_copy(2, input_pos, v)
            new_k.append(k_cache)
            new_v.append(v_cache)
            groups, cap = a.n_heads // a.n_kv_heads, k_cache.shape[2]
            keys = k_cache[:, :, None].expand(b, a.n_kv_heads, groups, cap, a.head_dim)
            values = v_cache[:, :, None].expand(b, a.n_kv_heads, groups, cap, a.head_dim)
            keys = keys.reshape(b, a.n_heads, cap, a.head_dim)
            values = values.reshape(b, a.n_heads, cap, a.head_dim)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            x = x + a.wo(y.transpose(1, 2).reshape(b, -1, a.n_heads * a.head_dim))
            h = layer.ffn_norm(x)
            x = x + layer.w_down(F.silu(layer.w_gate(h)) * layer.w_up(h))
        return F.linear(m.norm(x), m.tok_embeddings.weight), new_k, new_v


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class LinearSet(nn.Module):
    """x @ w.T for each w, constants of the program (nn.Linear's layout, no bias): one
    product per weight, returned as a tuple."""

    def __init__(self, weights: list[torch.Tensor]):
        super().__init__()
        self.weights = nn.ParameterList(nn.Parameter(w, requires_grad=False) for w in weights)

    def forward(self, x):
        return tuple(F.linear(x, w) for w in self.weights)


class MatMul(nn.Module):
    def forward(self, a, b):
        return a @ b


@dataclass
class Row:
    """One timed call: `inputs` to `model`, after running `prefix` once (a prefill that
    fills the KV cache a decode step reads; every timed call then does the same work)."""

    name: str
    model: str
    label: str
    inputs: list
    prefix: list = field(default_factory=list)


@dataclass
class Model:
    """An eager model and how to export it to kiln and to ONNX."""

    eager: nn.Module
    example: tuple
    dynamic_shapes: tuple | None = None
    onnx_module: nn.Module | None = None   # default: eager
    onnx_example: tuple | None = None      # default: example
    onnx_dynamic_shapes: tuple | None = None
    onnx_input_names: list | None = None
    num_state: int = 0                     # ORT inputs after the row's inputs: state fed back (KV caches)
    reset: object = None                   # eager: restore the state before a prefix
    ort_optimize: dict | None = None       # also run ORT's transformer optimizer with these arguments


ROW_NAMES = ("mobilenet_v3_small", "efficientnet_like", "resnet18", "minilm_16", "minilm_128",
             "smollm2_prefill_64", "smollm2_decode")
QUICK_ROWS = ("mobilenet_v3_small", "minilm_16")


def build_rows(selected: list[str]) -> tuple[dict[str, Model], list[Row]]:
    """The eager models and rows among `selected` (row names or model names)."""
    def gen(name: str) -> torch.Generator:  # inputs independent of which rows are selected
        return torch.Generator().manual_seed(zlib.crc32(name.encode()))

    models: dict[str, Model] = {}
    rows: list[Row] = []

    def wanted(row: str, model: str) -> bool:
        return row in selected or model in selected

    for name in ("mobilenet_v3_small", "efficientnet_like", "resnet18"):
        if not wanted(name, name):
            continue
        net = {"mobilenet_v3_small": vision.MobileNetV3Small, "efficientnet_like": vision.EfficientNetLike,
               "resnet18": vision.ResNet18}[name]()
        vision._randomize(net, seed=0)  # the zoo's seeded weights and measured BN statistics
        x = torch.randn(IMAGE, generator=gen(name))
        models[name] = Model(net, (x,))
        rows.append(Row(name, name, "x".join(map(str, IMAGE)), [x.numpy()]))

    if any(wanted(f"minilm_{s}", "minilm") for s in (16, 128)):
        seq = torch.export.Dim("seq", max=128)
        ids = torch.randint(1000, 30000, (1, 16), generator=gen("minilm"))
        bert = minilm.load_minilm()
        models["minilm"] = Model(bert, (ids, torch.ones_like(ids)), ({1: seq}, {1: seq}),
                                 onnx_input_names=["input_ids", "attention_mask"],
                                 ort_optimize={"model_type": "bert", "num_heads": bert.cfg.num_heads,
                                               "hidden_size": bert.cfg.hidden_size})
        for s in (16, 128):
            if wanted(f"minilm_{s}", "minilm"):
                ids = torch.randint(1000, 30000, (1, s), generator=gen(f"minilm_{s}")).numpy()
                rows.append(Row(f"minilm_{s}", "minilm", f"{s} tokens", [ids, np.ones_like(ids)]))

    if wanted("smollm2_prefill_64", "smollm2") or wanted("smollm2_decode", "smollm2"):
        llm = smollm2.load_smollm2(capacity=LLM_CAPACITY)
        cfg = llm.cfg
        prompt = torch.randint(0, cfg.vocab_size, (1, PREFILL), generator=gen("smollm2"))
        pos = torch.arange(PREFILL)
        tokens = torch.export.Dim("tokens", max=LLM_CAPACITY)
        cache = [torch.zeros(1, cfg.n_kv_heads, LLM_CAPACITY, cfg.head_dim) for _ in range(cfg.n_layers)]
        layers = range(cfg.n_layers)
        models["smollm2"] = Model(
            llm, (prompt, pos), ({1: tokens}, {0: tokens}),
            onnx_module=FunctionalLlama(llm), onnx_example=(prompt, pos, cache, [c.clone() for c in cache]),
            onnx_dynamic_shapes=({1: tokens}, {0: tokens}, [None] * cfg.n_layers, [None] * cfg.n_layers),
            onnx_input_names=["tokens", "input_pos", *(f"k_cache{i}" for i in layers),
                              *(f"v_cache{i}" for i in layers)],
            num_state=2 * cfg.n_layers, reset=smollm2.reset_cache)
        if wanted("smollm2_prefill_64", "smollm2"):
            rows.append(Row("smollm2_prefill_64", "smollm2", f"prefill {PREFILL} tokens",
                            [prompt.numpy(), pos.numpy()]))
        if wanted("smollm2_decode", "smollm2"):
            step = torch.randint(0, cfg.vocab_size, (1, 1), generator=gen("smollm2_decode")).numpy()
            rows.append(Row("smollm2_decode", "smollm2", f"1 token after {PREFILL}",
                            [step, np.array([PREFILL])], prefix=[prompt.numpy(), pos.numpy()]))
    return models, rows


def decode_read_bytes(llm: smollm2.Llama) -> tuple[int, int]:
    """(weight bytes, KV-cache bytes) one decode step reads, fp32. Weights: every linear
    weight, the (tied) output head, the norms and one embedding row. Caches: the keys and
    values of every slot, since the exported forward (cache_positions None) attends over the
    whole cache with a mask, in every runtime."""
    linears = sum(m.weight.numel() for m in llm.modules() if isinstance(m, nn.Linear))
    norms = sum(m.weight.numel() for m in llm.modules() if isinstance(m, RMSNorm))
    head = llm.tok_embeddings.weight.numel() if llm.cfg.tied_embeddings else 0
    cfg = llm.cfg
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * llm.capacity * cfg.head_dim
    return 4 * (linears + norms + head + cfg.dim), 4 * kv


def export_model(key: str, model: Model, workdir: Path, formats=("kiln", "onnx", "pt")) -> dict[str, float]:
    """Write key.kiln, key.onnx and key.pt (the pickled eager module, for the RSS
    subprocess) unless present; returns the seconds each export took."""
    times = {}
    for fmt in formats:
        path = workdir / f"{key}.{fmt}"
        if path.exists():
            continue
        start = time.perf_counter()
        with quiet():
            if fmt == "kiln":
                kiln_export(model.eager, model.example, path, dynamic_shapes=model.dynamic_shapes)
            elif fmt == "onnx":
                torch.onnx.export(model.onnx_module or model.eager, model.onnx_example or model.example,
                                  str(path), dynamo=True,
                                  dynamic_shapes=model.onnx_dynamic_shapes or model.dynamic_shapes,
                                  input_names=model.onnx_input_names)
            else:
                torch.save(model.eager, path)
        times[fmt] = time.perf_counter() - start
    return times


def ort_optimize(key: str, model: Model, workdir: Path) -> None:
    """Write key.ortopt.onnx, key.onnx after ONNX Runtime's transformer optimizer (the fusions
    ORT's own docs recommend for BERT-like models:
    https://onnxruntime.ai/docs/performance/transformers-optimization.html), and key.ortopt.txt,
    a line saying what it fused or why there is no such file. Both are kept with --keep."""
    note = workdir / f"{key}.ortopt.txt"
    if note.exists():
        return
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:
        note.write_text(f"not run: onnxruntime.transformers.optimizer does not import ({e})")
        return
    try:
        with quiet():
            optimized = optimize_model(str(workdir / f"{key}.onnx"), **model.ort_optimize)
            optimized.save_model_to_file(str(workdir / f"{key}.ortopt.onnx"))
            fused = optimized.get_fused_operator_statistics()
    except Exception as e:  # noqa: BLE001  (any failure is reported in the table, not fatal)
        (workdir / f"{key}.ortopt.onnx").unlink(missing_ok=True)
        note.write_text(f"not run: optimize_model failed ({type(e).__name__}: {e})")
        return
    counts = ", ".join(f"{op} {n}" for op, n in sorted(fused.items()) if n) or "nothing"
    # The fusions that make a BERT fast on CPU, named when absent so a short list is not mistaken for a full one.
    missed = ", ".join(op for op in ("Attention", "EmbedLayerNormalization", "SkipLayerNormalization")
                       if op in fused and not fused[op])
    note.write_text(f"the optimizer fused {counts}" + (f" (none of {missed})" if missed else ""))


# --------------------------------------------------------------------------- runtimes


class KilnRunner:
    def __init__(self, path: Path, gemm_precision: str = ""):
        self.method = kiln.load(path, gemm_precision=gemm_precision).load_method("forward")

    def prepare(self, row: Row):
        if row.prefix:
            self.method.reset_state()
            self.method(*row.prefix)
        method, inputs = self.method, row.inputs
        return lambda: method(*inputs)[0]


class OrtRunner:
    def __init__(self, path: Path, threads: int, num_state: int):
        ort = need_ort()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        inputs = self.session.get_inputs()
        self.names = [i.name for i in inputs]
        self.num_state = num_state
        self.empty_state = [np.zeros(i.shape, np.float32) for i in inputs[len(inputs) - num_state:]]

    def prepare(self, row: Row):
        state = self.empty_state
        if row.prefix:  # outputs after the first are the updated state, in input order
            state = self.session.run(None, dict(zip(self.names, [*row.prefix, *state])))[1:]
        session, feed = self.session, dict(zip(self.names, [*row.inputs, *state]))
        if not self.num_state:
            return lambda: session.run(None, feed)[0]
        return self._bound(feed)

    def _bound(self, feed: dict):
        """A call through IO binding: the inputs (the KV caches above all) are bound once as
        OrtValues over their arrays, and every output is bound to a preallocated array, so no
        call converts a cache in or allocates one out; ORT at its best for a decode loop
        (https://onnxruntime.ai/docs/performance/tune-performance/iobinding.html). Every call
        reads the same caches and writes the same output buffers: the same step each time."""
        ort = need_ort()
        session = self.session
        shapes = [o.shape for o in session.run(None, feed)]  # the outputs' concrete shapes
        binding = session.io_binding()
        values = []  # OrtValues over numpy arrays: both must outlive the binding
        for name, array in feed.items():
            values.append(ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array)))
            binding.bind_ortvalue_input(name, values[-1])
        outputs = [np.empty(shape, np.float32) for shape in shapes]
        for meta, array in zip(session.get_outputs(), outputs):
            values.append(ort.OrtValue.ortvalue_from_numpy(array))
            binding.bind_ortvalue_output(meta.name, values[-1])
        logits = outputs[0]

        def call():
            session.run_with_iobinding(binding)
            return logits

        call.keep = (binding, values, outputs)
        return call


class TorchRunner:
    def __init__(self, module: nn.Module, reset=None):
        self.module, self.reset = module, reset

    def prepare(self, row: Row):
        if row.prefix:
            if self.reset:
                self.reset(self.module)
            self.module(*map(torch.from_numpy, row.prefix))
        module, inputs = self.module, [torch.from_numpy(a) for a in row.inputs]
        return lambda: module(*inputs).numpy()


def set_threads(n: int) -> None:
    os.environ["KILN_NUM_THREADS"] = str(n)
    kiln.set_num_threads(n)
    torch.set_num_threads(n)
    if ET_MISSING is None:
        peers.set_threads(n)


def rss_kb(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field_name} in /proc/self/status")


def rss_child(spec: dict) -> None:
    """Subprocess entry: peak RSS growth (MB) of loading `runtime`'s model and running one row."""
    global ET_MISSING
    threads, workdir, runtime = spec["threads"], Path(spec["workdir"]), spec["runtime"]
    ET_MISSING = None if runtime == "et" else "not used in this subprocess"
    set_threads(threads)
    torch.set_grad_enabled(False)
    data = np.load(workdir / f"{spec['row']}.npz")
    row = Row(spec["row"], spec["model"], "", [data[f"in{i}"] for i in range(spec["num_inputs"])],
              [data[f"pre{i}"] for i in range(spec["num_prefix"])])
    if runtime == "ort":
        need_ort()  # imported before the baseline: the library is not the model
    if runtime == "et":
        from executorch.extension.pybindings import portable_lib  # noqa: F401  (likewise)
    base = rss_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    stem = workdir / spec["model"]
    if runtime == "kiln":
        runner = KilnRunner(stem.with_suffix(".kiln"))
    elif runtime == "ort":
        runner = OrtRunner(workdir / (spec["onnx"] or f"{spec['model']}.onnx"), threads, spec["num_state"])
    elif runtime == "et":
        runner = peers.EtRunner(workdir / f"{spec['row']}.pte")
    else:
        # The pickled eager module, weights memory-mapped like kiln's.
        module = torch.load(stem.with_suffix(".pt"), mmap=True, weights_only=False)
        runner = TorchRunner(module, smollm2.reset_cache if isinstance(module, smollm2.Llama) else None)
    call = runner.prepare(row)
    for _ in range(3):
        call()
    print(json.dumps({"mb": (rss_kb("VmHWM") - base) / 1024}))


def rss_growth(runtime: str, row: Row, model: Model, threads: int, workdir: Path, onnx: str = "") -> float:
    spec = {"runtime": runtime, "row": row.name, "model": row.model, "threads": threads,
            "workdir": str(workdir), "num_inputs": len(row.inputs), "num_prefix": len(row.prefix),
            "num_state": model.num_state, "onnx": onnx}
    env = {**os.environ, "KILN_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, __file__, "--rss-child", json.dumps(spec)], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"the RSS subprocess for {runtime} / {row.name} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])["mb"]


# --------------------------------------------------------------------------- timing


def other_threads_cpu() -> float:
    """CPU seconds used so far by this process's threads other than the calling one."""
    me, total = str(threading.get_native_id()), 0
    for tid in os.listdir("/proc/self/task"):
        if tid != me:
            with contextlib.suppress(OSError):  # the thread may have exited
                total += int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
    return total / 1e9


def settle(timeout: float = 0.3, window: float = 0.005) -> None:
    """Wait until no other thread of this process is running: after a call, ONNX
    Runtime's, OpenMP's and OpenBLAS's workers spin for tens of ms waiting for
    more work, which would take a core from whichever runtime is timed next."""
    deadline = time.perf_counter() + timeout
    before = other_threads_cpu()
    while time.perf_counter() < deadline:
        time.sleep(window)
        now = other_threads_cpu()
        if now - before < 0.05 * window:
            return
        before = now


def interleaved(calls: dict, rounds: int, budget: float, min_rounds: int = 3, repeat: int = 1,
                warmup: int = 1, repeats: dict | None = None) -> tuple[dict[str, float], int]:
    """Median seconds per call of each callable, and the number of rounds run.

    Every round times `repeat` (or `repeats[name]`) back-to-back calls of each callable, after the
    previous runtime's threads have settled and one untimed call of its own (which wakes its
    threads: on a VM a thread pool woken from idle for a single timed call lost most of its
    second thread's gain, docs/quantization.md), starting with a different one each round.
    Stops after `rounds` rounds, or after `min_rounds` once `budget` seconds have passed.
    """
    names = list(calls)
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    samples: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    done = 0
    while done < rounds and (done < min_rounds or time.perf_counter() - start < budget):
        shift = done % len(names)
        for name in names[shift:] + names[:shift]:
            fn, reps = calls[name], (repeats or {}).get(name, repeat)
            settle()
            fn()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            samples[name].append((time.perf_counter() - t0) / reps)
        done += 1
    return {n: statistics.median(v) for n, v in samples.items()}, done


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """max |out - ref| / max |ref|: the measure of agreement with eager PyTorch (float32 target: within 1e-4)."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        return math.inf
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


# --------------------------------------------------------------------------- tables


def load_limit(threads: int) -> float:
    """The 1-minute load average above which a section's verdicts are withheld: the
    benchmark's own runnable threads (`threads`: one runtime runs at a time) plus a quarter
    of the cores for everything else, past which other work takes a core often enough to
    move a median by more than the margins the verdicts judge."""
    return threads + LOAD_SHARE * os.cpu_count()


def load_rule() -> str:
    return (f"verdicts are withheld when the 1-minute load average at a section's start or end "
            f"exceeds its thread count + {LOAD_SHARE:g} x {os.cpu_count()} cores (the benchmark's "
            "own threads plus a quarter of the machine)")


class Section:
    """The load average at the start and end of one section of measurements (a table);
    `judge` replaces the table's timing verdicts when the machine was loaded meanwhile."""

    def __init__(self, threads: int):
        self.threads, self.start = threads, os.getloadavg()[0]

    def judge(self, *tables: Table) -> None:
        end = os.getloadavg()[0]
        worst, limit = max(self.start, end), load_limit(self.threads)
        for table in tables:
            if worst > limit and table.verdict is not None:
                for row in table.rows:
                    if row[table.verdict] in ("ok", "miss"):  # WRONG is about results, not time
                        row[table.verdict] = f"withheld: machine loaded (load average {worst:.2f})"
            table.notes.append(f"Load average (1 min): {self.start:.2f} at the section's start, {end:.2f} at "
                               f"its end; verdicts {'withheld' if worst > limit else 'given'} "
                               f"(limit {limit:g} at {self.threads} thread(s)).")


@dataclass
class Table:
    title: str
    headers: list
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    left: int = 1  # leading columns that hold names, aligned left
    verdict: int | None = None  # column of the timing verdicts that Section.judge may withhold

    def render(self, markdown: bool) -> str:
        if markdown:
            lines = [f"**{self.title}**", "", "| " + " | ".join(self.headers) + " |",
                     "|" + "|".join("---" if i < self.left else "---:" for i in range(len(self.headers))) + "|"]
            lines += ["| " + " | ".join(map(str, r)) + " |" for r in self.rows]
            lines += [""] + [f"{n}  " for n in self.notes]
            return "\n".join(lines).rstrip() + "\n"
        widths = [max(len(str(x)) for x in col) for col in zip(self.headers, *self.rows)]
        fmt = lambda r: "  ".join(str(x).ljust(w) if i < self.left else str(x).rjust(w)  # noqa: E731
                                  for i, (x, w) in enumerate(zip(r, widths)))
        lines = [self.title, fmt(self.headers), fmt(["-" * w for w in widths])]
        lines += [fmt(r) for r in self.rows] + self.notes
        return "\n".join(lines) + "\n"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}" if seconds < 0.1 else f"{seconds * 1e3:.0f}"


def err(e: float) -> str:
    return f"{e:.0e}" + (" WRONG" if e > WRONG else "")


# --------------------------------------------------------------------------- benchmarks


def bench_models(models, rows, threads, workdir, args, probe: Probe) -> list[Table]:
    section = Section(threads)
    table = Table(f"Models, {threads} thread(s): median ms per call ({args.rounds} rounds at most)",
                  ["model", "input", "kiln ms", "ort ms", "et ms", "torch ms", "kiln/ort", "kiln/et", "kiln/torch",
                   f"<= {TARGET_VS_ORT}x ort", "err kiln", "err ort", "err et", "rss+ kiln MB", "rss+ ort MB",
                   "rss+ et MB", "rss+ torch MB", "rounds"], left=2, verdict=9)
    tables = [table]
    decode = stream_bytes = None
    opt_notes, et_cores = [], []
    for key, model in models.items():
        runners = {"kiln": KilnRunner(workdir / f"{key}.kiln"),
                   "ort": OrtRunner(workdir / f"{key}.onnx", threads, model.num_state),
                   "torch": TorchRunner(model.eager, model.reset)}
        if (workdir / f"{key}.ortopt.onnx").exists():
            runners["ort_opt"] = OrtRunner(workdir / f"{key}.ortopt.onnx", threads, model.num_state)
        if model.ort_optimize:
            opt_notes.append(f"{key}: " + (workdir / f"{key}.ortopt.txt").read_text().strip())
        for row in (r for r in rows if r.model == key):
            calls = {name: r.prepare(row) for name, r in runners.items()}
            if ET_MISSING is None and (workdir / f"{row.name}.pte").exists():
                calls["et"] = peers.EtRunner(workdir / f"{row.name}.pte").prepare(row)
            outs = {name: np.asarray(fn()) for name, fn in calls.items()}
            errors = {name: rel_err(outs[name], outs["torch"]) for name in calls if name != "torch"}
            if "et" in calls:
                settle()
                et_cores.append(f"{row.name} {peers.cpu_per_wall(calls['et']):.2f}")
            timed = dict(calls)
            if row.name == "smollm2_decode":
                # Timed in the same rounds as the step it bounds, by the same clock.
                timed["stream"], stream_bytes = probe.stream(threads)
            med, done = interleaved(timed, args.rounds, args.budget)
            rss = {name: rss_growth(name, row, model, threads, workdir) for name in RUNTIMES + ("et",)
                   if name in calls}
            for name in calls:
                args.latency.setdefault(row.name, {}).setdefault(
                    LABELS[name], {})[threads] = med[name]
            for ort_name, suffix in (("ort", ""), ("ort_opt", ", ORT transformer-optimized")):
                if ort_name not in calls:
                    continue
                if ort_name != "ort":
                    rss[ort_name] = rss_growth("ort", row, model, threads, workdir, f"{key}.ortopt.onnx")
                ratio = med["kiln"] / med[ort_name]
                verdict = "WRONG" if errors["kiln"] > WRONG else "ok" if ratio <= TARGET_VS_ORT else "miss"
                has_et = "et" in calls
                table.rows.append([row.name + suffix, row.label, ms(med["kiln"]), ms(med[ort_name]),
                                   ms(med["et"]) if has_et else "-", ms(med["torch"]), f"{ratio:.2f}",
                                   f"{med['kiln'] / med['et']:.2f}" if has_et else "-",
                                   f"{med['kiln'] / med['torch']:.2f}", verdict,
                                   err(errors["kiln"]), err(errors[ort_name]), err(errors["et"]) if has_et else "-",
                                   *(f"{rss[n]:.0f}" if n in rss else "-" for n in ("kiln", ort_name, "et", "torch")),
                                   done])
            if row.name == "smollm2_decode":
                decode = med
            print(f"  [{threads} thread(s)] {row.name}: " +
                  ", ".join(f"{name} {ms(t)} ms" for name, t in med.items()), file=sys.stderr)
        del runners
    table.notes += [
        "kiln/ort and kiln/torch: below 1, kiln is faster. Verdict: kiln/ort against the target "
        f"{TARGET_VS_ORT}x (WRONG: kiln's error above {WRONG:g}).",
        "err: max |out - torch| / max |torch| against eager PyTorch on the same inputs.",
        "rss+: peak RSS growth of loading the model and running this row 3 times, in a fresh "
        "subprocess per runtime (baseline after imports); torch loads the pickled module with mmap=True.",
    ]
    table.notes += et_notes(rows, workdir, threads)
    if et_cores:
        table.notes.append("et CPU time / wall time over 5 calls (about the cores it used): " + ", ".join(et_cores))
    if opt_notes:
        table.notes.append("ORT transformer-optimized: the same ONNX file after onnxruntime.transformers."
                           "optimizer.optimize_model(model_type=\"bert\"), in the same rounds as the plain "
                           "row (kiln and torch columns shared); " + "; ".join(opt_notes))
    if "smollm2" in models:
        table.notes.append(f"smollm2: KV cache of {LLM_CAPACITY} positions; decode is one token at position "
                           f"{PREFILL} after a {PREFILL}-token prefill. ORT runs a functional copy of the model "
                           "that takes the caches as inputs and returns the updated caches, through IO binding "
                           "(caches bound once as OrtValues, outputs into preallocated arrays).")
    if decode is not None:
        gbs = stream_bytes / decode["stream"] / 1e9
        weight_bytes, kv_bytes = decode_read_bytes(models["smollm2"].eager)
        bound = (weight_bytes + kv_bytes) / (gbs * 1e9)
        bw = Table(f"SmolLM2 decode step vs the memory-bandwidth bound, {threads} thread(s)",
                   ["runtime", "decode ms", "bound ms", "share of bound", f">= {TARGET_BANDWIDTH:.0%}"],
                   verdict=4)
        for name in RUNTIMES:
            share = bound / decode[name]
            bw.rows.append([name, ms(decode[name]), ms(bound), f"{share:.0%}",
                            ("ok" if share >= TARGET_BANDWIDTH else "miss") if name == "kiln" else ""])
        bw.notes.append(f"bound = {(weight_bytes + kv_bytes) / 1e6:.1f} MB read per token ({weight_bytes / 1e6:.1f} "
                        "MB of fp32 weights: every linear weight, the tied output head, norms, one embedding "
                        f"row; {kv_bytes / 1e6:.1f} MB of KV caches: keys and values of all {LLM_CAPACITY} slots, "
                        f"which the step attends over) / {gbs:.1f} GB/s read bandwidth at {threads} thread(s): "
                        f"a read-only sum over {stream_bytes / 2**20:.0f} MiB (16x the last-level cache or more) "
                        "timed in the decode row's rounds with the same clock (median).")
        tables.append(bw)
    section.judge(*tables)
    return tables


def bench_call_overhead(threads, workdir, args) -> Table:
    """x + y on 4 floats: what a Python call costs beyond the work itself."""
    section = Section(threads)
    x, y = np.arange(4, dtype=np.float32), np.ones(4, dtype=np.float32)
    model = Model(Add(), (torch.from_numpy(x), torch.from_numpy(y)), onnx_input_names=["x", "y"])
    export_model("add", model, workdir, ("kiln", "onnx"))
    kiln_method = KilnRunner(workdir / "add.kiln").method
    session = OrtRunner(workdir / "add.onnx", threads, 0).session
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    feed = {"x": x, "y": y}
    calls = {"kiln": lambda: kiln_method(x, y), "ort": lambda: session.run(None, feed),
             "torch": lambda: tx + ty}
    med, done = interleaved(calls, args.rounds, args.budget, repeat=2000)
    us = {n: med[n] * 1e6 for n in RUNTIMES}
    table = Table(f"Python call overhead, {threads} thread(s): x + y on 4 floats, us per call",
                  ["method", "kiln us", "ort us", "torch us", "kiln/ort", "kiln/torch",
                   f"<= {TARGET_CALL_US:g} us", "rounds"], verdict=6)
    table.rows.append(["add [4]", f"{us['kiln']:.2f}", f"{us['ort']:.2f}", f"{us['torch']:.2f}",
                       f"{us['kiln'] / us['ort']:.2f}", f"{us['kiln'] / us['torch']:.2f}",
                       "ok" if us["kiln"] <= TARGET_CALL_US else "miss", done])
    table.notes.append("kiln: method(x, y) on numpy arrays (returns a list of new arrays); ORT: "
                       "session.run(None, feed); torch: eager x + y on tensors. 2000 calls per sample.")
    section.judge(table)
    return table

LABELS = {"kiln": "kiln", "ort": "ONNX Runtime", "ort_opt": "ORT transformer-opt", "et": "ExecuTorch+XNNPACK",
          "torch": "eager PyTorch", "et_int8": "ExecuTorch int8", "ort_int8": "ORT int8"}


def int8_kind(row: Row) -> str | None:
    """The int8 flow of a row: static (calibrated) for the CNNs, dynamic for MiniLM, none otherwise."""
    return "static" if row.model in CNNS else "dynamic" if row.model == "minilm" else None


def calibration_batches(row: Row) -> list[tuple]:
    """The int8 flows' calibration: the row's input and 3 more seeded random images (the same for
    ExecuTorch and ORT; random images, so the activation ranges are not those of real photos)."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"calibrate {row.name}".encode()))
    return [tuple(torch.from_numpy(a) for a in row.inputs)] + [(torch.randn(IMAGE, generator=gen),)
                                                                for _ in range(3)]


def export_executorch(models: dict, rows: list[Row], workdir: Path, int8: bool) -> None:
    """ROW.pte (fp32) for each row, lowered with the row's shapes, and for the int8 table
    ROW.int8.pte and MODEL.int8.onnx; files present are reused (--keep)."""
    if ET_MISSING is not None:
        return
    for row in rows:
        model = models[row.model]
        if model.num_state or row.prefix:
            continue  # SmolLM2: see et_notes
        example = tuple(torch.from_numpy(a) for a in row.inputs)
        kind = int8_kind(row) if int8 else None
        jobs = [(workdir / f"{row.name}.pte", None)] + ([(workdir / f"{row.name}.int8.pte", kind)] if kind else [])
        for path, quant in jobs:
            if path.exists():
                continue
            print(f"lowering {path.name} for ExecuTorch+XNNPACK...", end=" ", file=sys.stderr, flush=True)
            with quiet():
                info = peers.lower(model.eager, example, path, quant,
                                   calibration_batches(row) if quant == "static" else ())
            print(f"{info['seconds']:.1f} s, {info['delegates']} delegate(s)", file=sys.stderr)
        onnx_int8 = workdir / f"{row.model}.int8.onnx"
        if kind and not onnx_int8.exists():
            print(f"quantizing {onnx_int8.name} for ONNX Runtime ({kind})...", file=sys.stderr, flush=True)
            with quiet():
                peers.ort_quantize(workdir / f"{row.model}.onnx", onnx_int8, kind,
                                   OrtRunner(workdir / f"{row.model}.onnx", 1, 0).names,
                                   [tuple(t.numpy() for t in b) for b in calibration_batches(row)])


def et_notes(rows: list[Row], workdir: Path, threads: int) -> list[str]:
    if ET_MISSING is not None:
        return [f"et: ExecuTorch skipped: {ET_MISSING}. No int8 table either (it needs ExecuTorch's int8 models)."]
    notes = [f"et: ExecuTorch {peers.version()} with its XNNPACK delegate (torch.export, "
             "to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()]), to_executorch, run through "
             "executorch.extension.pybindings.portable_lib), fp32, one program per row lowered with that row's "
             f"static shapes; its threadpool set to {threads} with _unsafe_reset_threadpool and checked."]
    for row in rows:
        if (workdir / f"{row.name}.pte").exists():
            notes.append(f"et {row.name}: " + peers.describe(workdir / f"{row.name}.pte"))
    if any(row.model == "smollm2" for row in rows):
        notes.append("et smollm2: not run. Its KV cache is module buffers updated in place (index_copy_), "
                     "which XNNPACK does not delegate, and lowering the 135M-parameter model was not attempted "
                     "in this version of the script (MiniLM's 22M take 45-190 s to lower on this machine).")
    return notes


def bench_int8(models: dict, rows: list[Row], threads: int, workdir: Path, args) -> Table | None:
    """ExecuTorch's and ONNX Runtime's int8 models beside their fp32 ones and kiln's fp32, in the
    same interleaved rounds, with each int8 output's error and cosine against eager fp32."""
    rows = [r for r in rows if int8_kind(r) and (workdir / f"{r.name}.int8.pte").exists()]
    if not rows or ET_MISSING is not None:
        return None
    section = Section(threads)
    table = Table(f"int8, {threads} thread(s): median ms per call ({args.rounds} rounds at most); kiln fp32 "
                  "here (kiln's int8_dynamic: the dynamic int8 table)",
                  ["model", "input", "kiln fp32", "kiln int8", "et fp32", "et int8", "ort fp32", "ort int8",
                   "et int8/fp32", "ort int8/fp32", "kiln fp32/et int8", "kiln fp32/ort int8",
                   "err et int8", "cos et int8", "err ort int8", "cos ort int8", "rounds"], left=2)
    for row in rows:
        model = models[row.model]
        ort = lambda name: OrtRunner(workdir / name, threads, 0).prepare(row)  # noqa: E731
        calls = {"kiln": KilnRunner(workdir / f"{row.model}.kiln").prepare(row),
                 "et": peers.EtRunner(workdir / f"{row.name}.pte").prepare(row),
                 "et_int8": peers.EtRunner(workdir / f"{row.name}.int8.pte").prepare(row),
                 "ort": ort(f"{row.model}.onnx"), "ort_int8": ort(f"{row.model}.int8.onnx")}
        ref = np.asarray(TorchRunner(model.eager).prepare(row)())
        outs = {name: np.asarray(fn()) for name, fn in calls.items()}
        med, done = interleaved(calls, args.rounds, args.budget)
        for name in calls:
            args.latency_int8.setdefault(row.name, {}).setdefault(
                LABELS[name] + (" fp32" if name in ("kiln", "et", "ort") else ""), {})[threads] = med[name]
        table.rows.append([row.name, row.label, ms(med["kiln"]), "none", ms(med["et"]), ms(med["et_int8"]),
                           ms(med["ort"]), ms(med["ort_int8"]), f"{med['et_int8'] / med['et']:.2f}",
                           f"{med['ort_int8'] / med['ort']:.2f}", f"{med['kiln'] / med['et_int8']:.2f}",
                           f"{med['kiln'] / med['ort_int8']:.2f}",
                           f"{rel_err(outs['et_int8'], ref):.2g}", f"{peers.cosine(outs['et_int8'], ref):.4f}",
                           f"{rel_err(outs['ort_int8'], ref):.2g}", f"{peers.cosine(outs['ort_int8'], ref):.4f}",
                           done])
        print(f"  [{threads} thread(s)] int8 {row.name}: " +
              ", ".join(f"{name} {ms(t)} ms" for name, t in med.items()), file=sys.stderr)
    kinds = sorted({int8_kind(r) for r in rows})
    table.notes += [
        "kiln int8: see the dynamic int8 table (kiln's int8_dynamic, MiniLM); here the int8 peers are compared "
        "with kiln's fp32; below 1 in kiln fp32/X int8, kiln's fp32 is faster.",
        "err: max |int8 - fp32 eager| / max |fp32 eager|; cos: cosine of the int8 output to eager fp32's "
        "(MiniLM: the unit-norm embedding; CNNs: the logits). Not a task accuracy.",
    ] + [f"{kind}: ExecuTorch {peers.QUANT_SCHEMES[kind]}, lowered to XNNPACK; ONNX Runtime "
         f"{peers.ORT_SCHEMES[kind]}" for kind in kinds] + [
        f"et int8 {r.name}: " + peers.describe(workdir / f"{r.name}.int8.pte") for r in rows]
    if "static" in kinds:
        table.notes.append("static calibration: the row's input and 3 seeded random images, the same for both.")
    section.judge(table)
    return table


def export_kiln_int8(models: dict, rows: list[Row], workdir: Path) -> None:
    """MODEL.int8_dynamic.kiln (export(..., quantize="int8_dynamic")) and MODEL.int8.onnx (ONNX
    Runtime's quantize_dynamic) for the rows with a dynamic int8 flow; files present are reused."""
    for key in sorted({r.model for r in rows if int8_kind(r) == "dynamic"}):
        model, path = models[key], workdir / f"{key}.int8_dynamic.kiln"
        if not path.exists():
            print(f"exporting {path.name}...", file=sys.stderr, flush=True)
            with quiet():
                kiln_export(model.eager, model.example, path, dynamic_shapes=model.dynamic_shapes,
                            quantize="int8_dynamic")
        onnx_int8 = workdir / f"{key}.int8.onnx"
        if not onnx_int8.exists():
            print(f"quantizing {onnx_int8.name} for ONNX Runtime (dynamic)...", file=sys.stderr, flush=True)
            with quiet():
                peers.ort_quantize(workdir / f"{key}.onnx", onnx_int8, "dynamic", [], [])


def bench_kiln_int8(models: dict, rows: list[Row], threads: int, workdir: Path, args) -> Table | None:
    """kiln's int8_dynamic and its fp32 program with bfloat16 GEMMs (kiln.load(gemm_precision=
    "bfloat16")) beside its fp32 and ONNX Runtime's fp32 and quantize_dynamic int8, in the same
    interleaved rounds, with each reduced-precision output's error and cosine against eager fp32."""
    rows = [r for r in rows if int8_kind(r) == "dynamic" and (workdir / f"{r.model}.int8_dynamic.kiln").exists()]
    if not rows:
        return None
    section = Section(threads)
    title = f"dynamic int8 and bf16 GEMMs, {threads} thread(s): median ms per call ({args.rounds} rounds at most)"
    table = Table(title,
                  ["model", "input", "kiln fp32", "kiln int8", "kiln bf16", "ort fp32", "ort int8", "kiln int8/fp32",
                   "kiln bf16/fp32", "ort int8/fp32", "kiln int8/ort int8", "err kiln int8", "cos kiln int8",
                   "err kiln bf16", "cos kiln bf16", "err ort int8", "cos ort int8", "rounds"], left=2)
    for row in rows:
        ort = lambda name: OrtRunner(workdir / name, threads, 0).prepare(row)  # noqa: E731
        calls = {"kiln": KilnRunner(workdir / f"{row.model}.kiln").prepare(row),
                 "kiln_int8": KilnRunner(workdir / f"{row.model}.int8_dynamic.kiln").prepare(row),
                 "kiln_bf16": KilnRunner(workdir / f"{row.model}.kiln", "bfloat16").prepare(row),
                 "ort": ort(f"{row.model}.onnx"), "ort_int8": ort(f"{row.model}.int8.onnx")}
        ref = np.asarray(TorchRunner(models[row.model].eager).prepare(row)())
        outs = {name: np.asarray(fn()) for name, fn in calls.items()}
        med, done = interleaved(calls, args.rounds, args.budget)
        for name in calls:
            # The int8 table's labels, so that one runtime gets one column in the speedup table.
            label = {"kiln": "kiln fp32", "kiln_int8": "kiln int8", "kiln_bf16": "kiln bf16",
                     "ort": LABELS["ort"] + " fp32", "ort_int8": LABELS["ort_int8"]}[name]
            args.latency_int8.setdefault(row.name, {}).setdefault(label, {})[threads] = med[name]
        table.rows.append([row.name, row.label, ms(med["kiln"]), ms(med["kiln_int8"]), ms(med["kiln_bf16"]),
                           ms(med["ort"]), ms(med["ort_int8"]), f"{med['kiln_int8'] / med['kiln']:.2f}",
                           f"{med['kiln_bf16'] / med['kiln']:.2f}",
                           f"{med['ort_int8'] / med['ort']:.2f}", f"{med['kiln_int8'] / med['ort_int8']:.2f}",
                           f"{rel_err(outs['kiln_int8'], ref):.2g}", f"{peers.cosine(outs['kiln_int8'], ref):.4f}",
                           f"{rel_err(outs['kiln_bf16'], ref):.2g}", f"{peers.cosine(outs['kiln_bf16'], ref):.4f}",
                           f"{rel_err(outs['ort_int8'], ref):.2g}", f"{peers.cosine(outs['ort_int8'], ref):.4f}",
                           done])
        print(f"  [{threads} thread(s)] dynamic int8 {row.name}: " +
              ", ".join(f"{name} {ms(t)} ms" for name, t in med.items()), file=sys.stderr)
    table.notes += [
        "kiln int8: export(..., quantize=\"int8_dynamic\"): q8_0 weights per output channel, each input row of every "
        "linear quantized to bytes with a zero point at run time (compute=\"int8_row\", docs/quantization.md); "
        "embeddings q8_0. "
        f"ORT int8: {peers.ORT_SCHEMES['dynamic']}.",
        "kiln bf16: the fp32 program loaded with gemm_precision=\"bfloat16\": every linear's input and weight "
        "rounded to bfloat16, float32 sums (vdpbf16ps where the CPU has AVX512_BF16, emulated elsewhere; "
        "docs/kernels.md); attention's products and everything else stay float32.",
        "err: max |out - fp32 eager| / max |fp32 eager|; cos: cosine of the unit-norm embedding to eager fp32's.",
    ]
    section.judge(table)
    return table


def speedup_table(latency: dict, threads: list[int], title: str) -> Table | None:
    """Every runtime's median latency at the fewest threads over that at the most, per row."""
    lo, hi = min(threads), max(threads)
    if lo == hi or not latency:
        return None
    runtimes = list(dict.fromkeys(name for per in latency.values() for name in per))
    table = Table(f"{title}: speedup from {lo} to {hi} threads (median ms at {lo} / at {hi}; "
                  f"{hi / lo:g} is perfect scaling)", ["model", *runtimes])
    for row, per in latency.items():
        table.rows.append([row] + [f"{per[n][lo] / per[n][hi]:.2f}" if n in per and lo in per[n] and hi in per[n]
                                   else "-" for n in runtimes])
    table.notes.append("Each runtime's two medians come from its own thread-count pass (the 1-thread pass runs "
                       "first, the 2-thread one after): on a loaded machine the load of the two passes differs.")
    return table


def gemm_shapes(quick: bool) -> list[tuple[int, int, int, str]]:
    """(M, K, N, where it comes from): out[M, N] = a[M, K] @ b[K, N]."""
    square = [(n, n, n, "square") for n in ((64, 256) if quick else (64, 128, 256, 512, 1024, 2048))]
    if quick:
        return square + [(128, 384, 1536, "MiniLM FFN up"), (1, 576, 1536, "SmolLM2 gate/up, decode")]
    return square + [
        (128, 384, 384, "MiniLM qkv/out, 128 tok"), (128, 384, 1536, "MiniLM FFN up"),
        (128, 1536, 384, "MiniLM FFN down"),
        (64, 576, 576, "SmolLM2 q/o, prefill 64"), (64, 576, 192, "SmolLM2 k/v, prefill"),
        (64, 576, 1536, "SmolLM2 gate/up, prefill"), (64, 1536, 576, "SmolLM2 down, prefill"),
        (64, 576, 49152, "SmolLM2 head, prefill"),
        (1, 576, 576, "SmolLM2 q/o, decode"), (1, 576, 1536, "SmolLM2 gate/up, decode"),
        (1, 1536, 576, "SmolLM2 down, decode"), (1, 576, 49152, "SmolLM2 head, decode"),
        (8, 576, 1536, "SmolLM2 gate/up, 8 sequences"),
    ]


def bench_gemm(threads, workdir, args, peak) -> Table:
    from threadpoolctl import threadpool_limits

    section = Section(threads)
    llc = last_level_cache_bytes()
    table = Table(f"GEMM, {threads} thread(s): GFLOP/s (share of the {peak:.0f} GFLOP/s FMA peak at "
                  f"{threads} thread(s))",
                  ["M x K x N", "shape of", "weights", "kiln a@b", "numpy", "torch", "kiln a@b/numpy",
                   f">= {TARGET_PEAK_SHARE:.0%} peak", "kiln W prepacked", "err kiln", "rounds"],
                  left=3, verdict=7)
    for m, k, n, origin in gemm_shapes(args.quick):
        gen = np.random.default_rng([m, k, n])  # same operands whichever shapes run (--keep reuses W)
        a = gen.standard_normal((m, k), dtype=np.float32)
        b = gen.standard_normal((k, n), dtype=np.float32)
        tag = f"{m}x{k}x{n}"
        export_model(f"matmul_{tag}", Model(MatMul(), (torch.from_numpy(a), torch.from_numpy(b))), workdir,
                     ("kiln",))
        both = KilnRunner(workdir / f"matmul_{tag}.kiln").method
        # A decode step reads each weight once, long after its last use: shapes with M <= 8
        # run again over enough weight sets (2x the last-level cache) that no call finds its
        # weight in a cache, unless one weight is that large already.
        counts = [1]
        if m <= DECODE_M and b.nbytes < 2 * llc:
            counts.append(math.ceil(2 * llc / b.nbytes))
        for count in counts:
            bs = [b] + [np.random.default_rng([m, k, n, i]).standard_normal((k, n), dtype=np.float32)
                        for i in range(1, count)]
            # kiln's prepacked path: nn.Linear's layout, weights [N, K] constants of the program.
            weights = [torch.from_numpy(np.ascontiguousarray(w.T)) for w in bs]
            name = f"linear_{tag}" if count == 1 else f"linears_{tag}_x{count}"
            export_model(name, Model(LinearSet(weights), (torch.from_numpy(a),)), workdir, ("kiln",))
            const = KilnRunner(workdir / f"{name}.kiln").method
            out = np.empty((m, n), np.float32)
            ta, tout = torch.from_numpy(a), torch.empty(m, n)
            next_b = itertools.cycle(bs).__next__
            next_b_kiln = itertools.cycle(bs).__next__
            next_tb = itertools.cycle([torch.from_numpy(w) for w in bs]).__next__
            calls = {"kiln a@b": lambda: both(a, next_b_kiln()), "numpy": lambda: np.matmul(a, next_b(), out=out),
                     "torch": lambda: torch.matmul(ta, next_tb(), out=tout), "kiln W prepacked": lambda: const(a)}
            with threadpool_limits(limits=threads, user_api="blas"):
                refs = [a.astype(np.float64) @ w.astype(np.float64) for w in bs]
                error = max(max(rel_err(o, r) for o, r in zip(const(a), refs)),
                            max(rel_err(both(a, w)[0], r) for w, r in zip(bs, refs)))
                # Enough calls per sample to be well above the timer's and the call's overhead.
                t0 = time.perf_counter()
                np.matmul(a, b, out=out)
                repeat = max(1, min(1000, int(2e-3 / max(time.perf_counter() - t0, 1e-7))))
                med, done = interleaved(calls, args.gemm_rounds, args.budget, repeat=repeat,
                                        repeats={"kiln W prepacked": max(1, repeat // count)})
            med["kiln W prepacked"] /= count  # one call computes `count` products
            gflops = {name: 2 * m * k * n / t / 1e9 for name, t in med.items()}
            cell = lambda name: f"{gflops[name]:.1f} ({gflops[name] / peak:.0%})"  # noqa: E731
            judged = threads == 1 and min(m, k, n) >= 256
            share = gflops["kiln a@b"] / peak
            verdict = ("ok" if share >= TARGET_PEAK_SHARE else "miss") if judged else ""
            if error > WRONG:
                verdict = "WRONG"
            mb = count * b.nbytes / 1e6
            held = (f"1 set, {mb:.3g} MB" + (" (> LLC)" if b.nbytes > llc else "") if count == 1
                    else f"{count} sets, {mb:.0f} MB, rotated")
            table.rows.append([tag, origin, held, cell("kiln a@b"), cell("numpy"), cell("torch"),
                               f"{gflops['kiln a@b'] / gflops['numpy']:.2f}", verdict, cell("kiln W prepacked"),
                               err(error), done])
            print(f"  [{threads} thread(s)] GEMM {tag} ({held}): kiln a@b {gflops['kiln a@b']:.1f}, "
                  f"numpy {gflops['numpy']:.1f}, kiln W prepacked {gflops['kiln W prepacked']:.1f} GFLOP/s",
                  file=sys.stderr)
    table.notes += [
        "kiln a@b: both operands are inputs of the program, as they are for numpy (np.matmul(a, b, out=...) "
        "on OpenBLAS) and torch (torch.matmul(a, b, out=...)); kiln a@b/numpy compares those two.",
        "kiln W prepacked: F.linear(x, W) with W [N, K] a constant of the program, which kiln packs once at "
        "load (what the models' linears get); no other column has that advantage, so it is not in the ratio.",
        f"weights: 1 set: the same b on every call (in cache as far as it fits; > LLC: larger than the "
        f"{llc >> 20} MiB last-level cache). N sets, rotated: decode shapes (M <= {DECODE_M}) again with N "
        "different b of together 2x the last-level cache, the next one on every call, so each call reads its "
        "weights from memory as a decode step does; kiln W prepacked then runs one program holding the N "
        "weights whose call computes the N products (time per product shown).",
        f"Verdict (one thread, M, K, N >= 256): kiln a@b against {TARGET_PEAK_SHARE:.0%} of peak. "
        "err kiln: both kiln variants against a float64 product.",
    ]
    section.judge(table)
    return table


# --------------------------------------------------------------------------- main


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def header(args, probe_peak, dropped) -> list[str]:
    from threadpoolctl import threadpool_info

    ort = need_ort()
    import onnx
    import onnxscript

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [
        f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}; machine: {cpu}, {os.cpu_count()} cores; "
        f"load average {load_average()} (1, 5, 15 min)",
        f"python {platform.python_version()}, torch {torch.__version__}, onnxruntime {ort.__version__}, "
        f"onnx {onnx.__version__}, onnxscript {onnxscript.__version__}, numpy {np.__version__}, "
        f"kiln {kiln.__version__} ({kiln.runtime_library_path()})",
        f"threads: {args.threads}; rounds: at most {args.rounds} (GEMM {args.gemm_rounds}), "
        f"at least 3, {args.budget:g} s budget per row",
        "OpenBLAS env: " + (f"unset {dropped} for this process" if dropped else
                            "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE not set"),
    ]
    lines.append("ExecuTorch: " + (f"skipped: {ET_MISSING}" if ET_MISSING else
                                   f"executorch {peers.version()}, XNNPACK delegate, threadpool set per pass "
                                   "(_unsafe_reset_threadpool)"))
    lines.append(f"load: {load_rule()}")
    if os.getloadavg()[0] >= 1:
        lines.append("WARNING: other processes are using the cores: timings are noisy, the 2-thread "
                     "ones above all (OpenMP and OpenBLAS workers wait for descheduled peers)")
    for info in threadpool_info():
        if info.get("internal_api") == "openblas":
            lines.append(f"numpy BLAS: {info['internal_api']} {info.get('version')}, "
                         f"kernel {info.get('architecture')}, {info.get('threading_layer')} threading, "
                         f"{Path(info['filepath']).name}")
    lines.append("peak FMA (C++ probe, 12 independent 512-bit FMA chains, per second of CPU time): "
                 + ", ".join(f"{probe_peak(n):.1f} GFLOP/s at {n} thread(s)" for n in args.threads))
    return lines


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds per model row (default 20)")
    parser.add_argument("--gemm-rounds", type=int, default=10, help="rounds per GEMM shape (default 10)")
    parser.add_argument("--budget", type=float, default=60.0,
                        help="seconds per row after which no new round starts (once 3 are done)")
    parser.add_argument("--only", default="", help="comma-separated rows or models: "
                        + ", ".join(ROW_NAMES) + ", minilm, smollm2, call_overhead")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: 3 rounds, {', '.join(QUICK_ROWS)}, call overhead, 4 GEMM shapes "
                        "(one a decode shape, also with cold weights)")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--skip-gemm", action="store_true")
    parser.add_argument("--markdown", action="store_true", help="print the tables in Markdown")
    parser.add_argument("--skip-int8", action="store_true", help="no int8 table (ExecuTorch's and ORT's int8 models)")
    parser.add_argument("--plot", metavar="DIR", help="write the latency tables as PNG charts into DIR "
                        "(compare_fp32.png, compare_int8.png; needs matplotlib)")
    parser.add_argument("--keep", metavar="DIR", help="export into DIR and reuse what is there "
                        "(default: a temporary directory removed at exit)")
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    args.latency, args.latency_int8 = {}, {}  # row -> runtime -> threads -> median seconds
    if args.quick:
        args.rounds = args.gemm_rounds = 3
    args.only = [s for s in args.only.split(",") if s] or \
        (list(QUICK_ROWS) + ["call_overhead"] if args.quick else list(ROW_NAMES) + ["call_overhead"])
    unknown = set(args.only) - {*ROW_NAMES, "minilm", "smollm2", "call_overhead"}
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}")
    return args


def main() -> None:
    global ET_MISSING
    args = parse_args()
    if args.rss_child:
        return rss_child(json.loads(args.rss_child))
    need_ort()
    with quiet():
        ET_MISSING = peers.executorch_missing()
    torch.set_grad_enabled(False)
    torch.set_num_interop_threads(1)
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kiln-compare-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        probe = Probe(workdir)
        peaks = {n: probe.peak_gflops(n) for n in args.threads}
        lines = header(args, peaks.__getitem__, os.environ.get("KILN_BENCH_DROPPED"))
        print("\n".join(f"- {line}" if args.markdown else line for line in lines) + "\n", flush=True)

        models, rows = ({}, []) if args.skip_models else build_rows(args.only)
        for key, model in models.items():
            print(f"exporting {key}...", end=" ", file=sys.stderr, flush=True)
            times = export_model(key, model, workdir)
            print(", ".join(f"{n} {t:.1f} s" for n, t in times.items()) or "reused", file=sys.stderr)
            if model.ort_optimize:
                ort_optimize(key, model, workdir)
        if ET_MISSING:
            print(f"ExecuTorch skipped: {ET_MISSING}", file=sys.stderr)
        export_executorch(models, rows, workdir, not args.skip_int8)
        if not args.skip_int8:
            export_kiln_int8(models, rows, workdir)
        for row in rows:  # for the RSS subprocesses
            np.savez(workdir / f"{row.name}.npz", **{f"in{i}": a for i, a in enumerate(row.inputs)},
                     **{f"pre{i}": a for i, a in enumerate(row.prefix)})

        for threads in args.threads:
            set_threads(threads)
            load_before = load_average()
            tables: list[Table] = []
            if rows:
                tables += bench_models(models, rows, threads, workdir, args, probe)
                if not args.skip_int8:
                    tables += [t for t in [bench_int8(models, rows, threads, workdir, args),
                                           bench_kiln_int8(models, rows, threads, workdir, args)] if t]
            if not args.skip_models and "call_overhead" in args.only:
                tables.append(bench_call_overhead(threads, workdir, args))
            if not args.skip_gemm:
                tables.append(bench_gemm(threads, workdir, args, peaks[threads]))
            for table in tables:
                print(table.render(args.markdown), flush=True)
            print(f"Load average of the {threads}-thread pass: {load_before} at its start, "
                  f"{load_average()} at its end.\n", flush=True)
        for latency, title in ((args.latency, "Models, fp32"), (args.latency_int8, "int8")):
            table = speedup_table(latency, args.threads, title)
            if table:
                print(table.render(args.markdown), flush=True)
        if args.plot:
            stamp = f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load_average()} at the end"
            for latency, name, what in ((args.latency, "compare_fp32.png", "fp32"),
                                        (args.latency_int8, "compare_int8.png", "int8 peers beside fp32")):
                if latency:
                    runtimes = list(dict.fromkeys(n for per in latency.values() for n in per))
                    path = charts.plot_latency(latency, runtimes, Path(args.plot) / name,
                                               f"bench/compare.py, {what}: median ms per call ({stamp})")
                    print(f"chart: {path}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
