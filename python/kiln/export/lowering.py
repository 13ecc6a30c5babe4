"""FX graph (after the passes) -> kiln IR (MethodIR), plus the memory plan.

Every tensor of the graph becomes a TensorValue: user inputs are Bound,
constants are Constant (their bytes go to the program-wide ConstantPool, which
deduplicates them), everything else is Planned in arena 0. Every call becomes a
KernelCall whose inputs are one value per schema argument (see operators.py
for the argument conventions).
"""

from __future__ import annotations

import operator
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from ..errors import ExportError
from . import ir
from .constants import ConstantPool
from .memory_plan import Lifetime, plan_memory
from .operators import (custom_operator_problem, is_custom_operator, normalize_dims, op_key,
                        spec_for, split_key)
from .passes.manager import PassContext, bound_args, is_symbolic, nodes_in
from .symbolic import IntCompiler, SymbolicSizes, is_symbolic_int

_DTYPES = {
    torch.float32: ir.FLOAT32, torch.float64: ir.FLOAT64, torch.int64: ir.INT64,
    torch.int32: ir.INT32, torch.bool: ir.BOOL, torch.float16: ir.FLOAT16,
    torch.bfloat16: ir.BFLOAT16, torch.uint8: ir.UINT8, torch.int8: ir.INT8,
}
# Constants of these dtypes are stored as float32 (docs/format.md).
_WIDENED_CONSTANTS = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def kiln_dtype(dtype: torch.dtype, what: str = "") -> int:
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ExportError(f"dtype {dtype} is not supported by kiln{' (' + what + ')' if what else ''}; "
                          f"supported: {', '.join(str(d) for d in _DTYPES)}") from None


# -- where a node comes from, for error messages ------------------------------------

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def module_path(node: fx.Node, prefix: str = "") -> Tuple[str, str]:
    """(path like "layers.0.attn", class name) of the innermost nn.Module the
    node was traced in; ("", "") if unknown."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, cls = list(stack.values())[-1]
    path = str(path)
    # Strict-mode spellings: L['self'].layers[0].attn -> layers.0.attn
    path = path.replace("L['self'].", "").replace("L['self']", "")
    path = path.replace("[", ".").replace("]", "").replace("'", "")
    if prefix:
        if path == prefix.rstrip("."):
            path = ""
        elif path.startswith(prefix):
            path = path[len(prefix):]
    cls = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]
    return path, cls


def user_frame(node: fx.Node) -> str:
    """'file.py:12: code' of the innermost stack frame outside torch and kiln."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.splitlines()
    best = ""
    for i, line in enumerate(lines):
        line = line.strip()
        if not line.startswith('File "'):
            continue
        try:
            filename = line.split('"', 2)[1]
            lineno = line.split(", line ", 1)[1].split(",", 1)[0]
        except IndexError:
            continue
        if filename.startswith(_TORCH_DIR) or filename.startswith(_KILN_DIR):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        best = f"{filename}:{lineno}" + (f": {code}" if code else "")
    return best


def describe_node(node: fx.Node, prefix: str = "") -> str:
    path, cls = module_path(node, prefix)
    where = f"module '{path}' ({cls})" if path else (f"the root module ({cls})" if cls else "")
    frame = user_frame(node)
    parts = [p for p in (where, f"at {frame}" if frame else "") if p]
    return ", ".join(parts) if parts else f"node '{node.name}'"


# -- unsupported operators --------------------------------------------------------

def _functionalized_target(node: fx.Node):
    """The operator wrapped by torch.export's auto_functionalized(_v2) node (what
    a mutating custom operator becomes), else None."""
    name = getattr(node.target, "__name__", "") or str(node.target)
    if "auto_functionalized" in name and node.args and hasattr(node.args[0], "_schema"):
        return node.args[0]
    return None


def _is_size_arithmetic(node: fx.Node) -> bool:
    """sym_size, operator.mul, ... on symbolic sizes: not run as such; the
    lowering compiles the size expressions they produce (symbolic.py)."""
    return is_symbolic(node.meta.get("val"))


