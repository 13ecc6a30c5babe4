"""Fold inference batch norms into the conv2d or linear that feeds them.

Why: in eval mode a batch norm is a per-channel affine map, y = x * s + t with
s = weight / sqrt(running_var + eps) and t = bias - running_mean * s. Applied
to the output of a conv2d (or of a linear, BatchNorm1d on [N, C]), it is the
same layer with its weight rows scaled by s and its bias mapped to
bias * s + t. Folding removes a full pass over the activation per batch norm
and lets the activation that usually follows be fused into the conv
(fuse_epilogues).

After torch.export's decompositions a batch norm in eval mode is
aten::_native_batch_norm_legit_no_training (whose output 0 is the result).
It is folded only when the producer's output feeds nothing else, the
producer's weight and bias and the batch norm's parameters and statistics
are constants, and the channel dim of the batch norm (dim 1) is the
producer's output-channel dim: a 4-D conv2d output, a 2-D linear output.
The new weight and bias are computed in float64 and stored as new constants
(the originals stay for other users, or are removed as dead code).
"""

from __future__ import annotations

import numbers

import torch
import torch.fx as fx

from .manager import PassContext, bound_args, getitem_users

aten = torch.ops.aten

# producer -> (name in the report, rank its output must have)
_PRODUCERS = {aten.conv2d.default: ("conv2d", 4), aten.linear.default: ("linear", 2)}

_NOT_CONSTANT = object()


def _constant(ctx: PassContext, x):
    """The tensor of the constant node `x`, None for None, _NOT_CONSTANT otherwise."""
    if x is None:
        return None
    return ctx.constants[x] if ctx.is_constant(x) else _NOT_CONSTANT


def _fold(ctx: PassContext, bn: fx.Node) -> None:
    a = bound_args(bn)
    producer = a["input"]
    if not isinstance(producer, fx.Node) or producer.op != "call_function" or producer.target not in _PRODUCERS:
        return
    name, rank = _PRODUCERS[producer.target]
    users = getitem_users(bn)
    if len(producer.users) != 1 or set(users) - {0} or len(ctx.shape(producer)) != rank:
        return
    p = bound_args(producer)
    params = [_constant(ctx, x) for x in (p["weight"], p["bias"], a["weight"], a["bias"], a["running_mean"],
                                          a["running_var"])]
    if any(t is _NOT_CONSTANT for t in params):
        return
    weight, bias, gamma, beta, mean, var = params  # weight, mean and var are not optional
    eps = a["eps"]
    if not isinstance(eps, numbers.Real) or not weight.is_floating_point():
        return

    f64 = torch.float64
    scale = (var.to(f64) + float(eps)).rsqrt()
    if gamma is not None:
        scale = scale * gamma.to(f64)
    shift = -mean.to(f64) * scale
    if beta is not None:
        shift = shift + beta.to(f64)
    new_bias = shift if bias is None else bias.to(f64) * scale + shift
    new_weight = weight.to(f64) * scale.reshape([-1] + [1] * (weight.dim() - 1))

    w = ctx.add_constant(new_weight.to(weight.dtype), f"{producer.name}_weight_bn")
    b = ctx.add_constant(new_bias.to(weight.dtype), f"{producer.name}_bias_bn")
    p.update(weight=w, bias=b)
    new = ctx.call(producer.target, list(p.values()), like=producer, val=producer.meta["val"])
    for getitem in users.get(0, []):
        ctx.replace(getitem, new)
    ctx.graph.erase_node(bn)
    ctx.graph.erase_node(producer)
    ctx.count_fusion("batch_norm", name)


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if node.op == "call_function" and node.target is aten._native_batch_norm_legit_no_training.default:
            _fold(ctx, node)
