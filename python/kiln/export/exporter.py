"""The export driver: torch.export -> decompositions -> passes -> lowering -> file.

    ep = torch.export.export(module.eval(), args, strict=False)
    ep = ep.run_decompositions(decomposition_table())
    PassManager(default_passes(optimize, passes)).run(ctx)  # per method (optimize: fusion)
    find_unsupported(...)                           # all methods, before writing
    lower_method(ctx, pool)                         # shared ConstantPool = dedup
    write_program(...)                              # temp file + rename
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import sys
import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ..errors import ExportError, UnsupportedOperatorError
from .constants import ConstantPool
from .decompositions import decomposition_table
from .ir import ProgramIR
from .diagnostics import find_unsupported, format_unsupported
from .lowering import lower_method
from .passes import default_passes
from .passes.manager import PassContext, PassManager
from .quantized_summary import summarize_method
from .report import ExportReport, MethodReport
from .serialize import write_program

_WRAPPED = "model"  # attribute under which a non-forward method's module is wrapped


class _MethodModule(torch.nn.Module):
    """Exports `model.<name>` as if it were a forward()."""

    def __init__(self, model: torch.nn.Module, name: str) -> None:
        super().__init__()
        setattr(self, _WRAPPED, model)
        self._kiln_method = name

    def forward(self, *args):
        return getattr(getattr(self, _WRAPPED), self._kiln_method)(*args)


def _producer() -> str:
    kiln = sys.modules.get("kiln")
    version = getattr(kiln, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as dist_version

            version = dist_version("kiln")
        except Exception:
            version = "dev"
    return f"kiln {version} / torch {torch.__version__}"


def _check_inputs(name: str, args) -> Tuple[torch.Tensor, ...]:
    if isinstance(args, torch.Tensor):
        args = (args,)
    if not isinstance(args, (tuple, list)):
        raise ExportError(f"example inputs of method '{name}' must be a flat tuple of tensors, "
                          f"got {type(args).__name__}")
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise ExportError(f"example input {i} of method '{name}' is a {type(a).__name__}; "
                              "kiln methods take a flat tuple of tensors (no nested "
                              "structures or Python scalars)")
        if a.layout != torch.strided or a.device.type != "cpu":
            raise ExportError(f"example input {i} of method '{name}' must be a dense CPU tensor")
    return tuple(args)


def _method_plan(model, example_inputs, methods) -> List[Tuple[str, Tuple[torch.Tensor, ...]]]:
    plan: Dict[str, object] = {}
    if methods is None:
        if example_inputs is None:
            raise ExportError("example_inputs is required when `methods` is not given")
        plan["forward"] = example_inputs
    else:
        if not isinstance(methods, dict) or not methods:
            raise ExportError("`methods` must be a non-empty dict {method name: example inputs}")
        if example_inputs is not None and "forward" not in methods:
            plan["forward"] = example_inputs
        plan.update(methods)
    for name in plan:
        if not isinstance(name, str) or not name:
            raise ExportError(f"method names must be non-empty strings, got {name!r}")
        if not callable(getattr(model, name, None)):
            raise ExportError(f"the model has no method '{name}'")
    return [(name, _check_inputs(name, args)) for name, args in plan.items()]


def _input_names(model, name: str, count: int, placeholders: Sequence[str]) -> List[str]:
    try:
        sig = inspect.signature(getattr(model, name))
        params = [p.name for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) >= count:
        return params[:count]
    return list(placeholders)


def _dynamic_shapes_for(dynamic_shapes, name: str, names: Sequence[str]):
    if dynamic_shapes is None:
        return None
    if isinstance(dynamic_shapes, dict) and dynamic_shapes and set(dynamic_shapes) <= set(names):
        return dynamic_shapes.get(name)
    return dynamic_shapes if name == "forward" else None


@contextlib.contextmanager
def _torch_internal_warnings_hidden():
    """Hides the deprecation warnings torch.export raises about its own internals
    (torch 2.13: `isinstance(treespec, LeafSpec)`, on every export): the user can
    do nothing about them. Warnings about the user's model still show."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
        yield


def _data_dependent_guard(error: BaseException) -> Optional[str]:
    """The expression of torch's "Could not guard on data-dependent expression ..."
    or "Could not extract specialized integer from data-dependent expression ..."
    (GuardOnDataDependentSymNode, or a user error that wraps it), else None."""
    import re

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        match = re.search(r"[Cc]ould not (?:guard on|extract specialized integer from) data-dependent "
                          r"expression (.+?)(?: \(unhinted|\n|$)", text)
        if match:
            return match.group(1).strip()
        if type(error).__name__ == "GuardOnDataDependentSymNode":
            return text.splitlines()[0] if text else "(unnamed)"
        error = error.__cause__ or error.__context__
    return None


def _torch_failure(what: str, e: Exception) -> ExportError:
    guard = _data_dependent_guard(e)
    if guard is None:
        return ExportError(f"{what}: {type(e).__name__}: {e}")
    return ExportError(
        f"{what}: the model branches on, or shapes a tensor by, a value that depends on tensor "
        f"data: torch could not decide the data-dependent expression {guard}. Tell torch.export "
        "what holds with a hint before that line, e.g. torch._check(n <= x.numel()), "
        "torch._check(n % 2 == 0) or torch._check_is_size(n) (n being the size or value the "
        f"expression names), or avoid the branch. torch's message: {type(e).__name__}: {e}")


