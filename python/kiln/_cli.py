"""The `kiln` command (also `python -m kiln`): SDK locators, inspect, run, profile, bench, ops, doctor
(and the LLM commands of _llm_cli.py: llm export, generate, chat, serve)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

from . import _llm_cli

LOCATORS = {
    "--cmakedir": "directory of kilnConfig.cmake (for CMAKE_PREFIX_PATH or kiln_DIR)",
    "--pkgconfigdir": "directory of kiln.pc (for PKG_CONFIG_PATH)",
    "--includes": "compiler flags for the headers (-I...)",
    "--libs": "linker flags for libkiln.so.0, with its RUNPATH",
    "--version": "kiln's version",
}

GEMM_PRECISIONS = ("float32", "bfloat16")
GEMM_PRECISION_HELP = ("as kiln.load(gemm_precision=...) / KILN_GEMM_PRECISION: bfloat16 rounds the operands of "
                       "products with a constant weight to bfloat16 (default: the program's own, else float32)")


def _locate(flag: str) -> str:
    import kiln

    if flag == "--cmakedir":
        return kiln.cmake_dir()
    if flag == "--pkgconfigdir":
        return kiln.pkgconfig_dir()
    if flag == "--includes":
        return f"-I{kiln.include_dir()}"
    if flag == "--libs":
        # Same RUNPATH as the CMake package: the lib dir, then $ORIGIN and
        # $ORIGIN/../lib through a response file (no shell or make escaping).
        rsp = os.path.join(kiln.cmake_dir(), "kiln-runpath.rsp")
        return f"{kiln.library_path()} -Wl,-rpath,{kiln.lib_dir()} -Wl,@{rsp}"
    return kiln.__version__


def _inspect(args) -> int:
    import kiln

    started = time.perf_counter()
    prog = kiln.load(args.program, kernels=args.kernels or "", isa=args.isa or "",
                     packed_cache=args.packed_cache, gemm_precision=args.gemm_precision or "")
    load_ms = {"program": (time.perf_counter() - started) * 1e3}
    print(f"{args.program}: {prog.size_bytes} bytes, producer {prog.producer or '?'}")
    quantized = _quantized_summaries(args.program)
    for name in prog.method_names:
        m = prog.method_spec(name)  # read without loading: works without the plugins a program needs
        print(f"method {name}: {m.num_instructions} instructions, planned memory {sum(m.arena_bytes)} bytes")
        for kind, specs in (("input ", m.input_specs), ("output", m.output_specs), ("state ", m.state_specs)):
            for s in specs:
                print(f"  {kind} {s.name}: {s.dtype}{_shape(s)}")
        if quantized and quantized.get(name):
            print(f"  quantized weights: {quantized[name].saved()}")
            for line in quantized[name].lines():
                print(f"    {line}")
        ops = _print_kernels(prog, name, args.instructions, load_ms)
        if quantized is None and any(op.startswith("kiln_quantized::") for op in ops):
            print("  quantized weights: install the flatbuffers package (kiln[export]) to see their schemes")
    print(f"packed weights: {prog.packed_bytes} bytes")
    if args.load:
        _print_load(prog, load_ms)
    return 0


def _print_load(prog, load_ms: dict) -> None:
    """Where loading spent its time: the program (map, verify, open the packed-weight cache) and each
    method (resolve kernels, pack their weights or take them from the cache, plan memory)."""
    parts = ", ".join(f"{what} {ms:.1f} ms" for what, ms in load_ms.items())
    print(f"load: {sum(load_ms.values()):.1f} ms ({parts})")
    print(f"  packed weights mapped from the cache: {prog.packed_mapped_bytes} of {prog.packed_bytes} bytes")
    print(f"  packed-weight cache: {prog.packed_cache_report or 'not asked for (--packed-cache, KILN_PACKED_CACHE)'}")


def _quantized_summaries(path):
    """{method: QuantizedSummary} of the file's kiln_quantized instructions (scheme, group size,
    bytes), or None when the flatbuffers package that reads them is missing."""
    from .export.quantize.summary import summarize_file

    try:
        return summarize_file(path)
    except (OSError, ValueError, IndexError):
        return {}


def _print_kernels(prog, name: str, every_instruction: bool, load_ms: dict) -> set:
    """Which kernel (library, tier) serves each instruction of a loaded method; returns the operators.
    Adds the method's load time to load_ms."""
    import kiln

    started = time.perf_counter()
    try:
        method = prog.load_method(name)
        load_ms[f"method {name}"] = (time.perf_counter() - started) * 1e3
    except kiln.KilnError as e:
        print(f"  kernels: cannot load the method: {type(e).__name__}: {e}")
        return set()
    runtime = os.path.basename(kiln.runtime_library_path() or "")

    def served_by(i) -> str:
        if i.kind not in ("kernel", "backend"):
            return "runtime"
        lib = os.path.basename(i.library)
        where = "" if lib == runtime else f" ({lib})"
        return (kiln.kernel_tier_name(i.tier) if i.kind == "kernel" else "backend") + where

    infos = method.instructions
    print(f"  kernels (isa {method.isa}, gemm precision {method.gemm_precision}):")
    if every_instruction:
        for n, i in enumerate(infos):
            extra = f", packed {i.packed_bytes} B" if i.packed_bytes else ""
            extra += f", scratch {i.scratch_bytes} B" if i.scratch_bytes else ""
            print(f"    {n:>5} {i.op}: {served_by(i)}{extra}")
        return {i.op for i in infos}
    summary: dict = {}
    for i in infos:
        key = (i.op, served_by(i))
        count, packed = summary.get(key, (0, 0))
        summary[key] = (count + 1, packed + i.packed_bytes)
    for (op, by), (count, packed) in sorted(summary.items()):
        print(f"    {count:>5} x {op}: {by}" + (f", packed {packed} B" if packed else ""))
    return {i.op for i in infos}


