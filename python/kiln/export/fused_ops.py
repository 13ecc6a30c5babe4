"""The kiln-namespace operators the fusion passes put in the FX graph.

    kiln::fused_linear(input, weight, bias?, residual?, activation, act_min, act_max)
        = act(linear(input, weight, bias) + residual)
    kiln::fused_conv2d(input, weight, bias?, residual?, stride, padding, dilation, groups,
                       activation, act_min, act_max)
        = act(conv2d(input, weight, bias, stride, padding, dilation, groups) + residual)

    kiln::sdpa_rows(query, k_cache, v_cache, rows, attn_mask?, kv_heads, is_causal, scale?)
        = scaled_dot_product_attention(query, k_cache[rows].view(B, kv_heads, S, E),
                                       v_cache[rows].view(B, kv_heads, S, Ev), attn_mask,
                                       is_causal=is_causal, scale=scale, enable_gqa=True)
        (query [B, H, L, E], the caches [R, E] and [R, Ev], rows int64 [B * kv_heads * S]:
        key s of batch b, kv head h is cache row rows[(b * kv_heads + h) * S + s]; the
        kernels read the rows in place, passes/fuse_cache_attention.py; caches of float16
        or bfloat16 under a float32 query are widened to it as they are read)

The residual (None, or exactly the output's shape and dtype) is added before
the activation. ACTIVATIONS lists the activation names; act_min and act_max
are read for "clamp" only. The runtime's kernels (op_linear.cpp and
op_conv2d.cpp in kernels/portable and kernels/optimized) implement exactly
these schemas.

They are declared with torch.library so that a fused graph stays an ordinary
FX graph that torch can run and check: the CPU implementation is the eager
math, the fake one gives the output's shape and dtype. Importing this module
imports torch; the passes import it when they run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

FUSED_LINEAR_SCHEMA = ("(Tensor input, Tensor weight, Tensor? bias, Tensor? residual, str activation, "
                       "float act_min, float act_max) -> Tensor")
FUSED_CONV2D_SCHEMA = ("(Tensor input, Tensor weight, Tensor? bias, Tensor? residual, int[2] stride, "
                       "int[2] padding, int[2] dilation, int groups, str activation, float act_min, "
                       "float act_max) -> Tensor")

_ACTIVATIONS = {
    "none": lambda y, lo, hi: y,
    "relu": lambda y, lo, hi: torch.relu(y),
    "clamp": lambda y, lo, hi: torch.clamp(y, lo, hi),
    "gelu": lambda y, lo, hi: F.gelu(y),
    "gelu_tanh": lambda y, lo, hi: F.gelu(y, approximate="tanh"),
    "silu": lambda y, lo, hi: F.silu(y),
    "sigmoid": lambda y, lo, hi: torch.sigmoid(y),
    "tanh": lambda y, lo, hi: torch.tanh(y),
    "hardswish": lambda y, lo, hi: F.hardswish(y),
    "hardsigmoid": lambda y, lo, hi: F.hardsigmoid(y),
}
ACTIVATIONS = tuple(_ACTIVATIONS)


def _epilogue(y, residual, activation, act_min, act_max):
    if activation not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {', '.join(ACTIVATIONS)}")
    if residual is not None:
        y = y + residual
    return _ACTIVATIONS[activation](y, act_min, act_max)


def _define(name: str, schema: str, compute) -> None:
    qualified = f"kiln::{name}"
    torch.library.define(qualified, schema)

    @torch.library.impl(qualified, "CPU")
    def _cpu(input, weight, bias, residual, *rest):
        *conv_args, activation, act_min, act_max = rest
        return _epilogue(compute(input, weight, bias, *conv_args), residual, activation, act_min, act_max)

    @torch.library.register_fake(qualified)
    def _fake(input, weight, bias, residual, *rest):
        *conv_args, _, _, _ = rest
        return compute(input, weight, bias, *conv_args)


_define("fused_linear", FUSED_LINEAR_SCHEMA, F.linear)
_define("fused_conv2d", FUSED_CONV2D_SCHEMA, F.conv2d)

SDPA_ROWS_SCHEMA = ("(Tensor query, Tensor k_cache, Tensor v_cache, Tensor rows, Tensor? attn_mask, int kv_heads, "
                    "bool is_causal, float? scale) -> Tensor")


def _sdpa_rows(query, k_cache, v_cache, rows, attn_mask, kv_heads, is_causal, scale):
    b = query.shape[0]
    keys = k_cache.index_select(0, rows).to(query.dtype).view(b, kv_heads, -1, k_cache.shape[1])
    values = v_cache.index_select(0, rows).to(query.dtype).view(b, kv_heads, -1, v_cache.shape[1])
    return F.scaled_dot_product_attention(query, keys, values, attn_mask=attn_mask, is_causal=is_causal,
                                          scale=scale, enable_gqa=True)


torch.library.define("kiln::sdpa_rows", SDPA_ROWS_SCHEMA)
torch.library.impl("kiln::sdpa_rows", "CPU")(_sdpa_rows)


@torch.library.register_fake("kiln::sdpa_rows")
def _sdpa_rows_fake(query, k_cache, v_cache, rows, attn_mask, kv_heads, is_causal, scale):
    return query.new_empty((*query.shape[:-1], v_cache.shape[-1]))


fused_linear = torch.ops.kiln.fused_linear.default
fused_conv2d = torch.ops.kiln.fused_conv2d.default
sdpa_rows = torch.ops.kiln.sdpa_rows.default
