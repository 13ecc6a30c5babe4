// The arguments of add.Tensor, sub.Tensor, mul.Tensor and div.Tensor, validated once for both tiers.
#pragma once

#include "kernel_args.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

struct ArithArgs {
  const Tensor *a = nullptr, *b = nullptr;
  double alpha = 1.0;  // add and sub: self + alpha * other
  Dims sizes;          // the broadcast shape (the output's)
};

// Reads and checks (self, other[, alpha]): self, other and the output of one dtype, f32 or f64 (or
// i64 and i32 when `integers_ok`; then alpha must be an integer), shapes that broadcast; resizes the
// output to the broadcast shape. `has_alpha`: add and sub.
Status arith_args(const char* op, bool has_alpha, bool integers_ok, Inputs in, Outputs out, ArithArgs* a);

}  // namespace kernels
}  // namespace kiln
