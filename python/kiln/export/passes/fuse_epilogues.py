"""Fuse a residual add and an activation into the linear or conv2d before them.

Why: `act(conv(x) + identity)` (ResNet), `conv -> relu6/hardswish` (mobile
CNNs), `x + linear(h)` and `gelu(linear(h))` (transformers) each cost a full
extra pass over the activation per elementwise operator, and a planned
buffer. kiln::fused_conv2d and kiln::fused_linear (fused_ops.py) compute
act(op(...) + residual) in the kernel's epilogue, while the output is still
in cache.

A chain op -> [add] -> [activation] becomes one fused call when:
  * op is aten::linear or aten::conv2d computing in float32 (the fused
    kernels' only dtype), and each link's output feeds only the next link;
  * the add is add.Tensor(op_out, other) or add.Tensor(other, op_out) with
    alpha 1, `other` a tensor of exactly the output's shape and dtype (no
    broadcasting) that is computed before op (it becomes an input of the
    fused call, which takes op's place);
  * the activation is relu, hardtanh (relu6 after canonicalization) or
    clamp with constant bounds, gelu (approximate "none" or "tanh"), silu,
    sigmoid, tanh, hardswish or hardsigmoid.
The residual is added before the activation, so `residual + act(op(x))`
keeps its add. A linear or conv2d with nothing to fuse stays an ATen call.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.fx as fx

from ..fused_ops import fused_conv2d, fused_linear
from .manager import PassContext, bound_args, same_shape

aten = torch.ops.aten

_SIMPLE_ACTIVATIONS = {
    aten.relu.default: "relu",
    aten.silu.default: "silu",
    aten.sigmoid.default: "sigmoid",
    aten.tanh.default: "tanh",
    aten.hardswish.default: "hardswish",
    aten.hardsigmoid.default: "hardsigmoid",
}


def _bound(x, default: float):
    """A clamp bound as a float (None: unbounded on that side), or None if it is not a number (or NaN)."""
    if x is None:
        return default
    if isinstance(x, numbers.Real) and not isinstance(x, bool) and not math.isnan(x):
        return float(x)
    return None


def _activation(node: fx.Node):
    """(name for the report, (activation, act_min, act_max)) of what `node` computes, or None."""
    if node.op != "call_function":
        return None
    name = _SIMPLE_ACTIVATIONS.get(node.target)
    if name is not None:
        return name, (name, 0.0, 0.0)
    if node.target is aten.gelu.default:
        name = {"none": "gelu", "tanh": "gelu_tanh"}.get(bound_args(node)["approximate"])
        return (name, (name, 0.0, 0.0)) if name is not None else None
    if node.target in (aten.hardtanh.default, aten.clamp.default):
        a = bound_args(node)
        hardtanh = node.target is aten.hardtanh.default
        lo, hi = (a["min_val"], a["max_val"]) if hardtanh else (a["min"], a["max"])
        lo, hi = _bound(lo, float("-inf")), _bound(hi, float("inf"))
        if lo is None or hi is None:
            return None
        name = ("relu6" if (lo, hi) == (0.0, 6.0) else "hardtanh") if hardtanh else "clamp"
        return name, ("clamp", lo, hi)
    return None


def _only_user(node: fx.Node):
    return next(iter(node.users)) if len(node.users) == 1 else None


def _residual(ctx: PassContext, out: fx.Node, add: fx.Node, order) -> fx.Node:
    """The other operand of add(out, other) / add(other, out) if it can be fused, else None."""
    if add.op != "call_function" or add.target is not aten.add.Tensor:
        return None
    a = bound_args(add)
    if a["alpha"] != 1:
        return None
    operands = [a["self"], a["other"]]
    if operands.count(out) != 1:
        return None
    other = operands[1 - operands.index(out)]
    if not isinstance(other, fx.Node) or other not in order or order[other] > order[out]:
        return None
    val = other.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != ctx.dtype(out):
        return None
    return other if same_shape(ctx.shape(other), ctx.shape(out)) else None


def _is_float32(ctx: PassContext, *nodes) -> bool:
    return all(isinstance(n, fx.Node) and isinstance(n.meta.get("val"), torch.Tensor)
               and ctx.dtype(n) == torch.float32 for n in nodes)


def _fuse(ctx: PassContext, op: fx.Node, order) -> None:
    a = bound_args(op)
    if not _is_float32(ctx, op, a["input"], a["weight"]):
        return
    into = "linear" if op.target is aten.linear.default else "conv2d"
    chain, residual, fused_act, activation = [op], None, None, ("none", 0.0, 0.0)
    user = _only_user(op)
    if user is not None:
        residual = _residual(ctx, op, user, order)
        if residual is not None:
            chain.append(user)
    user = _only_user(chain[-1])
    found = _activation(user) if user is not None and _is_float32(ctx, user) else None
    if found is not None:
        fused_act, activation = found
        chain.append(user)
    if len(chain) == 1:
        return

    if into == "linear":
        target, args = fused_linear, [a["input"], a["weight"], a["bias"], residual, *activation]
    else:
        target, args = fused_conv2d, [a["input"], a["weight"], a["bias"], residual, a["stride"], a["padding"],
                                      a["dilation"], a["groups"], *activation]
    fused = ctx.call(target, args, like=op, val=chain[-1].meta["val"])
    order[fused] = order[op]
    ctx.replace(chain[-1], fused)
    for node in reversed(chain[:-1]):
        ctx.graph.erase_node(node)
    if residual is not None:
        ctx.count_fusion("residual_add", into)
    if fused_act is not None:
        ctx.count_fusion(fused_act, into)


def run(ctx: PassContext) -> None:
    order = {node: i for i, node in enumerate(ctx.graph.nodes)}
    for node in list(ctx.graph.nodes):
        if node.op == "call_function" and node.target in (aten.linear.default, aten.conv2d.default):
            _fuse(ctx, node, order)
