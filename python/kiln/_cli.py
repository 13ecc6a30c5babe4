"""The `kiln` command (also `python -m kiln`): SDK locators, inspect, run, doctor."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

LOCATORS = {
    "--cmakedir": "directory of kilnConfig.cmake (for CMAKE_PREFIX_PATH or kiln_DIR)",
    "--pkgconfigdir": "directory of kiln.pc (for PKG_CONFIG_PATH)",
    "--includes": "compiler flags for the headers (-I...)",
    "--libs": "linker flags for libkiln.so.0, with its RUNPATH",
    "--version": "kiln's version",
}


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

    prog = kiln.load(args.program)
    print(f"{args.program}: {prog.size_bytes} bytes, producer {prog.producer or '?'}")
    for name in prog.method_names:
        m = prog.method_spec(name)  # no method load: works without the plugins a program needs
        print(f"method {name}: {m.num_instructions} instructions, planned memory {sum(m.arena_bytes)} bytes")
        for s in m.input_specs:
            dyn = f" dynamic dims {list(s.dynamic_dims)}" if s.dynamic_dims else ""
            print(f"  input  {s.name}: {s.dtype}{list(s.shape)}{dyn}")
        for s in m.output_specs:
            print(f"  output {s.name}: {s.dtype}{list(s.shape)}")
    return 0


def _run(args) -> int:
    import numpy as np

    import kiln

    prog = kiln.load(args.program)
    method = prog.method(args.method)
    if args.inputs:
        inputs = [np.load(p) for p in args.inputs]
    else:
        rng = np.random.default_rng(args.seed)
        inputs = []
        for s in method.input_specs:
            if s.dtype.startswith("float"):
                inputs.append(rng.standard_normal(s.shape).astype(s.dtype))
            else:
                inputs.append(np.zeros(s.shape, dtype=s.dtype))
    outputs = method.run(*inputs)
    for i, out in enumerate(outputs):
        print(f"output {i}: {out.dtype}{list(out.shape)}")
        print(np.array2string(out, threshold=20, precision=6))
        if args.save:
            np.save(f"{args.save}_{i}.npy", out)
    return 0


def _doctor(_args) -> int:
    import kiln

    print(f"kiln {kiln.__version__}")
    print(f"runtime library: {kiln.runtime_library_path()}")
    if kiln._kiln.STATIC_RUNTIME:
        print("C++ SDK: none (static build: the runtime is embedded in the Python extension)")
    else:
        config = os.path.join(kiln.cmake_dir(), "kilnConfig.cmake")
        print(f"cmake dir: {kiln.cmake_dir()} ({'ok' if os.path.isfile(config) else 'missing'})")
    print(f"threads: {kiln.num_threads()}")
    kernels = kiln.registered_kernels()
    ops = sorted({k.op_name for k in kernels})
    print(f"kernels: {len(kernels)} registrations for {len(ops)} operators")
    print(f"backends: {[b.name for b in kiln.registered_backends()] or 'none'}")
    failures = kiln.registration_failures()
    for f in failures:
        print(f"refused registration: {f.what} from {f.library}: {f.message}")
    print(f"torch available for kiln.export: {importlib.util.find_spec('torch') is not None}")
    return 1 if failures else 0


def main(argv=None) -> int:
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
    p = sub.add_parser("inspect", help="print a program's methods, inputs and outputs")
    p.add_argument("program")
    p = sub.add_parser("run", help="run a method on .npy inputs (or random ones) and print the outputs")
    p.add_argument("program")
    p.add_argument("inputs", nargs="*", help=".npy files, one per input")
    p.add_argument("--method", default="forward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", help="write outputs to SAVE_<i>.npy")
    sub.add_parser("doctor", help="check the installation")
    args = parser.parse_args(argv)

    import kiln

    try:
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "run":
            return _run(args)
        if args.command == "doctor":
            return _doctor(args)
    except kiln.KilnError as e:
        print(f"kiln: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
