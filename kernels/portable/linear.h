// y = x @ w^T + bias (+ residual): the computation behind aten::linear and kiln::fused_linear.
#pragma once

#include "kiln/kernel.h"

namespace kiln {
namespace kernels {
namespace portable {

// Validates the float32 operands (x [..., K], w [N, K], bias [N] or a single
// element, residual exactly the output's shape), resizes y to [..., N] and
// computes it through the shared GEMM. `op` names the operator in errors.
Status linear_forward(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      Tensor& y);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
