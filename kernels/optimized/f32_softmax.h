// Softmax and log-softmax over float rows (the softmax dim innermost) or columns (a strided dim).
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

// Like the portable kernel: shifted by the maximum (0 when every value is -inf), the sum of the
// exponentials accumulated in float64 (from float vector partial sums of at most 256 terms each),
// then y = e / sum or y = (x - max) - log(sum). NaN anywhere in a row makes the whole row NaN.
struct F32SoftmaxKernels {
  // y = softmax(x) over n contiguous floats (n >= 1).
  void (*row)(const float* x, float* y, int64_t n, bool log);
  // `cols` (1 <= cols) neighbouring columns, each a softmax over `len` floats `stride` apart.
  void (*columns)(const float* x, float* y, int64_t len, int64_t stride, int64_t cols, bool log);
};
KILN_ISA_TABLE(F32SoftmaxKernels, f32_softmax)

}  // namespace kiln::kernels::optimized