def find_unsupported(ctx: PassContext) -> List[Tuple[str, fx.Node]]:
    """(operator key, node) of every call kiln cannot run, in graph order.

    Operators of SUPPORTED_OPERATORS and functional custom operators (any
    namespace neither PyTorch nor kiln owns, see operators.spec_for) pass; whether a kernel
    exists for a custom operator is the runtime's business at method load.
    """
    out = []
    for node in ctx.graph.nodes:
        if node.op == "call_function":
            if node.target is operator.getitem or _is_size_arithmetic(node):
                continue
            wrapped = _functionalized_target(node)
            if wrapped is not None:
                out.append((op_key(wrapped), node))
                continue
            if spec_for(node.target) is None:
                out.append((op_key(node.target), node))
        elif node.op == "call_module":
            out.append((f"call_module {node.target}", node))
    return out


def unsupported_reason(node: fx.Node) -> str:
    """Why a node found by find_unsupported cannot run ("" for an operator
    that is simply not in SUPPORTED_OPERATORS)."""
    wrapped = _functionalized_target(node)
    if wrapped is not None:
        if is_custom_operator(wrapped):
            return custom_operator_problem(wrapped) or "it mutates its arguments"
        return "it mutates its arguments in place"
    if node.op == "call_function" and is_custom_operator(node.target):
        return custom_operator_problem(node.target) or ""
    return ""


def format_unsupported(found: Sequence[Tuple[str, str, fx.Node, str]], max_locations: int = 5) -> str:
    """found: (method, key, node, module prefix) tuples."""
    by_key: Dict[str, List[Tuple[str, fx.Node, str]]] = {}
    for method, key, node, prefix in found:
        by_key.setdefault(key, []).append((method, node, prefix))
    lines = [f"the model uses {len(by_key)} operator(s) kiln cannot run "
             f"({len(found)} call(s) in total); no file was written:"]
    methods = {m for m, _, _, _ in found}
    for key, uses in by_key.items():
        reason = unsupported_reason(uses[0][1])
        lines.append(f"  {key}: {len(uses)} call(s)" + (f": {reason}" if reason else ""))
        for method, node, prefix in uses[:max_locations]:
            where = describe_node(node, prefix)
            lines.append(f"    - {where}" + (f" [method '{method}']" if len(methods) > 1 else ""))
        if len(uses) > max_locations:
            lines.append(f"    - ... and {len(uses) - max_locations} more")
    lines.append("ways forward: `kiln ops` (or docs/operators.md) lists the operators kiln runs, so the "
                 "model may be rewritten with those; or declare the missing piece as a custom operator "
                 "(torch.library.custom_op) and give it a kernel in a plugin library, as docs/extending.md "
                 "shows")
    return "\n".join(lines)


# -- lowering -----------------------------------------------------------------------

def _arg_kind(t) -> str:
    """Coarse category of a schema argument type."""
    if isinstance(t, torch._C.OptionalType):
        t = t.getElementType()
    if isinstance(t, torch._C.TensorType):
        return "tensor"
    if isinstance(t, torch._C.ListType):
        e = t.getElementType()
        if isinstance(e, torch._C.OptionalType):
            e = e.getElementType()
        if isinstance(e, torch._C.TensorType):
            return "tensor_list"
        if isinstance(e, (torch._C.IntType, torch._C.SymIntType)):
            return "int_list"
        if isinstance(e, torch._C.FloatType):
            return "float_list"
        if isinstance(e, torch._C.BoolType):
            return "bool_list"
        return "list"
    if isinstance(t, torch._C.FloatType):
        return "float"
    if isinstance(t, (torch._C.IntType, torch._C.SymIntType)):
        return "int"
    if isinstance(t, torch._C.BoolType):
        return "bool"
    return "other"


# c10::ScalarType codes (c10/core/ScalarType.h) of the dtypes kiln has: a schema
# default such as `ScalarType dt=6` reaches the exporter as this int.
_C10_DTYPES = {
    0: torch.uint8, 1: torch.int8, 3: torch.int32, 4: torch.int64, 5: torch.float16,
    6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16,
}


def _declared_type(arg) -> str:
    """"ScalarType", "Layout", "int", ... : the type the schema declares (before
    TorchScript maps dtype/layout/memory_format to int), Optional unwrapped."""
    t = getattr(arg, "real_type", None) or arg.type
    if isinstance(t, torch._C.OptionalType):
        t = t.getElementType()
    return str(t)


