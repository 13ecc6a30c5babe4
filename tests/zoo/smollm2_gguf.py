"""SmolLM2-135M-Instruct with the GGUF file's own quantized weights (kiln.export.quantize).

The zoo's float32 Llama (smollm2.py) is built from the GGUF's weights dequantized
to float32. Here every Q4_0/Q4_1/Q8_0 tensor of the file is kept in its own bits
instead: linear layers become QuantizedLinear and the token embedding a
QuantizedEmbedding made by `from_gguf_blocks` (attn_q/attn_k rows un-permuted
exactly like smollm2.py does for the float weights), and the output projection,
tied to the embedding, is a QuantizedLinear over the same tensors. Decoded,
these weights are bit for bit the float32 model's, so the two compute the same
function up to the order of float sums.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from . import smollm2 as zoo

# The model with an output projection module (`output`) instead of the projection by the embedding's
# weight, so that kiln.export.quantize can replace it: zoo.Llama with an untied config, whose
# `output` then shares the embedding's Parameter (or its quantized tensors).
HeadLlama = zoo.Llama


def _rope_row_order(rows: int, n_heads: int) -> np.ndarray:
    """The row permutation smollm2._unpermute_rope_rows applies, as an index."""
    return zoo._unpermute_rope_rows(np.arange(rows)[:, None], n_heads)[:, 0]


def _untied(cfg):
    return zoo.LlamaConfig(**{**asdict(cfg), "tied_embeddings": False})


def load_smollm2_float(capacity: int = 256) -> HeadLlama:
    """The zoo's float32 model with its tied output projection as an nn.Linear (same Parameter)."""
    cfg, state, _ = zoo._load()
    with torch.device("meta"):
        model = HeadLlama(_untied(cfg), capacity)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    assert missing == ["output.weight"] and not unexpected, (missing, unexpected)
    model.output.weight = model.tok_embeddings.weight
    return model.eval()


def load_smollm2_gguf(capacity: int = 256) -> HeadLlama:
    """The model with the GGUF's Q4_1 linear weights and Q8_0 embedding in their own bits."""
    import gguf

    from kiln.export.quantize import GGUF_TYPES, QuantizedEmbedding, QuantizedLinear, from_gguf_blocks

    cfg, state, _ = zoo._load()
    with torch.device("meta"):
        model = HeadLlama(_untied(cfg), capacity)
    quantized = {}
    reader = gguf.GGUFReader(zoo.gguf_path())
    for t in reader.tensors:
        if int(t.tensor_type) not in GGUF_TYPES:
            continue
        shape = tuple(int(n) for n in reversed(t.shape))
        qw = from_gguf_blocks(t.data, t.tensor_type, shape)
        if t.name.endswith("attn_q.weight"):
            qw = qw.permute_rows(_rope_row_order(shape[0], cfg.n_heads))
        elif t.name.endswith("attn_k.weight"):
            qw = qw.permute_rows(_rope_row_order(shape[0], cfg.n_kv_heads))
        quantized[zoo._our_name(t.name)] = qw
    for name, qw in quantized.items():
        module_name = name.rsplit(".", 1)[0]
        parent, _, leaf = module_name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        if module_name == "tok_embeddings":
            setattr(owner, leaf, QuantizedEmbedding(qw))
            model.output = QuantizedLinear(qw)  # tied: the same tensors
        else:
            setattr(owner, leaf, QuantizedLinear(qw))
    floats = {k: v for k, v in state.items() if k not in quantized}
    missing, unexpected = model.load_state_dict(floats, strict=False, assign=True)
    assert not unexpected, unexpected
    assert all(k.rsplit(".", 1)[0] in {n.rsplit(".", 1)[0] for n in quantized} or k.startswith("output.")
               for k in missing), missing
    assert not any(t.is_meta for t in list(model.parameters()) + list(model.buffers())), "weights left unset"
    return model.eval()
