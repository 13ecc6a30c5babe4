// The activations of the GEMM and convolution epilogues that are not a clamp.
//
// relu and clamp are applied in registers by the microkernels; the others run
// here, over each finished tile while it is still in L1. They are the scalar
// reference formulas for now; this is the one place to switch to the vector
// math of simd/vec_math.h.
#pragma once

#include <cstdint>

#include "common/activation.h"

namespace kiln {
namespace kernels {
namespace optimized {

// True if `kind` is applied by activate_tile rather than by the microkernel's clamp.
inline bool activation_after_tile(Activation kind) {
  return kind != Activation::None && kind != Activation::Relu && kind != Activation::Clamp;
}

// c[i * ldc + j] = act(c[i * ldc + j]) for i < rows, j < cols.
void activate_tile(const ActivationArg& act, float* c, int64_t ldc, int64_t rows, int64_t cols);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
