// Attention microkernels (scaled_dot_product_attention): flash-style, without a score matrix. A task
// is a chunk of query rows that share one key/value head; keys are taken in blocks of
// kAttentionKeyBlock: the block is packed transposed once for the whole chunk, then each group of
// rows (up to kAttentionGroupRows, as many as the level's registers hold) computes its scores,
// updates its running maxima and sums (online softmax) and accumulates P V, so that every load of a
// key or value serves all the rows of the group.
#pragma once

#include <cstddef>
#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

constexpr int64_t kAttentionKeyBlock = 64;
constexpr int64_t kAttentionRowChunk = 64;  // query rows per task at most
constexpr int64_t kAttentionGroupRows = 4;  // query rows per register tile at most (any level)

// What every task of one call shares.
struct AttentionShape {
  int64_t rows_per_head = 0;  // L
  int64_t keys = 0;           // S
  int64_t e = 0, ev = 0;      // head dims of q/k and of v
  float scale = 1;
  bool causal = false;                 // key j visible to query position i iff j <= i
  const uint8_t* bool_mask = nullptr;  // true = attend
  const float* float_mask = nullptr;   // added to the scaled scores
  int64_t mask_strides[4] = {};        // over [B, H, L, S], 0 where broadcast
};

// Query rows r < rows: q + r * e, written to out + r * ev; the first is query position `position`
// of head `head` in batch `batch`, the next ones follow in [H, L] order (positions, then heads).
struct AttentionTask {
  const float* q = nullptr;
  float* out = nullptr;
  const float* k = nullptr;                             // [S, E] of the key/value head these rows read
  const float* v = nullptr;                             // [S, Ev]
  int64_t batch = 0, head = 0, position = 0, rows = 0;  // rows <= kAttentionRowChunk
  // kiln::sdpa_rows: k and v are caches of cache_rows rows, key s is row key_rows[s] of each (a row out
  // of [0, cache_rows) reads row 0). Blocks of consecutive rows are read in place, others gathered.
  const int64_t* key_rows = nullptr;
  int64_t cache_rows = 0;
  // With key_rows, caches kept in 16 bits instead of k and v: float16 (or bfloat16) bits, widened
  // exactly into the gathered block.
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  bool bfloat16 = false;
};

// Per-thread scratch of a task, in bytes (64-byte aligned blocks); `rows`: room for a gathered key
// and value block (tasks with key_rows).
inline size_t attention_scratch_bytes(int64_t e, int64_t ev, bool rows = false) {
  const auto floats = static_cast<size_t>(e * kAttentionKeyBlock + kAttentionGroupRows * kAttentionKeyBlock +
                                          kAttentionRowChunk * (ev + 2) + (rows ? (e + ev) * kAttentionKeyBlock : 0));
  return floats * sizeof(float);
}

struct F32AttentionKernels {
  // Like the portable kernel: masked keys (causal, false, or a -inf score) take no weight, a row that
  // attends to nothing gives zeros, and a NaN or +inf score makes its row NaN.
  void (*attend)(const AttentionShape& shape, const AttentionTask& task, float* scratch);
};
KILN_ISA_TABLE(F32AttentionKernels, f32_attention)

}  // namespace kiln::kernels::optimized
