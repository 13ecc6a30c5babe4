// The arguments of aten::conv2d.default and kiln::fused_conv2d.default, validated once for both tiers.
#pragma once

#include <cstdint>

#include "activation.h"
#include "kernel_args.h"

namespace kiln {
namespace kernels {

// The geometry of a validated grouped 2-D convolution (NCHW; an unbatched input is one image).
struct Conv2dShape {
  int64_t images = 1;
  int64_t c = 0, h = 0, w = 0;  // input channels and spatial size
  int64_t cout = 0, groups = 1, cin_g = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
};

struct Conv2dArgs {
  const Tensor *x = nullptr, *weight = nullptr;       // x [N,] C, H, W; weight [Cout, C / groups, kh, kw]
  const Tensor *bias = nullptr, *residual = nullptr;  // null for None
  ActivationArg act;                                  // kiln::fused_conv2d only
  Conv2dShape shape;
};

// Reads (input, weight, bias, stride, padding, dilation, groups) of aten::conv2d or, `fused`,
// (input, weight, bias, residual, stride, padding, dilation, groups, activation, act_min, act_max)
// of kiln::fused_conv2d, and checks them: f32 tensors, groups dividing both channel counts, bias
// [Cout], the window (window_geometry), the residual exactly the output's shape; resizes the
// output. `at_prepare`: see tensor_arg.
Status conv2d_args(const char* op, bool fused, bool at_prepare, Inputs in, Outputs out, Conv2dArgs* a);

}  // namespace kernels
}  // namespace kiln