def _shape(spec) -> str:
    """[1, 0..128, 64]: a dynamic dim shows its range (its bound, for outputs)."""
    dims = []
    for d, size in enumerate(spec.shape):
        low = spec.min_shape[d] if d < len(spec.min_shape) else size
        dims.append(f"{low}..{size}" if d in spec.dynamic_dims and low != size else
                    f"<={size}" if d in spec.dynamic_dims else str(size))
    return f"[{', '.join(dims)}]"


def operator_table() -> list:
    """[(operator, [dtype signatures], [signatures with an optimized kernel],
    library or "")] of every registered kernel, sorted; the library is named
    only for kernels from outside libkiln."""
    import kiln

    runtime = os.path.basename(kiln.runtime_library_path() or "")
    table: dict = {}
    for k in kiln.registered_kernels():
        entry = table.setdefault(k.op_name, (set(), set(), set()))
        entry[0].add(k.dtypes)
        if k.tier > 0:
            entry[1].add(k.dtypes)
        if os.path.basename(k.library) != runtime:
            entry[2].add(os.path.basename(k.library))
    return [(op, sorted(sigs), sorted(fast), ", ".join(sorted(libs)))
            for op, (sigs, fast, libs) in sorted(table.items())]


def operators_markdown() -> str:
    """docs/operators.md: the supported operators and their dtypes (kiln ops --markdown)."""
    rows = operator_table()
    lines = [
        "# Supported operators",
        "",
        "Generated by `kiln ops --markdown` from the kernel registry of the installed runtime;",
        "`tests/test_cli.py` checks that this file is up to date. Each signature lists the",
        "dtypes of an operator's tensor arguments in order (`*`: the kernel checks dtypes",
        "itself). Every signature has a portable (reference) kernel; the last column lists",
        "those that also have an optimized kernel, used when its prepare accepts the",
        "instruction (docs/kernels.md). Programs compute in float32; float16 and bfloat16",
        "weights are converted to float32 at export (docs/format.md).",
        "",
        "How these operators do on PyTorch's own OpInfo samples (ok / unsupported / error / wrong",
        "per operator, made by `scripts/opinfo_sweep.py`): docs/opinfo.md.",
        "",
        f"{len(rows)} operators, {sum(1 for r in rows if r[2])} with optimized kernels.",
        "",
        "| operator | dtype signatures | optimized |",
        "|---|---|---|",
    ]
    for op, sigs, fast, lib in rows:
        lines.append(f"| `{op}` | {' · '.join(f'`{s}`' for s in sigs)}{f' ({lib})' if lib else ''} | "
                     f"{' · '.join(f'`{s}`' for s in fast)} |")
    return "\n".join(lines) + "\n"


def _ops(args) -> int:
    if args.markdown:
        sys.stdout.write(operators_markdown())
        return 0
    rows = operator_table()
    width = max((len(op) for op, *_ in rows), default=0)
    for op, sigs, fast, lib in rows:
        fast_text = f"  (optimized: {' | '.join(fast)})" if fast else ""
        print(f"{op:<{width}}  {' | '.join(sigs)}{fast_text}{f'  [{lib}]' if lib else ''}")
    print(f"{len(rows)} operators; dtypes of the tensor arguments in order, '*' = the kernel checks them itself")
    return 0


