"""kiln.export.export: the stages chained, and the report of what they did.

    traced = trace(model, example_inputs, methods=..., dynamic_shapes=..., quantize=...)
    passed = run_passes(traced, optimize=..., passes=...)
    program = lower(passed, metadata=...)
    write_program(program, path)        # or serialize(program) when path is None

The stages are public (kiln.export.trace, run_passes, lower, serialize,
write_program) so that a user can stop between them and look; this module adds
only the ExportReport, which needs what every stage produced, and the trial
load that says which kernels serve the program on this machine.
"""

from __future__ import annotations

import os
import time

from ..errors import ExportError
from .frontend.trace import trace
from .lowering.lower import lower
from .lowering.serialize import serialize, write_program
from .passes.pipeline import run_passes
from .quantize.summary import summarize_method
from .report import ExportReport, MethodReport


def export_program(model, example_inputs, path, *, methods=None, dynamic_shapes=None,
                   optimize=True, quantize=None, metadata=None, passes=()) -> ExportReport:
    start = time.perf_counter()
    traced = trace(model, example_inputs, methods=methods, dynamic_shapes=dynamic_shapes, quantize=quantize)
    passed = run_passes(traced, optimize=optimize, passes=passes)
    notes = list(traced.notes)
    if traced.gemm_precision and "kiln.gemm_precision" not in (metadata or {}):
        metadata = {**(metadata or {}), "kiln.gemm_precision": traced.gemm_precision}
        notes.append("its linear layers round their operands to bfloat16, as the bfloat16 model's do, with "
                     "float32 sums, where the CPU has AVX512_BF16 (metadata kiln.gemm_precision; "
                     "kiln.load(..., gemm_precision='float32') computes them in float32)")
    program = lower(passed, metadata=metadata)
    if path is None:
        data = serialize(program)
        file_size = len(data)
    else:
        path, data = os.fspath(path), None
        file_size = write_program(program, path, check=lambda written: _check_loadable(written, path))

    segment_bytes = [memoryview(s).nbytes for s in program.segments]
    report = ExportReport(path=path, file_size=file_size, export_seconds=0.0,
                          num_segments=len(segment_bytes), constant_bytes=sum(segment_bytes),
                          producer=program.producer, notes=notes, optimize=optimize, data=data)
    for m in program.methods:
        report.methods[m.name] = MethodReport(
            name=m.name, num_instructions=len(m.instructions), operators=m.operator_keys(),
            arena_bytes=sum(m.arena_sizes), naive_bytes=m.naive_bytes,
            constant_bytes=sum(segment_bytes[s] for s in m.constant_segments()),
            num_inputs=len(m.inputs), num_outputs=len(m.outputs), num_state=len(m.state),
            fused=dict(passed.methods[m.name].fused), quantized=summarize_method(m))
    _load_here(report, path if data is None else data)
    report.export_seconds = time.perf_counter() - start
    return report


def _check_loadable(written: str, path: str) -> None:
    """Refuses (ExportError, before the file takes its name) a program this runtime
    would refuse to load, e.g. one whose planned memory is past kiln.load's default
    limit because a dynamic dimension has a huge bound."""
    from .. import _program
    from ..errors import KilnError, OutOfMemory

    try:
        _program.load(written)
    except OutOfMemory as e:
        raise ExportError(f"'{path}' would not load: {e}; is a dynamic dimension's bound too large "
                          "(torch.export.Dim(..., max=...))?".replace(written, path)) from None
    except KilnError as e:
        raise ExportError(f"'{path}' would not load: {type(e).__name__}: {e}".replace(written, path)) from None


def _load_here(report: ExportReport, source) -> None:
    """Loads the program (`source`: its path or its bytes) with this process's
    runtime and records which kernel tier serves each method's instructions and
    the weights it prepacks, so the report says what the program costs on this
    machine."""
    from .. import _program, _registry
    from ..errors import KilnError

    program = _program.load(source)
    for name, m in report.methods.items():
        try:
            method = program.load_method(name)
        except KilnError as e:
            m.load_error = f"{type(e).__name__}: {e}"
            continue
        report.isa = method.isa
        portable = set()
        for info in method.instructions:
            if info.kind != "kernel":
                continue
            tier = _registry.kernel_tier_name(info.tier)
            m.kernel_tiers[tier] = m.kernel_tiers.get(tier, 0) + 1
            if info.tier == min(_registry.kernel_tiers().values()):  # the reference tier
                portable.add(info.op)
        m.portable_operators = sorted(portable)
    report.packed_bytes = program.packed_bytes
