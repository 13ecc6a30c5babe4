"""The trace stage: a model (or the user's own ExportedProgram) -> TracedProgram.

    traced = kiln.export.trace(model, (x,))
    traced.methods["forward"].exported      # torch.export's ExportedProgram
    ctx = traced.methods["forward"].decompose()   # kiln's core-ATen graph, before the passes

Each method of the model is traced by torch.export (non-strict); what kiln
changes about the model first (a float32 copy of a half-precision model, the
weights quantized on request) is said in `notes`. Decomposition to core ATen
happens in `TracedMethod.decompose()`, which run_passes calls: it gives a fresh
graph each time, so a TracedProgram stays as torch.export made it and can be
passed through the passes more than once.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ...errors import ExportError
from ..passes.manager import PassContext
from .decompositions import decomposition_table


@dataclass
class TracedMethod:
    """One method as torch.export traced it, before kiln's decompositions."""

    name: str
    """The method's name in the program ("forward", "encode", ...)."""
    exported: torch.export.ExportedProgram
    """torch.export's program for the method (the user's own, for an ExportedProgram input)."""
    example_inputs: Tuple[torch.Tensor, ...]
    """The inputs it was traced with (float32 where the model's were half precision)."""
    input_names: List[str]
    """The names of the program's inputs: the method's parameter names where they fit."""
    module_prefix: str = ""
    """Prefix of module paths that is kiln's wrapper, not the user's model (stripped from messages)."""

    def decompose(self) -> PassContext:
        """A fresh PassContext: kiln's decompositions (frontend/decompositions.py)
        run on a copy of the traced graph, whose placeholders are split into
        constants, state (buffers the method updates) and user inputs. The
        TracedMethod is left as it was."""
        from torch.export.graph_signature import InputKind, OutputKind

        name = self.name
        with _torch_internal_warnings_hidden():
            try:
                ep = self.exported.run_decompositions(decomposition_table())
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
        return PassContext(graph=graph, constants=constants, user_inputs=user_inputs, method=name,
                           input_names=list(self.input_names), module_prefix=self.module_prefix, state=state,
                           mutated=[state_node[target] for target in mutated_buffers],
                           symbol_ranges=dict(ep.range_constraints))

@dataclass
class TracedProgram:
    """The output of trace(): every method of the program, traced."""

    methods: Dict[str, TracedMethod]
    """{method name: TracedMethod}, in the order they are written to the file."""
    model: Optional[torch.nn.Module] = None
    """The module that was traced (a float32 or quantized copy when kiln made
    one), or None for an ExportedProgram input."""
    notes: List[str] = field(default_factory=list)
    """What kiln changed about the model before tracing it (for the report)."""
    gemm_precision: Optional[str] = None
    """"bfloat16" when every linear layer's weight was bfloat16: the program's
    default kiln.load(gemm_precision=...) where the CPU has AVX512_BF16, stored
    as the metadata kiln.gemm_precision; None otherwise."""

    def __str__(self) -> str:
        lines = [f"kiln.export.TracedProgram: {len(self.methods)} method(s)"]
        for m in self.methods.values():
            graph = m.exported.graph
            calls = sum(n.op == "call_function" for n in graph.nodes)
            lines.append(f"  method '{m.name}': inputs {', '.join(m.input_names) or '(none)'}; "
                         f"{calls} operator calls before kiln's decompositions")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

def trace(model, example_inputs=None, *, methods=None, dynamic_shapes=None, quantize=None) -> TracedProgram:
    """Traces `model` with torch.export: the first stage of kiln.export.export.

    model:          a torch.nn.Module (put in eval mode for the trace; its
                    training flags are restored afterwards), or an
                    ExportedProgram of the user's own torch.export.export,
                    which becomes the method "forward" (then example_inputs,
                    methods, dynamic_shapes and quantize must be left out: the
                    program already fixed them).
    example_inputs, methods, dynamic_shapes, quantize: as for export().

    Returns a TracedProgram. Raises kiln.errors.ExportError when torch.export
    fails (saying what to do about data-dependent branches) or the inputs are
    not a flat tuple of dense CPU tensors.
    """
    if isinstance(model, torch.export.ExportedProgram):
        return _from_exported_program(model, example_inputs, methods, dynamic_shapes, quantize)
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"kiln.export expects a torch.nn.Module or a torch.export.ExportedProgram, "
                          f"got {type(model).__name__}")
    plan = _method_plan(model, example_inputs, methods)
    names = [n for n, _ in plan]
    notes = []
    if quantize is not None:
        model, note = _quantized(model, quantize)
        notes.append(note)
    gemm_precision = "bfloat16" if _linear_weights_are_bfloat16(model) else None
    model, plan, note = _as_float32(model, plan)
    if note:
        notes.append(note)

    training = {m: m.training for m in model.modules()}
    traced: Dict[str, TracedMethod] = {}
    try:
        model.eval()
        for name, args in plan:
            traced[name] = _trace_method(model, name, args, _dynamic_shapes_for(dynamic_shapes, name, names))
    finally:
        for m, mode in training.items():
            m.training = mode
    return TracedProgram(methods=traced, model=model, notes=notes, gemm_precision=gemm_precision)


