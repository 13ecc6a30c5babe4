// conv2d(x, w, bias) (+ residual): the computation behind aten::conv2d and kiln::fused_conv2d.
#pragma once

#include "common/conv2d_args.h"

namespace kiln {
namespace kernels {
namespace portable {

// Computes y (resized by conv2d_args) by an implicit-im2col GEMM or, depthwise, directly; then the
// activation.
void conv2d_forward(const Conv2dArgs& a, Tensor& y);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