def _trace(model, name: str, args, dynamic_shapes) -> PassContext:
    from torch.export.graph_signature import InputKind, OutputKind

    module = model if name == "forward" else _MethodModule(model, name)
    with _torch_internal_warnings_hidden():
        try:
            ep = torch.export.export(module, args, strict=False, dynamic_shapes=dynamic_shapes)
        except Exception as e:
            raise _torch_failure(f"torch.export failed for method '{name}'", e) from e
        try:
            ep = ep.run_decompositions(decomposition_table())
        except Exception as e:
            raise _torch_failure(f"decomposing method '{name}' failed", e) from e

    sig = ep.graph_signature
    graph = ep.graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.input_specs):
        raise ExportError(f"internal: graph signature of method '{name}' does not match its graph")
    # Buffers the method writes become state; the outputs that carry their new
    # values come first (checked below), then the user outputs.
    mutated_buffers = [spec.target for spec in sig.output_specs
                       if spec.kind == OutputKind.BUFFER_MUTATION]
    constants, user_inputs, state = {}, [], {}
    state_node = {}
    for spec, node in zip(sig.input_specs, placeholders):
        if spec.kind == InputKind.BUFFER and spec.target in mutated_buffers:
            tensor = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            if not isinstance(tensor, torch.Tensor):
                raise ExportError(f"internal: no data for buffer '{spec.target}'")
            state[node] = (spec.target, tensor.detach().clone())
            state_node[spec.target] = node
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            if spec.target in ep.state_dict:
                tensor = ep.state_dict[spec.target]
            elif spec.target in ep.constants:
                tensor = ep.constants[spec.target]
            else:
                raise ExportError(f"internal: no data for constant '{spec.target}'")
            if not isinstance(tensor, torch.Tensor):
                raise ExportError(f"constant '{spec.target}' of method '{name}' is a "
                                  f"{type(tensor).__name__}, not a tensor")
            constants[node] = tensor.detach()
        elif spec.kind == InputKind.USER_INPUT:
            if not isinstance(node.meta.get("val"), torch.Tensor):
                raise ExportError(f"input '{node.name}' of method '{name}' is not a tensor")
            user_inputs.append(node)
        else:
            raise ExportError(f"method '{name}' has an input of kind {spec.kind.name} "
                              f"('{node.name}'), which kiln does not support")
    kinds = [spec.kind for spec in sig.output_specs]
    for i, spec in enumerate(sig.output_specs):
        if spec.kind not in (OutputKind.USER_OUTPUT, OutputKind.BUFFER_MUTATION):
            what = getattr(spec, "target", None) or spec.arg
            raise ExportError(f"method '{name}' has an output of kind {spec.kind.name} ({what}); "
                              "kiln keeps module buffers as state but cannot update inputs or "
                              "parameters in place: return the new value instead")
        if spec.kind == OutputKind.BUFFER_MUTATION and OutputKind.USER_OUTPUT in kinds[:i]:
            raise ExportError(f"internal: buffer mutations of method '{name}' do not come first")
    ctx = PassContext(graph=graph, constants=constants, user_inputs=user_inputs, method=name,
                      module_prefix="" if module is model else _WRAPPED + ".", state=state,
                      mutated=[state_node[target] for target in mutated_buffers],
                      symbol_ranges=dict(ep.range_constraints))
    ctx.input_names = _input_names(model, name, len(user_inputs), [n.name for n in user_inputs])
    return ctx


_HALF = (torch.float16, torch.bfloat16)


def _as_float32(model, plan):
    """(model, plan, note): a float32 copy of a model with float16/bfloat16
    parameters or buffers, and float32 example inputs, since kiln computes in
    float32 (docs/format.md). The caller's model is left untouched."""
    # Quantized layers (kiln.export.quantize) keep their float16 scales.
    tensors = [t for m in model.modules() if not getattr(m, "kiln_keeps_dtype", False)
               for t in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False))]
    inputs_half = any(a.dtype in _HALF for _, args in plan for a in args)
    if not inputs_half and not any(t.dtype in _HALF for t in tensors):
        return model, plan, None
    found = sorted({str(t.dtype).replace("torch.", "") for t in tensors if t.dtype in _HALF} |
                   {str(a.dtype).replace("torch.", "") for _, args in plan for a in args if a.dtype in _HALF})
    if any(t.dtype in _HALF for t in tensors):
        try:
            model = copy.deepcopy(model)
        except Exception as e:
            raise ExportError(f"the model has {' and '.join(found)} weights, which kiln converts to "
                              f"float32 in a copy of the model, but copying it failed: {e}; "
                              "convert it with model.float() before exporting") from e
        model._apply(lambda t: t.float() if t.dtype in _HALF else t)
    plan = [(name, tuple(a.float() if a.dtype in _HALF else a for a in args)) for name, args in plan]
    return model, plan, (f"{' and '.join(found)} weights and inputs were converted to float32 "
                         "(kiln computes in float32; the program's inputs are float32)")


