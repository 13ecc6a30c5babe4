"""`kiln llm export`: a GGUF Llama-family model -> one .kiln program with its tokenizer,
chat template and config (needs torch).

    export_gguf("model.gguf", "model.kiln")                  # default weights (below)
    export_gguf("model.gguf", "model.kiln", dtype="float32")  # float32 from the dequantized weights
    export_gguf("model.gguf", "model.kiln", quantize="int8")  # re-quantized by kiln.export.quantize

The program's method `forward(tokens i64[1, T], input_pos i64[T], cache_positions
i64[L]) -> logits f32[1, 1, vocab]` (kiln.llm.model.Llama, last token only) has a
KV cache of `context` positions and takes T up to `max_tokens_per_call` (the
prefill chunk) and L up to `context`.

Weights: every weight decision is one call, `_apply_weights`, into
kiln.export.quantize (the quantized-operators extension). Without options the
GGUF's own quantized blocks (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K;
a mixed file's tensors each in its own format) are kept as they are when that module is
present; a kiln without it exports float32 and says so in a note.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from .. import _kiln
from ..errors import ExportError, InvalidArgument, InvalidProgram, KilnError, NotSupported
from ..export import export
from ..export.report import ExportReport
from . import KV_CACHE_DTYPES
from .gguf import QUANTIZED_TYPES, GgufFile
from .model import LlamaConfig, build_llama

SUPPORTED_ARCHITECTURES = ("llama",)   # Llama 1/2-style and SmolLM2; no attention biases (Qwen2), no RoPE scaling
DEFAULT_CONTEXT = 2048
DEFAULT_MAX_TOKENS_PER_CALL = 128
MAX_SLOTS = 64  # kiln.llm.BatchRunner rows; each slot is a KV cache region of `context` positions
# Special tokens that end a model's turn when present in its vocabulary.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>")

CONFIG_KEY, TOKENIZER_KEY, CHAT_TEMPLATE_KEY = "kiln.llm.config", "kiln.llm.tokenizer", "kiln.llm.chat_template"

_GGUF_TO_OURS = {
    "attn_norm": "attention_norm", "attn_q": "attention.wq", "attn_k": "attention.wk",
    "attn_v": "attention.wv", "attn_output": "attention.wo",
    "ffn_norm": "ffn_norm", "ffn_gate": "w_gate", "ffn_up": "w_up", "ffn_down": "w_down",
}


def module_name(gguf_name: str) -> str | None:
    """Our parameter name of a GGUF tensor ("blk.3.attn_q.weight" -> "layers.3.attention.wq.weight")."""
    if gguf_name == "token_embd.weight":
        return "tok_embeddings.weight"
    if gguf_name == "output_norm.weight":
        return "norm.weight"
    if gguf_name == "output.weight":
        return "output.weight"
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _GGUF_TO_OURS:
        return f"layers.{parts[1]}.{_GGUF_TO_OURS[parts[2]]}.{parts[3]}"
    return None


def gguf_name(ours: str) -> str:
    """The GGUF name of one of our parameters (the inverse of module_name)."""
    fixed = {"tok_embeddings.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
             "output.weight": "output.weight"}
    if ours in fixed:
        return fixed[ours]
    _, layer, rest = ours.split(".", 2)
    part, _, suffix = rest.rpartition(".")
    theirs = {v: k for k, v in _GGUF_TO_OURS.items()}[part]
    return f"blk.{layer}.{theirs}.{suffix}"


def rope_row_order(rows: int, n_heads: int) -> np.ndarray:
    """Row index undoing llama.cpp's convert_hf_to_gguf.py permutation of attn_q/attn_k rows
    ([head, half, pair] -> [head, pair, half]): hf_rows = gguf_rows[order]."""
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


def config_from_gguf(g: GgufFile) -> LlamaConfig:
    arch = g.metadata.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise NotSupported(f"'{g.path}' holds a model of architecture {arch!r}; kiln llm export supports "
                           f"{', '.join(SUPPORTED_ARCHITECTURES)} (Llama, SmolLM2)")
    tokens = g.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ExportError(f"'{g.path}' has no tokenizer vocabulary (tokenizer.ggml.tokens)")
    cfg = LlamaConfig(
        vocab_size=len(tokens),
        dim=_meta(g, f"{arch}.embedding_length"),
        n_layers=_meta(g, f"{arch}.block_count"),
        n_heads=_meta(g, f"{arch}.attention.head_count"),
        n_kv_heads=_meta(g, f"{arch}.attention.head_count_kv") if f"{arch}.attention.head_count_kv" in g.metadata
        else _meta(g, f"{arch}.attention.head_count"),
        hidden_dim=_meta(g, f"{arch}.feed_forward_length"),
        rope_theta=_meta(g, f"{arch}.rope.freq_base", float) if f"{arch}.rope.freq_base" in g.metadata else 10000.0,
        norm_eps=_meta(g, f"{arch}.attention.layer_norm_rms_epsilon", float),
        context_length=_meta(g, f"{arch}.context_length"),
        tied_embeddings="output.weight" not in g.tensors,
    )
    sizes = (cfg.dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.hidden_dim, cfg.context_length)
    if min(sizes) < 1 or max(sizes) > 1 << 20 or cfg.dim % cfg.n_heads or cfg.n_heads % cfg.n_kv_heads \
            or cfg.head_dim % 2:
        raise ExportError(f"'{g.path}': inconsistent model sizes {cfg}")
    if g.metadata.get(f"{arch}.vocab_size", cfg.vocab_size) != cfg.vocab_size:
        raise ExportError(f"'{g.path}': {arch}.vocab_size does not match the tokenizer's {cfg.vocab_size} tokens")
    rope_dims = g.metadata.get(f"{arch}.rope.dimension_count", cfg.head_dim)
    if rope_dims != cfg.head_dim:
        raise NotSupported(f"'{g.path}': partial rotary embeddings ({rope_dims} of {cfg.head_dim} dims) "
                           "are not supported")
    if g.metadata.get(f"{arch}.rope.scaling.type", "none") not in ("none", None):
        raise NotSupported(f"'{g.path}': RoPE scaling '{g.metadata[f'{arch}.rope.scaling.type']}' is not supported")
    return cfg


_LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                  "ffn_down")


def expected_tensors(cfg: LlamaConfig):
    """(GGUF tensor name, shape in torch order) of every tensor a Llama of `cfg` needs
    (output.weight only when the embeddings are not tied), layer by layer."""
    hd, dim, hidden = cfg.head_dim, cfg.dim, cfg.hidden_dim
    yield "token_embd.weight", (cfg.vocab_size, dim)
    yield "output_norm.weight", (dim,)
    if not cfg.tied_embeddings:
        yield "output.weight", (cfg.vocab_size, dim)
    shapes = ((dim,), (cfg.n_heads * hd, dim), (cfg.n_kv_heads * hd, dim), (cfg.n_kv_heads * hd, dim),
              (dim, cfg.n_heads * hd), (dim,), (hidden, dim), (hidden, dim), (dim, hidden))
    for i in range(cfg.n_layers):
        for part, shape in zip(_LAYER_TENSORS, shapes):
            yield f"blk.{i}.{part}.weight", shape


def check_tensors(g: GgufFile, cfg: LlamaConfig) -> None:
    """Every tensor `cfg` (the file's metadata) implies is in the file with the shape it
    implies: checked before anything is built from the metadata, so that the sizes
    the model, its rotary tables and its caches are made with are those of weights the
    file really holds (whose bytes the reader checked lie inside the file), not merely
    what its metadata claims. InvalidProgram names the metadata and the tensor."""
    arch = g.metadata.get("general.architecture")
    sizes = (f"{arch}.block_count {cfg.n_layers}, {arch}.embedding_length {cfg.dim}, "
             f"{arch}.feed_forward_length {cfg.hidden_dim}, {arch}.attention.head_count {cfg.n_heads}, "
             f"{arch}.attention.head_count_kv {cfg.n_kv_heads}, vocabulary {cfg.vocab_size}")
    needed = 2 + (not cfg.tied_embeddings) + len(_LAYER_TENSORS) * cfg.n_layers
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


def state_from_gguf(g: GgufFile, cfg: LlamaConfig) -> dict:
    """The float32 state dict (our names, Hugging Face q/k row order) of layers 0..cfg.n_layers-1."""
    state = {}
    for name in g.tensors:
        ours = module_name(name)
        if ours is None:
            if name.startswith("rope_freqs") or name.endswith(".attn_rot_embd"):
                continue  # precomputed rotary tables: kiln computes its own
            raise NotSupported(f"'{g.path}': tensor '{name}' has no place in a Llama model "
                               "(attention biases and other extras are not supported)")
        if ours.startswith("layers.") and int(ours.split(".")[1]) >= cfg.n_layers:
            continue
        w = g.dequantize(name)
        if name.endswith("attn_q.weight"):
            w = w[rope_row_order(w.shape[0], cfg.n_heads)]
        elif name.endswith("attn_k.weight"):
            w = w[rope_row_order(w.shape[0], cfg.n_kv_heads)]
        state[ours] = torch.from_numpy(np.ascontiguousarray(w))
    return state


def _apply_weights(model, g: GgufFile, scheme: str):
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
    return _keep_gguf_blocks(model, g, q)


def _keep_gguf_blocks(model, g: GgufFile, q):
    """Every linear and embedding weight stored in a quantized type in the GGUF file
    (gguf.QUANTIZED_TYPES) becomes a quantized module over the file's own blocks (no
    re-quantization), each tensor in its own format; F32/F16/BF16 ones stay float32.
    The GGUF reader checked that every such tensor's rows are whole blocks."""
    cfg = model.cfg
    kinds = set()
    for name, t in g.tensors.items():
        ours = module_name(name)
        if ours is None or t.ggml_type not in QUANTIZED_TYPES or not ours.endswith(".weight"):
            continue
        if ours.startswith("layers.") and int(ours.split(".")[1]) >= cfg.n_layers:
            continue
        weight = q.from_gguf_blocks(g.raw(name), t.ggml_type, t.shape)
        if name.endswith("attn_q.weight"):
            weight = weight.permute_rows(rope_row_order(t.shape[0], cfg.n_heads))
        elif name.endswith("attn_k.weight"):
            weight = weight.permute_rows(rope_row_order(t.shape[0], cfg.n_kv_heads))
        path = ours[: -len(".weight")]
        parent_name, _, child = path.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, child)
        new = q.QuantizedEmbedding(weight) if isinstance(old, torch.nn.Embedding) else q.QuantizedLinear(weight)
        setattr(parent, child, new)
        kinds.add(t.type_name)
    return model, "gguf " + "/".join(sorted(kinds)), []


