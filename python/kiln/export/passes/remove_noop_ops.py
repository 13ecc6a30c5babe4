"""Remove operators that do not change their input, and run-time assertions.

Why: in eval mode dropout is the identity (torch.export decomposes it into a
clone); alias/detach/contiguous/lift_fresh_copy only matter to autograd or
strides, and kiln tensors are always contiguous; a view/expand/permute/_to_copy
that keeps the shape, order and dtype is a copy for nothing. Each would cost a
kernel call and a planned buffer. Shape assertions recorded by torch.export
(_assert_tensor_metadata, _assert_scalar, ...) have been checked at export
time with static shapes.

aten::clone.default is removed too, except when its input is a method input
or a constant and the clone is a method output: the caller then gets a copy,
not its own input buffer back.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .manager import PassContext, bound_args, same_shape

aten = torch.ops.aten

_ALWAYS_IDENTITY = {
    aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
    aten.contiguous.default,
}
_DROPOUTS = {aten.dropout.default, aten.feature_dropout.default, aten.alpha_dropout.default,
             aten.feature_alpha_dropout.default}


def _assert_targets():
    names = ["_assert_tensor_metadata.default", "_assert_scalar.default",
             "sym_constrain_range_for_size.default", "sym_constrain_range.default",
             "_assert_async.msg", "_assert_async.default"]
    out = set()
    for name in names:
        packet, _, overload = name.partition(".")
        op = getattr(aten, packet, None)
        if op is not None and hasattr(op, overload):
            out.add(getattr(op, overload))
    return out


def _same_tensor_meta(a: fx.Node, b: fx.Node) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor)
            and va.dtype == vb.dtype and same_shape(va.shape, vb.shape))


def _is_noop(ctx: PassContext, node: fx.Node) -> bool:
    target = node.target
    if not node.args or not isinstance(node.args[0], fx.Node):
        return False
    x = node.args[0]
    if not _same_tensor_meta(x, node):
        return False
    if target in _ALWAYS_IDENTITY:
        return True
    if target in _DROPOUTS:
        a = bound_args(node)
        return not a.get("train") or a.get("p") == 0
    if target is aten.clone.default:
        is_source = x.op == "placeholder"
        feeds_output = any(u.op == "output" for u in node.users)
        return not (is_source and feeds_output)
    if target in (aten.view.default, aten.expand.default, aten.squeeze.dims,
                  aten.slice.Tensor):
        return True  # same shape and dtype: nothing moves
    if target is aten.permute.default:
        return list(node.args[1]) == list(range(len(node.args[1])))
    if target is aten.transpose.int:
        rank = max(len(ctx.shape(x)), 1)
        return node.args[1] % rank == node.args[2] % rank
    if target is aten._to_copy.default:
        return True  # same dtype and shape; kiln has one device and one layout
    return False


def run(ctx: PassContext) -> None:
    asserts = _assert_targets()
    for node in list(ctx.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in asserts and not node.users:
            ctx.graph.erase_node(node)
            ctx.count("asserts_removed")
        elif _is_noop(ctx, node):
            ctx.replace(node, node.args[0])
            ctx.count("noops_removed")
