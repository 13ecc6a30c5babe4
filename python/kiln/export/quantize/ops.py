"""The kiln_quantized operators for torch (schemas in modules.py's docstring).

Declared with torch.library so that a quantized model is an ordinary module
that eager PyTorch runs (the CPU implementations below are the reference
math, the same as the runtime's portable kernels) and torch.export traces into
kiln_quantized::linear / kiln_quantized::embedding calls. Importing this module
imports torch.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .blocks import BLOCK_SIZES, INT8_SCHEMES, block_parts, decode_rows

SPLIT_SCHEMES = ("q8_0", "q4_0", "q4_1")
SCHEMES = SPLIT_SCHEMES + tuple(BLOCK_SIZES)
COMPUTES = ("float32", "int8", "int8_row")
# compute="int8_row" sums k products (q - z) * w with |q - z| <= 255, |w| <= 128 in int32 (quant.h).
INT8_ROW_MAX_K = 65536

LINEAR_SCHEMA = ("(Tensor input, Tensor qweight, Tensor? scales, Tensor? mins, Tensor? bias, str scheme, "
                 "int group_size, str compute=\"float32\") -> Tensor")
EMBEDDING_SCHEMA = ("(Tensor qweight, Tensor? scales, Tensor? mins, Tensor indices, str scheme, "
                    "int group_size) -> Tensor")


def row_length(qweight: torch.Tensor, scheme: str) -> int:
    """K of a quantized matrix's qweight (without checking it)."""
    if scheme in BLOCK_SIZES:
        elements, nbytes = BLOCK_SIZES[scheme]
        return qweight.shape[1] // nbytes * elements
    return qweight.shape[1] * (1 if scheme == "q8_0" else 2)


def _check_blocks(qweight, scales, mins, scheme: str, group_size: int) -> int:
    elements, nbytes = BLOCK_SIZES[scheme]
    if qweight.dtype != torch.uint8 or qweight.dim() != 2 or qweight.shape[1] % nbytes:
        raise ValueError(f"{scheme}: qweight must be a 2-D torch.uint8 tensor of whole {nbytes}-byte blocks per row, "
                         f"got {qweight.dtype} {list(qweight.shape)}")
    if scales is not None or mins is not None:
        raise ValueError(f"{scheme}: the scales are inside the blocks; scales and mins must be None")
    if group_size != elements:
        raise ValueError(f"{scheme}: group_size must be {elements} (the block's elements), got {group_size}")
    return row_length(qweight, scheme)


