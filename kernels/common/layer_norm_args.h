// The arguments of aten::layer_norm.default, validated once for both kernel tiers.
#pragma once

#include <cstdint>

#include "kernel_args.h"

namespace kiln {
namespace kernels {

// x seen as `rows` rows of `n` elements (n: the product of normalized_shape, the trailing dims).
struct LayerNormArgs {
  const Tensor *x = nullptr, *weight = nullptr, *bias = nullptr;  // weight and bias: null for None
  double eps = 0;
  int64_t rows = 0, n = 0;
};

// Reads and checks (input, normalized_shape, weight, bias, eps, cudnn_enable): f32 tensors,
// normalized_shape the trailing dims of the input and the shape of weight and bias; resizes the
// output to the input's sizes.
Status layer_norm_args(const char* op, Inputs in, Outputs out, LayerNormArgs* a);

}  // namespace kernels
}  // namespace kiln
