// Pieces of 2-D pooling over float planes: region sums and means (adaptive and global average pooling,
// mean over trailing dims) and
// the separable window reductions of max_pool2d / avg_pool2d (rows of a window first, then taps).
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct F32PoolKernels {
  // The sum of x[r * stride + c] for r < rows, c < cols: float partial sums of at most 256 terms,
  // added in float64.
  double (*sum2d)(const float* x, int64_t rows, int64_t cols, int64_t stride);
  // y[r] = (the sum2d of x[r * n, (r + 1) * n)) / n for r < rows, n >= 1: global average pooling and
  // means over trailing dims, without a call per row.
  void (*mean_rows)(const float* x, int64_t rows, int64_t n, float* y);
  // y[c] = max (or sum) over r < rows (>= 1) of x[r * stride + c], for c < n. NaN wins a max.
  void (*reduce_rows)(const float* x, int64_t rows, int64_t stride, int64_t n, bool max, float* y);
  // y[c] = max (or sum) over t < taps (>= 1) of x[c + t * dilation], for c < n. NaN wins a max.
  void (*reduce_taps)(const float* x, int64_t taps, int64_t dilation, int64_t n, bool max, float* y);
};
KILN_ISA_TABLE(F32PoolKernels, f32_pool)

}  // namespace kiln::kernels::optimized