def check_layout(qweight: torch.Tensor, scales: Optional[torch.Tensor], mins: Optional[torch.Tensor], scheme: str,
                 group_size: int) -> int:
    """Checks dtypes and shapes of one quantized matrix; returns K (its row length)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantization scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    if scheme in BLOCK_SIZES:
        return _check_blocks(qweight, scales, mins, scheme, group_size)
    if scales is None:
        raise ValueError(f"{scheme}: scales are required")
    want_q = torch.int8 if scheme == "q8_0" else torch.uint8
    if qweight.dtype != want_q or qweight.dim() != 2:
        raise ValueError(f"{scheme}: qweight must be a 2-D {want_q} tensor, got {qweight.dtype} "
                         f"{list(qweight.shape)}")
    n = qweight.shape[0]
    k = qweight.shape[1] * (1 if scheme == "q8_0" else 2)
    if group_size <= 0 or k % group_size or (group_size % 32 and not (scheme == "q8_0" and group_size == k)):
        raise ValueError(f"{scheme}: group_size {group_size} does not fit rows of {k} elements (a multiple of 32 "
                         "that divides the row" + (", or the row length" if scheme == "q8_0" else "") + ")")
    groups = k // group_size
    for name, t in (("scales", scales), ("mins", mins)):
        if t is None:
            continue
        if t.dtype != torch.float16 or list(t.shape) != [n, groups]:
            raise ValueError(f"{scheme}: {name} must be float16 [{n}, {groups}], got {t.dtype} {list(t.shape)}")
    if (mins is not None) != (scheme == "q4_1"):
        raise ValueError(f"{scheme}: mins must be {'given' if scheme == 'q4_1' else 'None'}")
    return k


def _unpack_nibbles(qweight: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> int16 [N, K] values 0..15 (GGUF order within each run of 32)."""
    n, half = qweight.shape
    runs = qweight.reshape(n, half // 16, 16).to(torch.int16)
    return torch.cat((runs & 15, runs >> 4), dim=-1).reshape(n, half * 2)


def decode(qweight, scales, mins, scheme: str, group_size: int) -> torch.Tensor:
    """The float32 weights [N, K]: bit-exact to gguf.quants.dequantize for group_size 32."""
    k = check_layout(qweight, scales, mins, scheme, group_size)
    n = qweight.shape[0]
    if scheme in BLOCK_SIZES:
        return torch.from_numpy(decode_rows(qweight.numpy(), scheme))
    d = scales.to(torch.float32).repeat_interleave(group_size, dim=1) if n else scales.new_zeros((0, k)).float()
    if scheme == "q8_0":
        return qweight.to(torch.float32) * d
    q = _unpack_nibbles(qweight)
    if scheme == "q4_0":
        return d * (q - 8).to(torch.float32)
    m = mins.to(torch.float32).repeat_interleave(group_size, dim=1) if n else d
    return d * q.to(torch.float32) + m


def quantize_activations(x: torch.Tensor):
    """Rows of x [M, K] in int8 per block of 32 (the last block may be shorter):
    (qx float32 [M, K] holding integers, dx float32 [M, ceil(K/32)])."""
    m, k = x.shape
    blocks = -(-k // 32)
    padded = F.pad(x, (0, blocks * 32 - k)).reshape(m, blocks, 32)
    dx = padded.abs().amax(-1) / 127
    inv = torch.where(dx == 0, torch.zeros_like(dx), 1 / dx)
    qx = torch.round(padded * inv[..., None]).clamp(-127, 127)  # half to even, as the kernels
    return qx.reshape(m, blocks * 32)[:, :k], dx


def quantize_rows_u8(x: torch.Tensor):
    """Rows of x [M, K] as bytes with a zero point, as quant.h's quantize_row_u8 (compute="int8_row"):
    (q float32 [M, K] holding 0..255, s float32 [M, 1], z float32 [M, 1] holding 0..255)."""
    x = x.float()
    finite = torch.isfinite(x).all(1, keepdim=True)
    safe = torch.where(finite, x, torch.zeros_like(x))
    lo = safe.amin(1, keepdim=True).clamp(max=0) if x.shape[1] else x.new_zeros(x.shape[0], 1)
    hi = safe.amax(1, keepdim=True).clamp(min=0) if x.shape[1] else x.new_zeros(x.shape[0], 1)
    s = hi / 255 - lo / 255
    inv = torch.where(s == 0, torch.zeros_like(s), 1 / s)
    usable = finite & torch.isfinite(inv) & (s != 0)
    inv = torch.where(usable, inv, torch.zeros_like(inv))
    z = torch.where(usable, torch.round(-lo * inv).clamp(0, 255), torch.zeros_like(s))
    q = torch.where(usable, (torch.round(safe * inv) + z).clamp(0, 255), torch.zeros_like(x))
    s = torch.where(usable, s, torch.where(finite, torch.zeros_like(s), torch.full_like(s, float("nan"))))
    return q, s, z


def _linear_int8_row(x2, qweight, scales):
    """compute="int8_row": (s * d) * float(sum (q - z) * w), the integer sum exact (in float64)."""
    q, s, z = quantize_rows_u8(x2)
    isum = ((q - z).double() @ qweight.double().T).float()  # |sum| < 2^31: exact, then rounded once
    return (s * scales.to(torch.float32).reshape(1, -1)) * isum


def _linear_int8(x2, qweight, scales, mins, scheme, group_size):
    """compute="int8": per 32-block of the input, dx * (d * sum(qx * q) + m * sum(qx))."""
    n = qweight.shape[0]
    k = x2.shape[1]
    qx, dx = quantize_activations(x2)
    q = qweight.to(torch.float32) if scheme == "q8_0" else _unpack_nibbles(qweight).to(torch.float32)
    if scheme == "q4_0":
        q = q - 8
    blocks = dx.shape[1]
    pad = blocks * 32 - k
    qxb = F.pad(qx, (0, pad)).reshape(-1, blocks, 32).double()
    qb = F.pad(q, (0, pad)).reshape(n, blocks, 32).double()
    isum = torch.einsum("mbi,nbi->mnb", qxb, qb).float()                # exact integers
    block_group = torch.arange(blocks) * 32 // group_size
    d = scales.to(torch.float32)[:, block_group]                         # [N, blocks]
    inner = d[None] * isum
    if scheme == "q4_1":
        inner = inner + mins.to(torch.float32)[:, block_group][None] * qxb.sum(-1).float()[:, None, :]
    return (dx[:, None, :] * inner).sum(-1)


def _linear_int8_blocks(x2, qweight, scheme):
    """compute="int8" on a block format (blocks.block_parts: w = d * sc * q + c): per 32-block of
    the input, dx * (d * (sc0 * sum16(qx * q) + sc1 * sum16(qx * q)) + c * sum(qx))."""
    n = qweight.shape[0]
    elements, nbytes = BLOCK_SIZES[scheme]
    k = x2.shape[1]
    q, sc, d, c = block_parts(qweight.numpy().reshape(-1, nbytes), scheme)
    per = elements // 32
    q = torch.from_numpy(q).reshape(n, k // 16, 16).double()
    sc = torch.from_numpy(sc).reshape(n, k // 16).double()
    d = torch.from_numpy(d).reshape(n, k // elements).repeat_interleave(per, dim=1)          # [N, blocks]
    qx, dx = quantize_activations(x2)
    qx16 = qx.reshape(-1, k // 16, 16).double()
    isum = (torch.einsum("mhi,nhi->mnh", qx16, q) * sc[None]).reshape(x2.shape[0], n, k // 32, 2).sum(-1).float()
    inner = d[None] * isum                                                                     # exact integers above
    if c is not None:
        c = torch.from_numpy(c).reshape(n, k // 32)
        inner = inner + c[None] * qx.reshape(-1, k // 32, 32).sum(-1)[:, None, :]
    return (dx[:, None, :] * inner).sum(-1)


def _linear(input, qweight, scales, mins, bias, scheme, group_size, compute="float32"):
    if compute not in COMPUTES:
        raise ValueError(f"compute must be one of {', '.join(COMPUTES)}, got {compute!r}")
    if compute == "float32":
        return F.linear(input, decode(qweight, scales, mins, scheme, group_size), bias)
    if scheme not in SPLIT_SCHEMES + INT8_SCHEMES:
        raise ValueError(f"compute={compute!r} takes integer weights ({', '.join(SPLIT_SCHEMES + INT8_SCHEMES)}), "
                         f"not {scheme}")
    k = check_layout(qweight, scales, mins, scheme, group_size)
    x2 = input.reshape(-1, k).float()
    if compute == "int8_row":
        if scheme != "q8_0" or group_size != k:
            raise ValueError(f"compute='int8_row' takes q8_0 with one scale per output channel (group_size {k}), "
                             f"not {scheme} in groups of {group_size}")
        if k > INT8_ROW_MAX_K:
            raise ValueError(f"compute='int8_row' takes rows of at most {INT8_ROW_MAX_K} elements, not {k}")
        y = _linear_int8_row(x2, qweight, scales)
    elif scheme in INT8_SCHEMES:
        y = _linear_int8_blocks(x2, qweight, scheme)
    else:
        y = _linear_int8(x2, qweight, scales, mins, scheme, group_size)
    if bias is not None:
        y = y + bias
    return y.reshape(*input.shape[:-1], qweight.shape[0])


def _embedding(qweight, scales, mins, indices, scheme, group_size):
    check_layout(qweight, scales, mins, scheme, group_size)
    flat = indices.reshape(-1)
    rows = decode(qweight[flat], None if scales is None else scales[flat], None if mins is None else mins[flat],
                  scheme, group_size)
    return rows.reshape(*indices.shape, rows.shape[1])


def _define(name: str, schema: str, cpu, fake) -> None:
    qualified = f"kiln_quantized::{name}"
    torch.library.define(qualified, schema)
    torch.library.impl(qualified, "CPU")(cpu)
    torch.library.register_fake(qualified)(fake)


def _linear_fake(input, qweight, scales, mins, bias, scheme, group_size, compute="float32"):
    return input.new_empty((*input.shape[:-1], qweight.shape[0]), dtype=torch.float32)


def _embedding_fake(qweight, scales, mins, indices, scheme, group_size):
    return qweight.new_empty((*indices.shape, row_length(qweight, scheme)), dtype=torch.float32)


_define("linear", LINEAR_SCHEMA, _linear, _linear_fake)
_define("embedding", EMBEDDING_SCHEMA, _embedding, _embedding_fake)

linear = torch.ops.kiln_quantized.linear.default
embedding = torch.ops.kiln_quantized.embedding.default
