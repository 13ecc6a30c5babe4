// The arguments of aten::_softmax.default and aten::_log_softmax.default, validated once for both tiers.
#pragma once

#include <cstdint>

#include "kernel_args.h"

namespace kiln {
namespace kernels {

// x seen as [outer, len, inner] around the softmax dim (len elements apart by inner).
struct SoftmaxArgs {
  const Tensor* x = nullptr;
  int64_t outer = 1, len = 1, inner = 1;
};

// Reads and checks (self, dim, half_to_float): an f32 or f64 self, half_to_float false; the output
// is resized to self's sizes.
Status softmax_args(const char* op, Inputs in, Outputs out, SoftmaxArgs* a);

}  // namespace kernels
}  // namespace kiln
