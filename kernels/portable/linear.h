// y = act(x @ w^T + bias + residual): the computation behind aten::linear and kiln::fused_linear.
#pragma once

#include "common/linear_args.h"

namespace kiln {
namespace kernels {
namespace portable {

// Computes y (resized by linear_args) through the shared GEMM, then the activation.
void linear_forward(const LinearArgs& a, Tensor& y);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