class CommandError(Exception):
    """A mistake in what the command was given (a file it cannot read or
    write): printed as "kiln: <message>", exit status 1."""


def _read_inputs(paths: list) -> list:
    """The .npy files given on the command line (no pickled objects)."""
    import numpy as np

    inputs = []
    for i, path in enumerate(paths):
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise CommandError(f"cannot read input {i} from '{path}': {e}") from None
        if not isinstance(array, np.ndarray):  # an .npz archive
            raise CommandError(f"cannot read input {i} from '{path}': not a .npy file (an .npz archive?)")
        inputs.append(array)
    return inputs


def _random_inputs(method, seed: int) -> list:
    """Inputs at each input's largest shape: standard normal floats, zero integers."""
    import numpy as np

    rng = np.random.default_rng(seed)
    inputs = []
    for s in method.input_specs:
        if s.dtype.startswith("float"):
            inputs.append(rng.standard_normal(s.shape).astype(s.dtype))
        else:
            inputs.append(np.zeros(s.shape, dtype=s.dtype))
    return inputs


def _inputs(args, method) -> list:
    return _read_inputs(args.inputs) if args.inputs else _random_inputs(method, args.seed)


def _run(args) -> int:
    import numpy as np

    import kiln

    prog = kiln.load(args.program)
    method = prog.method(args.method)
    inputs = _inputs(args, method)
    if not args.inputs:
        shapes = ", ".join(f"{x.dtype}{list(x.shape)}" for x in inputs)
        print(f"kiln run: no input files given; running on random inputs at each input's largest shape "
              f"(--seed {args.seed}): {shapes}", file=sys.stderr)
    outputs = method.run(*inputs)
    for i, out in enumerate(outputs):
        print(f"output {i}: {out.dtype}{list(out.shape)}")
        print(np.array2string(out, threshold=20, precision=6))
        if args.save:
            path = f"{args.save}_{i}.npy"
            try:
                np.save(path, out)
            except OSError as e:
                raise CommandError(f"cannot write output {i} to '{path}': {e}") from None
    return 0


def _prepare(args):
    """The program (with --kernels/--isa), the pool size (--threads), the
    method and its inputs, for profile and bench."""
    import kiln

    if args.threads is not None:
        kiln.set_num_threads(args.threads)
    prog = kiln.load(args.program, kernels=args.kernels or "", isa=args.isa or "",
                     gemm_precision=args.gemm_precision or "")
    method = prog.method(args.method)
    return method, _inputs(args, method)


def _describe_inputs(args, inputs) -> str:
    shapes = ", ".join(f"{x.dtype}{list(x.shape)}" for x in inputs)
    return f"inputs {shapes} ({'from ' + ', '.join(args.inputs) if args.inputs else f'random, seed {args.seed}'})"


def _setting(args, method) -> str:
    import kiln

    kernels = args.kernels or os.environ.get("KILN_KERNELS") or _default_tier()
    return (f"{kiln.num_threads()} thread(s), {kernels} kernels, isa {method.isa}, "
            f"gemm precision {method.gemm_precision}")


