"""Fold the key/value head repetition of grouped-query attention into scaled_dot_product_attention.

Why: Llama-style models repeat each key/value head for its group of query heads before attention
(Hugging Face's repeat_kv: x[:, :, None].expand(b, kv, g, s, d).reshape(b, kv * g, s, d)). In kiln
the unsqueeze, expand and view each materialize a copy: with a KV cache, three copies of it (two of
them g times its size) per layer, for keys and for values, at every generated token.
scaled_dot_product_attention(..., enable_gqa=True) reads the kv heads directly (query head h uses
kv head h // g, exactly what the repetition feeds it), so the attention is given the unrepeated
key and value instead; the repetition then has no user and is removed as dead code.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .manager import PassContext, same_shape

aten = torch.ops.aten


def _call(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _unrepeated(ctx: PassContext, node):
    """(x, g) if `node` is x [B, Hkv, S, D] with each head repeated g times along dim 1, else None."""
    if not _call(node, aten.view.default, aten.reshape.default, aten._unsafe_view.default):
        return None
    expanded = node.args[0]
    if not _call(expanded, aten.expand.default):
        return None
    unsqueezed = expanded.args[0]
    if not _call(unsqueezed, aten.unsqueeze.default) or unsqueezed.args[1] not in (2, -3):
        return None
    x = unsqueezed.args[0]
    xs, es, ns = ctx.shape(x), ctx.shape(expanded), ctx.shape(node)
    if len(xs) != 4 or len(es) != 5 or not isinstance(es[2], int) or not isinstance(xs[1], int):
        return None
    g = es[2]
    if not (same_shape(es, [xs[0], xs[1], g, xs[2], xs[3]]) and same_shape(ns, [xs[0], xs[1] * g, xs[2], xs[3]])):
        return None
    return x, g


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if not _call(node, aten.scaled_dot_product_attention.default) or len(node.args) < 3:
            continue
        query, key, value = node.args[:3]
        k, v = _unrepeated(ctx, key), _unrepeated(ctx, value)
        if k is None or v is None or k[1] != v[1] or len(ctx.shape(query)) != 4:
            continue
        heads = ctx.shape(query)[1]
        if not isinstance(heads, int) or heads != ctx.shape(k[0])[1] * k[1] or ctx.shape(v[0])[1] != ctx.shape(k[0])[1]:
            continue
        args = [query, k[0], v[0], *node.args[3:]]
        kwargs = dict(node.kwargs)
        if len(args) > 7:
            args[7] = True
        else:
            kwargs["enable_gqa"] = True
        node.args, node.kwargs = tuple(args), kwargs
        ctx.count("kv_head_repeats_folded")
