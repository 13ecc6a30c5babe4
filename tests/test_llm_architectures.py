"""kiln llm export against an independent reference, per architecture: Hugging Face transformers.

For each architecture kiln reads (llama, with linear and Llama 3 RoPE scaling; qwen2; qwen3;
phi3) a tiny random-weight model is built with transformers, written as a GGUF file the way
llama.cpp's convert_hf_to_gguf.py writes it (its tensor names through the `gguf` package's
TensorNameMap, its q/k row permutation for llama, its rope_freqs factors for Llama 3; `convert`
below), and exported with kiln llm export (float32). The program's logits for a fixed prompt
(prefill) and then for single-token decode steps through its KV cache are compared with

  * the original transformers model, and
  * the transformers model loaded from the same GGUF file by transformers' own GGUF reader
    (which un-permutes q/k independently of kiln), where that reader understands the file:
    it ignores RoPE scaling and `attention.key_length`, so the scaled llama models and
    qwen3 (head size not dim / n_heads) are compared with the original model only.

Tolerance: max |kiln - reference| <= 1e-4 * max |reference logit| (float32, SPEC G7), and
the greedy tokens are equal. The weights are random with a large spread (every parameter,
biases and norm weights included, see `_randomize`) so that each feature moves the logits
far beyond the tolerance: dropping Qwen2's biases, Qwen3's q/k norms, Llama 3's factors or
the un-permutation fails these tests (docs/llm.md, *Architectures*).

Last, the real SmolLM2 GGUF (Q4_1) loaded by transformers (dequantized) against kiln's default
export of it (the same Q4_1 blocks): logits for a fixed prompt, greedy tokens equal.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from llm_files import write_gguf

import kiln

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

VOCAB = 300
CONTEXT = 64           # the exported KV cache
PROMPT = [int(i) for i in np.random.default_rng(7).integers(0, VOCAB, 12)]
DECODE_STEPS = 6
TOLERANCE = 1e-4       # of the largest reference logit
MEASURED: dict = {}    # name -> max error / logit scale, for the record (printed with -s)


def _byte_vocab() -> tuple[list[str], list[str]]:
    """A 300-token byte-level BPE vocabulary (GPT-2's byte alphabet, then 44 merges) that
    kiln's tokenizer reads; the tests feed token ids, the tokenizer only has to load."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    tokens = [chr(c) for c in cs]
    letters = "abcdefghijklmnopqrstuvwxyz"
    merges = [f"{a} {b}" for a in letters for b in letters][: VOCAB - 256]
    return tokens + [m.replace(" ", "") for m in merges], merges


# --------------------------------------------------------------------------- the converter's part


def _permute(w: torch.Tensor, n_head: int, n_head_kv: int | None) -> torch.Tensor:
    """convert_hf_to_gguf.py's LlamaModel.permute (conversion/llama.py), as it is."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _llama3_rope_factors(rope: dict, head_dim: int) -> list[float]:
    """LlamaModel.generate_extra_tensors: the rope_freqs.weight divisors of a llama3 rope_scaling.
    (The converter reads original_max_position_embeddings from the top-level config, default
    8192, Llama 3.1's value; the tiny model keeps it in its rope parameters, where
    transformers reads it.)"""
    base = rope.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    factor, low, high = rope.get("factor", 8.0), rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old_context_len = rope["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return factors


def convert(model, arch: str, path) -> None:
    """The GGUF file llama.cpp's converter writes for `model` (float32 tensors): the metadata
    of TextModel.set_gguf_parameters and the architecture's class, the tensors renamed by
    gguf's TensorNameMap, q/k permuted for llama only (qwen2/qwen3/phi3 are NEOX RoPE in
    llama.cpp and stored as they are), Llama 3's rope_freqs."""
    c = model.config
    rope = c.rope_parameters
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    tokens, merges = _byte_vocab()
    meta = {
        "general.architecture": arch, "general.name": f"tiny-{arch}",
        f"{arch}.block_count": c.num_hidden_layers, f"{arch}.context_length": c.max_position_embeddings,
        f"{arch}.embedding_length": c.hidden_size, f"{arch}.feed_forward_length": c.intermediate_size,
        f"{arch}.attention.head_count": c.num_attention_heads,
        f"{arch}.attention.head_count_kv": c.num_key_value_heads,
        f"{arch}.attention.layer_norm_rms_epsilon": float(c.rms_norm_eps),
        f"{arch}.rope.freq_base": float(rope["rope_theta"]), f"{arch}.vocab_size": c.vocab_size,
        f"{arch}.attention.key_length": head_dim, f"{arch}.attention.value_length": head_dim,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm", "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * len(tokens), "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": c.bos_token_id, "tokenizer.ggml.eos_token_id": c.eos_token_id,
        "tokenizer.ggml.padding_token_id": c.eos_token_id,   # gguf.SpecialVocab's, from the tokenizer files
    }
    if arch == "llama":
        meta["llama.rope.dimension_count"] = head_dim
    if rope.get("rope_type") == "linear":
        meta[f"{arch}.rope.scaling.type"], meta[f"{arch}.rope.scaling.factor"] = "linear", float(rope["factor"])
    if arch == "phi3":
        meta["phi3.rope.dimension_count"] = head_dim
        meta["phi3.rope.scaling.original_context_length"] = c.original_max_position_embeddings
        meta["phi3.attention.sliding_window"] = c.sliding_window or 0
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch.upper()), c.num_hidden_layers)
    tensors = {}
    for hf_name, w in model.state_dict().items():
        if hf_name == "lm_head.weight" and c.tie_word_embeddings:
            continue  # a tied model's checkpoint has no lm_head
        if arch == "llama" and hf_name.endswith(("q_proj.weight", "q_proj.bias")):
            w = _permute(w, c.num_attention_heads, c.num_attention_heads)
        if arch == "llama" and hf_name.endswith(("k_proj.weight", "k_proj.bias")):
            w = _permute(w, c.num_attention_heads, c.num_key_value_heads)
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        tensors[name] = w.detach().float().numpy()
    if rope.get("rope_type") == "llama3":
        tensors["rope_freqs.weight"] = np.array(_llama3_rope_factors(rope, head_dim), np.float32)
    write_gguf(path, meta, tensors)


