"""GGUF's block formats kept whole by kiln (q5_0, q5_1, q4_k, q5_k, q6_k), and 16-bit weights
(f16, bf16: GGUF's F16 and BF16 tensors, in blocks of 32 values): sizes and float32 decoding with
numpy (torch-free; the layouts are in extensions/quantized/quant.h).

The decoding is ggml's float32 arithmetic: every product d * sc * q is exact, so
the only rounding is q5_1's + m and the K-quants' - dmin * m, and the result is
gguf.quants.dequantize's bit for bit (tests/test_quantized_blocks.py).
"""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

# ggml type id -> (GGUF name, kiln scheme, elements per block, bytes per block)
BLOCK_FORMATS: Dict[int, Tuple[str, str, int, int]] = {
    6: ("Q5_0", "q5_0", 32, 22), 7: ("Q5_1", "q5_1", 32, 24),
    12: ("Q4_K", "q4_k", 256, 144), 13: ("Q5_K", "q5_k", 256, 176), 14: ("Q6_K", "q6_k", 256, 210),
}
# GGUF's float tensors that kiln can keep in 16 bits: ggml type id -> the same fields. GGUF stores
# them in rows of any length; kiln keeps those whose rows are whole blocks of 32 (the others, and
# these with --dtype float32, are widened to float32).
HALF_FORMATS: Dict[int, Tuple[str, str, int, int]] = {1: ("F16", "f16", 32, 64), 30: ("BF16", "bf16", 32, 64)}
# The block formats of integers (compute="int8" takes them; f16 and bf16 it does not).
INT8_SCHEMES = tuple(scheme for _, scheme, _, _ in BLOCK_FORMATS.values())
# kiln scheme -> (elements, bytes) per block
BLOCK_SIZES: Dict[str, Tuple[int, int]] = {scheme: (e, b) for _, scheme, e, b in
                                           (*BLOCK_FORMATS.values(), *HALF_FORMATS.values())}


def _half(b: np.ndarray) -> np.ndarray:
    """[n, 2] uint8 -> [n, 1] float32 (little-endian float16)."""
    return np.ascontiguousarray(b).view("<f2").astype(np.float32)


def _k_scales(sc: np.ndarray):
    """The 8 six-bit scales and mins of q4_k / q5_k blocks: sc [n, 12] -> two int32 [n, 8]."""
    sc = sc.astype(np.int32)
    lo, mid, hi = sc[:, 0:4], sc[:, 4:8], sc[:, 8:12]
    scales = np.concatenate([lo & 63, (hi & 15) | ((lo >> 6) << 4)], axis=1)
    mins = np.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=1)
    return scales, mins


def block_parts(blocks: np.ndarray, scheme: str):
    """The integer formats' blocks uint8 [n, bytes] as w = d * sc * q + c (quant.h's Int8Block):
    (q int64 [n, E], sc int64 [n, E / 16], d float32 [n, 1], c float32 [n, E / 32] or None), E the
    block's elements; each part exact, so the decoded weight rounds only in + c."""
    n = blocks.shape[0]
    if scheme in ("q5_0", "q5_1"):
        at = 2 if scheme == "q5_0" else 4
        qh = np.ascontiguousarray(blocks[:, at:at + 4]).view("<u4").astype(np.int64)        # [n, 1]
        high = (qh >> np.arange(32)) & 1                                                      # [n, 32]
        qs = blocks[:, at + 4:at + 20].astype(np.int64)
        q = np.concatenate([qs & 15, qs >> 4], axis=1) | (high << 4)
        ones = np.ones((n, 2), dtype=np.int64)
        if scheme == "q5_0":
            return q - 16, ones, _half(blocks[:, 0:2]), None
        return q, ones, _half(blocks[:, 0:2]), _half(blocks[:, 2:4])
    if scheme in ("q4_k", "q5_k"):
        scales, mins = _k_scales(blocks[:, 4:16])
        qs = blocks[:, 16:144] if scheme == "q4_k" else blocks[:, 48:176]
        qs = qs.astype(np.int64).reshape(n, 4, 1, 32)
        q = ((qs >> np.array([0, 4]).reshape(1, 1, 2, 1)) & 15).reshape(n, 8, 32)          # sub-block 2c, 2c+1
        if scheme == "q5_k":
            qh = blocks[:, 16:48].astype(np.int64).reshape(n, 1, 32)
            q = q | (((qh >> np.arange(8).reshape(1, 8, 1)) & 1) << 4)
        c = -(_half(blocks[:, 2:4]) * mins.astype(np.float32))
        return q.reshape(n, 256), np.repeat(scales.astype(np.int64), 2, axis=1), _half(blocks[:, 0:2]), c
    if scheme == "q6_k":
        ql = blocks[:, 0:128].astype(np.int64).reshape(n, 2, 64)
        qh = blocks[:, 128:192].astype(np.int64).reshape(n, 2, 1, 32)
        low = np.concatenate([ql[..., :32] & 15, ql[..., 32:] & 15, ql[..., :32] >> 4, ql[..., 32:] >> 4], axis=-1)
        high = ((qh >> (2 * np.arange(4)).reshape(1, 1, 4, 1)) & 3).reshape(n, 2, 128)
        q = (low | (high << 4)).reshape(n, 256) - 32
        sc = blocks[:, 192:208].copy().view(np.int8).astype(np.int64)                        # [n, 16]
        return q, sc, _half(blocks[:, 208:210]), None
    raise ValueError(f"{scheme!r} is not one of kiln's integer block formats ({', '.join(INT8_SCHEMES)})")


def decode_blocks(blocks: np.ndarray, scheme: str) -> np.ndarray:
    """blocks uint8 [n, bytes per block] -> float32 [n, elements per block]."""
    if scheme == "f16":
        return np.ascontiguousarray(blocks).view("<f2").astype(np.float32)
    if scheme == "bf16":
        return (np.ascontiguousarray(blocks).view("<u2").astype(np.uint32) << 16).view(np.float32)
    if scheme not in BLOCK_SIZES:
        raise ValueError(f"{scheme!r} is not one of kiln's block formats ({', '.join(BLOCK_SIZES)})")
    q, sc, d, c = block_parts(blocks, scheme)
    w = (d * np.repeat(sc, 16, axis=1).astype(np.float32)) * q.astype(np.float32)
    # No + 0 where there is no c: it would turn a -0.0 into +0.0 (gguf keeps the sign).
    return w if c is None else w + np.repeat(c, 32, axis=1)


def decode_rows(qweight: np.ndarray, scheme: str) -> np.ndarray:
    """qweight uint8 [N, blocks * bytes] (one row of whole blocks per output feature) -> float32 [N, K]."""
    elements, nbytes = BLOCK_SIZES[scheme]
    n, cols = qweight.shape
    if cols % nbytes:
        raise ValueError(f"{scheme}: rows of {cols} bytes are not whole blocks of {nbytes} bytes")
    if n == 0 or cols == 0:
        return np.zeros((n, cols // nbytes * elements), dtype=np.float32)
    w = decode_blocks(np.ascontiguousarray(qweight).reshape(-1, nbytes), scheme)
    return w.reshape(n, cols // nbytes * elements)
