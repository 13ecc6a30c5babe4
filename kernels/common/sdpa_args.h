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
};

// Reads and checks (query, key, value, attn_mask, dropout_p (must be 0), is_causal, scale,
// enable_gqa) and resizes the output to q's sizes with Ev last.
Status sdpa_args(const char* op, Inputs in, Outputs out, SdpaArgs* a);

}  // namespace kernels
}  // namespace kiln
