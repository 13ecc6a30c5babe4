"""Weight-only quantization: linear and embedding weights in 8 or 4 bits, float32 activations.

The operators (libkiln_quantized.so.0; docs/quantization.md)
-------------------------------------------------------------

    kiln_quantized::linear(Tensor input, Tensor qweight, Tensor? scales, Tensor? mins, Tensor? bias,
                           str scheme, int group_size, str compute="float32") -> Tensor
        = input @ W^T + bias, with W [N, K] decoded from (qweight, scales, mins)
    kiln_quantized::embedding(Tensor qweight, Tensor? scales, Tensor? mins, Tensor indices,
                              str scheme, int group_size) -> Tensor
        = W[indices]  ([*indices.shape, K])

Each row of W (one output feature of a linear, one token of an embedding) is cut
into groups of `group_size` consecutive elements; a group shares a float16
scale d (and, for q4_1, a float16 min m):

    scheme  qweight              element w = ...      scales, mins
    q8_0    int8  [N, K]         d * q                 float16 [N, K / group_size], mins None
    q4_0    uint8 [N, K / 2]     d * (q - 8)           float16 [N, K / group_size], mins None
    q4_1    uint8 [N, K / 2]     d * q + m             float16 [N, K / group_size] each

4-bit values are packed as in GGUF: in every run of 32 elements of a row, byte j
holds element j in its low nibble and element j + 16 in its high nibble. With
group_size 32 the three schemes are GGUF's Q8_0, Q4_0 and Q4_1 bit for bit (a
GGUF file's blocks go in without re-quantization, and decode to exactly what
gguf.quants.dequantize gives). Group sizes: 32, 64, 128 (any multiple of 32 that
divides K); q8_0 also takes group_size == K (one scale per output channel, any K).

GGUF's other block formats are kept whole: qweight uint8 [N, K / B * bytes] holds
each row's blocks byte for byte, scales and mins are None, group_size is B:

    scheme  GGUF  B    bytes   element w = ...
    q5_0    Q5_0  32   22      d * (q - 16)               q 5 bits
    q5_1    Q5_1  32   24      d * q + m
    q4_k    Q4_K  256  144     d * sc * q - dmin * m      8 sub-blocks of 32, 6-bit sc and m
    q5_k    Q5_K  256  176     d * sc * q - dmin * m      q 5 bits
    q6_k    Q6_K  256  210     d * sc * (q - 32)          16 sub-blocks of 16, int8 sc, q 6 bits
    f16     F16   32   64      the float16 value          weights kept in 16 bits
    bf16    BF16  32   64      the bfloat16 value

(the byte layouts in extensions/quantized/quant.h; decoded by blocks.py, equal to
gguf.quants.dequantize bit for bit). compute="int8" takes them all but f16 and bf16.

`compute` is "float32" (the weights are decoded to float32 and multiplied with
the float32 input), "int8" (each row of the input is quantized to int8 per
block of 32 at run time and multiplied in integers: faster, less exact) or
"int8_row" (q8_0 with one scale per output channel only: each row of the input
quantized to bytes with one scale and zero point for the whole row, one integer
sum per output: fastest; quant.h's quantize_row_u8). docs/quantization.md has
their measured error.

The Python API
--------------

    quantize(model, scheme="int4", *, group_size=32, embeddings="int8", compute=None,
             include=None, exclude=None, inplace=False) -> torch.nn.Module
        Replaces every nn.Linear by QuantizedLinear and every nn.Embedding by
        QuantizedEmbedding (norms, biases and everything else stay float32) in a
        copy of `model` (or in `model` with inplace=True) and returns it; the
        result runs in eager PyTorch (reference kernels) and exports to the
        kiln_quantized operators. scheme: "int8" (q8_0, one scale per output
        channel unless group_size is given), "int4" (q4_1, asymmetric),
        "int4_sym" (q4_0), "int8_dynamic" (q8_0 per output channel with
        compute="int8_row": dynamic int8, each input row quantized at run time;
        a Linear that shares a 4-bit embedding's weight takes compute="int8"),
        or a scheme name above. compute: "float32", "int8" or "int8_row" (None:
        "int8_row" for "int8_dynamic", "float32" otherwise). embeddings: the scheme of
        embeddings ("int8": q8_0 per row; "int4"...; None keeps them float32).
        A Linear whose weight is an Embedding's weight (a tied output projection)
        shares the embedding's quantized tensors. include/exclude: predicates on
        the module's qualified name. The returned module's `kiln_quantization`
        attribute lists what was done (QuantizationSummary).

    export(model, inputs, path, quantize="int4")  (kiln.export.export)
        The same, on a copy of the model, as part of the export; the report
        says how many bytes of weights were saved.

    QuantizedWeight(qweight, scales, mins, scheme, group_size)
        The tensors of one quantized matrix [N, K]: .shape, .nbytes,
        .dequantize() (float32, bit-exact to the formulas above),
        .permute_rows(index) (e.g. undoing GGUF's rotary row permutation of
        attn_q/attn_k: rows are whole output features, so this is exact).
    quantize_weight(w, scheme, group_size) -> QuantizedWeight
        Round-to-nearest quantization of a float [N, K] weight (with group_size
        32, byte-identical to gguf.quants.quantize for Q8_0, Q4_0, Q4_1).
    from_gguf_blocks(data, ggml_type, shape) -> QuantizedWeight
        A GGUF tensor's raw blocks (gguf.ReaderTensor: data, tensor_type, and
        shape [out, in] in torch order, i.e. reversed(t.shape)) kept in their
        own bits. Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, and F16 / BF16
        (schemes f16 / bf16: 16-bit weights in blocks of 32); anything else, a
        row that is not whole blocks, or a block array whose size does not match
        the shape, raises ValueError.

    QuantizedLinear(weight: QuantizedWeight, bias=None, compute="float32")
    QuantizedEmbedding(weight: QuantizedWeight, linear_compute="float32")
        .linear(x): the tied output projection x @ W^T with the same tensors
        (computed as linear_compute says).

For `kiln llm export`: build the Llama module with QuantizedLinear /
QuantizedEmbedding made by from_gguf_blocks for the GGUF's quantized
tensors (float tensors stay nn.Linear), or build it in float32 and call
quantize(model, "int8" | "int4") for --quantize.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from . import ops  # noqa: F401  (declares torch.ops.kiln_quantized.*)
from .blocks import BLOCK_FORMATS, HALF_FORMATS
from .ops import COMPUTES, INT8_ROW_MAX_K, SCHEMES, SPLIT_SCHEMES, check_layout, decode, row_length  # noqa: F401  (SCHEMES: the API)

# ggml type id -> (GGUF name, scheme, bytes per block); blocks of 32 elements, of 256 for the K-quants
GGUF_TYPES: Dict[int, Tuple[str, str, int]] = {2: ("Q4_0", "q4_0", 18), 3: ("Q4_1", "q4_1", 20),
                                               8: ("Q8_0", "q8_0", 34),
                                               **{tid: (name, scheme, nbytes)
                                                  for tid, (name, scheme, _, nbytes) in
                                                  (*BLOCK_FORMATS.items(), *HALF_FORMATS.items())}}
# The types kept whole (qweight: each row's blocks byte for byte) -> elements per block.
_WHOLE_BLOCKS = {tid: e for tid, (_, _, e, _) in (*BLOCK_FORMATS.items(), *HALF_FORMATS.items())}

# User-facing names -> scheme.
_ALIASES = {"int8": "q8_0", "int4": "q4_1", "int4_sym": "q4_0", "int4_asym": "q4_1"}
# Names that also choose the compute (quantize()): name -> (scheme, compute).
_DYNAMIC = {"int8_dynamic": ("int8", "int8_row")}


def scheme_of(name: str) -> str:
    """The scheme quantize() makes for a user's name (kiln quantizes to the split formats only; the
    block formats come from GGUF files)."""
    scheme = _ALIASES.get(name, name)
    if scheme not in SPLIT_SCHEMES:
        raise ValueError(f"unknown quantization scheme {name!r}; expected one of "
                         f"{', '.join(list(_ALIASES) + list(_DYNAMIC) + list(SPLIT_SCHEMES))}")
    return scheme


@dataclass
class QuantizedWeight:
    """One quantized matrix W [N, K] (see the module docstring for the layout)."""

    qweight: torch.Tensor
    scales: torch.Tensor
    mins: Optional[torch.Tensor]
    scheme: str
    group_size: int

    def __post_init__(self) -> None:
        check_layout(self.qweight, self.scales, self.mins, self.scheme, self.group_size)

    @property
    def shape(self) -> Tuple[int, int]:
        return self.qweight.shape[0], row_length(self.qweight, self.scheme)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.qweight, self.scales, self.mins) if t is not None)

    def dequantize(self) -> torch.Tensor:
        return decode(self.qweight, self.scales, self.mins, self.scheme, self.group_size)

    def permute_rows(self, index) -> "QuantizedWeight":
        index = torch.as_tensor(np.asarray(index), dtype=torch.long)
        if sorted(index.tolist()) != list(range(self.shape[0])):
            raise ValueError(f"permute_rows needs a permutation of the {self.shape[0]} rows")
        take = lambda t: None if t is None else t[index].contiguous()  # noqa: E731
        return QuantizedWeight(take(self.qweight), take(self.scales), take(self.mins), self.scheme, self.group_size)


# --------------------------------------------------------------------------- quantizing floats


def _pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K] values 0..15 -> [N, K/2], GGUF order within each run of 32."""
    n, k = q.shape
    runs = q.reshape(n, k // 32, 2, 16)
    return (runs[:, :, 0, :] | (runs[:, :, 1, :] << 4)).reshape(n, k // 2).contiguous()


def quantize_weight(w: torch.Tensor, scheme: str, group_size: int) -> QuantizedWeight:
    """Round-to-nearest quantization of w [N, K] (ggml's reference quantizers, per group)."""
    scheme = scheme_of(scheme)
    w = w.detach().to(torch.float32).cpu()
    if w.dim() != 2:
        raise ValueError(f"quantize_weight expects a 2-D weight, got shape {list(w.shape)}")
    n, k = w.shape
    check_group(scheme, group_size, k)
    g = w.reshape(n, k // group_size, group_size)
    if scheme == "q8_0":
        d = g.abs().amax(-1, keepdim=True) / 127
        inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
        # roundf: half away from zero, as ggml.
        x = g * inv
        q = (torch.sign(x) * torch.floor(x.abs() + 0.5)).clamp(-127, 127).to(torch.int8).reshape(n, k)
        return QuantizedWeight(q, d.squeeze(-1).to(torch.float16), None, scheme, group_size)
    if scheme == "q4_0":
        idx = g.abs().argmax(-1, keepdim=True)
        d = torch.gather(g, -1, idx) / -8
        inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
        q = torch.trunc(g * inv + 8.5).clamp(0, 15).to(torch.uint8).reshape(n, k)
        return QuantizedWeight(_pack_nibbles(q), d.squeeze(-1).to(torch.float16), None, scheme, group_size)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    d = (hi - lo) / 15
    inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
    q = torch.trunc((g - lo) * inv + 0.5).clamp(0, 15).to(torch.uint8).reshape(n, k)
    return QuantizedWeight(_pack_nibbles(q), d.squeeze(-1).to(torch.float16), lo.squeeze(-1).to(torch.float16),
                           scheme, group_size)


def check_group(scheme: str, group_size: int, k: int) -> None:
    if not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if scheme == "q8_0" and group_size == k:
        return
    if group_size % 32 or k % group_size:
        raise ValueError(f"{scheme}: group_size {group_size} must be a multiple of 32 that divides the "
                         f"row length {k}" + (" (or equal it)" if scheme == "q8_0" else ""))


# --------------------------------------------------------------------------- GGUF blocks


def from_gguf_blocks(data, ggml_type, shape) -> QuantizedWeight:
    """A GGUF tensor's blocks (any type of GGUF_TYPES: F16 and BF16 too, kept in 16 bits when
    its rows are whole blocks of 32) as a QuantizedWeight, bit for bit.

    data: the raw blocks (numpy array or bytes-like, e.g. gguf.ReaderTensor.data);
    ggml_type: the ggml type id (ReaderTensor.tensor_type) or its name ("Q4_1");
    shape: (out_features, in_features), torch order (reversed ReaderTensor.shape).
    """
    if isinstance(ggml_type, str):
        by_name = {name: tid for tid, (name, _, _) in GGUF_TYPES.items()}
        if ggml_type.upper() not in by_name:
            raise ValueError(f"GGUF type {ggml_type} is not supported; supported: {', '.join(by_name)}")
        ggml_type = by_name[ggml_type.upper()]
    ggml_type = int(ggml_type)
    if ggml_type not in GGUF_TYPES:
        raise ValueError(f"GGUF type {_ggml_type_name(ggml_type)} is not supported; supported: "
                         f"{', '.join(name for name, _, _ in GGUF_TYPES.values())}")
    name, scheme, block_bytes = GGUF_TYPES[ggml_type]
    elements = _WHOLE_BLOCKS.get(ggml_type, 32)
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or shape[0] <= 0 or shape[1] <= 0 or shape[1] % elements:
        raise ValueError(f"a {name} tensor must be 2-D with rows a multiple of {elements} elements, got shape "
                         f"{list(shape)}")
    n, k = shape
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    raw = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    expected = n * (k // elements) * block_bytes
    if raw.size != expected:
        raise ValueError(f"{name} tensor of shape {list(shape)} needs {expected} bytes of blocks "
                         f"({n} rows x {k // elements} blocks x {block_bytes} bytes), got {raw.size}: "
                         "truncated or malformed")
    if ggml_type in _WHOLE_BLOCKS:  # kept whole: one row of blocks per output feature
        return QuantizedWeight(torch.from_numpy(raw.reshape(n, expected // n).copy()), None, None, scheme, elements)
    blocks = raw.reshape(n, k // 32, block_bytes)
    d = torch.from_numpy(blocks[:, :, 0:2].copy().view(np.float16).reshape(n, k // 32))
    if scheme == "q8_0":
        q = torch.from_numpy(blocks[:, :, 2:].copy().view(np.int8).reshape(n, k))
        return QuantizedWeight(q, d, None, scheme, 32)
    start = 4 if scheme == "q4_1" else 2
    q = torch.from_numpy(blocks[:, :, start:].copy().reshape(n, k // 2))
    m = torch.from_numpy(blocks[:, :, 2:4].copy().view(np.float16).reshape(n, k // 32)) if scheme == "q4_1" else None
    return QuantizedWeight(q, d, m, scheme, 32)


def _ggml_type_name(tid: int) -> str:
    try:
        from gguf import GGMLQuantizationType

        return GGMLQuantizationType(tid).name
    except Exception:
        return f"#{tid}"


# --------------------------------------------------------------------------- modules


class _QuantizedModule(nn.Module):
    """Holds a QuantizedWeight as buffers; dtype conversions (model.float(), and the
    exporter's float16 -> float32 conversion) leave them as they are."""

    kiln_keeps_dtype = True

    def _set_weight(self, weight: QuantizedWeight) -> None:
        self.register_buffer("qweight", weight.qweight)
        self.register_buffer("scales", weight.scales)
        self.register_buffer("mins", weight.mins)
        self.scheme, self.group_size = weight.scheme, weight.group_size

    @property
    def quantized_weight(self) -> QuantizedWeight:
        return QuantizedWeight(self.qweight, self.scales, self.mins, self.scheme, self.group_size)

    def _apply(self, fn, recurse=True):
        kept = {name: t.dtype for name, t in self._buffers.items() if t is not None and name != "bias"}

        def keep(t):
            out = fn(t)
            for name, dtype in kept.items():
                if self._buffers.get(name) is t and out.dtype != dtype:
                    return out.to(dtype)
            return out

        return super()._apply(keep, recurse)


class QuantizedLinear(_QuantizedModule):
    """y = x @ W^T + bias with W quantized (kiln_quantized::linear)."""

    def __init__(self, weight: QuantizedWeight, bias: Optional[torch.Tensor] = None, compute: str = "float32"):
        super().__init__()
        if compute not in COMPUTES:
            raise ValueError(f"compute must be one of {', '.join(COMPUTES)}, got {compute!r}")
        if compute == "int8_row" and not takes_int8_row(weight):
            raise ValueError(f"compute='int8_row' takes q8_0 with one scale per output channel and rows of at most "
                             f"{INT8_ROW_MAX_K}, not {weight.scheme} in groups of {weight.group_size}")
        self._set_weight(weight)
        self.out_features, self.in_features = weight.shape
        self.bias = None if bias is None else nn.Parameter(bias.detach().to(torch.float32), requires_grad=False)
        self.compute = compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kiln_quantized.linear(x, self.qweight, self.scales, self.mins, self.bias, self.scheme,
                                               self.group_size, self.compute)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, scheme={self.scheme}, "
                f"group_size={self.group_size}, bias={self.bias is not None}, compute={self.compute}")


class QuantizedEmbedding(_QuantizedModule):
    """W[indices] with W quantized (kiln_quantized::embedding); .linear(x) is the tied output projection,
    computed as linear_compute says ("float32" or "int8") unless its call gives one."""

    def __init__(self, weight: QuantizedWeight, linear_compute: str = "float32"):
        super().__init__()
        if linear_compute not in COMPUTES:
            raise ValueError(f"linear_compute must be one of {', '.join(COMPUTES)}, got {linear_compute!r}")
        self._set_weight(weight)
        self.num_embeddings, self.embedding_dim = weight.shape
        self.linear_compute = linear_compute

    @property
    def weight(self):
        raise AttributeError("a QuantizedEmbedding has no float weight: for a tied output projection call "
                             "embedding.linear(x), or make it an nn.Linear sharing the embedding's Parameter "
                             "before quantize()")

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return torch.ops.kiln_quantized.embedding(self.qweight, self.scales, self.mins, indices, self.scheme,
                                                  self.group_size)

    def linear(self, x: torch.Tensor, compute: Optional[str] = None) -> torch.Tensor:
        return torch.ops.kiln_quantized.linear(x, self.qweight, self.scales, self.mins, None, self.scheme,
                                               self.group_size, compute or self.linear_compute)

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}, scheme={self.scheme}, "
                f"group_size={self.group_size}")


# --------------------------------------------------------------------------- quantize(model)


@dataclass
class QuantizationSummary:
    """What quantize() did: {qualified name: (kind, scheme, group_size)}, and what it left in float32 and why."""

    quantized: Dict[str, Tuple[str, str, int]] = field(default_factory=dict)
    skipped: Dict[str, str] = field(default_factory=dict)
    float_bytes: int = 0       # float32 bytes of the weights that were quantized (tied ones once)
    quantized_bytes: int = 0   # bytes of their quantized tensors

    def __str__(self) -> str:
        counts: Dict[Tuple[str, str, int], int] = {}
        for entry in self.quantized.values():
            counts[entry] = counts.get(entry, 0) + 1
        parts = [f"{n} {kind} {scheme}/{group}" for (kind, scheme, group), n in sorted(counts.items())]
        text = (f"quantized {', '.join(parts) or 'nothing'}: {_size(self.float_bytes)} of float32 weights -> "
                f"{_size(self.quantized_bytes)}")
        if self.skipped:
            text += f"; kept in float32: {', '.join(f'{k} ({v})' for k, v in self.skipped.items())}"
        return text


def _size(n: int) -> str:
    from .summary import _mib

    return _mib(n)


def takes_int8_row(weight: QuantizedWeight) -> bool:
    """Whether compute="int8_row" takes this weight: q8_0, one scale per output channel, k <= 65536."""
    k = weight.shape[1]
    return weight.scheme == "q8_0" and weight.group_size == k and k <= INT8_ROW_MAX_K


def _group_for(scheme: str, group_size: Optional[int], k: int) -> int:
    if group_size is None:
        return k if scheme == "q8_0" else 32
    return group_size


def quantize(model: nn.Module, scheme: str = "int4", *, group_size: Optional[int] = None,
             embeddings: Optional[str] = "int8", compute: Optional[str] = None,
             include: Optional[Callable[[str], bool]] = None, exclude: Optional[Callable[[str], bool]] = None,
             inplace: bool = False) -> nn.Module:
    """Quantizes the weights of every nn.Linear and nn.Embedding (see the module docstring).

    group_size: for "int8" default one scale per output channel (the row length),
    for the 4-bit schemes 32. A layer whose row length the group does not divide
    (or, for 4 bits, is not a multiple of 32) falls back to q8_0 per channel.
    "int8_dynamic" is "int8" per output channel with compute="int8_row".
    """
    if scheme in _DYNAMIC:
        scheme, implied = _DYNAMIC[scheme]
        if compute not in (None, implied):
            raise ValueError(f"int8_dynamic computes in {implied}; compute={compute!r} contradicts it")
        if group_size is not None:
            raise ValueError(f"int8_dynamic keeps one scale per output channel; group_size={group_size} contradicts "
                             f"it (use scheme='int8', group_size=..., compute='int8' for int8 in groups)")
        compute = implied
    compute = "float32" if compute is None else compute
    linear_scheme = scheme_of(scheme)
    embedding_scheme = None if embeddings is None else scheme_of(embeddings)
    if compute not in COMPUTES:
        raise ValueError(f"compute must be one of {', '.join(COMPUTES)}, got {compute!r}")
    if compute == "int8_row" and (linear_scheme != "q8_0" or group_size is not None):
        raise ValueError(f"compute='int8_row' takes int8 weights with one scale per output channel, not "
                         f"{scheme!r}{'' if group_size is None else f' in groups of {group_size}'}")
    if not inplace:
        model = copy.deepcopy(model)
    summary = QuantizationSummary()
    done: Dict[int, QuantizedWeight] = {}  # id(weight Parameter) -> its quantized form (tied weights)

    def wanted(name: str) -> bool:
        return (include is None or include(name)) and (exclude is None or not exclude(name))

    def quantized(name: str, kind: str, w: torch.Tensor, scheme_: str) -> QuantizedWeight:
        key = id(w)
        if key in done:
            qw = done[key]
        else:
            k = w.shape[1]
            group = _group_for(scheme_, group_size if scheme_ == linear_scheme else None, k)
            try:
                check_group(scheme_, group, k)
            except ValueError:
                scheme_, group = "q8_0", k  # per channel works for any row length
            qw = done[key] = quantize_weight(w, scheme_, group)
            summary.float_bytes += w.numel() * 4
            summary.quantized_bytes += qw.nbytes
        summary.quantized[name] = (kind, qw.scheme, qw.group_size)
        return qw

    # Embeddings first, so a tied Linear reuses the embedding's quantized tensors.
    modules = sorted(model.named_modules(), key=lambda item: not isinstance(item[1], nn.Embedding))
    replacements: List[Tuple[str, nn.Module]] = []
    for name, module in modules:
        if not name or not wanted(name):
            continue
        if isinstance(module, nn.Embedding) and embedding_scheme is not None:
            if module.max_norm is not None:  # renormalizes its rows on lookup
                summary.skipped[name] = "max_norm"
                continue
            replacements.append((name, QuantizedEmbedding(quantized(name, "embedding", module.weight,
                                                                    embedding_scheme))))
        elif isinstance(module, nn.Linear):
            qw = quantized(name, "linear", module.weight,
                           done[id(module.weight)].scheme if id(module.weight) in done else linear_scheme)
            # int8_row needs one scale per channel: a Linear sharing a 4-bit embedding, or with rows
            # longer than its int32 sums allow, takes compute="int8" (per 32-block) instead.
            layer_compute = "int8" if compute == "int8_row" and not takes_int8_row(qw) else compute
            replacements.append((name, QuantizedLinear(qw, module.bias, layer_compute)))
    for name, new in replacements:
        parent_name, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, leaf, new)
    model.kiln_quantization = summary
    return model
