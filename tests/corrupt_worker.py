"""Subprocess worker for test_corrupt_files.py: loads and runs many mutated programs.

    python corrupt_worker.py CASES.json

CASES.json holds {"cases": [[case_id, hex_bytes_path], ...]} ... see test file.
Prints one "case <id>" line before each attempt (so a crash names its case) and
a final JSON summary line. Exits 3 if an exception other than KilnError escapes.
"""

import faulthandler
import json
import resource
import sys
import traceback

import numpy as np

import kiln

MAX_INPUT_ELEMENTS = 1 << 20


def attempt(data: bytes) -> str:
    try:
        program = kiln.load(data)
        for name in program.method_names:
            method = program.method(name)
            inputs = []
            for spec in method.input_specs:
                n = int(np.prod(spec.shape, dtype=np.float64)) if spec.shape else 1
                if n > MAX_INPUT_ELEMENTS or spec.dtype == "bfloat16":
                    return "loaded"
                inputs.append(np.zeros(spec.shape, dtype=spec.dtype))
            method.run(*inputs)
        return "ran"
    except kiln.KilnError as e:
        return type(e).__name__


def main() -> int:
    faulthandler.enable()
    spec = json.load(open(sys.argv[1]))
    base = open(spec["base"], "rb").read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcomes = {}
    for case in spec["cases"]:
        kind = case["kind"]
        if kind == "truncate":
            data = base[: case["length"]]
        elif kind == "flip":
            buf = bytearray(base)
            for pos, val in case["edits"]:
                buf[pos] ^= val
            data = bytes(buf)
        else:  # "raw": bytes given in hex
            data = bytes.fromhex(case["hex"])
        print(f"case {case['id']}", flush=True)
        try:
            outcome = attempt(data)
        except Exception:
            traceback.print_exc()
            print(f"UNTYPED ERROR in case {case['id']}", flush=True)
            return 3
        outcomes.setdefault(kind, {}).setdefault(outcome, 0)
        outcomes[kind][outcome] += 1
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"outcomes": outcomes, "rss_growth_kib": after - before}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