@dataclass
class LlmExportReport:
    path: str
    config: dict
    weights: str
    export: ExportReport
    notes: list = field(default_factory=list)

    def __str__(self) -> str:
        c = self.config
        lines = [f"{self.path}: {c['name'] or c['architecture']}, {c['n_layers']} layers, "
                 f"vocabulary {c['vocab_size']}, "
                 f"context {c['context_length']}, up to {c['max_tokens_per_call']} tokens per call, "
                 f"KV cache {c.get('kv_cache_dtype', 'float32')}, "
                 f"weights {self.weights}", str(self.export)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def export_gguf(gguf_path, out_path, *, dtype: str | None = None, quantize: str | None = None,
                context: int = DEFAULT_CONTEXT, max_tokens_per_call: int = DEFAULT_MAX_TOKENS_PER_CALL,
                slots: int = 1, n_layers: int | None = None, kv_cache_dtype: str = "float32") -> LlmExportReport:
    """Builds the Llama module from a GGUF file's config and tensors and exports it with
    its tokenizer, chat template and config as metadata (see the module docstring).

    dtype="float32" and quantize="int8"/"int4" are exclusive; neither keeps the GGUF's
    own quantized blocks (when kiln has its quantized operators). context: KV cache
    positions (at most the model's own context length); max_tokens_per_call: the
    largest prefill chunk; slots: sequences the KV cache holds at once (each a region
    of `context` positions: kiln.llm.BatchRunner decodes that many together, memory
    grows with it); n_layers: keep only the first layers (a quick model for tests,
    whose text means nothing); kv_cache_dtype: "float32", or "float16" / "bfloat16"
    (half the cache's memory; attention reads the 16-bit rows widened to float32).

    Every failure is a kiln.KilnError (ExportError, InvalidArgument, InvalidProgram,
    NotSupported, ...) naming what was wrong; nothing is written unless it succeeds.
    """
    try:
        return _export_gguf(gguf_path, out_path, dtype=dtype, quantize=quantize, context=context,
                            max_tokens_per_call=max_tokens_per_call, slots=slots, n_layers=n_layers,
                            kv_cache_dtype=kv_cache_dtype)
    except KilnError:
        raise
    except Exception as e:
        # A GGUF file is untrusted: whatever its contents make fail below (numpy,
        # torch, torch.export) is reported as this export's error, never as theirs.
        raise ExportError(f"kiln llm export of '{os.fspath(gguf_path)}' failed: {type(e).__name__}: {e}") from e


def export_program(model, out_path, *, max_tokens_per_call: int, context: int, metadata: dict):
    """Exports a kiln.llm.model.Llama (KV cache of model.slots regions of `context`
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


def _int_option(name: str, value, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


def _export_gguf(gguf_path, out_path, *, dtype, quantize, context, max_tokens_per_call, slots,
                 n_layers, kv_cache_dtype) -> LlmExportReport:
    if dtype is not None and quantize is not None:
        raise ExportError("give --dtype or --quantize, not both")
    if dtype not in (None, "float32"):
        raise ExportError(f"dtype {dtype!r} is not supported (float32)")
    if quantize not in (None, "int8", "int4"):
        raise ExportError(f"quantize {quantize!r} is not supported (int8, int4)")
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ExportError(f"kv_cache_dtype {kv_cache_dtype!r} is not supported ({', '.join(KV_CACHE_DTYPES)})")
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
        cfg = LlamaConfig(**{**asdict(cfg), "n_layers": n_layers})
    notes = []
    if context > cfg.context_length:
        notes.append(f"context {context} exceeds the model's own {cfg.context_length}: using {cfg.context_length}")
        context = cfg.context_length
    chunk = min(max_tokens_per_call, context - 1)

    model = build_llama(cfg, state_from_gguf(g, cfg), capacity=context, last_logits_only=True, slots=slots,
                        cache_dtype=getattr(torch, kv_cache_dtype))
    model, weights, weight_notes = _apply_weights(model, g, scheme)
    notes += weight_notes

    special = {tokenizer.id_to_token(i): i for i in tokenizer.special_ids}
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
    }
    metadata = {CONFIG_KEY: json.dumps(config), TOKENIZER_KEY: tokenizer.to_json()}
    template = g.metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template:
        metadata[CHAT_TEMPLATE_KEY] = template

    report = export_program(model, out_path, max_tokens_per_call=chunk, context=context, metadata=metadata)
    return LlmExportReport(os.fspath(out_path), config, weights, report, notes)
