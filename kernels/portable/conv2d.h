// conv2d(x, w, bias) (+ residual): the computation behind aten::conv2d and kiln::fused_conv2d.
#pragma once

#include <cstdint>

#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {

// The window arguments of a 2-D convolution (validated by conv2d_forward).
struct Conv2dParams {
  int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1};
  int64_t groups = 1;
};

// Reads (stride, padding, dilation, groups) from in[i .. i+3].
Status conv2d_params(const char* op, Inputs in, size_t i, Conv2dParams* p);

// Validates the float32 operands (x [N,] C, H, W; w [Cout, C / groups, kh, kw];
// bias [Cout]; residual exactly the output's shape) and the window, resizes y
// and computes it (implicit-im2col GEMM, direct depthwise). `op` names the
// operator in errors.
Status conv2d_forward(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      const Conv2dParams& p, Tensor& y);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