# --------------------------------------------------------------------------- the models

_SIZES = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, bos_token_id=0,
              eos_token_id=1, pad_token_id=None)

# name: (GGUF architecture, transformers classes, config, transformers' GGUF reader understands the file)
MODELS = {
    "llama": ("llama", "Llama", dict(tie_word_embeddings=False), True),
    "llama_linear": ("llama", "Llama", dict(rope_parameters={"rope_type": "linear", "factor": 4.0,
                                                             "rope_theta": 10000.0}), False),
    "llama3": ("llama", "Llama", dict(rope_parameters={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        # wavelengths 2 pi 10000^(i/8): below 8 unscaled, 8..32 smoothed, above 32 divided by 8
        "original_max_position_embeddings": 32, "rope_theta": 10000.0}), False),
    "qwen2": ("qwen2", "Qwen2", dict(tie_word_embeddings=True), True),
    "qwen3": ("qwen3", "Qwen3", dict(head_dim=32, tie_word_embeddings=False), False),
    "phi3": ("phi3", "Phi3", dict(sliding_window=CONTEXT, original_max_position_embeddings=128,
                                  tie_word_embeddings=False), True),
}


def _randomize(model, seed: int) -> None:
    """Every parameter random, with spread (transformers' init leaves biases 0 and norm
    weights 1, which would make dropping them invisible)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1.0 + 0.3 * noise if "norm" in name else 0.25 * noise)


def _hf_model(name: str):
    arch, prefix, extra, _ = MODELS[name]
    config = getattr(transformers, f"{prefix}Config")(**{**_SIZES, **extra})
    model = getattr(transformers, f"{prefix}ForCausalLM")(config).float().eval()
    _randomize(model, seed=len(name))
    return model


@torch.no_grad()
def _reference(model, n_steps: int = DECODE_STEPS) -> tuple[list[int], list[np.ndarray]]:
    """Greedy tokens and, per step, the logits of the last position (the prompt's, then each
    new token's), from the whole sequence each time (no cache: nothing shared with kiln's)."""
    ids, logits = list(PROMPT), []
    for _ in range(n_steps + 1):
        last = model(torch.tensor([ids])).logits[0, -1].double().numpy()
        logits.append(last)
        ids.append(int(last.argmax()))
    return ids[len(PROMPT):], logits


def _kiln_steps(path, tokens: list[int]) -> list[np.ndarray]:
    """The program's last logits for the prompt (one prefill call), then for each of
    `tokens` but the last (the reference's greedy tokens) fed one per call through its KV cache."""
    program = kiln.load(path)
    out = []
    ids, pos = list(PROMPT), 0
    for step in range(len(tokens)):
        feed = ids if step == 0 else [tokens[step - 1]]
        positions = np.arange(pos, pos + len(feed), dtype=np.int64)
        logits = program.forward(np.array([feed], np.int64), positions[None, :], np.zeros(1, np.int64),
                                 np.arange(pos + len(feed), dtype=np.int64))[0]
        out.append(np.asarray(logits, np.float64)[0, -1])
        pos += len(feed)
    return out


def _compare(name: str, got: list[np.ndarray], want: list[np.ndarray]) -> float:
    scale = max(float(np.abs(w).max()) for w in want)
    err = max(float(np.abs(g - w).max()) for g, w in zip(got, want))
    MEASURED[name] = err / scale
    assert err <= TOLERANCE * scale, f"{name}: max |kiln - reference| {err:.3g} at logit scale {scale:.3g}"
    assert [int(g.argmax()) for g in got] == [int(w.argmax()) for w in want], name
    return err / scale


@pytest.fixture(scope="module", params=list(MODELS))
def exported(request, tmp_path_factory):
    """(name, transformers model, GGUF path, kiln program path) of one architecture, exported once."""
    from kiln.llm.export import export_gguf

    name = request.param
    model = _hf_model(name)
    d = tmp_path_factory.mktemp(name)
    convert(model, MODELS[name][0], d / "model.gguf")
    report = export_gguf(d / "model.gguf", d / "model.kiln", dtype="float32", context=CONTEXT,
                         max_tokens_per_call=16)
    return name, model, d, report


def test_kiln_equals_the_transformers_model(exported):
    name, model, d, _ = exported
    tokens, want = _reference(model)
    _compare(f"{name} vs transformers", _kiln_steps(d / "model.kiln", tokens), want)


def test_kiln_equals_transformers_reading_the_same_gguf(exported):
    name, model, d, _ = exported
    if not MODELS[name][3]:
        pytest.skip("transformers' GGUF reader ignores this file's RoPE scaling / attention.key_length")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file="model.gguf", dtype=torch.float32).eval()
    tokens, want = _reference(theirs)
    _compare(f"{name} vs transformers' GGUF reader", _kiln_steps(d / "model.kiln", tokens), want)