def _double_key(x: float) -> bytes:
    return struct.pack("<d", float(x))


def _bytes_of(tensor: torch.Tensor):
    """The tensor's bytes, contiguous, as a numpy uint8 array (for the constant pool)."""
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy()


# Functional updates that kernels may run in place when out aliases self.
_IN_PLACE_UPDATES = frozenset({"aten::index_put.default", "aten::index_copy.default",
                               "aten::slice_scatter.default"})


class _MethodLowering:
    def __init__(self, ctx: PassContext, pool: ConstantPool, input_names: Sequence[str]):
        self.ctx = ctx
        self.pool = pool
        self.m = ir.MethodIR(name=ctx.method)
        self.input_names = list(input_names)
        self.tensor_of: Dict[fx.Node, int] = {}
        self.multi_out: Dict[fx.Node, List[int]] = {}
        self.scalar_cache: Dict[tuple, int] = {}
        self.const_cache: Dict[tuple, int] = {}
        self.op_index: Dict[Tuple[str, str], int] = {}
        self.producer: Dict[int, int] = {}        # planned value -> instruction
        self.last_use: Dict[int, int] = {}        # value -> last instruction reading it
        self.state_of: Dict[fx.Node, int] = {}    # state placeholder -> STATE value
        self.sizes = SymbolicSizes(ctx)
        for sym, bounds in ctx.input_symbol_bounds.items():
            if self.sizes.shape_env.bound_sympy(sym) != bounds:
                raise ExportError(f"internal: a graph pass specialized the dynamic size {sym} "
                                  f"(bounds {bounds} became {self.sizes.shape_env.bound_sympy(sym)})")
        self.ints = IntCompiler(self.sizes, new_int=lambda hint: self._add(ir.ScalarValue("Int", hint)),
                                const_int=lambda v: self.scalar("Int", v), emit=self._emit_int_op,
                                input_value=lambda node: self.tensor_of[node],
                                output_value=self._output_value)
        # Data-dependent sizes by producer: read right after it runs (symbolic.DataDim).
        self.data_symbols: Dict[fx.Node, list] = {}
        for sym, src in self.sizes.data.items():
            self.data_symbols.setdefault(src.node, []).append(sym)

    def _output_value(self, node: fx.Node, index: int) -> int:
        outputs = self.multi_out.get(node)
        if outputs is not None:
            return outputs[index]
        if index == 0 and node in self.tensor_of:
            return self.tensor_of[node]
        raise ExportError(f"internal: output {index} of '{node.name}' is read before it is defined")

    # values -------------------------------------------------------------------------
    def _add(self, value) -> int:
        self.m.values.append(value)
        return len(self.m.values) - 1

    def scalar(self, kind: str, value=None) -> int:
        if kind in ("Double",):
            key = (kind, _double_key(value))
        elif kind == "DoubleList":
            key = (kind, tuple(_double_key(v) for v in value))
        elif isinstance(value, list):
            key = (kind, tuple(value))
        else:
            key = (kind, value)
        index = self.scalar_cache.get(key)
        if index is None:
            stored = tuple(value) if isinstance(value, list) else value
            index = self.scalar_cache[key] = self._add(ir.ScalarValue(kind, stored))
        return index

    def constant(self, tensor: torch.Tensor, name: str = "", keep_half: bool = False) -> int:
        tensor = tensor.detach()
        if tensor.layout != torch.strided or tensor.is_quantized:
            raise ExportError(f"constant '{name}' has layout {tensor.layout}; kiln stores dense "
                              "tensors only")
        if not (keep_half and tensor.dtype == torch.float16):
            tensor = tensor.to(_WIDENED_CONSTANTS.get(tensor.dtype, tensor.dtype))
        dtype = kiln_dtype(tensor.dtype, f"constant '{name}'")
        data = _bytes_of(tensor)
        segment = self.pool.add(data)
        sizes = [int(s) for s in tensor.shape]
        key = (segment, dtype, tuple(sizes))
        index = self.const_cache.get(key)
        if index is None:
            index = self.const_cache[key] = self._add(ir.TensorValue(
                dtype=dtype, sizes=sizes, storage=ir.CONSTANT, segment=segment, name=name))
        return index

    def bounded_sizes(self, val) -> Tuple[List[int], List[int]]:
        """(sizes with dynamic dims at their upper bound, indices of the dynamic dims)."""
        sizes, dynamic = [], []
        for d, s in enumerate(val.shape):
            if isinstance(s, torch.SymInt):
                sizes.append(self.sizes.upper_bound(s))
                dynamic.append(d)
            else:
                sizes.append(int(s))
        return sizes, dynamic

    def planned(self, val, name: str) -> int:
        if not isinstance(val, torch.Tensor):
            raise ExportError(f"'{name}' is not a tensor ({type(val).__name__})")
        sizes, dynamic = self.bounded_sizes(val)
        return self._add(ir.TensorValue(dtype=kiln_dtype(val.dtype, f"value '{name}'"), sizes=sizes,
                                        dynamic_dims=dynamic, storage=ir.PLANNED, name=name))

    def state(self, node: fx.Node, name: str, tensor: torch.Tensor) -> int:
        """A STATE value: its initial bytes go to the constant pool (zero-filled
        caches deduplicate to one segment); plan() gives it its place in arena 1."""
        tensor = tensor.detach()
        if tensor.dtype in _WIDENED_CONSTANTS:
            raise ExportError(f"buffer '{name}' is {tensor.dtype}; kiln keeps state in float32 or "
                              "integer dtypes: convert the model to float32 before exporting")
        dtype = kiln_dtype(tensor.dtype, f"buffer '{name}'")
        index = self._add(ir.TensorValue(dtype=dtype, sizes=[int(s) for s in tensor.shape],
                                         storage=ir.STATE, segment=self.pool.add(_bytes_of(tensor)),
                                         name=name))
        self.state_of[node] = index
        self.m.state.append(index)
        self.m.state_names.append(name)
        return index

    def check_input_sizes(self, names: Dict[fx.Node, str]) -> None:
        """CheckEqual IntOps for input dims that torch.export declared related
        (the same Dim in two inputs, or a derived 2*s): a call that breaks the
        relation is InvalidInput, not a run on mismatched sizes."""
        for node, dim, expr in self.sizes.input_dims:
            src = self.sizes.inputs.get(expr) if expr.is_Symbol else None
            if src is not None and src.node is node and src.dim == dim:
                continue  # the dim the symbol is read from
            if any(x not in self.sizes.inputs for x in expr.free_symbols):
                continue  # refused with a clear message by check_shape_bounds
            message = (f"input '{names[node]}' dimension {dim} must be {expr} "
                       f"({', '.join(self._symbol_source(x, names) for x in sorted(expr.free_symbols, key=str))})")
            self._emit_int_op("CheckEqual", [self.ints.size_of(node, dim), self.ints.value(node.meta["val"].shape[dim]),
                                             self.scalar("String", message)], self._add(ir.ScalarValue("Int", 0)))

    def _symbol_source(self, sym, names) -> str:
        src = self.sizes.inputs[sym]
        where = f"dimension {src.dim} of input '{names[src.node]}'"
        if (src.scale, src.offset) == (1, 0):
            return f"{sym} = {where}"
        return f"{sym} = ({where} - {src.offset}) // {src.scale}"

    def _emit_int_op(self, kind: str, inputs: List[int], output: int) -> None:
        index = len(self.m.instructions)
        for v in inputs:
            self._mark_use(v, index)
        self.m.instructions.append(ir.IntOp(kind, list(inputs), output))

    def tensor(self, node: fx.Node) -> int:
        index = self.tensor_of.get(node)
        if index is not None:
            return index
        if self.ctx.is_constant(node):
            index = self.tensor_of[node] = self.constant(self.ctx.constants[node], node.name)
            return index
        if node in self.state_of:
            return self.state_of[node]
        raise ExportError(f"internal: value '{node.name}' is used before it is defined")

    # arguments ------------------------------------------------------------------------
    def encode(self, arg, value, spec, out_dtype, node) -> int:
        kind = _arg_kind(arg.type)
        if value is None:
            return self.scalar("None")
        if kind == "int_list" and isinstance(value, (list, tuple)) and any(map(is_symbolic_int, value)):
            # Sizes known only at run time: a list of Int values, some computed by IntOps.
            return self._add(ir.ScalarValue("IntValueList", tuple(self.ints.value(v) for v in value)))
        if is_symbolic_int(value):
            if kind not in ("int", "float", "other"):  # other: a Scalar (int or float)
                raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a symbolic "
                                  f"size used as a {kind}, which kiln cannot run "
                                  f"({describe_node(node, self.ctx.module_prefix)})")
            return self.ints.value(value)
        if isinstance(value, fx.Node) and is_symbolic(value.meta.get("val")):
            raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a symbolic "
                              f"{type(value.meta['val']).__name__}, which kiln cannot compute "
                              f"({describe_node(node, self.ctx.module_prefix)})")
        if isinstance(value, int) and not isinstance(value, bool):
            # An int where the schema declares a dtype/layout/memory format is a
            # c10 code, e.g. the default of a custom op's `dtype: torch.dtype = torch.float32`.
            declared = _declared_type(arg)
            if declared == "ScalarType":
                if value not in _C10_DTYPES:
                    raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a dtype "
                                      f"kiln does not support (c10 code {value})")
                value = _C10_DTYPES[value]
            elif declared in ("Layout", "MemoryFormat"):
                return self.scalar("None")
        if isinstance(value, torch.dtype):
            return self.scalar("Int", kiln_dtype(value, f"argument '{arg.name}'"))
        if isinstance(value, (torch.layout, torch.device, torch.memory_format)):
            return self.scalar("None")
        if kind == "tensor":
            if isinstance(value, fx.Node) and arg.name in spec.half_args and self.ctx.is_constant(value):
                # Quantization scales: float16 in the file (OpSpec.half_args).
                return self.constant(self.ctx.constants[value], value.name, keep_half=True)
            if isinstance(value, fx.Node):
                if (self.ctx.is_constant(value) and out_dtype in _WIDENED_CONSTANTS
                        and self.ctx.constants[value].dtype in _WIDENED_CONSTANTS):
                    raise ExportError(
                        f"{op_key(node.target)} computes in {out_dtype} with a {out_dtype} "
                        f"constant ('{value.name}'); kiln stores float16/bfloat16 constants as "
                        "float32 and does not run half-precision models yet: export the model "
                        f"in float32 ({describe_node(node, self.ctx.module_prefix)})")
                return self.tensor(value)
            if isinstance(value, (bool, int, float)):
                dtype = torch.bool if arg.name in spec.bool_args else out_dtype
                return self.constant(torch.tensor(value, dtype=dtype), f"{node.name}.{arg.name}")
            raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a "
                              f"{type(value).__name__}, expected a tensor")
        if kind == "tensor_list":
            items = [self.tensor(v) if isinstance(v, fx.Node) else self.scalar("None")
                     for v in value]
            return self.scalar("TensorList", items)
        if kind == "int_list":
            n = getattr(arg, "N", None) or 1
            if isinstance(value, int):
                value = [value] * n
            elif len(value) == 1 and n > 1:  # int[2] given as [k]: ATen broadcasts it
                value = list(value) * n
            return self.scalar("IntList", [int(v) for v in value])
        if kind == "float_list":
            return self.scalar("DoubleList", [float(v) for v in value])
        if kind == "bool_list":
            return self.scalar("BoolList", [bool(v) for v in value])
        if isinstance(value, bool):
            return self.scalar("Bool", value)
        if isinstance(value, int):
            return self.scalar("Double", float(value)) if kind == "float" else self.scalar("Int", value)
        if isinstance(value, float):
            if kind == "int":
                if not value.is_integer():
                    raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} expects "
                                      f"an int, got {value}")
                return self.scalar("Int", int(value))
            return self.scalar("Double", value)
        if isinstance(value, str):
            return self.scalar("String", value)
        if isinstance(value, (list, tuple)) and all(isinstance(v, bool) for v in value):
            return self.scalar("BoolList", list(value))
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            return self.scalar("IntList", list(value))
        if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
            return self.scalar("DoubleList", [float(v) for v in value])
        raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} has a value kiln "
                          f"cannot encode: {value!r} ({describe_node(node, self.ctx.module_prefix)})")

    # instructions --------------------------------------------------------------------
    def call(self, node: fx.Node) -> None:
        key = op_key(node.target)
        out = node.meta.get("val")
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        spec = spec_for(node.target, num_outputs=len(outs))
        if spec is None:
            raise ExportError(f"internal: unsupported operator {key} reached the lowering")
        outs = outs[:spec.num_outputs]
        out_dtype = outs[0].dtype
        args = bound_args(node)
        schema = node.target._schema
        tensor_args = [v for a, v in zip(schema.arguments, args.values())
                       if isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)]
        in_shape = self.ctx.shape(tensor_args[0]) if tensor_args else []
        out_shape = self.ctx.shape(node) if not isinstance(out, (tuple, list)) else list(outs[0].shape)
        if spec.normalize is not None:
            spec.normalize(args, in_shape, out_shape)
        normalize_dims(args, spec, len(in_shape), len(out_shape))

        inputs = [self.encode(a, args[a.name], spec, out_dtype, node) for a in schema.arguments]
        index = len(self.m.instructions)
        in_place = self._updates_state_in_place(node, key, args)
        outputs = []
        for i, val in enumerate(outs):
            if i == 0 and in_place is not None:
                outputs.append(in_place)  # the kernel writes the state itself (out aliases self)
                continue
            v = self.planned(val, node.name if i == 0 else f"{node.name}.{i}")
            self.producer[v] = index
            outputs.append(v)
        if isinstance(out, (tuple, list)):
            self.multi_out[node] = outputs
        else:
            self.tensor_of[node] = outputs[0]
        for v in inputs:
            self._mark_use(v, index)
        op = split_key(key)
        if op not in self.op_index:
            self.op_index[op] = len(self.m.operators)
            self.m.operators.append(op)
        self.m.instructions.append(ir.Instruction(self.op_index[op], inputs, outputs))
        for sym in self.data_symbols.get(node, ()):
            self.ints.value(sym)  # SizeOf now, so later uses do not keep the output alive

    def _updates_state_in_place(self, node: fx.Node, key: str, args) -> Optional[int]:
        """The STATE value `node` may write in place, or None.

        A cache update (index_put, index_copy, slice_scatter of a mutated
        buffer) whose result is the buffer's new value may write into the
        buffer itself instead of a planned copy, which the method would then
        move back: that saves copying the whole cache on every call. Safe when
        nothing reads the old value after it, and the buffer is no other
        argument of the same call (its indices or values).
        """
        if key not in _IN_PLACE_UPDATES:
            return None
        target = args.get("self")
        if target not in self.state_of or self.new_value_of_state.get(target) is not node:
            return None
        here = self.order[node]
        if any(self.order[u] > here for u in target.users if u is not node):
            return None
        others = [v for name, v in args.items() if name != "self"]
        if any(n is target for n in nodes_in(others)):
            return None
        return self.state_of[target]

    def _mark_use(self, v: int, index: int) -> None:
        value = self.m.values[v]
        if isinstance(value, ir.ScalarValue) and value.kind == "TensorList":
            for item in value.value:
                self._mark_use(item, index)
        elif isinstance(value, ir.TensorValue):
            self.last_use[v] = index

    def getitem(self, node: fx.Node) -> None:
        src, i = node.args
        outputs = self.multi_out.get(src)
        if outputs is None:
            raise ExportError(f"internal: getitem on '{src.name}', which has one output")
        if i >= len(outputs):
            raise ExportError(
                f"output {i} of {op_key(src.target)} is used, but kiln's kernel computes only "
                f"{len(outputs)} output(s) ({describe_node(node, self.ctx.module_prefix)})")
        self.tensor_of[node] = outputs[i]

    # driver -------------------------------------------------------------------------
    def lower(self) -> ir.MethodIR:
        m = self.m
        names = self.input_names or [n.name for n in self.ctx.user_inputs]
        for node, name in zip(self.ctx.user_inputs, names):
            val = node.meta["val"]
            sizes, dynamic = self.bounded_sizes(val)
            mins = [self.sizes.lower_bound(s) if d in dynamic else s for d, s in enumerate(val.shape)]
            index = self._add(ir.TensorValue(dtype=kiln_dtype(val.dtype, f"input '{name}'"),
                                             sizes=sizes, dynamic_dims=dynamic,
                                             min_sizes=[int(x) for x in mins] if dynamic else [],
                                             storage=ir.BOUND, name=name))
            self.tensor_of[node] = index
            m.inputs.append(index)
            m.input_names.append(name)
        self.check_input_sizes(dict(zip(self.ctx.user_inputs, names)))
        prefix = self.ctx.module_prefix
        for node, (name, tensor) in self.ctx.state.items():
            self.state(node, name[len(prefix):] if prefix and name.startswith(prefix) else name, tensor)
        self.order = {n: i for i, n in enumerate(self.ctx.graph.nodes)}
        output_node = next(n for n in self.ctx.graph.nodes if n.op == "output")
        results = output_node.args[0]
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        self.new_value_of_state = dict(zip(self.ctx.mutated, results))
        for node in self.ctx.graph.nodes:
            if node.op == "call_function":
                if node.target is operator.getitem:
                    self.getitem(node)
                elif not _is_size_arithmetic(node):  # sizes are compiled where used
                    self.call(node)
            elif node.op == "output":
                self.outputs(node)
            elif node.op not in ("placeholder",):
                raise ExportError(f"internal: unexpected FX node {node.op} '{node.name}'")
        self.plan()
        return m

    def outputs(self, node: fx.Node) -> None:
        """User outputs, then the moves that store new state values."""
        m = self.m
        results = node.args[0]
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        num_mutated = len(self.ctx.mutated)
        overwritten = {self.state_of[st] for st, new in zip(self.ctx.mutated, results)
                       if self.tensor(new) != self.state_of[st]}
        for i, r in enumerate(results[num_mutated:]):
            if not isinstance(r, fx.Node):
                raise ExportError(f"output {i} of method '{m.name}' is not a tensor "
                                  f"({r!r}); kiln methods return tensors only")
            v = self.tensor(r)
            if v in overwritten:
                # The old value of a state tensor that is about to be replaced.
                v = self._copy(v, f"{r.name}.before_update")
            m.outputs.append(v)
            m.output_names.append(f"output_{i}")
        moves = [(self.tensor(new), self.state_of[st]) for st, new in zip(self.ctx.mutated, results)]
        moves = [(src, dst) for src, dst in moves if src != dst]
        # A new value that is the old value of another state (prev <- cur) is
        # copied first: the moves below may already have overwritten it.
        written = {dst for _, dst in moves}
        moves = [(self._copy(src, f"{m.values[src].name}.old") if src in written else src, dst)
                 for src, dst in moves]
        for src, dst in moves:
            index = len(m.instructions)
            self._mark_use(src, index)
            m.instructions.append(ir.Move(src, dst))

    def _copy(self, v: int, name: str) -> int:
        src = self.m.values[v]
        index = len(self.m.instructions)
        copy = self._add(ir.TensorValue(dtype=src.dtype, sizes=list(src.sizes),
                                        dynamic_dims=list(src.dynamic_dims), storage=ir.PLANNED,
                                        name=name))
        self.producer[copy] = index
        self._mark_use(v, index)
        self.m.instructions.append(ir.Move(v, copy))
        return copy

    def plan(self) -> None:
        m = self.m
        end = len(m.instructions)
        for v in m.outputs:
            if v in self.producer:
                self.last_use[v] = end
        planned = sorted(self.producer)
        lifetimes = [Lifetime(m.values[v].nbytes, self.producer[v],
                              max(self.producer[v], self.last_use.get(v, self.producer[v])))
                     for v in planned]
        result = plan_memory(lifetimes)
        for v, offset in zip(planned, result.offsets):
            m.values[v].arena = 0
            m.values[v].arena_offset = offset
        m.arena_sizes = [result.arena_size]
        m.naive_bytes = result.naive_size
        if m.state:
            # Arena 1 holds the state: never reused, kept across calls.
            offset = 0
            for v in m.state:
                m.values[v].arena, m.values[v].arena_offset = 1, offset
                offset += -(-m.values[v].nbytes // 64) * 64
            m.arena_sizes.append(offset)


def lower_method(ctx: PassContext, pool: ConstantPool,
                 input_names: Optional[Sequence[str]] = None) -> ir.MethodIR:
    return _MethodLowering(ctx, pool, input_names or []).lower()
