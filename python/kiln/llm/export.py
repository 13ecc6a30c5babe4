"""`kiln llm export`: a GGUF decoder (architectures llama, qwen2, qwen3, phi3, gemma2, gemma3) -> one .kiln
program with its tokenizer, chat template and config (needs torch).

    export_gguf("model.gguf", "model.kiln")                    # the GGUF's blocks, int8 activations
    export_gguf("model.gguf", "model.kiln", compute="float32")  # the GGUF's blocks, float32 activations
    export_gguf("model.gguf", "model.kiln", dtype="float32")    # float32 from the dequantized weights
    export_gguf("model.gguf", "model.kiln", quantize="int8")    # re-quantized by kiln.export.quantize

The program's method `forward(tokens i64[1, T], input_pos i64[T], cache_positions
i64[L]) -> logits f32[1, 1, vocab]` (kiln.llm.model.Decoder, last token only) has a
KV cache of `context` positions and takes T up to `max_tokens_per_call` (the
prefill chunk) and L up to `context`.

Weights: every weight decision is one call, `_apply_weights`, into
kiln.export.quantize (the quantized-operators extension). Without options the
GGUF's own quantized blocks (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K;
a mixed file's tensors each in its own format), and its F16 / BF16 matrices in 16
bits, are kept as they are when that module is
present; a kiln without it exports float32 and says so in a note. Their linears
quantize their input per 32-block to int8 at run time and multiply in integers
(compute="int8", the default: kiln.export.quantize's compute; docs/llm.md has its
speed and its perplexity cost, within 1% of float32's); compute="float32"
multiplies the decoded blocks with float32 inputs instead. The 16-bit ones stay float32.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import _kiln
from ..errors import ExportError, InvalidArgument, InvalidProgram, KilnError, NotSupported
from ..export import export
from ..export.report import ExportReport
from . import KV_CACHE_DTYPES
from .gguf import BF16, F16, QUANTIZED_TYPES, GgufFile
from .model import DecoderConfig, build_decoder

# What each architecture adds to the Llama decoder (DecoderConfig's features). Which GGUF files
# have which: llama.cpp's convert_hf_to_gguf.py (conversion/llama.py, qwen.py, phi.py). It writes
# Mistral 7B as "llama"; it permutes attn_q/attn_k rows for "llama" only (its interleaved RoPE),
# the others are stored in Hugging Face's order (llama.cpp runs them with NEOX RoPE).
# Gemma 2 and 3 (conversion/gemma.py): the converter stores every RMSNorm weight as 1 + w (Gemma's norms
# multiply by 1 + w), so the file's weights multiply as they are; it writes neither the query scale nor
# the layer pattern, which llama.cpp derives (_gemma_features).
_GEMMA = {"activation": "gelu_tanh", "post_norms": True}
ARCHITECTURES = {
    "llama": {},                                            # Llama 1/2/3, Mistral 7B, SmolLM2
    "qwen2": {"attention_bias": True},                      # q/k/v biases
    "qwen3": {"qk_norm": True},                             # per-head RMSNorm of q and k before RoPE
    "phi3": {"fused_qkv": True, "fused_gate_up": True},    # attn_qkv; ffn_up holds gate then up
    "gemma2": {**_GEMMA, "window_pattern": 2},              # + soft-capping; even layers windowed
    "gemma3": {**_GEMMA, "window_pattern": 6, "qk_norm": True, "local_rope_theta": 10000.0},  # 5 local : 1 global
}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
# Architectures kiln knows it does not read, and what it lacks for them.
REFUSED_ARCHITECTURES = {
    "gemma": "Gemma 1 (a GELU-tanh feed-forward, sqrt(dim)-scaled embeddings, norms stored as 1 + w, without "
             "gemma2's post-norms and soft-capping): the decoder has these parts, but no test checks this "
             "architecture against a reference yet",
}
DEFAULT_CONTEXT = 2048
DEFAULT_MAX_TOKENS_PER_CALL = 128
MAX_SLOTS = 64  # kiln.llm.BatchRunner rows; each slot is a KV cache region of `context` positions
# Special tokens that end a model's turn when present in its vocabulary.
GEMMA_END_OF_TURN = ("<end_of_turn>",)
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>") + GEMMA_END_OF_TURN

CONFIG_KEY, TOKENIZER_KEY, CHAT_TEMPLATE_KEY = "kiln.llm.config", "kiln.llm.tokenizer", "kiln.llm.chat_template"

_GGUF_TO_OURS = {
    "attn_norm": "attention_norm", "attn_q": "attention.wq", "attn_k": "attention.wk",
    "attn_v": "attention.wv", "attn_output": "attention.wo", "attn_qkv": "attention.wqkv",
    "attn_q_norm": "attention.q_norm", "attn_k_norm": "attention.k_norm",
    "ffn_norm": "ffn_norm", "ffn_gate": "w_gate", "ffn_up": "w_up", "ffn_down": "w_down",
    "post_attention_norm": "post_attention_norm", "post_ffw_norm": "post_ffn_norm",
}
_FIXED = {"token_embd.weight": "tok_embeddings.weight", "output_norm.weight": "norm.weight",
          "output.weight": "output.weight"}


def _ours(part: str, cfg: DecoderConfig | None) -> str:
    if part == "ffn_up" and cfg is not None and cfg.fused_gate_up:
        return "w_gate_up"  # Phi-3's ffn_up holds the gate rows, then the up rows
    return _GGUF_TO_OURS[part]


def module_name(gguf_name: str, cfg: DecoderConfig | None = None) -> str | None:
    """Our parameter name of a GGUF tensor ("blk.3.attn_q.weight" -> "layers.3.attention.wq.weight")
    in a model of `cfg` (whose features decide what ffn_up is), or None if it has none. Whether
    the model of `cfg` has that parameter is expected_tensors' business."""
    if gguf_name in _FIXED:
        return _FIXED[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _GGUF_TO_OURS \
            and parts[3] in ("weight", "bias"):
        return f"layers.{parts[1]}.{_ours(parts[2], cfg)}.{parts[3]}"
    return None


def gguf_name(ours: str, cfg: DecoderConfig | None = None) -> str:
    """The GGUF name of one of our parameters (the inverse of module_name)."""
    fixed = {v: k for k, v in _FIXED.items()}
    if ours in fixed:
        return fixed[ours]
    _, layer, rest = ours.split(".", 2)
    part, _, suffix = rest.rpartition(".")
    theirs = {_ours(k, cfg): k for k in _GGUF_TO_OURS}[part]
    return f"blk.{layer}.{theirs}.{suffix}"


def rope_row_order(rows: int, n_heads: int) -> np.ndarray:
    """Row index undoing llama.cpp's convert_hf_to_gguf.py permutation of a llama file's
    attn_q/attn_k rows (LlamaModel.permute: [head, half, pair] -> [head, pair, half]):
    hf_rows = gguf_rows[order]."""
    return np.arange(rows).reshape(n_heads, rows // n_heads // 2, 2).swapaxes(1, 2).reshape(-1)


def _meta(g: GgufFile, key: str, kind=int):
    value = g.metadata.get(key)
    if value is None:
        raise ExportError(f"'{g.path}' has no metadata '{key}'")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ExportError(f"'{g.path}': metadata '{key}' is {value!r}, not an integer")
    if kind is float and not isinstance(value, (int, float)):
        raise ExportError(f"'{g.path}': metadata '{key}' is {value!r}, not a number")
    return kind(value)


def _rope_scale(g: GgufFile, arch: str) -> float:
    """The linear RoPE scaling factor (1: none); any other scaling is NotSupported naming it."""
    kind = g.metadata.get(f"{arch}.rope.scaling.type", "none")
    factor_key = f"{arch}.rope.scaling.factor"
    if kind == "linear":
        if factor_key not in g.metadata:
            raise ExportError(f"'{g.path}': {arch}.rope.scaling.type is 'linear' but there is no {factor_key}")
        factor = _meta(g, factor_key, float)
    elif kind in ("none", None):
        # Files of before rope.scaling.type said linear scaling with rope.scale_linear (llama.cpp reads it).
        factor = _meta(g, f"{arch}.rope.scale_linear", float) if f"{arch}.rope.scale_linear" in g.metadata else 1.0
    elif kind == "yarn":
        return 1.0  # _yarn reads it
    else:
        raise NotSupported(f"'{g.path}': RoPE scaling {arch}.rope.scaling.type = {kind!r} is not supported "
                           "(kiln reads 'linear', 'yarn' and Llama 3's rope_freqs factors; LongRoPE switches "
                           "factors by sequence length, which kiln's decoder does not)")
    if not np.isfinite(factor) or not 1e-6 <= factor <= 1e6:
        raise ExportError(f"'{g.path}': RoPE scaling factor {factor!r} is out of range")
    attn_factor = g.metadata.get(f"{arch}.rope.scaling.attn_factor", 1.0)
    if attn_factor != 1.0:
        raise NotSupported(f"'{g.path}': {arch}.rope.scaling.attn_factor = {attn_factor!r} (an attention scale "
                           "of YaRN or LongRoPE) is not supported")
    return factor


def _yarn(g: GgufFile, arch: str, context_length: int) -> tuple | None:
    """YaRN's (factor, original context, beta_fast, beta_slow) when rope.scaling.type is 'yarn'
    (Qwen2.5's long-context files), as llama.cpp reads them: the original context defaults to the
    trained one, the betas to 32 and 1. The variants that change YaRN's attention scale or its
    ramp (DeepSeek's log multiplier, an ext_factor or attn_factor of their own) are NotSupported."""
    if g.metadata.get(f"{arch}.rope.scaling.type") != "yarn":
        return None
    for key, neutral in (("yarn_log_multiplier", 0.0), ("yarn_ext_factor", 1.0), ("yarn_attn_factor", 1.0)):
        full = f"{arch}.rope.scaling.{key}"
        if full in g.metadata and g.metadata[full] != neutral:
            raise NotSupported(f"'{g.path}': {full} = {g.metadata[full]!r} is not supported (kiln reads YaRN with "
                               "its own attention scale 0.1 ln(factor) + 1)")
    factor_key, original_key = f"{arch}.rope.scaling.factor", f"{arch}.rope.scaling.original_context_length"
    if factor_key not in g.metadata:
        raise ExportError(f"'{g.path}': {arch}.rope.scaling.type is 'yarn' but there is no {factor_key}")
    factor = _meta(g, factor_key, float)
    original = _meta(g, original_key) if original_key in g.metadata else context_length
    beta_fast = _meta(g, f"{arch}.rope.scaling.yarn_beta_fast", float) \
        if f"{arch}.rope.scaling.yarn_beta_fast" in g.metadata else 32.0
    beta_slow = _meta(g, f"{arch}.rope.scaling.yarn_beta_slow", float) \
        if f"{arch}.rope.scaling.yarn_beta_slow" in g.metadata else 1.0
    if not (np.isfinite(factor) and 1.0 <= factor <= 1e6 and 1 <= original <= 1 << 30
            and np.isfinite(beta_fast) and np.isfinite(beta_slow) and 0 < beta_slow < beta_fast <= 1e6):
        raise ExportError(f"'{g.path}': YaRN parameters out of range (factor {factor!r}, original context "
                          f"{original}, betas {beta_fast!r}, {beta_slow!r})")
    return (factor, original, beta_fast, beta_slow)


def _rope_freq_factors(g: GgufFile, head_dim: int) -> tuple | None:
    """Llama 3's per-frequency divisors: llama.cpp's converter computes them from the
    llama3 rope_scaling (LlamaModel.generate_extra_tensors) into a rope_freqs.weight of
    head_dim / 2 values, which llama.cpp divides the inverse frequencies by."""
    for name in ("rope_factors_long.weight", "rope_factors_short.weight"):
        if name in g.tensors:
            raise NotSupported(f"'{g.path}': tensor '{name}' (LongRoPE, Phi-3's long-context scaling, which "
                               "switches factors by sequence length and scales attention) is not supported")
    t = g.tensors.get("rope_freqs.weight")
    if t is None:
        return None
    if t.shape != (head_dim // 2,):
        raise InvalidProgram(f"'{g.path}': tensor 'rope_freqs.weight' is {list(t.shape)}, but the head size "
                             f"{head_dim} implies [{head_dim // 2}]")
    factors = g.dequantize("rope_freqs.weight").astype(np.float64)
    if not np.all(np.isfinite(factors)) or not np.all((factors >= 1e-6) & (factors <= 1e6)):
        raise InvalidProgram(f"'{g.path}': tensor 'rope_freqs.weight' holds factors out of range")
    return tuple(float(f) for f in factors)


def sliding_window(g: GgufFile) -> int:
    """The file's attention window (0: none). llama.cpp's converter writes it for Phi-3
    (0 for Phi-4), Gemma 2 and 3, and not for Mistral 7B, whose "llama" file llama.cpp runs with
    full attention. A Gemma 2 file without it has Gemma 2's 4096 (llama.cpp's default)."""
    arch = g.metadata.get("general.architecture")
    key = f"{arch}.attention.sliding_window"
    if key not in g.metadata:
        return 4096 if arch == "gemma2" else 0
    window = _meta(g, key)
    if not 0 <= window <= 1 << 30:
        raise ExportError(f"'{g.path}': {key} = {window} is out of range")
    return window


# llama.cpp's Gemma 2 and 3 model sizes by block count whose query scale is 1 / sqrt(dim / heads)
# (query_pre_attn_scalar, which the converter does not write): the 27B models'. Every other size
# scales by 1 / sqrt(head size).
_GEMMA_27B_BLOCKS = {"gemma2": 46, "gemma3": 62}


def _gemma_features(g: GgufFile, cfg: DecoderConfig) -> dict:
    """The DecoderConfig fields of a gemma2/gemma3 file that its metadata decides."""
    arch = cfg.architecture
    features = {"embedding_scale": float(np.float32(np.sqrt(cfg.dim))),  # HF's float32 tensor(dim ** 0.5)
                "sliding_window": sliding_window(g)}
    if cfg.n_layers == _GEMMA_27B_BLOCKS[arch]:
        features["query_scale"] = float(1.0 / np.sqrt(cfg.dim // cfg.n_heads))
    else:
        features["query_scale"] = float(1.0 / np.sqrt(cfg.head_dim))
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    if pattern_key in g.metadata and g.metadata[pattern_key] != cfg.window_pattern:
        raise NotSupported(f"'{g.path}': {pattern_key} = {g.metadata[pattern_key]!r} is not supported (kiln reads "
                           f"{arch}'s fixed pattern, every {cfg.window_pattern}th layer global)")
    for key, field_name in ((f"{arch}.attn_logit_softcapping", "attn_softcap"),
                            (f"{arch}.final_logit_softcapping", "final_softcap")):
        if key in g.metadata:
            cap = _meta(g, key, float)
            if not (cap == 0 or (np.isfinite(cap) and 1e-3 <= cap <= 1e6)):
                raise ExportError(f"'{g.path}': {key} = {cap!r} is out of range")
            features[field_name] = cap
    return features


def config_from_gguf(g: GgufFile) -> DecoderConfig:
    arch = g.metadata.get("general.architecture")
    if arch in REFUSED_ARCHITECTURES:
        raise NotSupported(f"'{g.path}' holds a model of architecture {arch!r}, which kiln llm export does not "
                           f"read: {REFUSED_ARCHITECTURES[arch]} (kiln reads "
                           f"{', '.join(SUPPORTED_ARCHITECTURES)})")
    if arch not in ARCHITECTURES:
        raise NotSupported(f"'{g.path}' holds a model of architecture {arch!r}; kiln llm export supports "
                           f"{', '.join(SUPPORTED_ARCHITECTURES)}")
    tokens = g.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ExportError(f"'{g.path}' has no tokenizer vocabulary (tokenizer.ggml.tokens)")
    dim, n_heads = _meta(g, f"{arch}.embedding_length"), _meta(g, f"{arch}.attention.head_count")
    key_length = _meta(g, f"{arch}.attention.key_length") if f"{arch}.attention.key_length" in g.metadata else 0
    value_length = _meta(g, f"{arch}.attention.value_length") if f"{arch}.attention.value_length" in g.metadata \
        else key_length
    if value_length != key_length:
        raise NotSupported(f"'{g.path}': {arch}.attention.key_length {key_length} and value_length {value_length} "
                           "differ, which kiln's attention does not support")
    if n_heads >= 1 and key_length == dim // n_heads and dim % n_heads == 0:
        key_length = 0  # the usual head size: nothing to configure
    cfg = DecoderConfig(
        vocab_size=len(tokens),
        dim=dim,
        n_layers=_meta(g, f"{arch}.block_count"),
        n_heads=n_heads,
        n_kv_heads=_meta(g, f"{arch}.attention.head_count_kv") if f"{arch}.attention.head_count_kv" in g.metadata
        else n_heads,
        hidden_dim=_meta(g, f"{arch}.feed_forward_length"),
        rope_theta=_meta(g, f"{arch}.rope.freq_base", float) if f"{arch}.rope.freq_base" in g.metadata else 10000.0,
        norm_eps=_meta(g, f"{arch}.attention.layer_norm_rms_epsilon", float),
        context_length=_meta(g, f"{arch}.context_length"),
        tied_embeddings="output.weight" not in g.tensors,
        architecture=arch,
        key_length=key_length,
        **ARCHITECTURES[arch],
    )
    sizes = (cfg.dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.hidden_dim, cfg.context_length)
    if min(sizes) < 1 or max(sizes) > 1 << 20 or not 0 <= key_length <= 1 << 16 \
            or (not key_length and cfg.dim % cfg.n_heads) or cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 2:
        raise ExportError(f"'{g.path}': inconsistent model sizes {cfg}")
    if g.metadata.get(f"{arch}.vocab_size", cfg.vocab_size) != cfg.vocab_size:
        raise ExportError(f"'{g.path}': {arch}.vocab_size does not match the tokenizer's {cfg.vocab_size} tokens")
    rope_dims = g.metadata.get(f"{arch}.rope.dimension_count", cfg.head_dim)
    if rope_dims != cfg.head_dim:
        raise NotSupported(f"'{g.path}': partial rotary embeddings ({rope_dims} of {cfg.head_dim} dims) "
                           "are not supported")
    if arch in ("gemma2", "gemma3"):
        cfg = dataclasses.replace(cfg, **_gemma_features(g, cfg))
    else:
        for key in (f"{arch}.attn_logit_softcapping", f"{arch}.final_logit_softcapping"):
            if g.metadata.get(key, 0.0) not in (0, 0.0):
                raise NotSupported(f"'{g.path}': {key} = {g.metadata[key]!r} (logit soft-capping) is not supported "
                                   "for this architecture (kiln reads it in gemma2 files)")
        cfg = dataclasses.replace(cfg, sliding_window=sliding_window(g))
    return dataclasses.replace(cfg, rope_scale=_rope_scale(g, arch), yarn=_yarn(g, arch, cfg.context_length),
                               rope_freq_factors=_rope_freq_factors(g, cfg.head_dim))


def _layer_tensors(cfg: DecoderConfig):
    """(GGUF name within a layer, shape in torch order) of every tensor one layer of `cfg` has."""
    hd, dim, hidden = cfg.head_dim, cfg.dim, cfg.hidden_dim
    q, kv = cfg.n_heads * hd, cfg.n_kv_heads * hd
    yield "attn_norm.weight", (dim,)
    projections = (("attn_qkv", q + 2 * kv),) if cfg.fused_qkv else (("attn_q", q), ("attn_k", kv), ("attn_v", kv))
    for part, rows in projections:
        yield f"{part}.weight", (rows, dim)
        if cfg.attention_bias:
            yield f"{part}.bias", (rows,)
    if cfg.qk_norm:
        yield "attn_q_norm.weight", (hd,)
        yield "attn_k_norm.weight", (hd,)
    yield "attn_output.weight", (dim, q)
    if cfg.post_norms:
        yield "post_attention_norm.weight", (dim,)
        yield "post_ffw_norm.weight", (dim,)
    yield "ffn_norm.weight", (dim,)
    if cfg.fused_gate_up:
        yield "ffn_up.weight", (2 * hidden, dim)
    else:
        yield "ffn_gate.weight", (hidden, dim)
        yield "ffn_up.weight", (hidden, dim)
    yield "ffn_down.weight", (dim, hidden)


def expected_tensors(cfg: DecoderConfig):
    """(GGUF tensor name, shape in torch order) of every tensor a decoder of `cfg` needs
    (output.weight only when the embeddings are not tied), layer by layer."""
    yield "token_embd.weight", (cfg.vocab_size, cfg.dim)
    yield "output_norm.weight", (cfg.dim,)
    if not cfg.tied_embeddings:
        yield "output.weight", (cfg.vocab_size, cfg.dim)
    layer = list(_layer_tensors(cfg))
    for i in range(cfg.n_layers):
        for part, shape in layer:
            yield f"blk.{i}.{part}", shape


def check_tensors(g: GgufFile, cfg: DecoderConfig) -> None:
    """Every tensor `cfg` (the file's metadata) implies is in the file with the shape it
    implies: checked before anything is built from the metadata, so that the sizes
    the model, its rotary tables and its caches are made with are those of weights the
    file really holds (whose bytes the reader checked lie inside the file), not merely
    what its metadata claims. InvalidProgram names the metadata and the tensor."""
    arch = g.metadata.get("general.architecture")
    sizes = (f"{arch}.block_count {cfg.n_layers}, {arch}.embedding_length {cfg.dim}, "
             f"{arch}.feed_forward_length {cfg.hidden_dim}, {arch}.attention.head_count {cfg.n_heads}, "
             f"{arch}.attention.head_count_kv {cfg.n_kv_heads}, vocabulary {cfg.vocab_size}")
    needed = 2 + (not cfg.tied_embeddings) + len(list(_layer_tensors(cfg))) * cfg.n_layers
    if needed > len(g.tensors):
        raise InvalidProgram(f"'{g.path}': {arch}.block_count {cfg.n_layers} implies {needed} tensors but the file "
                             f"has {len(g.tensors)}")
    for name, shape in expected_tensors(cfg):
        t = g.tensors.get(name)
        if t is None:
            raise InvalidProgram(f"'{g.path}': the metadata ({sizes}) implies a tensor '{name}', which the file "
                                 "does not have")
        if t.shape != shape:
            raise InvalidProgram(f"'{g.path}': tensor '{name}' is {list(t.shape)}, but the metadata ({sizes}) "
                                 f"implies {list(shape)}")


def _unpermute(name: str, cfg: DecoderConfig):
    """The row order undoing the converter's q/k permutation of tensor `name` (llama files
    only, weights and biases alike), or None."""
    if cfg.architecture != "llama":
        return None
    if name.endswith((".attn_q.weight", ".attn_q.bias")):
        return cfg.n_heads
    if name.endswith((".attn_k.weight", ".attn_k.bias")):
        return cfg.n_kv_heads
    return None


def state_from_gguf(g: GgufFile, cfg: DecoderConfig) -> dict:
    """The float32 state dict (our names, Hugging Face q/k row order) of layers 0..cfg.n_layers-1."""
    layer_parts = {part for part, _ in _layer_tensors(cfg)}
    state = {}
    for name in g.tensors:
        ours = module_name(name, cfg)
        top_level = name in _FIXED and (name != "output.weight" or not cfg.tied_embeddings)
        if ours is None or not (top_level or name.split(".", 2)[2] in layer_parts):
            if name == "rope_freqs.weight" or name.endswith(".attn_rot_embd"):
                continue  # rotary tables: config_from_gguf read the factors, kiln computes its own tables
            raise NotSupported(f"'{g.path}': tensor '{name}' has no place in a {cfg.architecture} model as kiln "
                               f"reads it (attention biases: qwen2; q/k norms: qwen3, gemma3; fused attn_qkv: phi3; "
                               "post-norms: gemma2, gemma3)")
        if ours.startswith("layers.") and int(ours.split(".")[1]) >= cfg.n_layers:
            continue
        w = g.dequantize(name)
        heads = _unpermute(name, cfg)
        if heads is not None:
            w = w[rope_row_order(w.shape[0], heads)]
        state[ours] = torch.from_numpy(np.ascontiguousarray(w))
    return state


def _apply_weights(model, g: GgufFile, scheme: str, compute: str = "float32"):
    """The model with its weights in `scheme` ("float32", "gguf", "int8", "int4"), a
    description of what the weights are, and notes. The one place kiln llm export
    calls into kiln.export.quantize (the quantized-operators extension)."""
    if scheme == "float32":
        return model, "float32", []
    try:
        from ..export import quantize as q
        q.from_gguf_blocks, q.quantize, q.QuantizedLinear, q.QuantizedEmbedding  # noqa: B018 (the API this needs)
    except (ImportError, AttributeError):
        if scheme == "gguf":
            types = sorted({t.type_name for t in g.tensors.values() if t.ggml_type in QUANTIZED_TYPES})
            return model, "float32", [f"the GGUF's {'/'.join(types) or 'quantized'} weights were dequantized to "
                                      "float32: keeping them needs kiln's quantized operators "
                                      "(kiln.export.quantize), which this kiln does not have"]
        raise ExportError(f"--quantize {scheme} needs kiln.export.quantize (the quantized operators), "
                          "which this kiln does not have") from None
    if scheme in ("int8", "int4"):
        return q.quantize(model, scheme), scheme, []
    return _keep_gguf_blocks(model, g, q, compute)


def _keep_gguf_blocks(model, g: GgufFile, q, compute: str):
    """Every linear and embedding weight stored in a quantized type in the GGUF file
    (gguf.QUANTIZED_TYPES) becomes a quantized module over the file's own blocks (no
    re-quantization), each tensor in its own format; so do F16 and BF16 matrices whose rows
    are whole blocks of 32 (kept in 16 bits: schemes f16 and bf16). F32 ones, and 16-bit
    ones of other row lengths, stay float32. The GGUF reader checked that every quantized
    tensor's rows are whole blocks. compute: the linears' (the 16-bit ones stay float32)."""
    cfg = model.cfg
    kinds, int8_linears = set(), 0
    for name, t in g.tensors.items():
        ours = module_name(name, cfg)
        sixteen_bit = t.ggml_type in (F16, BF16) and len(t.shape) == 2 and t.shape[-1] % 32 == 0
        if ours is None or not (t.ggml_type in QUANTIZED_TYPES or sixteen_bit) or not ours.endswith(".weight"):
            continue
        if ours.startswith("layers.") and int(ours.split(".")[1]) >= cfg.n_layers:
            continue
        weight = q.from_gguf_blocks(g.raw(name), t.ggml_type, t.shape)
        heads = _unpermute(name, cfg)
        if heads is not None:
            weight = weight.permute_rows(rope_row_order(t.shape[0], heads))
        path = ours[: -len(".weight")]
        parent_name, _, child = path.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, child)
        if isinstance(old, torch.nn.Embedding):  # a tied head projects with it in `compute` too
            new = q.QuantizedEmbedding(weight, linear_compute="float32" if sixteen_bit else compute)
        else:
            new = q.QuantizedLinear(weight, compute="float32" if sixteen_bit else compute)
        setattr(parent, child, new)
        kinds.add(t.type_name)
        int8_linears += compute == "int8" and not sixteen_bit
    return model, "gguf " + "/".join(sorted(kinds)) + (", int8 activations" if int8_linears else ""), []


@dataclass
class LlmExportReport:
    path: str
    config: dict
    weights: str
    export: ExportReport
    notes: list = field(default_factory=list)

    def __str__(self) -> str:
        c = self.config
        name = f"{c['name']} ({c['architecture']})" if c['name'] else c['architecture']
        lines = [f"{self.path}: {name}, {c['n_layers']} layers, "
                 f"vocabulary {c['vocab_size']}, "
                 f"context {c['context_length']}, up to {c['max_tokens_per_call']} tokens per call, "
                 f"KV cache {c.get('kv_cache_dtype', 'float32')}, "
                 f"weights {self.weights}", str(self.export)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def export_gguf(gguf_path, out_path, *, dtype: str | None = None, quantize: str | None = None,
                context: int = DEFAULT_CONTEXT, max_tokens_per_call: int = DEFAULT_MAX_TOKENS_PER_CALL,
                slots: int = 1, n_layers: int | None = None, kv_cache_dtype: str = "float32",
                compute: str | None = None) -> LlmExportReport:
    """Builds the decoder from a GGUF file's config and tensors and exports it with
    its tokenizer, chat template and config as metadata (see the module docstring).

    dtype="float32" and quantize="int8"/"int4" are exclusive; neither keeps the GGUF's
    own quantized blocks (when kiln has its quantized operators). context: KV cache
    positions (at most the model's own context length); max_tokens_per_call: the
    largest prefill chunk; slots: sequences the KV cache holds at once (each a region
    of `context` positions: kiln.llm.BatchRunner decodes that many together, memory
    grows with it); n_layers: keep only the first layers (a quick model for tests,
    whose text means nothing); kv_cache_dtype: "float32", or "float16" / "bfloat16"
    (half the cache's memory; attention reads the 16-bit rows widened to float32);
    compute: the kept GGUF blocks' linears, "int8" (the default when the blocks are kept: the
    input quantized to int8 per 32-block at run time, faster decoding and batching at a
    perplexity change within 1%; docs/llm.md) or "float32" (the decoded blocks times float32
    inputs); with dtype or quantize it must be left out (or "float32").

    Every failure is a kiln.KilnError (ExportError, InvalidArgument, InvalidProgram,
    NotSupported, ...) naming what was wrong; nothing is written unless it succeeds.
    """
    try:
        return _export_gguf(gguf_path, out_path, dtype=dtype, quantize=quantize, context=context,
                            max_tokens_per_call=max_tokens_per_call, slots=slots, n_layers=n_layers,
                            kv_cache_dtype=kv_cache_dtype, compute=compute)
    except KilnError:
        raise
    except Exception as e:
        # A GGUF file is untrusted: whatever its contents make fail below (numpy,
        # torch, torch.export) is reported as this export's error, never as theirs.
        raise ExportError(f"kiln llm export of '{os.fspath(gguf_path)}' failed: {type(e).__name__}: {e}") from e


def export_program(model, out_path, *, max_tokens_per_call: int, context: int, metadata: dict):
    """Exports a kiln.llm.model.Decoder (KV cache of model.slots regions of `context`
    positions) with the method Runner and BatchRunner take:
    forward(tokens i64[B, T], input_pos i64[B, T], slots i64[B], cache_positions i64[L])
    with B <= model.slots, T <= max_tokens_per_call and L <= context dynamic. Returns
    the ExportReport."""
    import torch

    slots = model.slots
    tokens = torch.export.Dim("tokens", min=1, max=max_tokens_per_call)
    used = torch.export.Dim("cache", min=1, max=context)
    rows = min(slots, 2)  # torch.export keeps a dimension of size 1 static
    example = (torch.zeros(rows, 3, dtype=torch.int64), torch.arange(2, 5).repeat(rows, 1),
               torch.arange(rows), torch.arange(5))
    batch = {0: torch.export.Dim("batch", min=1, max=slots)} if slots > 1 else {}
    dims = ({**batch, 1: tokens}, {**batch, 1: tokens}, batch, {0: used})
    return export(model, example, out_path, dynamic_shapes=dims, metadata=metadata)


def _rope_scaling_summary(cfg: DecoderConfig) -> str:
    """What the program's rotary frequencies are scaled by: "none", "linear 4", "rope_freqs" (Llama 3),
    "yarn 4 of 32768" (factor, original context)."""
    parts = ([f"linear {cfg.rope_scale:g}"] if cfg.rope_scale != 1.0 else []) + \
        (["rope_freqs"] if cfg.rope_freq_factors is not None else []) + \
        ([f"yarn {cfg.yarn[0]:g} of {cfg.yarn[1]}"] if cfg.yarn is not None else [])
    return " + ".join(parts) or "none"


def _int_option(name: str, value, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


def _export_gguf(gguf_path, out_path, *, dtype, quantize, context, max_tokens_per_call, slots,
                 n_layers, kv_cache_dtype, compute) -> LlmExportReport:
    if dtype is not None and quantize is not None:
        raise ExportError("give --dtype or --quantize, not both")
    if dtype not in (None, "float32"):
        raise ExportError(f"dtype {dtype!r} is not supported (float32)")
    if quantize not in (None, "int8", "int4"):
        raise ExportError(f"quantize {quantize!r} is not supported (int8, int4)")
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ExportError(f"kv_cache_dtype {kv_cache_dtype!r} is not supported ({', '.join(KV_CACHE_DTYPES)})")
    if compute is None:  # the default: int8 activations wherever the GGUF's blocks are kept
        compute = "float32" if dtype is not None or quantize is not None else "int8"
    if compute not in ("float32", "int8"):
        raise ExportError(f"compute {compute!r} is not supported (float32, int8)")
    if compute == "int8" and (dtype is not None or quantize is not None):
        raise ExportError("compute='int8' applies to the GGUF's own blocks: give it without dtype or quantize "
                          "(quantize='int8' re-quantizes with int8 compute already)")
    scheme = quantize or dtype or "gguf"
    context = _int_option("context", context, 2, 1 << 24)
    max_tokens_per_call = _int_option("max_tokens_per_call", max_tokens_per_call, 1, 1 << 24)
    slots = _int_option("slots", slots, 1, MAX_SLOTS)
    if n_layers is not None:
        n_layers = _int_option("n_layers", n_layers, 1, 1 << 20)
    try:
        gguf_path, out_path = os.fspath(gguf_path), os.fspath(out_path)
    except TypeError as e:
        raise InvalidArgument(f"kiln llm export: {e}") from None
    g = GgufFile(gguf_path)
    cfg = config_from_gguf(g)
    check_tensors(g, cfg)
    tokenizer = _kiln.llm.Tokenizer.from_gguf(gguf_path)
    if tokenizer.vocab_size != cfg.vocab_size:
        raise ExportError(f"'{gguf_path}': the tokenizer has {tokenizer.vocab_size} tokens, the model {cfg.vocab_size}")
    if n_layers is not None:
        if not 1 <= n_layers <= cfg.n_layers:
            raise ExportError(f"n_layers must be in 1..{cfg.n_layers}, got {n_layers}")
        cfg = dataclasses.replace(cfg, n_layers=n_layers)
    notes = []
    if context > cfg.context_length:
        notes.append(f"context {context} exceeds the model's own {cfg.context_length}: using {cfg.context_length}")
        context = cfg.context_length
    window = cfg.sliding_window
    windowed_layers = sum(cfg.windowed(i) for i in range(cfg.n_layers))
    if window and context <= window:
        # A query at position p sees the positions p - window + 1 .. p (Hugging Face's and
        # llama.cpp's window): with at most `window` positions cached that is all of 0 .. p.
        notes.append(f"sliding window {window} >= context {context}: full attention is exact")
    elif window:
        notes.append(f"sliding window {window} on {windowed_layers} of {cfg.n_layers} layers: their attention "
                     f"masks keys {window} or more positions older than the query")
    chunk = min(max_tokens_per_call, context - 1)

    model = build_decoder(cfg, state_from_gguf(g, cfg), capacity=context, last_logits_only=True, slots=slots,
                        cache_dtype=getattr(torch, kv_cache_dtype))
    model, weights, weight_notes = _apply_weights(model, g, scheme, compute)
    notes += weight_notes

    special = {tokenizer.id_to_token(i): i for i in tokenizer.special_ids}
    # Gemma files may store <end_of_turn> as a user-defined piece, not a control one: llama.cpp
    # makes it its end-of-turn token whatever its type, and so does kiln.
    for name in GEMMA_END_OF_TURN:
        if tokenizer.token_to_id(name) >= 0:
            special[name] = tokenizer.token_to_id(name)
    stop_ids = sorted({i for name, i in special.items() if name in END_OF_TURN_TOKENS} |
                      ({tokenizer.eos_id} if tokenizer.eos_id >= 0 else set()))
    add_bos = g.metadata.get("tokenizer.ggml.add_bos_token", False) is True and tokenizer.bos_id >= 0
    config = {
        "architecture": g.metadata["general.architecture"], "name": str(g.metadata.get("general.name", "")),
        "vocab_size": cfg.vocab_size, "context_length": context, "max_tokens_per_call": chunk, "slots": slots,
        "kv_cache_dtype": kv_cache_dtype,
        "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id, "add_bos": add_bos, "stop_ids": stop_ids,
        "weights": weights, "dim": cfg.dim, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
        "n_kv_heads": cfg.n_kv_heads, "hidden_dim": cfg.hidden_dim, "rope_theta": cfg.rope_theta,
        "norm_eps": cfg.norm_eps, "tied_embeddings": cfg.tied_embeddings,
        "trained_context_length": cfg.context_length, "source": os.path.basename(gguf_path),
        "head_dim": cfg.head_dim, "attention_bias": cfg.attention_bias, "qk_norm": cfg.qk_norm,
        "rope_scaling": _rope_scaling_summary(cfg), "sliding_window": window,
        "windowed_layers": windowed_layers if window else 0, "activation": cfg.activation,
        "post_norms": cfg.post_norms, "embedding_scale": cfg.embedding_scale,
        "query_scale": float(cfg.query_scale or 1.0 / np.sqrt(cfg.head_dim)), "attn_softcap": cfg.attn_softcap,
        "final_softcap": cfg.final_softcap, "local_rope_theta": cfg.local_rope_theta,
    }
    metadata = {CONFIG_KEY: json.dumps(config), TOKENIZER_KEY: tokenizer.to_json()}
    template = g.metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template:
        metadata[CHAT_TEMPLATE_KEY] = template

    report = export_program(model, out_path, max_tokens_per_call=chunk, context=context, metadata=metadata)
    return LlmExportReport(os.fspath(out_path), config, weights, report, notes)