def test_the_program_says_what_it_is(exported):
    name, model, d, report = exported
    config = json.loads(kiln.load(d / "model.kiln").metadata("kiln.llm.config"))
    arch = MODELS[name][0]
    assert config["architecture"] == arch and f"({arch})" in str(report)
    assert config["head_dim"] == (32 if name == "qwen3" else 16)
    assert config["attention_bias"] is (name == "qwen2") and config["qk_norm"] is (name == "qwen3")
    assert config["rope_scaling"] == {"llama_linear": "linear 4", "llama3": "rope_freqs"}.get(name, "none")
    assert config["tied_embeddings"] is model.config.tie_word_embeddings
    if name == "phi3":
        assert config["sliding_window"] == CONTEXT
        assert f"sliding window {CONTEXT} >= context {CONTEXT}: full attention is exact" in report.notes


# --------------------------------------------------------------------------- refusals


def _tiny_gguf(tmp_path, name: str, edit=None):
    model = _hf_model(name)
    path = tmp_path / f"{name}.gguf"
    convert(model, MODELS[name][0], path)
    if edit is not None:
        from llm_files import gguf_bytes

        from kiln.llm.gguf import GgufFile

        g = GgufFile(path)
        meta, tensors = dict(g.metadata), {n: g.dequantize(n) for n in g.tensors}
        edit(meta, tensors)
        path.write_bytes(gguf_bytes(meta, tensors))
    return path


def test_a_sliding_window_shorter_than_the_context_is_refused(tmp_path):
    from kiln.llm.export import export_gguf

    path = _tiny_gguf(tmp_path, "llama", lambda meta, _: meta.update({"llama.attention.sliding_window": 32}))
    with pytest.raises(kiln.NotSupported, match=r"llama.attention.sliding_window = 32: .*--context 32 or less, "
                                                 r"not 64"):
        export_gguf(path, tmp_path / "out.kiln", dtype="float32", context=CONTEXT)
    assert not (tmp_path / "out.kiln").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda m, t: m.update({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0}),
     r"llama.rope.scaling.type = 'yarn' is not supported"),
    (lambda m, t: t.update({"rope_factors_long.weight": np.ones(8, np.float32)}),
     r"tensor 'rope_factors_long.weight' \(LongRoPE"),
    (lambda m, t: t.update({"blk.0.attn_q.bias": np.ones(64, np.float32)}),
     r"tensor 'blk.0.attn_q.bias' has no place in a llama model"),
    (lambda m, t: m.update({"general.architecture": "gemma2"}),
     r"architecture 'gemma2', which kiln llm export does not read: .*logit soft-capping"),
])
def test_what_kiln_does_not_read_is_refused_by_name(tmp_path, edit, message):
    from kiln.llm.export import export_gguf

    path = _tiny_gguf(tmp_path, "llama", edit)
    with pytest.raises(kiln.NotSupported, match=message):
        export_gguf(path, tmp_path / "out.kiln", dtype="float32", context=CONTEXT)


# --------------------------------------------------------------------------- a real model


@pytest.mark.full
def test_smollm2_equals_transformers_reading_its_gguf(tmp_path):
    """SmolLM2-135M-Instruct Q4_1 (30 layers, vocabulary 49,152): transformers dequantizes the
    blocks to float32 (un-permuting q/k itself), kiln's default export keeps them and its
    kernels decode exactly the same weights (docs/quantization.md), so the two differ by the
    order of float32 sums only; the prompt is PROMPT's ids (ordinary tokens of SmolLM2's vocabulary)."""
    from kiln.llm.export import export_gguf

    from zoo import smollm2

    path = smollm2.gguf_path()
    export_gguf(path, tmp_path / "smollm2.kiln", context=CONTEXT, max_tokens_per_call=16)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                               dtype=torch.float32).eval()
    tokens, want = _reference(theirs)
    _compare("SmolLM2 Q4_1 vs transformers' GGUF reader", _kiln_steps(tmp_path / "smollm2.kiln", tokens), want)
