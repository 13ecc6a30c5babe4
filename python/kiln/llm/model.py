"""The Llama-family decoder kiln exports (needs torch): RMSNorm, rotary attention with
grouped-query KV heads and a static KV cache updated in place, SwiGLU, tied or
separate output projection.

    forward(tokens i64[1, T], input_pos i64[T], cache_positions i64[L] = None) -> logits

`input_pos` are the absolute positions of `tokens`; their keys and values are
written into per-layer cache buffers in place (torch.export turns that into
state updates). Attention reads the first L cache slots, L = len(cache_positions)
(the slots in use: callers pass arange(L), L = last position + 1), or the whole
cache when cache_positions is None. A query at position p sees the slots
0..p, so slots not written yet are masked whatever they hold, and T and L can
be exported as dynamic dimensions.

Weights follow Hugging Face's LlamaForCausalLM up to naming, rotary embedding
included (rotate_half): a GGUF file's attn_q/attn_k rows, which llama.cpp's
converter permutes for its interleaved rotary embedding, are permuted back
when it is read (kiln.llm.gguf).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    hidden_dim: int
    rope_theta: float
    norm_eps: float
    context_length: int       # what the model was trained for (the KV cache may hold less)
    tied_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig, capacity: int):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)
        shape = (1, cfg.n_kv_heads, capacity, cfg.head_dim)
        # device="cpu": the model may be built under torch.device("meta"); the caches are not weights.
        self.register_buffer("k_cache", torch.zeros(shape, device="cpu"), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, device="cpu"), persistent=False)

    def forward(self, x, cos, sin, input_pos, mask, used: int):
        b = x.shape[0]
        q = self.wq(x).reshape(b, -1, self.n_heads, self.head_dim).transpose(1, 2)      # [1, H, T, Dh]
        k = self.wk(x).reshape(b, -1, self.n_kv_heads, self.head_dim).transpose(1, 2)   # [1, KV, T, Dh]
        v = self.wv(x).reshape(b, -1, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin

        self.k_cache.index_copy_(2, input_pos, k)
        self.v_cache.index_copy_(2, input_pos, v)

        # Grouped-query attention over the slots in use: KV head j serves query
        # heads j*g .. j*g+g-1 (HF's repeat_kv; kiln folds the repeat away).
        groups = self.n_heads // self.n_kv_heads
        keys = self.k_cache[:, :, :used]
        values = self.v_cache[:, :, :used]
        keys = keys[:, :, None].expand(b, self.n_kv_heads, groups, used, self.head_dim)
        values = values[:, :, None].expand(b, self.n_kv_heads, groups, used, self.head_dim)
        keys = keys.reshape(b, self.n_heads, used, self.head_dim)
        values = values.reshape(b, self.n_heads, used, self.head_dim)

        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, -1, self.n_heads * self.head_dim))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig, capacity: int):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg, capacity)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.w_gate = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w_up = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w_down = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, input_pos, mask, used: int):
        x = x + self.attention(self.attention_norm(x), cos, sin, input_pos, mask, used)
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    """Llama decoder with a static KV cache of `capacity` positions (see the module docstring).

    last_logits_only: return the logits of the last token only ([1, 1, vocab]),
    which is all generation needs (kiln llm export sets it: the output projection
    of the other prompt tokens is never computed).
    """

    def __init__(self, cfg: LlamaConfig, capacity: int = 256, last_logits_only: bool = False):
        super().__init__()
        self.cfg = cfg
        self.capacity = capacity
        self.last_logits_only = last_logits_only
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, capacity) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        if not cfg.tied_embeddings:
            self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)

        # HF rotary tables: angle(pos, i) = pos * theta^(-2i/Dh), the halves duplicated.
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64,
                                                          device="cpu") / cfg.head_dim))
        angles = torch.outer(torch.arange(capacity, dtype=torch.float64, device="cpu"), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos().float(), persistent=False)   # [capacity, Dh]
        self.register_buffer("rope_sin", angles.sin().float(), persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor,
                cache_positions: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tok_embeddings(tokens)
        cos, sin = self.rope_cos[input_pos], self.rope_sin[input_pos]                   # [T, Dh]
        if cache_positions is None:
            cache_positions = torch.arange(self.capacity, device=tokens.device)
        used = cache_positions.shape[0]
        # Query at position p sees cache slots 0..p: causal within the new tokens, and
        # slots not written yet (> p) are masked whatever they hold.
        mask = cache_positions[None, :] <= input_pos[:, None]                           # [T, L]
        for layer in self.layers:
            x = layer(x, cos, sin, input_pos, mask, used)
        if self.last_logits_only:
            x = x[:, -1:]
        x = self.norm(x)
        if not self.cfg.tied_embeddings:
            return self.output(x)
        embedding = self.tok_embeddings
        if isinstance(embedding, nn.Embedding):
            return F.linear(x, embedding.weight)
        return embedding.linear(x)  # a quantized embedding (kiln.export.quantize) projects with its own tensors


def build_llama(cfg: LlamaConfig, state: dict, capacity: int, last_logits_only: bool = False) -> Llama:
    """A Llama in eval mode whose weights are the tensors of `state` (used in place, not copied)."""
    with torch.device("meta"):  # weights are assigned from `state` below, no point initialising them
        model = Llama(cfg, capacity, last_logits_only)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise ValueError(f"the weights do not fit the model: missing {missing[:4]}, unexpected {unexpected[:4]}")
    return model.eval()


@torch.no_grad()
def reset_cache(model: Llama) -> None:
    """Zero every layer's KV cache (eager)."""
    for layer in model.layers:
        layer.attention.k_cache.zero_()
        layer.attention.v_cache.zero_()


@torch.no_grad()
def greedy_generate(model: Llama, prompt_ids: list[int], n_new: int, eos_id: int | None = None) -> list[int]:
    """Greedy decoding in eager: one prefill call with the whole prompt, then one token per call.

    Returns the new ids only (stops after eos_id when given). Positions start at 0,
    so stale cache contents from earlier calls are never attended to.
    """
    if len(prompt_ids) + n_new > model.capacity:
        raise ValueError(f"{len(prompt_ids)} + {n_new} tokens do not fit a cache of {model.capacity}")
    logits = model(torch.tensor([prompt_ids]), torch.arange(len(prompt_ids)))
    out: list[int] = []
    pos = len(prompt_ids)
    for _ in range(n_new):
        token = int(logits[0, -1].argmax())
        out.append(token)
        if token == eos_id or len(out) == n_new:
            break
        logits = model(torch.tensor([[token]]), torch.tensor([pos]))
        pos += 1
    return out