_WRAPPED = "model"  # attribute under which a non-forward method's module is wrapped


class _MethodModule(torch.nn.Module):
    """Exports `model.<name>` as if it were a forward()."""

    def __init__(self, model: torch.nn.Module, name: str) -> None:
        super().__init__()
        setattr(self, _WRAPPED, model)
        self._kiln_method = name

    def forward(self, *args):
        return getattr(getattr(self, _WRAPPED), self._kiln_method)(*args)


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


_HALF = (torch.float16, torch.bfloat16)


def _half_weights(model):
    # Quantized layers (kiln.export.quantize) keep their float16 scales.
    return [t for m in model.modules() if not getattr(m, "kiln_keeps_dtype", False)
            for t in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False)) if t.dtype in _HALF]


def _linear_weights_are_bfloat16(model) -> bool:
    """True if the model has linear layers and every one's weight is bfloat16."""
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return bool(weights) and all(w.dtype == torch.bfloat16 for w in weights)


def _as_float32(model, plan):
    """(model, plan, note): a float32 copy of a model with float16/bfloat16
    parameters or buffers, and float32 example inputs, since kiln computes in
    float32 (docs/format.md). The caller's model is left untouched."""
    tensors = _half_weights(model)
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
    from ..quantize import quantize as quantize_model

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


def _trace_method(model, name: str, args, dynamic_shapes) -> TracedMethod:
    module = model if name == "forward" else _MethodModule(model, name)
    with _torch_internal_warnings_hidden():
        try:
            ep = torch.export.export(module, args, strict=False, dynamic_shapes=dynamic_shapes)
        except Exception as e:
            raise _torch_failure(f"torch.export failed for method '{name}'", e) from e
    placeholders = _user_input_names(ep)
    return TracedMethod(name=name, exported=ep, example_inputs=args,
                        input_names=_input_names(model, name, len(placeholders), placeholders),
                        module_prefix="" if module is model else _WRAPPED + ".")


def _from_exported_program(ep, example_inputs, methods, dynamic_shapes, quantize) -> TracedProgram:
    given = [what for what, value in (("example_inputs", example_inputs), ("methods", methods),
                                      ("dynamic_shapes", dynamic_shapes), ("quantize", quantize))
             if value is not None]
    if given:
        raise ExportError(f"an ExportedProgram carries its own inputs and shapes: {', '.join(given)} "
                          "cannot be given with it (export the model itself to change them)")
    args, kwargs = ep.example_inputs if ep.example_inputs is not None else ((), {})
    if kwargs:
        raise ExportError("the ExportedProgram was traced with keyword inputs "
                          f"({', '.join(sorted(kwargs))}); kiln methods take a flat tuple of tensors")
    args = _check_inputs("forward", args)
    half = sorted({str(a.dtype).replace("torch.", "") for a in args if a.dtype in _HALF})
    if half:
        # A model kiln traces itself gets a float32 copy; a traced program cannot be converted.
        raise ExportError(f"the ExportedProgram takes {' and '.join(half)} inputs; kiln programs compute "
                          "in float32: pass the model itself (kiln converts a copy) or export it after "
                          "model.float()")
    method = TracedMethod(name="forward", exported=ep, example_inputs=args, input_names=_user_input_names(ep))
    return TracedProgram(methods={"forward": method})


def _user_input_names(ep) -> List[str]:
    """torch.export's names of the program's inputs (after the method's parameters)."""
    from torch.export.graph_signature import InputKind

    return [spec.arg.name for spec in ep.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]
