"""Small GGUF files written byte by byte, the one GGUF writer of the tests: unlike the `gguf`
package's writer, this one writes whatever it is told (repeated tensor names,
tokens that are not UTF-8, metadata that lies about the tensors).

    write_gguf(path, metadata={"general.architecture": "llama", ...}, tensors={"name": np.ndarray})

Metadata values: str or bytes (string), bool, int (uint32, or int64 beyond), float
(float32), lists of str/bytes (string arrays), of int (int32 arrays) or of float (float32
arrays). Tensors are
float32 arrays, or Blocks (a quantized tensor's raw bytes, written as they are), in GGUF's
dimension order (innermost first) at 32-byte alignment; `tensors` may be a list of (name,
array) pairs to repeat a name.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

ALIGNMENT = 32


class Blocks(NamedTuple):
    """A tensor of ggml type `ggml_type` (e.g. 12 for Q4_K) and torch-order `shape`, whose bytes
    are `data` (whole blocks, or not: the writer does not check)."""
    ggml_type: int
    shape: tuple
    data: bytes


def _string(s) -> bytes:
    b = s if isinstance(s, bytes) else s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(v) -> bytes:
    if isinstance(v, (str, bytes)):
        return struct.pack("<I", 8) + _string(v)
    if isinstance(v, bool):
        return struct.pack("<IB", 7, int(v))
    if isinstance(v, int):
        return struct.pack("<II", 4, v) if 0 <= v < 1 << 32 else struct.pack("<Iq", 11, v)
    if isinstance(v, float):
        return struct.pack("<If", 6, v)
    if isinstance(v, list):
        if v and isinstance(v[0], (str, bytes)):
            return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(_string(s) for s in v)
        if v and isinstance(v[0], float):
            return struct.pack("<IIQ", 9, 6, len(v)) + struct.pack(f"<{len(v)}f", *v)
        return struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", i) for i in v)
    raise TypeError(type(v))


def gguf_bytes(metadata: dict, tensors) -> bytes:
    items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
    out = b"GGUF" + struct.pack("<IQQ", 3, len(items), len(metadata))
    for key, value in metadata.items():
        out += _string(key) + _value(value)
    data, offset = [], 0
    for name, array in items:
        if isinstance(array, Blocks):
            ggml_type, dims, blob = array.ggml_type, list(reversed(array.shape)), bytes(array.data)
        else:
            array = np.ascontiguousarray(array, dtype=np.float32)
            ggml_type, dims, blob = 0, list(reversed(array.shape)), array.tobytes()
        out += _string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        out += struct.pack("<IQ", ggml_type, offset)
        blob += b"\0" * (-len(blob) % ALIGNMENT)
        data.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % ALIGNMENT)
    return out + b"".join(data)


def write_gguf(path, metadata: dict, tensors=()):
    path.write_bytes(gguf_bytes(metadata, tensors))
    return path


def tiny_llama(vocab=("a", "b", "ab"), dim=8, n_layers=1, n_heads=2, n_kv_heads=1, hidden=16, **overrides) -> tuple:
    """(metadata, tensors) of a valid 1-layer Llama GGUF with random float32 weights and a
    byte-level BPE vocabulary; `overrides` replace metadata values afterwards (the lies)."""
    rng = np.random.default_rng(0)
    hd = dim // n_heads
    meta = {
        "general.architecture": "llama", "general.name": "tiny", "llama.block_count": n_layers,
        "llama.context_length": 16, "llama.embedding_length": dim, "llama.feed_forward_length": hidden,
        "llama.attention.head_count": n_heads, "llama.attention.head_count_kv": n_kv_heads,
        "llama.attention.layer_norm_rms_epsilon": 1e-5, "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": list(vocab),
        "tokenizer.ggml.token_type": [1] * len(vocab), "tokenizer.ggml.merges": ["a b"],
    }
    meta.update(overrides)
    w = lambda *shape: rng.standard_normal(shape).astype(np.float32) * 0.1  # noqa: E731
    tensors = {"token_embd.weight": w(len(vocab), dim), "output_norm.weight": np.ones(dim, np.float32)}
    for i in range(n_layers):
        tensors.update({
            f"blk.{i}.attn_norm.weight": np.ones(dim, np.float32), f"blk.{i}.attn_q.weight": w(n_heads * hd, dim),
            f"blk.{i}.attn_k.weight": w(n_kv_heads * hd, dim), f"blk.{i}.attn_v.weight": w(n_kv_heads * hd, dim),
            f"blk.{i}.attn_output.weight": w(dim, n_heads * hd), f"blk.{i}.ffn_norm.weight": np.ones(dim, np.float32),
            f"blk.{i}.ffn_gate.weight": w(hidden, dim), f"blk.{i}.ffn_up.weight": w(hidden, dim),
            f"blk.{i}.ffn_down.weight": w(dim, hidden),
        })
    return meta, tensors