def _percentile(sorted_values: list, q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation, as numpy's default."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _timed_calls(method, inputs, n: int) -> list:
    """Wall times (seconds) of n calls, as a caller sees them (binding inputs and copying outputs included)."""
    import time

    times = []
    for _ in range(n):
        start = time.perf_counter()
        method(*inputs)
        times.append(time.perf_counter() - start)
    return times


def _profile(args) -> int:
    import time

    from . import _kiln
    from ._profile import Profile

    method, inputs = _prepare(args)
    print(f"{args.program} {method.name}: {_describe_inputs(args, inputs)}; {_setting(args, method)}")
    for _ in range(args.warmup):
        method(*inputs)
    # Profiled calls alternate with plain ones timed as a caller sees them, so
    # that both meet the same machine load.
    native, plain = _kiln.Profile(), []
    for _ in range(args.runs):
        start = time.perf_counter()
        method(*inputs)
        plain.append(time.perf_counter() - start)
        outputs = method._native.run_profiled(tuple(inputs), native)
    profile = Profile(native, method.instructions, outputs)
    print(profile.table(args.top), end="")
    wall = sum(plain) / len(plain)
    per_call = profile.instruction_ns / len(profile.calls) / 1e9
    print(f"{f'{wall * 1e3:.3f} ms':>12} {'':7} {'':6}  measured wall time of a call without the profiler "
          f"(mean of {len(plain)}, binding and outputs included; instructions: {100 * per_call / wall:.1f}% of it)")
    trace = args.trace or f"{os.path.splitext(os.path.basename(args.program))[0]}.trace.json"
    try:
        profile.write_chrome_trace(trace)
    except OSError as e:
        raise CommandError(f"cannot write the trace to '{trace}': {e}") from None
    print(f"trace: {trace} ({len(profile.instructions)} instructions, {len(profile.chunks)} thread-pool chunks; "
          "open it in chrome://tracing or https://ui.perfetto.dev)")
    return 0


def _bench(args) -> int:
    method, inputs = _prepare(args)
    print(f"{args.program} {method.name}: {_describe_inputs(args, inputs)}; {_setting(args, method)}")
    for _ in range(args.warmup):
        method(*inputs)
    times = sorted(_timed_calls(method, inputs, args.runs))
    stats = {"min": times[0], "p50": _percentile(times, 50), "p90": _percentile(times, 90),
             "p99": _percentile(times, 99), "max": times[-1], "mean": sum(times) / len(times)}
    print(f"{args.warmup} warm-up calls, {args.runs} timed calls")
    print("latency  " + "  ".join(f"{k} {v * 1e3:.3f} ms" for k, v in stats.items()))
    print(f"throughput {1.0 / stats['mean']:.1f} calls/s (one call at a time)")
    return 0


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got '{text}'") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {n}")
    return n


def _non_negative(text: str) -> int:
    return 0 if text.strip() == "0" else _positive(text)


def _default_tier() -> str:
    """What kiln.load uses unless told otherwise: the highest named tier."""
    import kiln

    return max(kiln.kernel_tiers().items(), key=lambda kv: kv[1])[0]


def _tier_choices() -> list:
    import kiln

    return sorted(kiln.kernel_tiers(), key=kiln.kernel_tiers().get, reverse=True)


def _isa_choices() -> list:
    import kiln

    return kiln.isa_levels()


def _doctor(_args) -> int:
    import kiln

    print(f"kiln {kiln.__version__}")
    print(f"runtime library: {kiln.runtime_library_path()}")
    if kiln._kiln.STATIC_RUNTIME:
        print("C++ SDK: none (static build: the runtime is embedded in the Python extension)")
    else:
        config = os.path.join(kiln.cmake_dir(), "kilnConfig.cmake")
        print(f"cmake dir: {kiln.cmake_dir()} ({'ok' if os.path.isfile(config) else 'missing'})")
    print(f"threads: {kiln.num_threads()} (KILN_NUM_THREADS={os.environ.get('KILN_NUM_THREADS', 'unset')})")
    print(f"cpu instruction set: {kiln.detected_isa()}; optimized kernels use "
          f"{os.environ.get('KILN_ISA') or kiln.detected_isa()} (KILN_ISA={os.environ.get('KILN_ISA', 'unset')})")
    have = set(kiln.cpu_features())
    print(f"cpu features: {' '.join(kiln.cpu_features()) or 'none'}")
    missing = [f for f in kiln.cpu_feature_names() if f not in have]
    if missing:
        print(f"cpu features absent: {' '.join(missing)}")
    for level in kiln.isa_levels():
        needs = kiln.isa_features(level)
        lacking = [f for f in needs if f not in have]
        print(f"  level {level}: {'runs here' if not lacking else 'needs ' + ' '.join(lacking)}"
              f" ({' '.join(needs) or 'no features'})")
    print(f"kernels: {os.environ.get('KILN_KERNELS') or _default_tier()} "
          f"(KILN_KERNELS={os.environ.get('KILN_KERNELS', 'unset')})")
    kernels = kiln.registered_kernels()
    ops = sorted({k.op_name for k in kernels})
    print(f"kernel registrations: {len(kernels)} for {len(ops)} operators "
          f"({sum(1 for k in kernels if k.tier > min(kiln.kernel_tiers().values()))} above the reference tier)")
    print(f"backends: {[b.name for b in kiln.registered_backends()] or 'none'}")
    failures = kiln.registration_failures()
    for f in failures:
        print(f"refused registration: {f.what} from {f.library}: {f.message}")
    print(f"torch available for kiln.export: {importlib.util.find_spec('torch') is not None}")
    return 1 if failures else 0


