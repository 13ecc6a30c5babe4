// The arguments of aten::scaled_dot_product_attention.default, validated once for both kernel tiers.
#pragma once

#include <cstdint>

#include "kernel_args.h"

namespace kiln {
namespace kernels {

// q [B, H, L, E] (or [H, L, E]), k [B, Hkv, S, E], v [B, Hkv, S, Ev]; H a multiple of Hkv with
// enable_gqa (query head h reads kv head h / (H / Hkv)). attn_mask: bool (true = attend) or the
// dtype of q, broadcastable to [B, H, L, S]; is_causal keeps key j <= query row i (top-left aligned).
struct SdpaArgs {
  const Tensor *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  int64_t b = 1, h = 1, hkv = 1, l = 0, s = 0, e = 0, ev = 0;
  double scale = 1;  // the given scale, or 1 / sqrt(E)
  bool causal = false;
  int64_t mask_strides[4] = {};  // element strides of the mask over [B, H, L, S] (0 where broadcast)
  // kiln::sdpa_rows only: k and v are the caches [R, E] and [R, Ev], and key s of (batch b, kv head h)
  // is row rows[(b * Hkv + h) * S + s] of each; every index was checked to be in [0, R).
  const int64_t* rows = nullptr;
  int64_t cache_rows = 0;  // R
  // The caches' dtype: q's, or float16 / bfloat16 under a float32 query (a KV cache kept in 16 bits,
  // widened to float exactly as each row is read).
  ScalarType cache_dtype = ScalarType::Float32;
};

// Reads and checks (query, key, value, attn_mask, dropout_p (must be 0), is_causal, scale,
// enable_gqa) and resizes the output to q's sizes with Ev last.
Status sdpa_args(const char* op, Inputs in, Outputs out, SdpaArgs* a);

// Reads and checks kiln::sdpa_rows(query [B, H, L, E], k_cache [R, E], v_cache [R, Ev], rows i64
// [B * Hkv * S], attn_mask, kv_heads, is_causal, scale): scaled_dot_product_attention(query,
// k_cache[rows].view(B, Hkv, S, E), v_cache[rows].view(B, Hkv, S, Ev), attn_mask, is_causal=is_causal,
// scale=scale, enable_gqa=True) without the gathered copies. Every row index is bounds-checked here;
// the kernels still read each index once more through sdpa_row() (memory is never trusted twice).
Status sdpa_rows_args(const char* op, Inputs in, Outputs out, SdpaArgs* a);

// Row i of a.rows, or 0 if it is (no longer) in [0, R): never a read out of bounds.
inline int64_t sdpa_row(const SdpaArgs& a, int64_t i) {
  const int64_t r = a.rows[i];
  return r >= 0 && r < a.cache_rows ? r : 0;
}

}  // namespace kernels
}  // namespace kiln
