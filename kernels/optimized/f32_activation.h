// Activations over float rows, vectorized (simd/vec_math.h): every kind of common/activation.h.
// The aten activation kernels use `map`; the fused linear/conv epilogues call `apply` on each
// finished row:
//   f32_activation_for(ctx.isa).apply(act.kind, row, n, act.lo, act.hi);
#pragma once

#include <cstdint>

#include "common/activation.h"
#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct F32ActivationKernels {
  // x[i] = act(x[i]) for i < n, in place. lo and hi are read for Activation::Clamp only (NaN passes
  // through; lo > hi gives hi). Results equal the portable formulas up to the error of the vector
  // exp/tanh/erf (docs/kernels.md, "Vector math"); relu, clamp, hardswish and hardsigmoid are exact.
  void (*apply)(Activation act, float* x, int64_t n, float lo, float hi);
  // y[i] = act(x[i]); y may be x.
  void (*map)(Activation act, const float* x, float* y, int64_t n, float lo, float hi);
};
KILN_ISA_TABLE(F32ActivationKernels, f32_activation)

}  // namespace kiln::kernels::optimized
