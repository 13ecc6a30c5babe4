"""Fuse attention spelled out as matmul, scale, mask, softmax, matmul into scaled_dot_product_attention.

Why: BERT-style models (MiniLM) write attention as softmax(q @ k^T / c + mask) @ v. In kiln that is
five kernels and a [B, H, L, S] score tensor written and read four times; the fused kernel
(flash-style, online softmax) reads q, k and v once and never stores the scores. k^T is a
permutation of some x in these models; k is then x with the last two entries of that permutation
swapped, so the rewrite adds no copy.

When: softmax over the last dim of (q @ k^T) [/ c or * c] [+ mask], then @ v, all float32, q, k^T
and v 3-D or 4-D with the same leading dims, each step read only by the next. The scale becomes
sdpa's `scale` (1/c for a division: the kernel multiplies, a rounding apart). A mask must be
float32, broadcastable to the scores and provably finite (_magnitude): where all of a row's scores
are -inf, softmax gives NaN but scaled_dot_product_attention gives zeros, so a mask that could
hide a whole row is left alone.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import torch
import torch.fx as fx

from .manager import PassContext, bound_args, same_shape

aten = torch.ops.aten

_FLOAT32_MAX = float(torch.finfo(torch.float32).max)
# Integer and bool values convert to floats no larger than these.
_INT_MAGNITUDE = {torch.bool: 1.0, torch.uint8: 255.0, torch.int8: 128.0, torch.int16: 2.0 ** 15,
                  torch.int32: 2.0 ** 31, torch.int64: 2.0 ** 63}
# Operators whose output holds only values of their first input.
_SAME_VALUES = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.unsqueeze.default,
                aten.squeeze.dims, aten.squeeze.dim, aten.expand.default, aten.permute.default,
                aten.slice.Tensor, aten.clone.default, aten._to_copy.default}


def _call(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _read_only_by(node: fx.Node, user: fx.Node) -> bool:
    return list(node.users) == [user]


def _scalar(x) -> Optional[float]:
    """x as a finite float if it is a Python number (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _magnitude(ctx: PassContext, x, depth: int = 0) -> Optional[float]:
    """An upper bound of |x| over all its elements in every run, or None if unknown (a float
    input, an operator not followed here)."""
    if _scalar(x) is not None:
        return abs(_scalar(x))
    if not isinstance(x, fx.Node) or depth > 32:
        return None
    if ctx.is_constant(x):
        t = ctx.constants[x].to(torch.float64)
        if t.numel() == 0:
            return 0.0
        return float(t.abs().max()) if bool(torch.isfinite(t).all()) else None
    val = x.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    if not val.is_floating_point():  # any integer tensor, inputs included
        return _INT_MAGNITUDE.get(val.dtype)
    if x.op != "call_function":
        return None
    if x.target in _SAME_VALUES:
        return _magnitude(ctx, x.args[0], depth + 1)
    if x.target in (aten.add.Tensor, aten.sub.Tensor, aten.rsub.Scalar, aten.mul.Tensor):
        a = bound_args(x)
        left, right = _magnitude(ctx, a["self"], depth + 1), _magnitude(ctx, a["other"], depth + 1)
        if left is None or right is None:
            return None
        if x.target is aten.mul.Tensor:
            return left * right
        alpha = _magnitude(ctx, a["alpha"], depth + 1)
        return None if alpha is None else left + alpha * right
    return None


def _broadcasts_to(shape: Sequence, full: Sequence) -> bool:
    if len(shape) > len(full):
        return False
    return all((isinstance(d, int) and d == 1) or same_shape([d], [f])
               for d, f in zip(reversed(list(shape)), reversed(list(full))))


def _scores(node) -> bool:
    """True if node is q @ k^T, maybe scaled: the side of the mask addition that is not the mask."""
    if _call(node, aten.div.Tensor, aten.mul.Tensor):
        node = node.args[0]
    return _call(node, aten.matmul.default)


def _fuse(ctx: PassContext, out: fx.Node) -> bool:
    """Replaces out = softmax(...) @ v by scaled_dot_product_attention if the pattern matches."""
    probs, v = out.args
    if not _call(probs, aten._softmax.default) or not _read_only_by(probs, out):
        return False
    x, dim, half_to_float = probs.args
    rank = len(ctx.shape(x))
    if half_to_float or rank not in (3, 4) or dim % rank != rank - 1:
        return False
    reader = probs
    chain = [probs]  # the nodes the fused call replaces, last first
    mask = None
    if _call(x, aten.add.Tensor) and _read_only_by(x, reader) and bound_args(x)["alpha"] == 1:
        a, b = x.args[0], x.args[1]
        (x, mask) = (a, b) if _scores(a) else (b, a)
        if not isinstance(mask, fx.Node) or ctx.dtype(mask) != torch.float32 \
                or not _broadcasts_to(ctx.shape(mask), ctx.shape(x)) or len(ctx.shape(mask)) > 4:
            return False
        bound = _magnitude(ctx, mask)
        if bound is None or bound >= _FLOAT32_MAX:
            return False
        reader = probs.args[0]
        chain.append(reader)
    scale = 1.0
    if _call(x, aten.div.Tensor, aten.mul.Tensor) and _read_only_by(x, reader):
        c = _scalar(x.args[1])
        if c is None or c == 0:
            return False
        scale = 1.0 / c if x.target is aten.div.Tensor else c
        chain.append(x)
        reader, x = x, x.args[0]
    if not _call(x, aten.matmul.default) or not _read_only_by(x, reader):
        return False
    q, kt = x.args
    if not all(isinstance(n, fx.Node) and ctx.dtype(n) == torch.float32 for n in (q, kt, v)):
        return False
    qs, kts, vs = ctx.shape(q), ctx.shape(kt), ctx.shape(v)
    if not (len(qs) == len(kts) == len(vs) == rank and same_shape(qs[:-2], kts[:-2])
            and same_shape(qs[:-2], vs[:-2]) and same_shape(qs[-1:], kts[-2:-1])
            and same_shape(kts[-1:], vs[-2:-1])):
        return False
    if not _call(kt, aten.permute.default) or not _read_only_by(kt, x):
        return False
    # k^T = permute(y, p) makes k = permute(y, p with its last two entries swapped).
    perm: List[int] = list(kt.args[1])
    perm[-1], perm[-2] = perm[-2], perm[-1]
    kt.args = (kt.args[0], perm)
    kt.meta["val"] = kt.meta["val"].transpose(-1, -2).contiguous()
    ctx.rewrote(kt)  # k now, not the eager k^T
    kwargs = {"attn_mask": mask, "dropout_p": 0.0, "is_causal": False, "scale": scale}
    fused = ctx.call(aten.scaled_dot_product_attention.default, (q, kt, v), kwargs, like=out, val=out.meta["val"])
    ctx.replace(out, fused)
    for dead in chain + [x]:
        ctx.graph.erase_node(dead)
    ctx.count("attentions_fused")
    return True


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if _call(node, aten.matmul.default) and len(node.args) == 2 and _fuse(ctx, node):
            ctx.count_fusion("attention", "scaled_dot_product_attention")
    # The scores, their scaling, mask addition and softmax are dead now: eliminate_dead_code drops them.
