"""Fuse attention over rows gathered from a key/value cache into kiln::sdpa_rows.

Why: kiln's LLM program (kiln.llm.model.Attention) keeps each layer's cache as a matrix [R, E] and
reads it with keys = k_cache.index_select(0, rows).view(B, Hkv, S, E), the same for values. In kiln
the index_select copies B * Hkv * S rows and the view copies them again, at every step and for
every layer: a cost that grows with the text so far. kiln::sdpa_rows (fused_ops.py) takes the
caches and the row indices and its kernels read each key and value row in place, with the same
float operations as scaled_dot_product_attention on the gathered copy.

When: scaled_dot_product_attention(q, view(index_select(K, 0, rows)), view(index_select(V, 0,
rows)), mask, dropout_p=0, ...) with q [B, H, L, E], K [R, E] and V [R, Ev] of q's float dtype, the
same 1-D int64 rows for both, each view to [B, Hkv, S, *] (q's B, a static Hkv, the cache's width)
and H a multiple of Hkv (enable_gqa, or H = Hkv), and every gather and view read by this attention
alone. A cache kept in 16 bits (float16 or bfloat16 under a float32 q) is read as
view(_to_copy(index_select(K, 0, rows), dtype=float32)): the cast goes too, and the kernels widen
each row as they read it, the same floats as the cast.
It runs after fold_kv_head_expansion (which gives the attention the unrepeated kv heads) and after
dead-code elimination (so the users it counts are the live ones).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.fx as fx

from ..fused_ops import sdpa_rows
from .manager import PassContext, bound_args, same_shape

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_COMPACT = (torch.float16, torch.bfloat16)  # cache dtypes read under a float32 query


def _call(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _gathered(ctx: PassContext, node, reader: fx.Node) -> Optional[Tuple[fx.Node, fx.Node, list]]:
    """(cache, rows, the nodes between) if `node` is view(index_select(cache, 0, rows)) of a 2-D cache,
    or view(_to_copy(index_select(...), dtype=float32)) of a 16-bit one, read by `reader` alone, else None."""
    if not _call(node, *_VIEWS) or list(node.users) != [reader]:
        return None
    between = [node.args[0]]
    if _call(between[0], aten._to_copy.default) and list(between[0].users) == [node]:
        cast = between[0]
        if set(cast.kwargs) != {"dtype"} or cast.kwargs["dtype"] != torch.float32 or len(cast.args) != 1:
            return None
        between.insert(0, cast.args[0])
    gather, gather_reader = between[0], between[1] if len(between) > 1 else node
    if not _call(gather, aten.index_select.default) or list(gather.users) != [gather_reader]:
        return None
    cache, dim, rows = gather.args[:3]
    if not isinstance(cache, fx.Node) or not isinstance(rows, fx.Node) or len(ctx.shape(cache)) != 2 \
            or dim not in (0, -2) or len(ctx.shape(rows)) != 1 or ctx.dtype(rows) != torch.int64:
        return None
    if (len(between) > 1) != (ctx.dtype(cache) in _COMPACT):
        return None
    return cache, rows, between


def _fuse(ctx: PassContext, node: fx.Node) -> bool:
    a = bound_args(node)
    q, key, value, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    if a["dropout_p"] not in (0, 0.0) or key is value or not isinstance(q, fx.Node):
        return False
    k, v = _gathered(ctx, key, node), _gathered(ctx, value, node)
    if k is None or v is None or k[1] is not v[1]:
        return False
    (k_cache, rows, k_between), (v_cache, _, v_between) = k, v
    dtype, cache_dtype = ctx.dtype(q), ctx.dtype(k_cache)
    if dtype not in (torch.float32, torch.float64) or ctx.dtype(v_cache) != cache_dtype \
            or cache_dtype not in (dtype, *(_COMPACT if dtype == torch.float32 else ())):
        return False
    qs, ks, vs = ctx.shape(q), ctx.shape(key), ctx.shape(value)
    kc, vc = ctx.shape(k_cache), ctx.shape(v_cache)
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
        return False
    b, hkv, s = ks[0], ks[1], ks[2]
    heads = qs[1]
    if not (isinstance(hkv, int) and isinstance(heads, int) and hkv > 0 and heads % hkv == 0
            and (heads == hkv or a["enable_gqa"])):
        return False
    if not (same_shape(qs[:1], [b]) and same_shape(vs[:3], [b, hkv, s]) and same_shape([ks[3]], [kc[1]])
            and same_shape([vs[3]], [vc[1]]) and same_shape([qs[3]], [ks[3]]) and same_shape(kc[:1], vc[:1])):
        return False
    # rows.numel() = B * Hkv * S: a view keeps the element count (torch.export's symbols often cannot
    # show it: S is a quotient), so the unfused program runs only when it holds; the kernels take S as
    # rows.numel() / (B * Hkv) and refuse rows that are not a whole number of keys per head.
    args = (q, k_cache, v_cache, rows, mask, hkv, bool(a["is_causal"]), a["scale"])
    fused = ctx.call(sdpa_rows, args, like=node, val=node.meta["val"])
    ctx.replace(node, fused)
    for dead in (key, value, *reversed(k_between), *reversed(v_between)):
        ctx.graph.erase_node(dead)
    return True


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if _call(node, aten.scaled_dot_product_attention.default) and _fuse(ctx, node):
            ctx.count_fusion("cache_gather", "sdpa_rows")
