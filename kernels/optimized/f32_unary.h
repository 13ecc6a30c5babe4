// Elementwise float math that is not an activation: exp, erf, neg, abs, sqrt, rsqrt, reciprocal and
// powers with a constant exponent.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

enum class UnaryMath : uint8_t {
  Exp,  // vector exp (docs/kernels.md, "Vector math")
  Erf,  // vector erf
  Neg,  // -x (the sign bit: -0 for 0)
  Abs,
  Sqrt,
  Rsqrt,         // 1 / sqrt(x), as the portable kernel computes it (rsqrt(-0) = -inf)
  Reciprocal,    // 1 / x
  PowInt,        // x^e for an integer e in [0, kMaxPowExponent] by repeated squaring; e = 2 and 3 give x*x and x*x*x
  PowRecip,      // 1 / x^e for e = 1 or 2
  PowMinusHalf,  // x^-0.5 = 1 / sqrt(x) with pow's special cases: (-0)^-0.5 = inf, (-inf)^-0.5 = 0
};
constexpr int kMaxPowExponent = 16;

struct F32UnaryKernels {
  // y[i] = op(x[i]) for i < n; `exponent` is read by the Pow kinds only. y may be x.
  void (*map)(UnaryMath op, const float* x, float* y, int64_t n, int exponent);
};
KILN_ISA_TABLE(F32UnaryKernels, f32_unary)

}  // namespace kiln::kernels::optimized