def main(argv=None) -> int:
    """Runs one command; every failure is one line on stderr and a non-zero status, never a traceback."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except BrokenPipeError:
        # The reader went away (`kiln ops | head`): stop quietly. Later flushes of
        # stdout (at exit) would fail again, so it is pointed at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141  # as a command killed by SIGPIPE
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as e:  # a bug in kiln: one line, with a way to see the traceback
        if os.environ.get("KILN_TRACEBACK"):
            raise
        print(f"kiln: internal error: {type(e).__name__}: {e} (set KILN_TRACEBACK=1 for the traceback)",
              file=sys.stderr)
        return 1


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in LOCATORS:
        import kiln

        try:
            print(_locate(argv[0]))
        except kiln.KilnError as e:
            print(f"kiln: {e}", file=sys.stderr)
            return 1
        return 0

    parser = argparse.ArgumentParser(prog="kiln", description="kiln: run exported PyTorch programs")
    for flag, help_text in LOCATORS.items():
        parser.add_argument(flag, action="store_true", help=help_text)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("inspect", help="print a program's methods, inputs, outputs and the kernels serving them")
    p.add_argument("program")
    p.add_argument("--instructions", action="store_true", help="list the kernel of every instruction")
    p.add_argument("--kernels", choices=_tier_choices(), help="as LoadOptions / KILN_KERNELS")
    p.add_argument("--isa", help=f"as LoadOptions / KILN_ISA ({', '.join(_isa_choices())})")
    p.add_argument("--gemm-precision", choices=GEMM_PRECISIONS, help=GEMM_PRECISION_HELP)
    p.add_argument("--load", action="store_true",
                   help="time the load: the program (map, verify) and each method (kernels, packing)")
    p.add_argument("--packed-cache", metavar="DIR",
                   help="as kiln.load(packed_cache=DIR) / KILN_PACKED_CACHE (docs/memory.md)")
    p = sub.add_parser("run", help="run a method on .npy inputs (or random ones) and print the outputs")
    p.add_argument("program")
    p.add_argument("inputs", nargs="*", help=".npy files, one per input")
    p.add_argument("--method", default="forward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", help="write outputs to SAVE_<i>.npy")
    for name, help_text in (("profile", "time each instruction of a method, print the costliest operators and "
                                         "write a Chrome trace"),
                            ("bench", "measure a method's latency: warm-up calls, then timed calls; percentiles")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("program")
        p.add_argument("inputs", nargs="*", help=".npy files, one per input (default: random, as kiln run)")
        p.add_argument("--method", default="forward")
        p.add_argument("--seed", type=int, default=0, help="of the random inputs")
        p.add_argument("--threads", type=_positive, help="the thread pool's size (default: KILN_NUM_THREADS or "
                                                         "one per core)")
        p.add_argument("--kernels", choices=_tier_choices(), help="as LoadOptions / KILN_KERNELS")
        p.add_argument("--isa", help=f"as LoadOptions / KILN_ISA ({', '.join(_isa_choices())})")
        p.add_argument("--gemm-precision", choices=GEMM_PRECISIONS, help=GEMM_PRECISION_HELP)
        if name == "profile":
            p.add_argument("--runs", type=_positive, default=5, help="profiled calls (the table shows the mean)")
            p.add_argument("--warmup", type=_non_negative, default=2, help="calls before timing")
            p.add_argument("--top", type=_positive, default=20, help="operators in the table")
            p.add_argument("--trace", help="the Chrome trace file (default: PROGRAM.trace.json here)")
        else:
            p.add_argument("--runs", type=_positive, default=100, help="timed calls")
            p.add_argument("--warmup", type=_non_negative, default=10, help="calls before timing")
    p = sub.add_parser("ops", help="list the operators kiln can run and their dtypes")
    p.add_argument("--markdown", action="store_true", help="print docs/operators.md")
    sub.add_parser("doctor", help="check the installation")
    _llm_cli.add_commands(sub)
    args = parser.parse_args(argv)

    import kiln

    try:
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "run":
            return _run(args)
        if args.command == "profile":
            return _profile(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "ops":
            return _ops(args)
        if args.command == "doctor":
            return _doctor(args)
        if args.command in _llm_cli.COMMANDS:
            return _llm_cli.run(args, parser)
    except kiln.KilnError as e:
        print(f"kiln: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except CommandError as e:
        print(f"kiln: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        print(f"kiln: IoError: {e}", file=sys.stderr)
        return 1
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
