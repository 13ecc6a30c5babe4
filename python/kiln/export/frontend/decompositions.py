"""The decomposition table given to ExportedProgram.run_decompositions.

torch.export.default_decompositions() lowers everything to core ATen; kiln
keeps the operators it has fused kernels for (linear, conv2d, layer_norm,
pooling, activations, softmax, scaled_dot_product_attention, ...;
operators.KEEP_UNDECOMPOSED). scaled_dot_product_attention has its own kernel;
`scaled_dot_product_attention` below is the plain decomposition made of
operators kiln runs (matmul, mul, where, add, softmax), for reference and for
callers that want the unfused form.
"""

from __future__ import annotations

import math


def _lookup(key: str):
    import torch

    name, _, overload = key.rpartition(".")
    namespace, _, op = name.partition("::")
    packet = getattr(getattr(torch.ops, namespace), op, None)
    return getattr(packet, overload, None) if packet is not None else None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, written with kiln-supported ops.

    Differs from ATen's math path only for rows whose every position is
    masked: ATen returns zeros there, this returns NaN (as plain softmax does).
    dropout_p is ignored (export runs in eval mode).
    """
    import torch

    if enable_gqa and query.size(-3) != key.size(-3):
        groups = query.size(-3) // key.size(-3)
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    L, S = query.size(-2), key.size(-2)
    s = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)) * s
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril()  # folded into a constant
        scores = torch.where(keep, scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:  # True = take part in attention
            scores = torch.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.matmul(torch.softmax(scores, dim=-1), value)


_TABLE = None


def decomposition_table():
    global _TABLE
    if _TABLE is None:
        import torch

        from ..operators import KEEP_UNDECOMPOSED

        table = torch.export.default_decompositions()
        for key in KEEP_UNDECOMPOSED:
            op = _lookup(key)
            if op is not None:
                table.pop(op, None)
        _TABLE = table
    return dict(_TABLE)
