// The arguments of aten::linear.default and kiln::fused_linear.default, validated once for both tiers.
#pragma once

#include <cstdint>

#include "activation.h"
#include "kernel_args.h"

namespace kiln {
namespace kernels {

// y [..., N] = act(x [..., K] @ weight [N, K]^T + bias + residual), x seen as [m, k].
struct LinearArgs {
  const Tensor *x = nullptr, *weight = nullptr;
  const Tensor *bias = nullptr, *residual = nullptr;  // null for None
  ActivationArg act;                                  // kiln::fused_linear only
  int64_t m = 0, n = 0, k = 0;
};

// Reads (input, weight, bias) of aten::linear or, `fused`, (input, weight, bias, residual,
// activation, act_min, act_max) of kiln::fused_linear, and checks them: f32 tensors, bias [N] or a
// single element, the residual exactly the output's shape; resizes the output to [..., N].
// `at_prepare`: see tensor_arg.
Status linear_args(const char* op, bool fused, bool at_prepare, Inputs in, Outputs out, LinearArgs* a);

}  // namespace kernels
}  // namespace kiln