def _quantized(model, quantize):
    """(model, note): `model` with its linear and embedding weights quantized
    (kiln.export.quantize.quantize on a copy), for export(..., quantize=...)."""
    from .quantize import quantize as quantize_model

    if isinstance(quantize, str):
        options = {"scheme": quantize}
    elif isinstance(quantize, dict):
        options = dict(quantize)
    else:
        raise ExportError(f"quantize must be a scheme name or a dict of kiln.export.quantize.quantize "
                          f"options, got {type(quantize).__name__}")
    try:
        model = quantize_model(model, **options)
    except (TypeError, ValueError) as e:
        raise ExportError(f"quantize={quantize!r}: {e}") from e
    return model, str(model.kiln_quantization)


# The runtime's limits on named metadata (runtime/loader/program_data.h).
MAX_METADATA_ENTRIES = 1024
MAX_METADATA_KEY_BYTES = 256


def check_metadata(metadata) -> Dict[str, bytes]:
    """{key: bytes} from a {str: bytes | str} mapping (str values are stored as UTF-8),
    refusing what the runtime would refuse to load."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ExportError(f"metadata must be a dict {{str: bytes or str}}, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise ExportError(f"{len(metadata)} metadata entries; at most {MAX_METADATA_ENTRIES} are allowed")
    out: Dict[str, bytes] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or len(key.encode("utf-8")) > MAX_METADATA_KEY_BYTES:
            raise ExportError(f"metadata key {key!r} must be a non-empty string of at most "
                              f"{MAX_METADATA_KEY_BYTES} UTF-8 bytes")
        if isinstance(value, str):
            value = value.encode("utf-8")
        try:
            out[key] = bytes(memoryview(value))
        except TypeError:
            raise ExportError(f"metadata '{key}' must be bytes or str, not {type(value).__name__}") from None
    return out


def export_program(model, example_inputs, path, *, methods=None, dynamic_shapes=None,
                   optimize=True, quantize=None, metadata=None, passes=()) -> ExportReport:
    start = time.perf_counter()
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"kiln.export.export expects a torch.nn.Module, got {type(model).__name__}")
    if path is None:
        raise ExportError("an output path is required")
    named_metadata = check_metadata(metadata)
    plan = _method_plan(model, example_inputs, methods)
    names = [n for n, _ in plan]
    pipeline = default_passes(optimize, passes or ())
    notes = []
    if quantize is not None:
        model, note = _quantized(model, quantize)
        notes.append(note)
    model, plan, note = _as_float32(model, plan)
    if note:
        notes.append(note)

    training = {m: m.training for m in model.modules()}
    contexts: List[PassContext] = []
    try:
        model.eval()
        for name, args in plan:
            ctx = _trace(model, name, args, _dynamic_shapes_for(dynamic_shapes, name, names))
            PassManager(pipeline).run(ctx)
            contexts.append(ctx)
    finally:
        for m, mode in training.items():
            m.training = mode

    unsupported = [(ctx.method, key, node, ctx.module_prefix)
                   for ctx in contexts for key, node in find_unsupported(ctx)]
    if unsupported:
        error = UnsupportedOperatorError(format_unsupported(unsupported))
        error.operators = sorted({key for _, key, _, _ in unsupported})
        raise error

    pool = ConstantPool()
    method_irs = [lower_method(ctx, pool, ctx.input_names) for ctx in contexts]
    program = ProgramIR(methods=method_irs, segments=pool.segments, producer=_producer(),
                        metadata=named_metadata)
    path = os.fspath(path)
    file_size = write_program(program, path, check=lambda written: _check_loadable(written, path))

    report = ExportReport(path=path, file_size=file_size, export_seconds=0.0,
                          num_segments=len(pool), constant_bytes=pool.total_bytes(),
                          producer=program.producer, notes=notes, optimize=optimize)
    for m, ctx in zip(method_irs, contexts):
        report.methods[m.name] = MethodReport(
            name=m.name, num_instructions=len(m.instructions), operators=m.operator_keys(),
            arena_bytes=sum(m.arena_sizes), naive_bytes=m.naive_bytes,
            constant_bytes=sum(pool[s].nbytes for s in m.constant_segments()),
            num_inputs=len(m.inputs), num_outputs=len(m.outputs), num_state=len(m.state),
            fused=dict(ctx.fused), quantized=summarize_method(m))
    _load_here(report)
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


def _load_here(report: ExportReport) -> None:
    """Loads the written program with this process's runtime and records which
    kernel tier serves each method's instructions and the weights it prepacks,
    so the report says what the program costs on this machine."""
    from .. import _program
    from ..errors import KilnError

    tier_names = {0: "portable", 100: "optimized"}
    program = _program.load(report.path)
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
            tier = tier_names.get(info.tier, f"tier {info.tier}")
            m.kernel_tiers[tier] = m.kernel_tiers.get(tier, 0) + 1
            if info.tier == 0:
                portable.add(info.op)
        m.portable_operators = sorted(portable)
    report.packed_bytes = program.packed_bytes
