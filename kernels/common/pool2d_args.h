// The arguments of adaptive_avg_pool2d, max_pool2d and avg_pool2d, validated once for both tiers.
#pragma once

#include <cstdint>

#include "kernel_args.h"
#include "window.h"

namespace kiln {
namespace kernels {

// aten::adaptive_avg_pool2d.default (self, output_size): a pooling input and a non-negative output
// size (oh, ow); resizes the output.
struct AdaptivePool2dArgs {
  const Tensor* x = nullptr;
  PoolInput input;
  int64_t oh = 0, ow = 0;
};
Status adaptive_avg_pool2d_args(const char* op, Inputs in, Outputs out, AdaptivePool2dArgs* a);

enum class Pool2d : uint8_t { Max, Avg };

// aten::max_pool2d.default (self, kernel_size, stride, padding, dilation, ceil_mode) and
// aten::avg_pool2d.default (self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override): an empty stride is the kernel size; the windows are validated (window_geometry,
// padding at most half the kernel); the output is resized unless `at_prepare` (see tensor_arg).
struct Pool2dArgs {
  const Tensor* x = nullptr;
  PoolInput input;
  Window wh, ww;  // height and width (dilation 1 for avg_pool2d)
  bool ceil_mode = false;
  bool count_include_pad = true, has_divisor = false;  // avg_pool2d
  int64_t divisor = 0;                                 // divisor_override when has_divisor (not 0)
};
Status pool2d_args(const char* op, Pool2d kind, bool at_prepare, Inputs in, Outputs out, Pool2dArgs* p);

}  // namespace kernels
}  // namespace kiln
