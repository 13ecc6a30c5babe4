// f32 GEMM microkernels: one register tile of C = A @ B over a slice of K, with the fused epilogue.
//
// A is read in place, row by row (a + r * lda, K contiguous): linear inputs,
// conv weights and matmul operands all have contiguous rows, so A is never
// packed. B is packed into panels of `nr` columns, K-major (panel[k * nr + j]),
// zero-padded past the last column: prepacked once for constant weights, or
// per cache block into worker scratch (gemm_driver.h).
#pragma once

#include <cstdint>

#include "optimized/f32_activation.h"
#include "optimized/isa_dispatch.h"
#include "optimized/register_activation.h"

namespace kiln::kernels::optimized {

// The largest register tile height of any level (the size of the tile table).
constexpr int kGemmMaxMR = 8;

// One call of a tile microkernel: C[0:mr, 0:nc] (+)= A[0:mr, 0:kc] @ panel[0:kc, 0:nr].
struct GemmTile {
  int64_t kc = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;  // kc rows of nr floats
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t nc = 0;           // valid columns, 1..nr; the tile stores only these
  bool accumulate = false;  // add C's contents (the sum over the earlier slices of K)
  bool last = false;        // the last slice of K: apply the epilogue below before storing
  // Epilogue: y = act(alpha * sum + bias + residual).
  float alpha = 1.0f;
  const float* bias = nullptr;  // at this tile's first column (per column) or first row (per row)
  bool bias_per_row = false;
  const float* residual = nullptr;  // at this tile's C[0, 0], same layout as C with row stride ldr
  int64_t ldr = 0;
  RegisterActivation act;
};

using GemmTileFn = void (*)(const GemmTile& t);

struct F32GemmKernels {
  int mr = 0, nr = 0;              // register tile: mr rows by nr columns of C
  int64_t kc = 0, mc = 0, nc = 0;  // cache blocks: K slice, rows of A per L2 block, columns of B per block
  // tile[r - 1] computes a tile of r rows (1 <= r <= mr), each element summed in the same order at
  // every height (and in gemv4), so that a row of C never depends on the other rows of A.
  GemmTileFn tile[kGemmMaxMR] = {};
  // The same for a tile of at most nr / 2 valid columns (the last panel of an N that is not a
  // multiple of nr): it computes half the vectors.
  GemmTileFn narrow[kGemmMaxMR] = {};
  // Four one-row tiles (t[0..3]: the same kc, a and flags, their own panels)
  // at once, so that four streams of B are read side by side: one core reads
  // memory faster from several streams than from one.
  void (*gemv4)(const GemmTile* t) = nullptr;
  // Packs B[k][j] = b[k * ldb + j] (k < kc, j < nc) into panels of nr columns,
  // kc x nr floats each, zero-padded past column nc.
  void (*pack_rows)(const float* b, int64_t ldb, int64_t kc, int64_t nc, float* dst) = nullptr;
  // The same level's vector activations, for the epilogue's after-tile part.
  const F32ActivationKernels* activation = nullptr;
};
KILN_INTERNAL_ISA_TABLE(F32GemmKernels, f32_gemm)

}  // namespace kiln::kernels::optimized
