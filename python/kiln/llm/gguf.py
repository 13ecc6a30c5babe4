"""Reading a GGUF file for export (torch-free): metadata and tensor table come from
libkiln_llm's checked reader (a truncated or hostile file is kiln.InvalidProgram),
tensor data is memory-mapped and dequantized with numpy.

Dequantization matches llama.cpp's (and the `gguf` package's) float32
arithmetic: Q8_0 d*q, Q4_0 d*(q-8), Q4_1 d*q+m, with per-32-element float16 d, m;
Q5_0, Q5_1, Q4_K, Q5_K and Q6_K as kiln.export.quantize.blocks decodes them
(the layouts in extensions/quantized/quant.h).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._kiln import llm as _native
from ..errors import InvalidProgram, NotSupported
from ..export.quantize.blocks import BLOCK_FORMATS, decode_blocks

# ggml type codes kiln dequantizes.
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30
QUANTIZED_TYPES = {Q4_0: "Q4_0", Q4_1: "Q4_1", Q8_0: "Q8_0",
                   **{tid: name for tid, (name, _, _, _) in BLOCK_FORMATS.items()}}
# (elements, bytes) per block of each type kiln dequantizes.
_BLOCK_BYTES = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q8_0: (32, 34), Q4_0: (32, 18), Q4_1: (32, 20),
                **{tid: (e, b) for tid, (_, _, e, b) in BLOCK_FORMATS.items()}}


@dataclass(frozen=True)
class GgufTensor:
    name: str
    ggml_type: int
    type_name: str
    shape: tuple        # torch order: outermost first (the reverse of GGUF's dims)
    offset: int         # absolute byte offset in the file
    nbytes: int


class GgufFile:
    """metadata: {key: value}; tensors: {name: GgufTensor}; raw(name) and dequantize(name)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        info = _native.read_gguf(self.path)
        self.version: int = info["version"]
        self.metadata: dict = info["metadata"]
        self.tensors: dict = {}
        for t in info["tensors"]:
            self.tensors[t["name"]] = GgufTensor(t["name"], t["ggml_type"], t["type_name"],
                                                 tuple(int(d) for d in reversed(t["dims"])), t["offset"], t["nbytes"])
        # The reader checked every tensor's bytes lie inside the file.
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if self.tensors else None

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as stored (a read-only view of the mapped file)."""
        t = self.tensors[name]
        return self._map[t.offset:t.offset + t.nbytes]

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor in float32, shaped like torch ([out, in] for a weight matrix)."""
        t = self.tensors[name]
        data = self.raw(name)
        n = int(np.prod(t.shape))
        block = _BLOCK_BYTES.get(t.ggml_type)
        if block is not None:
            elements, nbytes = block
            want = -(-n // elements) * nbytes
            row = t.shape[-1] if t.shape else 1
            if n % elements or row % elements:
                raise InvalidProgram(f"'{self.path}': tensor '{name}' is {t.type_name} of shape {list(t.shape)}: rows "
                                     f"of {row} elements are not whole blocks of {elements}")
            if t.nbytes != want:
                raise InvalidProgram(f"'{self.path}': tensor '{name}' ({t.type_name}, shape {list(t.shape)}) has "
                                     f"{t.nbytes} bytes, not {want}")
        if t.ggml_type == F32:
            w = data.view(np.float32).copy()
        elif t.ggml_type == F16:
            w = data.view(np.float16).astype(np.float32)
        elif t.ggml_type == BF16:
            w = (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif t.ggml_type == Q8_0:
            blocks = data.reshape(-1, 34)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
            w = d * q
        elif t.ggml_type in (Q4_0, Q4_1):
            size = 18 if t.ggml_type == Q4_0 else 20
            blocks = data.reshape(-1, size)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            qs = blocks[:, size - 16:]
            # Byte j holds element j (low nibble) and element j + 16 (high nibble).
            q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
            if t.ggml_type == Q4_0:
                w = d * (q - 8.0)
            else:
                m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
                w = d * q + m
        elif t.ggml_type in BLOCK_FORMATS:
            _, scheme, _, size = BLOCK_FORMATS[t.ggml_type]
            w = decode_blocks(data.reshape(-1, size), scheme)
        else:
            raise NotSupported(f"'{self.path}': tensor '{name}' is {t.type_name}; kiln reads F32, F16, BF16, "
                               "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K tensors")
        return np.ascontiguousarray(w.reshape(-1)[:n].reshape(t.shape), dtype=np.float32)
