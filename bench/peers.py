"""compare.py's peers beyond ONNX Runtime fp32: ExecuTorch 1.5.1 with its XNNPACK delegate,
and the int8 flows of ExecuTorch (XNNPACKQuantizer, PT2E) and of ONNX Runtime
(quantize_dynamic / quantize_static).

ExecuTorch is optional: `executorch_missing()` says why it cannot run (compare.py then
skips it and prints the reason). Programs are lowered ahead of time with static shapes,
one .pte per row (ExecuTorch's own deployment model; lowering MiniLM with a dynamic
sequence took 4x longer and split the graph into more delegates), written beside the
.kiln and .onnx files and reused with --keep; each .pte has a .json saying what the
XNNPACK partitioner left outside its delegates.

Threads: the 1.5.1 pybindings size the threadpool that the XNNPACK delegate runs on
(executorch::extension::threadpool, the pthreadpool XNNPACK is given) with
`_unsafe_reset_threadpool(n)` and report it with `_threadpool_get_thread_count()`;
`set_threads` sets it and checks the count, and raises if the two disagree, so that no
table compares unequal thread counts silently. Its default is the number of cores. A
program keeps the threadpool it was loaded with: one loaded at 1 thread still runs on one
core (CPU time / wall time 1.00) after a reset to 2, so compare.py sets the count before it
loads a pass's programs, and `cpu_per_wall` measures what a call actually used.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

QUANT_SCHEMES = {
    "static": "XNNPACKQuantizer, get_symmetric_quantization_config(is_per_channel=True): int8 weights per "
              "output channel, int8 activations per tensor from calibration (prepare_pt2e, convert_pt2e)",
    "dynamic": "XNNPACKQuantizer, get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True): "
               "int8 weights per output channel, activations quantized per call (the linears)",
}
ORT_SCHEMES = {
    "static": "quantize_static, QDQ, per_channel=True, uint8 activations / int8 weights (ORT's x86 default), "
              "MinMax calibration",
    "dynamic": "quantize_dynamic, weight_type=QInt8 (ORT's defaults otherwise: per-tensor weights)",
}


def executorch_missing() -> str | None:
    """None if ExecuTorch with its XNNPACK delegate can run here, else why not."""
    try:
        import executorch.exir  # noqa: F401
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: F401
        from executorch.extension.pybindings import portable_lib
    except ImportError as e:
        return f"executorch does not import ({e}); bash bench/setup.sh installs executorch==1.5.1"
    if "XnnpackBackend" not in portable_lib._get_registered_backend_names():
        return "executorch's pybindings have no XnnpackBackend registered"
    return None


def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("executorch")


def set_threads(n: int) -> None:
    from executorch.extension.pybindings import portable_lib

    if portable_lib._threadpool_get_thread_count() != n:
        portable_lib._unsafe_reset_threadpool(n)
    got = portable_lib._threadpool_get_thread_count()
    if got != n:
        raise RuntimeError(f"ExecuTorch's threadpool has {got} threads after _unsafe_reset_threadpool({n})")


def _op_name(node) -> str:
    name = getattr(node.target, "__name__", str(node.target))
    return name.split("::")[-1]


def lower(module: torch.nn.Module, example: tuple, path: Path, quant: str | None = None,
          calibration: list[tuple] = ()) -> dict:
    """torch.export -> (int8: PT2E quantization) -> to_edge_transform_and_lower with the
    XNNPACK partitioner -> to_executorch, written to `path`; returns (and writes beside it)
    what was delegated."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    start = time.perf_counter()
    ep = torch.export.export(module, example)
    if quant:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=quant == "dynamic")
        prepared = prepare_pt2e(ep.module(), XNNPACKQuantizer().set_global(config))
        for batch in calibration or [example]:
            prepared(*batch)
        ep = torch.export.export(convert_pt2e(prepared), example)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    nodes = [n for n in edge.exported_program().graph_module.graph.nodes if n.op == "call_function"]
    outside = Counter(_op_name(n) for n in nodes)
    delegates = outside.pop("executorch_call_delegate", 0)
    for bookkeeping in ("getitem", "sym_size.int"):
        outside.pop(bookkeeping, None)
    path.write_bytes(edge.to_executorch().buffer)
    info = {"seconds": time.perf_counter() - start, "delegates": delegates, "outside": dict(outside)}
    path.with_suffix(".json").write_text(json.dumps(info))
    return info


def describe(path: Path) -> str:
    """One line: how many XNNPACK delegates the program has and which ops run outside them."""
    info = json.loads(path.with_suffix(".json").read_text())
    outside = ", ".join(f"{op} x{n}" for op, n in sorted(info["outside"].items()))
    return f"{info['delegates']} XNNPACK delegate(s)" + (f"; outside them: {outside}" if outside else
                                                         "; nothing outside them")


class EtRunner:
    """A .pte through ExecuTorch's C++ runtime (pybindings), fp32 or int8 alike."""

    def __init__(self, path: Path):
        from executorch.extension.pybindings.portable_lib import _load_for_executorch

        self.module = _load_for_executorch(str(path))

    def prepare(self, row):
        module, inputs = self.module, tuple(torch.from_numpy(a) for a in row.inputs)
        return lambda: module.forward(inputs)[0].numpy()


def ort_quantize(src: Path, dst: Path, kind: str, input_names: list[str], calibration: list[tuple]) -> None:
    """ONNX Runtime's int8 model of `src`: quantize_dynamic (transformers) or quantize_static
    with `calibration` batches (CNNs), per ORT_SCHEMES."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    if kind == "dynamic":
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
        return

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([dict(zip(input_names, (np.asarray(a) for a in b))) for b in calibration])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def cosine(out: np.ndarray, ref: np.ndarray) -> float:
    a, b = np.asarray(out, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


def cpu_per_wall(call, calls: int = 5) -> float:
    """This process's CPU time over wall time during `calls` calls: about the number of
    threads that worked (call it once the other runtimes' workers have stopped spinning)."""
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    return (time.process_time() - c0) / (time.perf_counter() - t0)
