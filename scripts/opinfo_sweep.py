"""OpInfo conformance sweep: PyTorch's own operator samples exported with kiln and compared with eager.

    python scripts/opinfo_sweep.py [NAME ...] [--max-samples 8] [--dtypes float32,int64,bool]
                                   [--jobs 2] [--timeout 120] [--markdown docs/opinfo.md] [--json FILE]
                                   [--runtime kiln|executorch] [--python WORKER_PYTHON] [--compare JSON]

For every OpInfo of `torch.testing._internal.common_methods_invocations.op_db`
(or those whose name contains one of NAME), its CPU samples of each dtype (float32 by
default; integer and bool dtypes when asked and the OpInfo supports them) are wrapped in
a module whose forward calls `op.op(input, *args, **kwargs)` with every tensor of the
sample as a module input (everything else baked in), exported with `kiln.export.export`,
run with `kiln.load`, and compared with eager PyTorch.

Each sample gets one status:
    ok           ran and matched eager (float: within the tolerance of the output's scale,
                 NaN against NaN, the same infinities; integer and bool: exactly)
    unsupported  kiln.errors.UnsupportedOperatorError (kiln has no kernel for an operator)
    export_error torch.export failed (`torch_export` is set), or lowering / another ExportError
    run_error    a kiln error at load or run time
    wrong        ran, but the result differs from eager (a real bug)
    crash        the worker process died or hung (timeout) on the sample
    skipped      not compared, with the reason: eager calls a random operator (one tagged
                 nondeterministic_seeded: no runtime draws PyTorch's random numbers), eager
                 is nondeterministic (two seeds give different results), its output is
                 uninitialized memory, or the sample is larger than --max-elements

The rule for an operator: it is "ok" when at least one of its samples was exported by
torch.export and every sample torch.export exported (not skipped) is ok. Otherwise its
status is the worst status among those samples (wrong > crash > run_error >
export_error > unsupported); an operator none of whose samples torch.export can export
is "not_exportable". The summary also counts operators "ok on at least one sample".

Samples run in worker subprocesses (each imports op_db once); a worker that dies or
exceeds --timeout on a sample is replaced and the sample recorded as a crash, so the
sweep always finishes.

--runtime executorch runs the same samples, with the same skips and the same compare(),
through ExecuTorch instead (torch.export.export, exir.to_edge, to_executorch, the .pte run
by executorch.runtime): unsupported when the edge verifier refuses an operator or the
runtime has no kernel for one. ExecuTorch lives in its own venv (scripts/setup_executorch.sh);
--python points the workers at it (its torch must be the same version, so op_db is the same).
--compare takes the --json of the other runtime's sweep and adds the comparison to --markdown:

    python scripts/opinfo_sweep.py --json kiln.json
    python scripts/opinfo_sweep.py --runtime executorch --python /work/venvs/et/bin/python --json et.json
    python scripts/opinfo_sweep.py --from-json kiln.json --compare et.json --markdown docs/opinfo.md \
        --operators-md docs/operators.md

--operators-md writes the summary (counts of both runtimes, a link to docs/opinfo.md) as the last
section of docs/operators.md, after `kiln ops --markdown`'s text (tests/test_cli.py checks both).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

DEFAULT_TOLERANCE = 1e-4  # against eager PyTorch: max abs error relative to the output's scale

# Operators compared with a wider tolerance, each with its reason.
TOLERANCES: dict = {}

# Operators whose outputs are not compared, each with its reason.
UNCOMPARABLE = {
    "empty": "uninitialized memory",
    "empty_like": "uninitialized memory",
    "new_empty": "uninitialized memory",
    "empty_strided": "uninitialized memory",
    "new_empty_strided": "uninitialized memory",
    "empty_permuted": "uninitialized memory",
    "nn.functional.dropout": "random",
    "nn.functional.alpha_dropout": "random",
    "nn.functional.feature_alpha_dropout": "random",
    "nn.functional.dropout2d": "random",
    "nn.functional.dropout3d": "random",
}

# (runtime, operator) -> what was found when a wrong result or a crash was looked into.
DIAGNOSES = {
    ("executorch", "max_pool2d_with_indices_backward"):
        "ExecuTorch's max_pool2d_with_indices_backward.grad_input adds the gradients onto its output "
        "without zeroing it first: the extra values are stale contents of the memory-planned buffer "
        "(here, elements of the input)",
    ("executorch", "argwhere"):
        "ExecuTorch's nonzero.out returns wrong indices, not just in another order: argwhere(eye(3)) "
        "gives [[0, 1], [0, 2], [1, 2]]",
    ("executorch", "sum"):
        "sum of a 0-dim tensor over dim 0 (PyTorch allows it) fails an assert in ExecuTorch's "
        "TensorImpl::size() (\"Dimension out of range\"), which aborts the process; most of the other "
        "crashes are on 0-dim (float32[]) samples too",
}

SEVERITY = ["wrong", "crash", "run_error", "export_error", "unsupported"]
STATUSES = ["ok"] + SEVERITY + ["skipped"]
DTYPE_NAMES = ["float32", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"]


def operator_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def load_op_db():
    import warnings

    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def samples_of(op, dtype_name: str, max_samples: int, max_elements: int):
    """[(sample, skip reason or None)]: the first `max_samples` samples of `op` in `dtype_name`
    small enough to run, and before them the larger ones met on the way (skipped). The global
    RNG is seeded from the operator's name, so a restarted worker gets the same samples."""
    import torch
    from torch.utils import _pytree as pytree

    dtype = getattr(torch, dtype_name)
    torch.manual_seed(zlib.crc32(f"{operator_name(op)}:{dtype_name}".encode()))
    out, kept = [], 0
    for s in op.sample_inputs("cpu", dtype):
        leaves = pytree.tree_leaves((s.input, s.args, s.kwargs))
        size = sum(t.numel() for t in leaves if isinstance(t, torch.Tensor))
        if size > max_elements:
            out.append((s, f"{size} elements (> {max_elements})"))
            continue
        out.append((s, None))
        kept += 1
        if kept >= max_samples:
            break
    return out


