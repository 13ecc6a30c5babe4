"""The one decoder kiln exports (needs torch), configured by DecoderConfig for every
architecture kiln reads (kiln.llm.export): RMSNorm, rotary attention with
grouped-query KV heads and a static KV cache updated in place, SwiGLU, tied or
separate output projection; optionally q/k/v biases (Qwen2), a per-head RMSNorm of
q and k before the rotary embedding (Qwen3), a head size that is not dim / n_heads,
fused q/k/v and gate/up projections (Phi-3), scaled rotary frequencies (linear
scaling, Llama 3's per-frequency factors, YaRN), sliding-window attention on all layers
(Mistral, Phi-3) or on a pattern of them with their own rotary base (Gemma 2 and 3),
and Gemma's parts: embeddings scaled by sqrt(dim), a GELU-tanh feed-forward,
post-attention and post-feed-forward norms, a query scale of its own, and tanh
soft-capping of the attention scores and of the logits.

    forward(tokens i64[B, T], input_pos i64[B, T], slots i64[B], cache_positions i64[L]) -> logits

The KV cache has `slots` regions of `capacity` positions each: one per sequence
decoded at the same time (a batch). Row b of `tokens` belongs to the sequence in
cache region slots[b]; input_pos[b] are the positions of its tokens, whose keys and
values are written into that region in place (torch.export turns that into state
updates). Attention reads the first L positions of each row's region, L =
len(cache_positions) (callers pass arange(L), L = the largest last position + 1).
A query at position p sees positions 0..p of its own region, so positions not
written yet, and the positions past a shorter row's end, are masked whatever they
hold; in a layer with a sliding window W it sees p - W + 1..p only (Hugging Face's and
llama.cpp's window). B, T and L can be exported as dynamic dimensions.

Each layer's cache is one matrix of rows of head_dim values, row
(slot * n_kv_heads + kv_head) * capacity + position, so writing the new tokens is
one index_copy and reading a batch's keys is one index_select whose result is
already laid out [B, n_kv_heads, L, head_dim] (no transpose, no copy of unused slots; kiln's
exporter fuses it into the attention, kiln::sdpa_rows, which reads the rows in place).

In eager, input_pos may be i64[T] and slots and cache_positions omitted: one
sequence in region 0, attending to the whole region.

Weights follow Hugging Face's LlamaForCausalLM (Qwen2ForCausalLM, ...) up to naming,
rotary embedding included (rotate_half, llama.cpp's "NEOX" rotation): a llama GGUF's
attn_q/attn_k rows, which llama.cpp's converter permutes for its interleaved rotary
embedding, are permuted back when it is read (kiln.llm.export); the other
architectures' files are stored in this order already.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DecoderConfig:
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
    # The features beyond Llama's, off by default (kiln.llm.export sets them per architecture).
    architecture: str = "llama"
    key_length: int = 0                  # the head size when it is not dim // n_heads (0: dim // n_heads)
    attention_bias: bool = False         # q, k and v projections have biases (Qwen2)
    qk_norm: bool = False                # RMSNorm of each head's q and k before the rotary embedding (Qwen3)
    fused_qkv: bool = False              # one projection wqkv whose rows are q, k, v (Phi-3)
    fused_gate_up: bool = False          # one projection w_gate_up whose rows are gate, up (Phi-3)
    rope_scale: float = 1.0              # linear RoPE scaling: every inverse frequency divided by it
    rope_freq_factors: tuple | None = None  # per-frequency divisors of the inverse frequencies (Llama 3)
    yarn: tuple | None = None            # YaRN's (factor, original context, beta_fast, beta_slow) (Qwen2.5)
    sliding_window: int = 0              # keys older than this many positions are masked in windowed layers
    window_pattern: int = 0              # 0: every layer is windowed; n: all but every n-th (layer i with
                                         # (i + 1) % n == 0 sees everything: Gemma 2's 2, Gemma 3's 6)
    local_rope_theta: float = 0.0        # windowed layers' own RoPE base, unscaled (Gemma 3); 0: the global one
    activation: str = "silu"             # the gated feed-forward's: "silu" (SwiGLU) or "gelu_tanh" (GeGLU)
    embedding_scale: float = 1.0         # the token embeddings are multiplied by it (Gemma: sqrt(dim))
    post_norms: bool = False             # RMSNorm of the attention's and the feed-forward's outputs (Gemma 2, 3)
    query_scale: float = 0.0             # the attention's score scale; 0: 1 / sqrt(head_dim)
    attn_softcap: float = 0.0            # scores -> tanh(scores / cap) * cap before the mask (Gemma 2); 0: none
    final_softcap: float = 0.0           # the same for the logits

    @property
    def head_dim(self) -> int:
        return self.key_length or self.dim // self.n_heads

    def windowed(self, layer: int) -> bool:
        """Whether layer `layer` attends through the sliding window."""
        if not self.sliding_window:
            return False
        return self.window_pattern == 0 or (layer + 1) % self.window_pattern != 0


LlamaConfig = DecoderConfig  # the name of the days when it was Llama only


def _yarn_frequencies(inv_freq: torch.Tensor, theta: float, head_dim: int, factor: float, original: int,
                      beta_fast: float, beta_slow: float):
    """YaRN (Peng et al. 2023) as Hugging Face's "yarn" rope type and llama.cpp compute it: frequencies
    that turn fewer than beta_slow times over the original context are divided by `factor`, those
    that turn more than beta_fast times are kept, a linear ramp between (over whole dimensions: the
    bounds rounded outwards); cos and sin are multiplied by 0.1 ln(factor) + 1, which scales every
    attention score by its square."""
    def dimension(rotations: float) -> float:
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = max(math.floor(dimension(beta_fast)), 0), min(math.ceil(dimension(beta_slow)), head_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64, device="cpu") - low) / (high - low)).clamp(0, 1)
    kept = 1 - ramp  # the share of the unscaled frequency
    inv_freq = inv_freq / factor * (1 - kept) + inv_freq * kept
    return inv_freq, (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)


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
    def __init__(self, cfg: DecoderConfig, capacity: int, slots: int, cache_dtype: torch.dtype = torch.float32):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.scale = cfg.query_scale or None  # None: scaled_dot_product_attention's 1 / sqrt(head_dim)
        self.softcap = cfg.attn_softcap
        q_rows, kv_rows = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        self.split = (q_rows, kv_rows, kv_rows)
        if cfg.fused_qkv:
            self.wqkv = nn.Linear(cfg.dim, q_rows + 2 * kv_rows, bias=cfg.attention_bias)
        else:
            self.wq = nn.Linear(cfg.dim, q_rows, bias=cfg.attention_bias)
            self.wk = nn.Linear(cfg.dim, kv_rows, bias=cfg.attention_bias)
            self.wv = nn.Linear(cfg.dim, kv_rows, bias=cfg.attention_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps)
            self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps)
        self.wo = nn.Linear(q_rows, cfg.dim, bias=False)
        shape = (slots * cfg.n_kv_heads * capacity, cfg.head_dim)   # rows: see the module docstring
        # device="cpu": the model may be built under torch.device("meta"); the caches are not weights.
        # A float16 or bfloat16 cache holds each key and value rounded to it; attention reads them widened.
        # kiln's exporter keeps this module's own tensors (the caches) in their dtype.
        self.kiln_keeps_dtype = True
        self.register_buffer("k_cache", torch.zeros(shape, dtype=cache_dtype, device="cpu"), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=cache_dtype, device="cpu"), persistent=False)

    def forward(self, x, cos, sin, write_rows, read_rows, mask, used: int):
        b = x.shape[0]
        if hasattr(self, "wqkv"):
            q, k, v = self.wqkv(x).split(self.split, dim=-1)
        else:
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q = q.reshape(b, -1, self.n_heads, self.head_dim)
        k = k.reshape(b, -1, self.n_kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.transpose(1, 2)                                                           # [B, H, T, Dh]
        k = k.transpose(1, 2)                                                           # [B, KV, T, Dh]
        v = v.reshape(b, -1, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin

        self.k_cache.index_copy_(0, write_rows, k.reshape(-1, self.head_dim).to(self.k_cache.dtype))
        self.v_cache.index_copy_(0, write_rows, v.reshape(-1, self.head_dim).to(self.v_cache.dtype))

        # Grouped-query attention over the positions in use: KV head j serves query
        # heads j*g .. j*g+g-1 (HF's repeat_kv; kiln folds the repeat away).
        groups = self.n_heads // self.n_kv_heads
        keys = self.k_cache.index_select(0, read_rows).to(q.dtype).reshape(b, self.n_kv_heads, used, self.head_dim)
        values = self.v_cache.index_select(0, read_rows).to(q.dtype).reshape(b, self.n_kv_heads, used,
                                                                             self.head_dim)
        keys = keys[:, :, None].expand(b, self.n_kv_heads, groups, used, self.head_dim)
        values = values[:, :, None].expand(b, self.n_kv_heads, groups, used, self.head_dim)
        keys = keys.reshape(b, self.n_heads, used, self.head_dim)
        values = values.reshape(b, self.n_heads, used, self.head_dim)

        if self.softcap:
            y = self._softcapped_attention(q, keys, values, mask)
        else:
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scale)
        return self.wo(y.transpose(1, 2).reshape(b, -1, self.n_heads * self.head_dim))


    def _softcapped_attention(self, q, keys, values, mask):
        """Attention with Gemma 2's tanh soft-capping of the scores, which scaled_dot_product_attention
        cannot express: spelled out as Hugging Face's eager attention computes it. Every row sees
        at least its own position, so no row of the softmax is all -inf."""
        scale = self.scale if self.scale is not None else self.head_dim ** -0.5
        scores = torch.matmul(q, keys.transpose(-1, -2)) * scale
        scores = torch.tanh(scores / self.softcap) * self.softcap
        scores = torch.where(mask, scores, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), values)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig, capacity: int, slots: int, cache_dtype: torch.dtype = torch.float32):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg, capacity, slots, cache_dtype)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        if cfg.post_norms:
            self.post_attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
            self.post_ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        if cfg.activation not in ("silu", "gelu_tanh"):
            raise ValueError(f"activation {cfg.activation!r} is not silu or gelu_tanh")
        self.activation = cfg.activation
        self.hidden_dim = cfg.hidden_dim
        if cfg.fused_gate_up:
            self.w_gate_up = nn.Linear(cfg.dim, 2 * cfg.hidden_dim, bias=False)
        else:
            self.w_gate = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
            self.w_up = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w_down = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, write_rows, read_rows, mask, used: int):
        h = self.attention(self.attention_norm(x), cos, sin, write_rows, read_rows, mask, used)
        if hasattr(self, "post_attention_norm"):
            h = self.post_attention_norm(h)
        x = x + h
        h = self.ffn_norm(x)
        if hasattr(self, "w_gate_up"):
            gate, up = self.w_gate_up(h).split(self.hidden_dim, dim=-1)
        else:
            gate, up = self.w_gate(h), self.w_up(h)
        gate = F.silu(gate) if self.activation == "silu" else F.gelu(gate, approximate="tanh")
        h = self.w_down(gate * up)
        if hasattr(self, "post_ffn_norm"):
            h = self.post_ffn_norm(h)
        return x + h


class Decoder(nn.Module):
    """The decoder of `cfg` with a static KV cache of `slots` regions of `capacity` positions
    (see the module docstring).

    last_logits_only: return the logits of the last token only ([1, 1, vocab]),
    which is all generation needs (kiln llm export sets it: the output projection
    of the other prompt tokens is never computed). cache_dtype: the KV cache's,
    float32, float16 or bfloat16 (half the memory, each key and value rounded).
    """

    def __init__(self, cfg: DecoderConfig, capacity: int = 256, last_logits_only: bool = False, slots: int = 1,
                 cache_dtype: torch.dtype = torch.float32):
        super().__init__()
        self.cfg = cfg
        self.capacity = capacity
        self.slots = slots
        self.last_logits_only = last_logits_only
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, capacity, slots, cache_dtype) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        if not cfg.tied_embeddings:
            self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)

        self.windowed = [cfg.windowed(i) for i in range(cfg.n_layers)]
        # A window as long as the cache masks nothing: such layers take the full mask (and the fast path).
        self.window = cfg.sliding_window if cfg.sliding_window and cfg.sliding_window < capacity else 0
        cos, sin = self._rope_tables(cfg, capacity, cfg.rope_theta, scaled=True)
        self.register_buffer("rope_cos", cos, persistent=False)   # [capacity, Dh]
        self.register_buffer("rope_sin", sin, persistent=False)
        if cfg.local_rope_theta and any(self.windowed):
            cos, sin = self._rope_tables(cfg, capacity, cfg.local_rope_theta, scaled=False)
            self.register_buffer("local_rope_cos", cos, persistent=False)
            self.register_buffer("local_rope_sin", sin, persistent=False)

    @staticmethod
    def _rope_tables(cfg: DecoderConfig, capacity: int, theta: float, scaled: bool):
        """HF rotary tables: angle(pos, i) = pos * theta^(-2i/Dh) / (rope_scale * factor_i), the halves
        duplicated (llama.cpp divides by its rope_freqs factors the same way); unscaled for Gemma 3's
        local layers."""
        inv_freq = 1.0 / (theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64,
                                                 device="cpu") / cfg.head_dim))
        attention_factor = 1.0
        if scaled:
            inv_freq = inv_freq / cfg.rope_scale
            if cfg.rope_freq_factors is not None:
                inv_freq = inv_freq / torch.tensor(cfg.rope_freq_factors, dtype=torch.float64, device="cpu")
            if cfg.yarn is not None:
                inv_freq, attention_factor = _yarn_frequencies(inv_freq, theta, cfg.head_dim, *cfg.yarn)
        angles = torch.outer(torch.arange(capacity, dtype=torch.float64, device="cpu"), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        return (angles.cos() * attention_factor).float(), (angles.sin() * attention_factor).float()

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor, slots: torch.Tensor | None = None,
                cache_positions: torch.Tensor | None = None) -> torch.Tensor:
        if input_pos.dim() == 1:
            input_pos = input_pos[None, :]
        if slots is None:
            slots = torch.zeros(tokens.shape[0], dtype=torch.int64, device=tokens.device)
        if cache_positions is None:
            cache_positions = torch.arange(self.capacity, device=tokens.device)
        used = cache_positions.shape[0]
        x = self.tok_embeddings(tokens)
        if self.cfg.embedding_scale != 1.0:
            x = x * self.cfg.embedding_scale  # in x's dtype, as Hugging Face and llama.cpp scale them
        cos, sin = self.rope_cos[input_pos][:, None], self.rope_sin[input_pos][:, None]  # [B, 1, T, Dh]
        local_cos, local_sin = cos, sin
        if hasattr(self, "local_rope_cos"):
            local_cos, local_sin = self.local_rope_cos[input_pos][:, None], self.local_rope_sin[input_pos][:, None]
        # Cache rows (module docstring): region (slot, kv head) starts at row
        # (slot * n_kv_heads + kv_head) * capacity.
        kv_heads = torch.arange(self.cfg.n_kv_heads, device=tokens.device)
        region = (slots[:, None] * self.cfg.n_kv_heads + kv_heads[None, :]) * self.capacity   # [B, KV]
        write_rows = (region[:, :, None] + input_pos[:, None, :]).reshape(-1)              # [B * KV * T]
        read_rows = (region[:, :, None] + cache_positions[None, None, :]).reshape(-1)      # [B * KV * L]
        # Query at position p sees positions 0..p of its region: causal within the new
        # tokens, and positions not written yet (> p) are masked whatever they hold.
        mask = (cache_positions[None, None, :] <= input_pos[:, :, None])[:, None]          # [B, 1, T, L]
        window_mask = mask
        if self.window:
            # Windowed layers also mask the keys W or more positions older than the query: one more
            # [B, 1, T, L] mask per call, shared by those layers (kiln's fused attention skips the key
            # blocks it hides).
            recent = cache_positions[None, None, :] > input_pos[:, :, None] - self.window
            window_mask = mask & recent[:, None]
        for layer, windowed in zip(self.layers, self.windowed):
            if windowed:
                x = layer(x, local_cos, local_sin, write_rows, read_rows, window_mask, used)
            else:
                x = layer(x, cos, sin, write_rows, read_rows, mask, used)
        if self.last_logits_only:
            x = x[:, -1:]
        x = self.norm(x)
        logits = self._project(x)
        if self.cfg.final_softcap:
            logits = torch.tanh(logits / self.cfg.final_softcap) * self.cfg.final_softcap
        return logits

    def _project(self, x: torch.Tensor) -> torch.Tensor:
        if not self.cfg.tied_embeddings:
            return self.output(x)
        embedding = self.tok_embeddings
        if isinstance(embedding, nn.Embedding):
            return F.linear(x, embedding.weight)
        return embedding.linear(x)  # a quantized embedding (kiln.export.quantize) projects with its own tensors


Llama = Decoder  # the name of the days when it was Llama only


def build_decoder(cfg: DecoderConfig, state: dict, capacity: int, last_logits_only: bool = False,
                  slots: int = 1, cache_dtype: torch.dtype = torch.float32) -> Decoder:
    """A Decoder in eval mode whose weights are the tensors of `state` (used in place, not copied)."""
    with torch.device("meta"):  # weights are assigned from `state` below, no point initialising them
        model = Decoder(cfg, capacity, last_logits_only, slots, cache_dtype)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise ValueError(f"the weights do not fit the model: missing {missing[:4]}, unexpected {unexpected[:4]}")
    return model.eval()


build_llama = build_decoder


@torch.no_grad()
def reset_cache(model: Decoder) -> None:
    """Zero every layer's KV cache (eager)."""
    for layer in model.layers:
        layer.attention.k_cache.zero_()
        layer.attention.v_cache.zero_()


@torch.no_grad()
def greedy_generate(model: Decoder, prompt_ids: list[int], n_new: int, eos_id: int | None = None) -> list[int]:
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
