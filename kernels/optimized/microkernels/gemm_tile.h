// The register tile shared by the GEMM microkernel families of one level (f32_gemm.inc,
// bf16_gemm.inc): its shape, and the epilogue that finishes a tile of C.
#pragma once

#include "optimized/f32_gemm.h"
#include "optimized/simd/activation.h"

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {
namespace {

using V = VecF32;
constexpr int W = V::kWidth;
constexpr int NV = 2;  // vectors per row of the tile (even: the narrow tiles have half)
constexpr int NR = NV * W;
#if defined(__aarch64__) || defined(__AVX512F__)
constexpr int MR = 8;  // 32 vector registers
#else
constexpr int MR = 6;  // 16 vector registers
#endif
static_assert(MR <= kGemmMaxMR, "the tile table has kGemmMaxMR entries");

// Loads the first `n` lanes of p (all of them when n >= W).
inline V load_n(const float* p, int64_t n) { return n >= W ? V::load(p) : V::load_partial(p, static_cast<int>(n)); }
inline void store_n(V x, float* p, int64_t n) {
  if (n >= W) {
    x.store(p);
  } else {
    x.store_partial(p, static_cast<int>(n));
  }
}

// Adds C's earlier partial sums and the epilogue, then stores the valid columns.
template <int R, int NVT = NV>
inline void finish(const GemmTile& t, V (&acc)[R][NVT]) {
  const V alpha = V::broadcast(t.alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* c = t.c + r * t.ldc;
    const V row_bias = t.last && t.bias != nullptr && t.bias_per_row ? V::broadcast(t.bias[r]) : V::zero();
#pragma GCC unroll 4
    for (int v = 0; v < NVT; ++v) {
      const int64_t cols = t.nc - v * W;
      if (cols <= 0) break;
      V x = acc[r][v];
      if (t.accumulate) x = x + load_n(c + v * W, cols);
      if (t.last) {
        if (t.alpha != 1.0f) x = x * alpha;
        if (t.bias != nullptr) x = x + (t.bias_per_row ? row_bias : load_n(t.bias + v * W, cols));
        if (t.residual != nullptr) x = x + load_n(t.residual + r * t.ldr + v * W, cols);
        x = activate(x, t.act);
      }
      store_n(x, c + v * W, cols);
    }
  }
}

// C's partial sums (or the residual) are read after the walk over K; ask for
// them first, so that they arrive from L2 or L3 meanwhile.
template <int R>
inline void prefetch_tile(const GemmTile& t) {
  const float* src = t.accumulate ? t.c : t.last ? t.residual : nullptr;
  const int64_t ld = t.accumulate ? t.ldc : t.ldr;
  if (src == nullptr) return;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __builtin_prefetch(src + r * ld);
    __builtin_prefetch(src + r * ld + NR - 1);
  }
}

}  // namespace
}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
