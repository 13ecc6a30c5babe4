"""kiln llm export against an independent reference, per architecture: Hugging Face transformers.

For each architecture kiln reads (llama, with linear and Llama 3 RoPE scaling; qwen2, also
with YaRN; qwen3; phi3; gemma2; gemma3) a tiny random-weight model is built with
transformers, written as a GGUF file the way llama.cpp's convert_hf_to_gguf.py writes it (its
tensor names through the `gguf` package's TensorNameMap, its q/k row permutation for llama, its
rope_freqs factors for Llama 3, Gemma's norm weights stored as 1 + w; `convert` below), and
exported with kiln llm export (float32). The program's logits for a fixed prompt (prefill) and
then for single-token decode steps through its KV cache are compared with

  * the original transformers model, and
  * the transformers model loaded from the same GGUF file by transformers' own GGUF reader
    (which un-permutes q/k independently of kiln), where that reader understands the file:
    it ignores RoPE scaling and `attention.key_length`, so the scaled llama and qwen2
    models and qwen3 (head size not dim / n_heads) are compared with the original model only; it does not
    read Phi-3's window; for Gemma it reads the weights (taking the 1 back off the norms)
    and the sizes (the window too) but neither the soft-capping caps, the query scale nor
    Gemma 3's RoPE scaling. What it does not read it is given as the original model has it
    (`GGUF_READER_OVERRIDES`).

The windowed models (Phi-3, every layer; Gemma) have a window of 8 positions and the prompt and
decode steps reach 18, so their windowed layers mask keys (in the prefill call and in decode
steps); Gemma 2's two layers
are one windowed and one global, Gemma 3's six are five windowed (RoPE base 10,000, unscaled)
and one global (the file's base, linear scaling).

Tolerance: max |kiln - reference| <= 1e-4 * max |reference logit| (float32, SPEC G7), and
the greedy tokens are equal. The weights are random with a large spread (every parameter,
biases and norm weights included, see `_randomize`) so that each feature moves the logits
far beyond the tolerance: dropping Qwen2's biases, Qwen3's q/k norms, Llama 3's factors,
the un-permutation, the window, Gemma's embedding scale, soft-capping or the stored 1 + w
fails these tests (docs/llm.md, *Architectures*). The caps are small (attention 5, logits 3) so
that the tanh moves the logits well past the tolerance.

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
    if arch in ("gemma2", "gemma3"):
        rope = rope.get("full_attention", rope)  # Gemma 3 keeps one set per layer type
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
    if rope.get("rope_type") == "yarn":
        meta[f"{arch}.rope.scaling.type"], meta[f"{arch}.rope.scaling.factor"] = "yarn", float(rope["factor"])
        meta[f"{arch}.rope.scaling.original_context_length"] = rope["original_max_position_embeddings"]
    if arch == "phi3":
        meta["phi3.rope.dimension_count"] = head_dim
        meta["phi3.rope.scaling.original_context_length"] = c.original_max_position_embeddings
        meta["phi3.attention.sliding_window"] = c.sliding_window or 0
    if arch in ("gemma2", "gemma3"):
        # conversion/gemma.py: the window and Gemma 2's caps (Gemma 3's base and linear scaling, written
        # above, are its global layers').
        meta[f"{arch}.attention.sliding_window"] = c.sliding_window
        if arch == "gemma2":
            meta["gemma2.attn_logit_softcapping"] = float(c.attn_logit_softcapping)
            meta["gemma2.final_logit_softcapping"] = float(c.final_logit_softcapping)
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
        if arch in ("gemma2", "gemma3") and hf_name.endswith("norm.weight"):
            w = w + 1  # Gemma's norms multiply by 1 + w: the converter stores 1 + w
        tensors[name] = w.detach().float().numpy()
    if rope.get("rope_type") == "llama3":
        tensors["rope_freqs.weight"] = np.array(_llama3_rope_factors(rope, head_dim), np.float32)
    write_gguf(path, meta, tensors)


# --------------------------------------------------------------------------- the models

_SIZES = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, bos_token_id=0,
              eos_token_id=1, pad_token_id=None)

WINDOW = 8
_GEMMA = dict(head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW, rms_norm_eps=1e-6, pad_token_id=None)
_GEMMA2_CAPS = dict(attn_logit_softcapping=5.0, final_logit_softcapping=3.0)
_GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}

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
    # Qwen2.5's long-context YaRN (factor 4 of an original context of 32: frequency 0 kept, 1 half-scaled,
    # 2..7 divided by 4, and cos/sin times 0.1 ln 4 + 1)
    "qwen2_yarn": ("qwen2", "Qwen2", dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                                           "original_max_position_embeddings": 32},
                                          tie_word_embeddings=True), False),
    "qwen3": ("qwen3", "Qwen3", dict(head_dim=32, tie_word_embeddings=False), False),
    "phi3": ("phi3", "Phi3", dict(sliding_window=WINDOW, original_max_position_embeddings=128,
                                  tie_word_embeddings=False), True),
    "gemma2": ("gemma2", "Gemma2", dict(**_GEMMA, **_GEMMA2_CAPS, tie_word_embeddings=True), True),
    "gemma3": ("gemma3", "Gemma3Text", dict(**_GEMMA, num_hidden_layers=6, rope_parameters=_GEMMA3_ROPE,
                                            tie_word_embeddings=True), True),
}
# What transformers' GGUF reader does not take from a phi3 or gemma file, given as the original model has it.
GGUF_READER_OVERRIDES = {
    "phi3": dict(sliding_window=WINDOW),
    "gemma2": dict(query_pre_attn_scalar=16, **_GEMMA2_CAPS),
    "gemma3": dict(query_pre_attn_scalar=16, rope_parameters=_GEMMA3_ROPE),
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
    model = getattr(transformers, f"{prefix.removesuffix('Text')}ForCausalLM")(config).float().eval()
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
        pytest.skip("transformers' GGUF reader ignores this file's RoPE scaling / attention.key_length / window")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file="model.gguf", dtype=torch.float32,
                                                               **GGUF_READER_OVERRIDES.get(name, {})).eval()
    assert type(theirs) is type(model)
    tokens, want = _reference(theirs)
    _compare(f"{name} vs transformers' GGUF reader", _kiln_steps(d / "model.kiln", tokens), want)


def test_the_program_says_what_it_is(exported):
    name, model, d, report = exported
    config = json.loads(kiln.load(d / "model.kiln").metadata("kiln.llm.config"))
    arch = MODELS[name][0]
    assert config["architecture"] == arch and f"({arch})" in str(report)
    assert config["head_dim"] == (32 if name == "qwen3" else 16)
    assert config["attention_bias"] is (arch == "qwen2") and config["qk_norm"] is (name in ("qwen3", "gemma3"))
    assert config["rope_scaling"] == {"llama_linear": "linear 4", "llama3": "rope_freqs", "gemma3": "linear 4",
                                      "qwen2_yarn": "yarn 4 of 32"}.get(name, "none")
    assert config["tied_embeddings"] is model.config.tie_word_embeddings
    gemma = arch in ("gemma2", "gemma3")
    assert config["activation"] == ("gelu_tanh" if gemma else "silu") and config["post_norms"] is gemma
    assert config["embedding_scale"] == pytest.approx(8.0 if gemma else 1.0)
    assert config["query_scale"] == pytest.approx(config["head_dim"] ** -0.5)
    assert (config["attn_softcap"], config["final_softcap"]) == ((5.0, 3.0) if name == "gemma2" else (0, 0))
    if name in ("phi3", "gemma2", "gemma3"):
        layers = {"phi3": 2, "gemma2": 1, "gemma3": 5}[name]
        assert config["sliding_window"] == WINDOW and config["windowed_layers"] == layers
        assert f"sliding window {WINDOW} on {layers} of {model.config.num_hidden_layers} layers" in report.notes[0]
    # Windowed layers keep the fused cache attention (their mask is another bool mask); Gemma 2's
    # soft-capped scores cannot be a scaled_dot_product_attention, so its layers stay unfused.
    fused = report.export.methods["forward"].fused.get(("cache_gather", "sdpa_rows"), 0)
    assert fused == (0 if name == "gemma2" else model.config.num_hidden_layers)


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


@pytest.mark.parametrize("edit, message", [
    (lambda m, t: m.update({"llama.rope.scaling.type": "longrope", "llama.rope.scaling.factor": 4.0}),
     r"llama.rope.scaling.type = 'longrope' is not supported"),
    (lambda m, t: m.update({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0,
                            "llama.rope.scaling.yarn_log_multiplier": 0.1}),
     r"llama.rope.scaling.yarn_log_multiplier = 0.1.* is not supported"),
    (lambda m, t: t.update({"rope_factors_long.weight": np.ones(8, np.float32)}),
     r"tensor 'rope_factors_long.weight' \(LongRoPE"),
    (lambda m, t: t.update({"blk.0.attn_q.bias": np.ones(64, np.float32)}),
     r"tensor 'blk.0.attn_q.bias' has no place in a llama model"),
    (lambda m, t: m.update({"general.architecture": "gemma"}),
     r"architecture 'gemma', which kiln llm export does not read: Gemma 1 .*no test checks"),
    (lambda m, t: m.update({"llama.final_logit_softcapping": 30.0}),
     r"llama.final_logit_softcapping = 30.0 \(logit soft-capping\) is not supported for this architecture"),
])
def test_what_kiln_does_not_read_is_refused_by_name(tmp_path, edit, message):
    from kiln.llm.export import export_gguf

    path = _tiny_gguf(tmp_path, "llama", edit)
    with pytest.raises(kiln.NotSupported, match=message):
        export_gguf(path, tmp_path / "out.kiln", dtype="float32", context=CONTEXT)


@pytest.mark.parametrize("arch, blocks", [("gemma2", 46), ("gemma3", 62), ("gemma2", 45)])
def test_gemma_query_scale_is_llama_cpps(tmp_path, arch, blocks):
    """The converter writes no query_pre_attn_scalar; llama.cpp scales queries by 1 / sqrt(dim / heads)
    in the 27B models (46 blocks for Gemma 2, 62 for Gemma 3: their query_pre_attn_scalar, 144 and
    168, is that) and by 1 / sqrt(head size) otherwise. A 64-wide model of 4 heads of 8 tells the two
    apart (1/4 against 1/sqrt(8)); the config is read without building the model."""
    from kiln.llm.export import config_from_gguf
    from kiln.llm.gguf import GgufFile

    prefix = "Gemma2" if arch == "gemma2" else "Gemma3Text"
    config = getattr(transformers, f"{prefix}Config")(**{**_SIZES, **_GEMMA, "head_dim": 8,
                                                          "num_hidden_layers": blocks})
    model = getattr(transformers, f"{prefix.removesuffix('Text')}ForCausalLM")(config).eval()
    convert(model, arch, tmp_path / "model.gguf")
    cfg = config_from_gguf(GgufFile(tmp_path / "model.gguf"))
    assert cfg.query_scale == pytest.approx(0.25 if blocks in (46, 62) else 8 ** -0.5)


_GEMMA_TEXTS = ["The quick brown fox jumps over the lazy dog.", "Gemma's vocabulary has no space prefix.",
                "Größe, naïve café: déjà vu.", "日本語のテキストと中文文本。", "Привет, мир! Как дела?",
                "def f(x):\n    return x ** 2\n\n\nprint(f(3))", "emoji \U0001f600 and \u2581 marks",
                "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n"]


SPM_VOCAB = 600  # the texts' characters and their byte tokens, and merges


def test_a_gemma_style_sentencepiece_vocabulary_reads_as_sentencepiece_does(tmp_path):
    """Gemma's GGUF vocabulary as the converter writes it (SentencePiece, `tokenizer.ggml.model` llama):
    pad 0, eos 1, bos 2, unk 3, the chat markers as user-defined pieces (type 4), byte fallback and no
    space prefix. kiln's tokenizer from that GGUF encodes and decodes as sentencepiece does, and the
    export makes <end_of_turn> a stop token."""
    import io

    import sentencepiece
    from llm_files import gguf_bytes
    from sentencepiece import sentencepiece_model_pb2

    from kiln.llm import Tokenizer
    from kiln.llm.export import export_gguf
    from kiln.llm.gguf import GgufFile

    (tmp_path / "corpus.txt").write_text("\n".join(_GEMMA_TEXTS * 20) + "\n")
    proto_bytes = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"), model_writer=proto_bytes, model_type="bpe", vocab_size=SPM_VOCAB,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=False, num_threads=1, allow_whitespace_only_pieces=True, minloglevel=2,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, user_defined_symbols=["<start_of_turn>", "<end_of_turn>"])
    sp = sentencepiece.SentencePieceProcessor(model_proto=proto_bytes.getvalue())
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(proto_bytes.getvalue())
    types = [int(p.type) for p in proto.pieces]  # NORMAL 1 ... BYTE 6: the GGUF's token types
    assert types[:4] == [3, 3, 3, 2] and types[4:6] == [4, 4]
    config = transformers.Gemma2Config(**{**_SIZES, **_GEMMA, **_GEMMA2_CAPS, "vocab_size": SPM_VOCAB})
    convert(transformers.Gemma2ForCausalLM(config).eval(), "gemma2", tmp_path / "model.gguf")
    g = GgufFile(tmp_path / "model.gguf")
    meta = {k: v for k, v in g.metadata.items() if not k.startswith("tokenizer.")}
    meta.update({"tokenizer.ggml.model": "llama",
                 "tokenizer.ggml.tokens": [sp.id_to_piece(i) for i in range(SPM_VOCAB)],
                 "tokenizer.ggml.scores": [sp.get_score(i) for i in range(SPM_VOCAB)],
                 "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 2,
                 "tokenizer.ggml.eos_token_id": 1, "tokenizer.ggml.unknown_token_id": 3,
                 "tokenizer.ggml.padding_token_id": 0, "tokenizer.ggml.add_space_prefix": False,
                 "tokenizer.ggml.add_bos_token": True})
    (tmp_path / "spm.gguf").write_bytes(gguf_bytes(meta, {n: g.dequantize(n) for n in g.tensors}))

    ours = Tokenizer.from_gguf(str(tmp_path / "spm.gguf"))
    assert (ours.bos_id, ours.eos_id, ours.special_ids) == (2, 1, [0, 1, 2, 3])
    for text in _GEMMA_TEXTS + [" leading space", "a  b\n\nc"]:
        assert ours.encode(text) == sp.encode(text), text
        assert ours.decode(sp.encode(text)) == sp.decode(sp.encode(text))  # a literal \u2581 comes back a space
    report = export_gguf(tmp_path / "spm.gguf", tmp_path / "spm.kiln", dtype="float32", context=WINDOW,
                         max_tokens_per_call=4, n_layers=1)
    assert report.config["stop_ids"] == [1, 5] and report.config["add_bos"] is True
    # A context no longer than the window masks nothing: the program is the full-attention one.
    assert f"sliding window {WINDOW} >= context {WINDOW}: full attention is exact" in report.notes


# --------------------------------------------------------------------------- a real model


@pytest.mark.full
def test_smollm2_equals_transformers_reading_its_gguf(tmp_path):
    """SmolLM2-135M-Instruct Q4_1 (30 layers, vocabulary 49,152): transformers dequantizes the
    blocks to float32 (un-permuting q/k itself), kiln's export with compute="float32" keeps them
    and its kernels decode exactly the same weights (docs/quantization.md), so the two differ by
    the order of float32 sums only; the prompt is PROMPT's ids (ordinary tokens of SmolLM2's
    vocabulary). (The default, int8 activations, rounds each linear's input: test_quantized_blocks
    bounds it against this float path.)"""
    from kiln.llm.export import export_gguf

    from zoo import smollm2

    path = smollm2.gguf_path()
    export_gguf(path, tmp_path / "smollm2.kiln", context=CONTEXT, max_tokens_per_call=16, compute="float32")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                               dtype=torch.float32).eval()
    tokens, want = _reference(theirs)
    _compare("SmolLM2 Q4_1 vs transformers' GGUF reader", _kiln_steps(tmp_path / "smollm2.kiln", tokens), want)


def teardown_module():
    for k, v in MEASURED.items():
        print(f"MEASURED {k}: {v:.2g}")