def describe(sample) -> str:
    """A short text of a sample: tensors as dtype[shape], other arguments as they are."""
    import torch
    from torch.utils import _pytree as pytree

    def short(x):
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
        return repr(x)

    inp = pytree.tree_map(short, sample.input)
    args = [pytree.tree_map(short, a) for a in sample.args]
    kwargs = {k: pytree.tree_map(short, v) for k, v in sample.kwargs.items()}
    parts = [str(inp)] + [str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]
    text = ", ".join(parts).replace("'", "")
    return text if len(text) <= 200 else text[:197] + "..."


def sample_module(op, sample):
    """(module, tensors): a module whose forward(*tensors) calls op.op on the sample."""
    import torch
    from torch.utils import _pytree as pytree

    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = [leaves[i].detach() for i in positions]
    fn = op.op

    class Sample(torch.nn.Module):
        def forward(self, *ts):
            filled = list(leaves)
            for i, t in zip(positions, ts):
                filled[i] = t
            inp, args, kwargs = pytree.tree_unflatten(filled, spec)
            return fn(inp, *args, **kwargs)

    return Sample(), tensors


def _eager(module, tensors, seed: int, random_ops: set = None):
    """The output leaves; the random operators eager calls (tagged nondeterministic_seeded) are
    added to `random_ops` when given."""
    import contextlib

    import torch
    from torch.utils import _pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seeded(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if torch.Tag.nondeterministic_seeded in func.tags:
                random_ops.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    torch.manual_seed(seed)
    with torch.no_grad(), (Seeded() if random_ops is not None else contextlib.nullcontext()):
        out = module(*[t.clone() for t in tensors])
    return pytree.tree_leaves(out)


def _same(a, b) -> bool:
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if not isinstance(a, torch.Tensor):
        return a == b or (a != a and b != b)
    if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
        return False
    if a.layout != torch.strided:
        a, b = a.to_dense(), b.to_dense()
    if a.dtype in (torch.bfloat16, torch.complex32):  # no numpy twin: widen exactly
        wide = torch.float32 if a.dtype == torch.bfloat16 else torch.complex64
        a, b = a.to(wide), b.to(wide)
    x, y = a.detach().resolve_conj().numpy(), b.detach().resolve_conj().numpy()
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def compare(actual, expected, tol: float):
    """None when `actual` (numpy) matches `expected` (numpy), else what differs. Floats: within `tol`
    of the expected output's largest finite magnitude, NaN against NaN, the same infinities; other
    dtypes exactly."""
    import numpy as np

    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)}, want {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, want {expected.dtype}"
    if expected.dtype.kind not in "fc":
        bad = actual != expected
        if bad.any():
            at = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return f"{int(bad.sum())} of {bad.size} elements differ, e.g. at {tuple(map(int, at))}: " \
                   f"got {actual[at]}, want {expected[at]}"
        return None
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    finite = np.isfinite(e)
    scale = max(float(np.abs(e[finite]).max(initial=0.0)), 1e-6)
    with np.errstate(invalid="ignore"):
        err = np.abs(a - e) / scale
    err[np.isnan(err)] = np.inf
    err[(a == e) | (np.isnan(a) & np.isnan(e))] = 0.0
    if err.size and err.max() > tol:
        at = np.unravel_index(int(err.argmax()), actual.shape)
        return (f"error {err.max():.3g} of the scale {scale:.3g} at {tuple(map(int, at))} "
                f"(got {actual[at]}, want {expected[at]}), tolerance {tol:g}")
    return None


def run_sample(op, sample, directory: str, *, kernels: str = "", runtime: str = "kiln") -> dict:
    """Exports, runs and compares one sample in this process; {"status", "detail", "torch_export"}.
    `runtime` is "kiln" or "executorch" (RUNTIMES): everything but the export and run is shared."""
    import numpy as np
    import torch

    name = operator_name(op)
    if name in UNCOMPARABLE:
        return {"status": "skipped", "detail": UNCOMPARABLE[name]}
    module, tensors = sample_module(op, sample)
    if any(t.is_complex() for t in tensors):
        return {"status": "skipped", "detail": "complex tensor input"}
    if any(t.layout != torch.strided for t in tensors):
        return {"status": "skipped", "detail": "sparse tensor input"}
    random_ops = set()
    try:
        expected = _eager(module, tensors, 1, random_ops)
        again = _eager(module, tensors, 2)
    except Exception as e:  # the sample is an error input for eager too
        return {"status": "skipped", "detail": f"eager fails: {type(e).__name__}: {str(e)[:150]}"}
    if random_ops:  # many such OpInfos seed the RNG themselves (wrapper_set_seed): two seeds agree
        return {"status": "skipped", "detail": f"random ({', '.join(sorted(random_ops))})"}
    if len(expected) != len(again) or not all(_same(x, y) for x, y in zip(expected, again)):
        return {"status": "skipped", "detail": "eager is nondeterministic (two seeds differ)"}
    expected = [x for x in expected if isinstance(x, torch.Tensor)]
    if any(x.layout != torch.strided or x.is_complex() for x in expected):
        return {"status": "skipped", "detail": "sparse or complex output"}
    if any(x.dtype in (torch.float16, torch.bfloat16) for x in expected):
        return {"status": "skipped",
                "detail": "float16/bfloat16 output: kiln programs compute in float32 (docs/format.md)"}
    outputs = RUNTIMES[runtime](module, tensors, directory, kernels)
    if isinstance(outputs, dict):  # the sample's status: it did not export or run
        return outputs
    if len(outputs) != len(expected):
        return {"status": "wrong", "detail": f"{len(outputs)} outputs, want {len(expected)}"}
    tol = TOLERANCES.get(name, (DEFAULT_TOLERANCE, ""))[0]
    for i, (a, e) in enumerate(zip(outputs, expected)):
        diff = compare(np.asarray(a), e.detach().resolve_conj().numpy(), tol)
        if diff:
            return {"status": "wrong", "detail": f"output {i}: {diff}"}
    return {"status": "ok"}


def _run_kiln(module, tensors, directory: str, kernels: str):
    """kiln.export.export, kiln.load and forward: the outputs (numpy), or a status dict."""
    import kiln
    from kiln.errors import ExportError, KilnError, UnsupportedOperatorError
    from kiln.export import export

    path = os.path.join(directory, "sample.kiln")
    try:
        export(module, tuple(tensors), path)
    except UnsupportedOperatorError as e:
        return {"status": "unsupported", "detail": ", ".join(getattr(e, "operators", [])) or str(e)[:200]}
    except ExportError as e:
        text = str(e)
        return {"status": "export_error", "torch_export": text.startswith("torch.export failed"),
                "detail": text[:300]}
    except Exception as e:
        return {"status": "export_error", "detail": f"internal {type(e).__name__}: {str(e)[:280]}"}
    try:
        program = kiln.load(path, kernels=kernels) if kernels else kiln.load(path)
        return program.forward(*[t.contiguous().numpy() for t in tensors])
    except KilnError as e:
        return {"status": "run_error", "detail": f"{type(e).__name__}: {str(e)[:280]}"}
    except Exception as e:
        return {"status": "run_error", "detail": f"{type(e).__name__}: {str(e)[:280]}"}


def _run_executorch(module, tensors, directory: str, kernels: str):
    """ExecuTorch as its documentation shows: torch.export.export (non-strict, as kiln calls it),
    exir.to_edge, to_executorch, and the .pte buffer run by executorch.runtime (the kernels of the
    PyPI wheel, no delegate). The tensor outputs (numpy), or a status dict: unsupported when the
    edge verifier refuses an operator (not Core ATen) or the runtime has no kernel for one."""
    import re

    import torch
    from executorch.exir import to_edge
    from executorch.runtime import Runtime
    from torch._export.verifier import SpecViolationError
    from torch.utils import _pytree as pytree

    class Flat(torch.nn.Module):  # the outputs as a flat tuple: the .pte serializer knows no
        def forward(self, *ts):   # named tuples (torch.return_types); compared flat anyway
            return tuple(pytree.tree_leaves(module(*ts)))

    try:
        ep = torch.export.export(Flat().eval(), tuple(tensors), strict=False)
    except Exception as e:
        return {"status": "export_error", "torch_export": True,
                "detail": f"torch.export failed: {type(e).__name__}: {str(e)[:260]}"}
    try:
        manager = to_edge(ep).to_executorch()
    except SpecViolationError as e:
        text = " ".join(str(e).split())
        found = re.search(r"Operator (\S+) is not in Core ATen opset", text)
        return {"status": "unsupported",
                "detail": f"to_edge: {found.group(1)} is not Core ATen" if found else f"to_edge: {text[:260]}"}
    except Exception as e:
        return {"status": "export_error", "detail": f"{type(e).__name__}: {' '.join(str(e).split())[:280]}"}
    runtime = Runtime.get()
    used = {f"{o.name}.{o.overload}" if o.overload else o.name
            for plan in manager.executorch_program.execution_plan for o in plan.operators}
    missing = sorted(used - set(runtime.operator_registry.operator_names))
    if missing:
        return {"status": "unsupported", "detail": ", ".join(missing)}
    try:
        method = runtime.load_program(manager.buffer).load_method("forward")
        outputs = method.execute([t.contiguous() for t in tensors])
    except Exception as e:
        return {"status": "run_error", "detail": f"{type(e).__name__}: {str(e)[:280]}"}
    return [o.detach().clone().numpy() for o in outputs if isinstance(o, torch.Tensor)]


RUNTIMES = {"kiln": _run_kiln, "executorch": _run_executorch}


def runtime_versions(runtime: str) -> dict:
    """The versions a worker reports: torch's and the runtime's."""
    import importlib.metadata

    import torch

    return {"torch": torch.__version__, runtime: importlib.metadata.version(runtime)}


# ---------------------------------------------------------------- worker side


def worker_main(runtime: str) -> int:
    """Reads {"op", "start", ...} lines on stdin; writes "begin"/"result"/"done" lines on the
    original stdout (fd 1 is pointed at stderr, so prints from torch or kiln cannot garble it)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import torch

    torch.set_num_threads(1)
    op_db = load_op_db()
    directory = tempfile.mkdtemp(prefix="kiln-opinfo-")

    def send(**message):
        proto.write(json.dumps(message) + "\n")
        proto.flush()

    send(event="ready", versions=runtime_versions(runtime))
    for line in sys.stdin:
        task = json.loads(line)
        op = op_db[task["op"]]
        k = 0
        for dtype_name in task["dtypes"]:
            try:
                found = samples_of(op, dtype_name, task["max_samples"], task["max_elements"])
            except Exception as e:
                send(event="result", sample=k, dtype=dtype_name, desc="(sample_inputs)", status="skipped",
                     detail=f"sample_inputs failed: {type(e).__name__}: {str(e)[:150]}")
                k += 1
                continue
            for sample, too_big in found:
                if k >= task["start"]:
                    desc = describe(sample)
                    send(event="begin", sample=k, dtype=dtype_name, desc=desc)
                    if too_big:
                        result = {"status": "skipped", "detail": too_big}
                    else:
                        try:
                            result = run_sample(op, sample, directory, runtime=runtime)
                        except Exception as e:  # a bug of this script, recorded rather than fatal
                            result = {"status": "crash", "detail": f"sweep error {type(e).__name__}: {e}"}
                    send(event="result", sample=k, dtype=dtype_name, desc=desc, **result)
                k += 1
        send(event="done")
    return 0


class Worker:
    """One worker subprocess and a thread that queues its protocol lines."""

    def __init__(self, log, python: str, runtime: str):
        env = dict(os.environ, KILN_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
                   PYTHONHASHSEED="0")  # sample generators that iterate a set of strings: one order
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", "--runtime", runtime],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                     text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)  # end of file: the worker exited

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_operator(state, index: int, task: dict, timeout: float) -> list:
    """All sample results of op_db[index], replacing the worker after a crash or a hang."""
    results, start = [], 0
    while True:
        worker = state.get("worker")
        if worker is None or worker.proc.poll() is not None:
            worker = state["worker"] = Worker(state["log"], state["python"], state["runtime"])
            message = worker.lines.get(timeout=600)  # op_db import
            if message is None or message.get("event") != "ready":
                raise RuntimeError("a worker failed to start (see its log)")
            if message["versions"]["torch"] != state["torch"]:  # op_db indices would differ
                raise RuntimeError(f"the worker's torch is {message['versions']['torch']}, "
                                   f"this process's {state['torch']}: they must be the same")
            state["versions"] = message["versions"]
        worker.proc.stdin.write(json.dumps(dict(task, op=index, start=start)) + "\n")
        worker.proc.stdin.flush()
        current = None
        while True:
            try:
                message = worker.lines.get(timeout=timeout)
            except queue.Empty:
                message = "timeout"
            if message is None or message == "timeout":
                worker.kill()
                state["worker"] = None
                if current is None:  # died between samples: nothing to blame, stop here
                    results.append({"sample": start, "status": "crash", "desc": "(between samples)",
                                    "detail": f"worker {message or 'exit'} {worker.proc.returncode}"})
                    return results
                what = (f"timeout after {timeout:g} s" if message == "timeout"
                        else f"worker died (exit status {worker.proc.returncode})")
                results.append(dict(current, event="result", status="crash", detail=what))
                start = current["sample"] + 1
                break
            if message["event"] == "begin":
                current = message
            elif message["event"] == "result":
                results.append(message)
                current = None
            elif message["event"] == "done":
                return results


# ---------------------------------------------------------------- summary


def operator_status(samples: list) -> str:
    counted = [s for s in samples if s["status"] != "skipped" and not s.get("torch_export")]
    if not counted:
        return "not_exportable" if any(s.get("torch_export") for s in samples) else "skipped"
    if all(s["status"] == "ok" for s in counted):
        return "ok"
    return next(st for st in SEVERITY if any(s["status"] == st for s in counted))


def summarize(report: dict) -> dict:
    ops = report["operators"]
    by_status = {}
    for o in ops:
        by_status[o["status"]] = by_status.get(o["status"], 0) + 1
    samples = {}
    for o in ops:
        for s in o["samples"]:
            key = s["status"] + ("(torch.export)" if s.get("torch_export") else "")
            samples[key] = samples.get(key, 0) + 1
    return {"operators": len(ops), "by_status": by_status,
            "ok_on_one_sample": sum(1 for o in ops if any(s["status"] == "ok" for s in o["samples"])),
            "samples": samples, "num_samples": sum(len(o["samples"]) for o in ops)}


def first_problem(o: dict):
    for st in SEVERITY:
        for s in o["samples"]:
            if s["status"] == st and not s.get("torch_export"):
                return s
    for s in o["samples"]:
        if s.get("torch_export") or s["status"] == "skipped":
            return s
    return None


RUNTIME_NAMES = {"kiln": "kiln", "executorch": "ExecuTorch"}
ORDER = ["ok", "unsupported", "export_error", "run_error", "wrong", "crash", "not_exportable", "skipped"]


def runtime_name(report: dict) -> str:
    runtime = report.get("runtime", "kiln")
    version = report.get("versions", {}).get(runtime)
    return RUNTIME_NAMES[runtime] + (f" {version}" if version and runtime != "kiln" else "")


def problem_text(o: dict, width: int = 120) -> str:
    """The first problem of a not-ok operator, one table cell."""
    s = first_problem(o) if o["status"] != "ok" else None
    if not s:
        return ""
    detail = (s.get("detail") or "").replace("|", "\\|").replace("\n", " ")
    detail = detail if len(detail) <= width else detail[:width - 3] + "..."
    return f"{s['status']}{' (torch.export)' if s.get('torch_export') else ''}: {detail}"


def ok_compared(o: dict) -> str:
    compared = [s for s in o["samples"] if s["status"] != "skipped" and not s.get("torch_export")]
    return f"{sum(1 for s in compared if s['status'] == 'ok')} / {len(compared)}"


def comparison(report: dict, other: dict) -> list:
    """Markdown lines comparing two sweeps (this runtime and the other) of the same samples."""
    a, b = runtime_name(report), runtime_name(other)
    sa, sb = report["summary"], other["summary"]
    theirs = {o["name"]: o for o in other["operators"]}
    pairs = [(o, theirs[o["name"]]) for o in report["operators"] if o["name"] in theirs]
    key = lambda o: sorted((s["dtype"], s["desc"]) for s in o["samples"])  # some generators iterate sets
    differ = [x["name"] for x, y in pairs if key(x) != key(y)]
    lines = [f"## {RUNTIME_NAMES[report.get('runtime', 'kiln')]} and {RUNTIME_NAMES[other['runtime']]}", "",
             f"The same samples run through {b} from PyPI (`{other['command']}`"
             + "".join(f", then `{u}`" for u in other.get("updates", [])) + ", in the venv of",
             "`scripts/setup_executorch.sh`: torch.export.export, `exir.to_edge`, `to_executorch`, the .pte",
             "run by `executorch.runtime` with the kernels of the wheel, no delegate), with the same skips,",
             "the same comparison with eager and the same rule per operator. For ExecuTorch, unsupported",
             "means the edge verifier refuses an operator (not Core ATen) or the runtime has no kernel for",
             f"one; a crash is an abort of the worker process. {other['seconds']:.0f} s for its sweep, "
             f"{report['seconds']:.0f} s for {a}'s.",
             ""]
    if len(pairs) != len(report["operators"]) or len(pairs) != len(other["operators"]) or differ:
        lines += [f"**The samples differ**: {len(report['operators'])} and {len(other['operators'])} OpInfos, "
                  f"{len(pairs)} in both, {len(differ)} with other samples"
                  + (f" ({', '.join(differ[:10])})." if differ else "."), ""]
    else:
        lines += [f"Both saw the same {sa['num_samples']} samples of the same {len(pairs)} OpInfos.", ""]
    lines += [f"| operators | {a} | {b} |", "|---|---|---|"]
    for k in ORDER:
        lines.append(f"| {k} | {sa['by_status'].get(k, 0)} | {sb['by_status'].get(k, 0)} |")
    lines += [f"| ok on at least one sample | {sa['ok_on_one_sample']} | {sb['ok_on_one_sample']} |",
              f"| samples ok | {sa['samples'].get('ok', 0)} | {sb['samples'].get('ok', 0)} |", ""]
    both = sum(1 for x, y in pairs if x["status"] == y["status"] == "ok")
    only_b = [(x, y) for x, y in pairs if y["status"] == "ok" and x["status"] != "ok"]
    only_a = [(x, y) for x, y in pairs if x["status"] == "ok" and y["status"] != "ok"]
    lines += [f"Operators ok in both: {both}; only in {a}: {len(only_a)}; only in {b}: {len(only_b)}.", ""]
    lines += [f"### {b} ok, {a} not ({len(only_b)})", "",
              f"The work list for {a}'s coverage, with {a}'s first problem.", ""]
    lines += [f"- `{x['name']}`: {problem_text(x)}" for x, _ in only_b] or ["None."]
    missing = {}  # the operators behind "unsupported" there, by how many of those OpInfos need each
    for x, _ in only_b:
        needed = {m for smp in x["samples"] if smp["status"] == "unsupported"
                  for m in (smp.get("detail") or "").split(", ") if m}
        for m in needed:
            missing[m] = missing.get(m, 0) + 1
    if missing:
        ranked = sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))
        lines += ["", f"The operators {a} has no kernel for behind them, with how many of these OpInfos "
                      "need each: " + ", ".join(f"`{m}` {n}" for m, n in ranked) + "."]
    lines += ["", f"### {a} ok, {b} not ({len(only_a)})", ""]
    lines += [", ".join(f"`{x['name']}` ({y['status']})" for x, y in only_a) or "None.", ""]
    lines += [f"### {b}'s wrong results and crashes", ""]
    bad = [y for _, y in pairs if y["status"] in ("wrong", "crash")]
    for y in bad:
        s = first_problem(y)
        why = DIAGNOSES.get((other["runtime"], y["name"]))
        lines.append(f"- `{y['name']}` {s['status']} ({s['dtype']} sample {s['sample']}: {s['desc']}): "
                     f"{(s.get('detail') or '').splitlines()[0] if s.get('detail') else ''}"
                     + (f". {why}." if why else ""))
    lines += (["None."] if not bad else []) + [""]
    return lines


def markdown(report: dict, other: dict = None) -> str:
    summary = report["summary"]
    st = summary["by_status"]
    name = runtime_name(report)
    lines = [
        "# OpInfo conformance",
        "",
        "PyTorch's own operator samples (`op_db` of `torch.testing._internal.common_methods_invocations`),",
        f"each wrapped in a module (tensors as inputs, other arguments baked in), exported with {name} and",
        "compared with eager. Made by `scripts/opinfo_sweep.py` (its docstring has the statuses and the",
        "rule); `tests/test_opinfo.py` runs a fast subset in the default test command.",
        "",
        f"Command: `{report['command']}`  ",
        *[f"then `{u}`  " for u in report.get("updates", [])],
        f"torch {report['torch']}, {report['date']}, {report['seconds']:.0f} s, "
        f"{summary['num_samples']} samples of {summary['operators']} OpInfos "
        f"(dtypes {', '.join(report['dtypes'])}, at most {report['max_samples']} samples each "
        f"of at most {report['max_elements']} elements).",
        "",
        "Rule: an operator is **ok** when torch.export exports at least one of its samples and every",
        f"sample torch.export exports is exported, run and matched by {name} (float: within "
        f"{DEFAULT_TOLERANCE:g} of the output's",
        "largest magnitude, NaN for NaN; integer and bool: exactly). Otherwise it takes the worst status",
        "of those samples (wrong > crash > run_error > export_error > unsupported); `not_exportable`:",
        "torch.export fails on all its samples; `skipped`: none compared (random or uninitialized outputs,",
        "eager rejects the samples).",
        "",
        "| operators | count |",
        "|---|---|",
    ]
    for key in ORDER:
        lines.append(f"| {key} | {st.get(key, 0)} |")
    lines += [f"| total | {summary['operators']} |",
              f"| ok on at least one sample | {summary['ok_on_one_sample']} |", ""]
    lines += ["Samples: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["samples"].items())) + ".", ""]
    if other:
        lines += comparison(report, other)
    wrong = [o for o in report["operators"] if o["status"] == "wrong"]
    lines += ["## Wrong results", ""]
    if not wrong:
        lines += ["None.", ""]
    for o in wrong:
        s = first_problem(o)
        why = DIAGNOSES.get((report.get("runtime", "kiln"), o["name"]))
        lines.append(f"- `{o['name']}` ({s['dtype']} sample {s['sample']}: {s['desc']}): {s['detail']}"
                     + (f". {why}." if why else ""))
    if wrong:
        lines.append("")
    # Not wrong, but where the runtime accepted an operator and then failed: exporter bugs (an
    # internal error), kernels the exporter assumed (MissingKernel at load) and run-time refusals.
    broken = []
    for o in report["operators"]:
        for smp in o["samples"]:
            detail = smp.get("detail") or ""
            if smp["status"] in ("run_error", "crash") or detail.startswith("internal"):
                broken.append(f"- `{o['name']}` ({smp['dtype']} sample {smp['sample']}: {smp['desc']}): "
                              f"{smp['status']}: {detail.splitlines()[0] if detail else ''}")
                break
    lines += ["## Run errors, crashes and internal export errors", "",
              f"Not wrong answers, but places where {name} took an operator and then failed (first such",
              "sample of each operator):", ""]
    lines += (broken or ["None."]) + [""]
    if TOLERANCES:
        lines += ["## Wider tolerances", ""]
        lines += [f"- `{k}`: {tol:g}, {why}" for k, (tol, why) in sorted(TOLERANCES.items())] + [""]
    lines += ["## Operators", ""]
    if other:
        theirs = {o["name"]: o for o in other["operators"]}
        b = RUNTIME_NAMES[other["runtime"]]
        lines += [f"| OpInfo | {name} | ok / compared | first problem | {b} | ok / compared | {b}'s first problem |",
                  "|---|---|---|---|---|---|---|"]
        for o in report["operators"]:
            y = theirs.get(o["name"])
            cells = [y["status"], ok_compared(y), problem_text(y, 80)] if y else ["", "", ""]
            lines.append(f"| `{o['name']}` | {o['status']} | {ok_compared(o)} | {problem_text(o, 80)} | "
                         + " | ".join(cells) + " |")
    else:
        lines += ["| OpInfo | status | ok / compared | first problem |", "|---|---|---|---|"]
        for o in report["operators"]:
            lines.append(f"| `{o['name']}` | {o['status']} | {ok_compared(o)} | {problem_text(o)} |")
    return "\n".join(lines) + "\n"


# docs/operators.md is `kiln ops --markdown`, then from this line on the summary below
# (tests/test_cli.py compares the part before it with the generator's output).
OPERATORS_MD_MARKER = "<!-- the OpInfo summary below is written by scripts/opinfo_sweep.py --operators-md -->"


def operators_md_summary(report: dict, other: dict = None) -> str:
    """The section of docs/operators.md: the counts of the sweep (and of --compare), a link."""
    s = report["summary"]
    name = runtime_name(report)
    lines = [OPERATORS_MD_MARKER, "", "## OpInfo sweep", "",
             f"PyTorch's OpInfo samples ({s['num_samples']} {'/'.join(report['dtypes'])} samples of "
             f"{s['operators']} OpInfos, "
             f"torch {report['torch']}, {report['date']}), run with `scripts/opinfo_sweep.py`; per operator "
             "and sample in [opinfo.md](opinfo.md).", ""]
    reports = [report] + ([other] if other else [])
    lines += ["| operators | " + " | ".join(runtime_name(r) for r in reports) + " |",
              "|---|" + "---|" * len(reports)]
    for key in ["ok", "wrong", "crash"]:
        lines.append(f"| {key} | " + " | ".join(str(r["summary"]["by_status"].get(key, 0)) for r in reports) + " |")
    lines.append("| ok on at least one sample | "
                 + " | ".join(str(r["summary"]["ok_on_one_sample"]) for r in reports) + " |")
    if other:
        theirs = {o["name"]: o["status"] for o in other["operators"]}
        only = sum(1 for o in report["operators"] if o["status"] != "ok" and theirs.get(o["name"]) == "ok")
        lines += ["", f"{only} operators are ok in {runtime_name(other)} and not in {name}: listed in "
                      f"[opinfo.md](opinfo.md), the work list for {name}'s coverage."]
    return "\n".join(lines) + "\n"


def write_operators_md(path: str, section: str):
    """Replaces the sweep's section of docs/operators.md (from OPERATORS_MD_MARKER on), or appends it."""
    text = Path(path).read_text()
    head = text.split(OPERATORS_MD_MARKER)[0].rstrip("\n") + "\n\n"
    Path(path).write_text(head + section)


def load_report(path):
    """An earlier --json (None without a path), with its summary."""
    if not path:
        return None
    report = json.loads(Path(path).read_text())
    report.setdefault("runtime", "kiln")  # written before --runtime
    report["summary"] = summarize(report)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="only OpInfos whose name contains one of these")
    parser.add_argument("--max-samples", type=int, default=8, help="samples per OpInfo and dtype (default 8)")
    parser.add_argument("--max-elements", type=int, default=1_000_000, help="skip larger samples")
    parser.add_argument("--dtypes", default="float32",
                        help="comma-separated dtypes (each only where the OpInfo supports it)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per sample before it is a crash")
    parser.add_argument("--markdown", help="write the summary and per-operator table here")
    parser.add_argument("--json", help="write every sample's result here")
    parser.add_argument("--from-json", help="only rewrite --markdown from the results of an earlier --json")
    parser.add_argument("--runtime", choices=sorted(RUNTIMES), default="kiln",
                        help="the runtime that exports and runs the samples (default kiln)")
    parser.add_argument("--python", default=sys.executable,
                        help="the workers' interpreter, e.g. the venv of scripts/setup_executorch.sh "
                             "(default: this one); its torch must be this one's")
    parser.add_argument("--compare", metavar="JSON",
                        help="the --json of a sweep of the other runtime on the same samples: "
                             "--markdown gets the comparison")
    parser.add_argument("--operators-md", metavar="MD",
                        help="write the summary (with --compare's) as the last section of this file "
                             "(docs/operators.md), replacing the one there")
    parser.add_argument("--update", metavar="JSON",
                        help="put the results of this (NAME-filtered) sweep into this earlier --json of "
                             "the same runtime, replacing those OpInfos, and write that as --json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args.runtime)
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
        report["summary"] = summarize(report)
        other = load_report(args.compare)
        if args.operators_md:
            write_operators_md(args.operators_md, operators_md_summary(report, other))
        if args.markdown or not args.operators_md:
            Path(args.markdown or "/dev/stdout").write_text(markdown(report, other))
        return 0

    import torch

    started = time.time()
    op_db = load_op_db()
    dtypes = [d for d in args.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPE_NAMES:
            parser.error(f"unknown dtype {d!r}; one of {', '.join(DTYPE_NAMES)}")
    jobs = []
    for index, op in enumerate(op_db):
        name = operator_name(op)
        if args.names and not any(n in name for n in args.names):
            continue
        supported = {str(t).replace("torch.", "") for t in op.supported_dtypes("cpu")}
        wanted = [d for d in dtypes if d in supported]
        if "float32" not in supported:
            continue  # the measurement is over OpInfos that run in float32 on the CPU
        jobs.append((index, name, wanted))
    print(f"{len(jobs)} OpInfos, {args.jobs} workers", file=sys.stderr)

    results: dict = {}
    pending = list(jobs)
    lock = threading.Lock()
    logdir = tempfile.mkdtemp(prefix="kiln-opinfo-logs-")

    versions = {}

    def lane(n: int):
        state = {"log": open(os.path.join(logdir, f"worker{n}.log"), "w"), "python": args.python,
                 "runtime": args.runtime, "torch": torch.__version__}
        while True:
            with lock:
                if not pending:
                    break
                index, name, wanted = pending.pop(0)
            task = {"dtypes": wanted, "max_samples": args.max_samples, "max_elements": args.max_elements}
            samples = run_operator(state, index, task, args.timeout)
            for s in samples:
                s.pop("event", None)
            o = {"name": name, "samples": samples, "status": operator_status(samples)}
            with lock:
                results[index] = o
                done = len(results)
            print(f"[{done}/{len(jobs)} {time.time() - started:.0f}s] {name}: {o['status']} "
                  f"({sum(s['status'] == 'ok' for s in samples)}/{len(samples)} ok)", file=sys.stderr)
        versions.update(state.get("versions", {}))
        if state.get("worker"):
            state["worker"].proc.stdin.close()
            state["worker"].proc.wait()

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    report = {"command": "python scripts/opinfo_sweep.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "runtime": args.runtime, "versions": versions,
              "torch": torch.__version__, "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "seconds": time.time() - started, "dtypes": dtypes, "max_samples": args.max_samples,
              "max_elements": args.max_elements,
              "operators": [results[i] for i, _, _ in jobs]}
    if args.update:  # the earlier sweep, with these OpInfos rerun
        base = json.loads(Path(args.update).read_text())
        if base.get("runtime", "kiln") != args.runtime:
            parser.error(f"--update {args.update} is a sweep of {base.get('runtime', 'kiln')}")
        fresh = {o["name"]: o for o in report["operators"]}
        base["operators"] = [fresh.get(o["name"], o) for o in base["operators"]]
        base["updates"] = base.get("updates", []) + [f"{report['command']} ({report['date']}, "
                                                     f"{len(fresh)} OpInfos rerun)"]
        report = base
    report["summary"] = summarize(report)
    s = report["summary"]
    print(f"\n{'status':<16}operators")
    for key in ORDER:
        print(f"{key:<16}{s['by_status'].get(key, 0)}")
    print(f"{'total':<16}{s['operators']}  (ok on at least one sample: {s['ok_on_one_sample']}; "
          f"{s['num_samples']} samples, {report['seconds']:.0f} s)")
    for o in report["operators"]:
        if o["status"] in ("wrong", "crash"):
            p = first_problem(o)
            print(f"{o['status'].upper()}: {o['name']} sample {p['sample']} ({p['desc']}): {p['detail']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(report, load_report(args.compare)))
    if args.operators_md:
        write_operators_md(args.operators_md, operators_md_summary(report, load_report(args.compare)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
