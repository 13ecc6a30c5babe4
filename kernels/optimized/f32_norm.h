// Normalization over float rows: layer norm.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct F32NormKernels {
  // y = (x - mean) * rstd [* w] [+ b] over n >= 1 contiguous floats, rstd = 1 / sqrt(var + eps); w and b
  // may be null. Mean and (biased) variance in two passes, the second one corrected (the deviations
  // from a first mean), float partial sums of at most 256 terms added in float64; x - mean formed
  // from the mean's two float halves, so rows far from 0 keep their spread (docs/kernels.md).
  void (*layer_norm_row)(const float* x, float* y, int64_t n, const float* w, const float* b, double eps);
};
KILN_ISA_TABLE(F32NormKernels, f32_norm)

}  // namespace kiln::kernels::optimized
