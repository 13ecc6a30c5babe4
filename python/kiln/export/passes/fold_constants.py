"""Evaluate operators whose inputs are all constants, at export time.

Why: weight transposes, casts of constants, masks built with full/arange/
tril, scalar_tensor, and shape-only creators (full_like, zeros_like, ...)
would otherwise run on every call, and several of them (arange, tril, full)
have no kiln kernel at all. They are run eagerly in torch here and their
results stored as constants.

A supported operator is not folded when its result would be much larger
than its inputs (an expand of a bias to a large activation shape, say): the
file would grow by the result while the run-time saving is one cheap kernel.
Results with a dynamic size are never folded (their size is known at run
time only). Random operators are never folded, and neither are custom operators (any
namespace neither PyTorch nor kiln owns, declared with torch.library): the user asked for their
kernel to run, and their Python implementation is only a reference that may
differ from it, be slow, or not exist (a fake/meta implementation only).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ..operators import is_custom_operator, is_supported, op_key
from .manager import PassContext, nodes_in

aten = torch.ops.aten

#: Results up to this size are always folded; larger ones only if they are no
#: larger than the constants they are computed from.
SMALL_RESULT_BYTES = 64 * 1024

_SHAPE_ONLY = {"aten::full_like.default", "aten::zeros_like.default", "aten::ones_like.default",
               "aten::empty_like.default", "aten::new_full.default", "aten::new_zeros.default",
               "aten::new_ones.default", "aten::new_empty.default"}


def _materialize(x, env):
    if isinstance(x, fx.Node):
        return env[x]
    if isinstance(x, (list, tuple)):
        return type(x)(_materialize(y, env) for y in x)
    return x


def _scalars_as_tensors(node, args, kwargs, out_dtype):
    """Python scalars in Tensor arguments (add.Tensor(c, 2.0)) as 0-d tensors."""
    schema = node.target._schema
    args = list(args)
    for i, arg in enumerate(schema.arguments):
        if str(arg.type) not in ("Tensor", "Optional[Tensor]"):
            continue
        if arg.kwarg_only:
            if isinstance(kwargs.get(arg.name), (bool, int, float)):
                kwargs[arg.name] = torch.tensor(kwargs[arg.name], dtype=out_dtype)
        elif i < len(args) and isinstance(args[i], (bool, int, float)):
            args[i] = torch.tensor(args[i], dtype=out_dtype)
    return tuple(args), kwargs


def _foldable(ctx: PassContext, node: fx.Node, key: str) -> bool:
    if node.op != "call_function" or node.target is operator.getitem:
        return False
    if not hasattr(node.target, "_schema"):
        return False
    if is_custom_operator(node.target):
        return False
    if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
        return False
    out = node.meta.get("val")
    if not isinstance(out, torch.Tensor):
        return False
    if any(isinstance(s, torch.SymInt) for s in out.shape):
        return False  # a dynamic size: computed at run time (int() would specialize it)
    if key in _SHAPE_ONLY:
        return True
    inputs = list(nodes_in((node.args, node.kwargs)))
    if not all(ctx.is_constant(n) for n in inputs):
        return False
    if is_supported(key):
        result = out.numel() * out.element_size()
        source = sum(ctx.constants[n].numel() * ctx.constants[n].element_size() for n in inputs)
        if result > max(SMALL_RESULT_BYTES, source):
            return False
    return True


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        key = op_key(node.target) if node.op == "call_function" else ""
        if not _foldable(ctx, node, key):
            continue
        out = node.meta["val"]
        env = {}
        for n in nodes_in((node.args, node.kwargs)):
            if ctx.is_constant(n):
                env[n] = ctx.constants[n]
            else:  # shape-only operator: only the shape and dtype matter
                v = n.meta["val"]
                env[n] = torch.zeros([int(s) for s in v.shape], dtype=v.dtype)
        args = _materialize(node.args, env)
        kwargs = {k: _materialize(v, env) for k, v in node.kwargs.items()}
        args, kwargs = _scalars_as_tensors(node, args, kwargs, out.dtype)
        try:
            with torch.no_grad():
                result = node.target(*args, **kwargs)
        except Exception:
            continue  # left to the lowering (or reported as unsupported)
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != tuple(out.shape):
            continue
        result = result.to(out.dtype).contiguous().clone()
        const = ctx.add_constant(result, node.name)
        const.meta["val"] = out
        from .manager import copy_provenance
        copy_provenance(node, const)
        ctx.replace(node, const)
        ctx.count("constants_folded")
