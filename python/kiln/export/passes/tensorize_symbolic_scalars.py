"""Turn symbolic sizes passed as tensors into 0-d tensors computed at run time.

Why: `x + x.shape[0]` or `counter.add_(tokens.shape[1])` pass a size (a
torch.SymInt under dynamic shapes) where the operator's schema expects a
Tensor. A static size becomes a 0-d constant in the lowering; a symbolic one
has no value until the method runs, so it is wrapped in
aten::scalar_tensor, whose Scalar argument the lowering computes with IntOps.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .manager import PassContext, is_symbolic

aten = torch.ops.aten


def _is_tensor_type(t) -> bool:
    if isinstance(t, torch._C.OptionalType):
        t = t.getElementType()
    return isinstance(t, torch._C.TensorType)


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        out = node.meta.get("val")
        for i, arg in enumerate(schema.arguments):
            if not _is_tensor_type(arg.type):
                continue
            in_kwargs = arg.kwarg_only or i >= len(node.args)
            value = node.kwargs.get(arg.name) if in_kwargs else node.args[i]
            if not (isinstance(value, fx.Node) and is_symbolic(value.meta.get("val"))):
                continue
            dtype = out.dtype if isinstance(out, torch.Tensor) else torch.int64
            scalar = ctx.call(aten.scalar_tensor.default, (value,), {"dtype": dtype}, like=node,
                              val=torch.empty((), dtype=dtype, device="meta"))
            if in_kwargs:
                node.kwargs = {**node.kwargs, arg.name: scalar}
            else:
                node.args = node.args[:i] + (scalar,) + node.args[i + 1:]
            ctx.count("symbolic_scalars_tensorized")
