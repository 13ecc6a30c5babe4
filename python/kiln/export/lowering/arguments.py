"""Encoding one schema argument of an operator call as a kiln value.

The conventions (one value per schema argument, defaults filled in, Python
scalars for Tensor arguments as 0-d constants, symbolic sizes as run-time Int
values, ...) are those operators.py describes and docs/format.md specifies.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.fx as fx

from ...errors import ExportError
from ..diagnostics import describe_node
from ..operators import OpSpec, op_key
from ..passes.manager import PassContext, is_symbolic, nodes_in
from . import ir
from .dtypes import C10_DTYPES, WIDENED_CONSTANTS, kiln_dtype
from .symbolic import IntCompiler, is_symbolic_int
from .values import ValueTable


def arg_kind(t) -> str:
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


def declared_type(arg) -> str:
    """"ScalarType", "Layout", "int", ... : the type the schema declares (before
    TorchScript maps dtype/layout/memory_format to int), Optional unwrapped."""
    t = getattr(arg, "real_type", None) or arg.type
    if isinstance(t, torch._C.OptionalType):
        t = t.getElementType()
    return str(t)


def scalar_read_hint(node: fx.Node) -> str:
    """A hint for a value that is a Python number read off a tensor (item(), tolist(), float(t))."""
    for n in [node, *nodes_in(node.args)]:
        if getattr(n, "target", None) is torch.ops.aten._local_scalar_dense.default:
            return ("; it is a Python number read from a tensor (item(), tolist(), int() or float() "
                    "of a tensor): keep the computation in tensors, e.g. x * t instead of x * t.item()")
    return ""


class ArgumentEncoder:
    """`encode(arg, value, spec, out_dtype, node)` -> the index of the value
    that carries `value` for schema argument `arg` of `node`'s operator."""

    def __init__(self, ctx: PassContext, values: ValueTable, ints: IntCompiler,
                 tensor_value: Callable[[fx.Node], int]) -> None:
        self.ctx = ctx
        self.values = values
        self.ints = ints
        self.tensor_value = tensor_value

    def encode(self, arg, value, spec: OpSpec, out_dtype: torch.dtype, node: fx.Node) -> int:
        kind = arg_kind(arg.type)
        if value is None:
            return self.values.scalar("None")
        if kind == "int_list" and isinstance(value, (list, tuple)) and any(map(is_symbolic_int, value)):
            # Sizes known only at run time: a list of Int values, some computed by IntOps.
            return self.values.add(ir.ScalarValue("IntValueList", tuple(self.ints.value(v) for v in value)))
        if is_symbolic_int(value):
            if kind not in ("int", "float", "other"):  # other: a Scalar (int or float)
                raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a symbolic "
                                  f"size used as a {kind}, which kiln cannot run "
                                  f"({describe_node(node, self.ctx.module_prefix)})")
            return self.ints.value(value)
        if isinstance(value, fx.Node) and is_symbolic(value.meta.get("val")):
            raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a symbolic "
                              f"{type(value.meta['val']).__name__}, which kiln cannot compute "
                              f"({describe_node(node, self.ctx.module_prefix)}){scalar_read_hint(value)}")
        if isinstance(value, int) and not isinstance(value, bool):
            # An int where the schema declares a dtype/layout/memory format is a
            # c10 code, e.g. the default of a custom op's `dtype: torch.dtype = torch.float32`.
            declared = declared_type(arg)
            if declared == "ScalarType":
                if value not in C10_DTYPES:
                    raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a dtype "
                                      f"kiln does not support (c10 code {value})")
                value = C10_DTYPES[value]
            elif declared in ("Layout", "MemoryFormat"):
                return self.values.scalar("None")
        if isinstance(value, torch.dtype):
            return self.values.scalar("Int", kiln_dtype(value, f"argument '{arg.name}'"))
        if isinstance(value, (torch.layout, torch.device, torch.memory_format)):
            return self.values.scalar("None")
        if kind == "tensor":
            if isinstance(value, fx.Node) and arg.name in spec.half_args and self.ctx.is_constant(value):
                # Quantization scales: float16 in the file (OpSpec.half_args).
                return self.values.constant(self.ctx.constants[value], value.name, keep_half=True)
            if isinstance(value, fx.Node):
                if (self.ctx.is_constant(value) and out_dtype in WIDENED_CONSTANTS
                        and self.ctx.constants[value].dtype in WIDENED_CONSTANTS):
                    raise ExportError(
                        f"{op_key(node.target)} computes in {out_dtype} with a {out_dtype} "
                        f"constant ('{value.name}'); kiln stores float16/bfloat16 constants as "
                        "float32 and does not run half-precision models yet: export the model "
                        f"in float32 ({describe_node(node, self.ctx.module_prefix)})")
                return self.tensor_value(value)
            if isinstance(value, (bool, int, float)):
                dtype = torch.bool if arg.name in spec.bool_args else out_dtype
                return self.values.constant(torch.tensor(value, dtype=dtype), f"{node.name}.{arg.name}")
            raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} is a "
                              f"{type(value).__name__}, expected a tensor")
        if kind == "tensor_list":
            items = [self.tensor_value(v) if isinstance(v, fx.Node) else self.values.scalar("None")
                     for v in value]
            return self.values.scalar("TensorList", items)
        if kind == "int_list":
            n = getattr(arg, "N", None) or 1
            if isinstance(value, int):
                value = [value] * n
            elif len(value) == 1 and n > 1:  # int[2] given as [k]: ATen broadcasts it
                value = list(value) * n
            return self.values.scalar("IntList", [int(v) for v in value])
        if kind == "float_list":
            return self.values.scalar("DoubleList", [float(v) for v in value])
        if kind == "bool_list":
            return self.values.scalar("BoolList", [bool(v) for v in value])
        if isinstance(value, bool):
            return self.values.scalar("Bool", value)
        if isinstance(value, int):
            return self.values.scalar("Double", float(value)) if kind == "float" else self.values.scalar("Int", value)
        if isinstance(value, float):
            if kind == "int":
                if not value.is_integer():
                    raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} expects "
                                      f"an int, got {value}")
                return self.values.scalar("Int", int(value))
            return self.values.scalar("Double", value)
        if isinstance(value, str):
            return self.values.scalar("String", value)
        if isinstance(value, (list, tuple)) and all(isinstance(v, bool) for v in value):
            return self.values.scalar("BoolList", list(value))
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            return self.values.scalar("IntList", list(value))
        if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
            return self.values.scalar("DoubleList", [float(v) for v in value])
        raise ExportError(f"argument '{arg.name}' of {op_key(node.target)} has a value kiln "
                          f"cannot encode: {value!r} ({describe_node(node, self.ctx.module_prefix)})")
