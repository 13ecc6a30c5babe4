// y = min(max(x, lo), hi) over float arrays: relu, relu6, hardtanh, clamp.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct F32ClampKernels {
  // NaN passes through, as in PyTorch; lo > hi gives hi.
  void (*clamp)(const float* x, float* y, int64_t n, float lo, float hi);
};
KILN_ISA_TABLE(F32ClampKernels, f32_clamp)

}  // namespace kiln::kernels::optimized
