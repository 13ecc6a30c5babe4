// f32 data movement between NCHW planes and pixel-major vectors of channels (the layouts of the
// channel-block depthwise kernel and of the transposed convolution GEMM), with the epilogue that
// follows a transposed result.
#pragma once

#include <cstdint>

#include "common/activation.h"
#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct F32LayoutKernels {
  // dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols.
  void (*transpose)(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                    int64_t dst_stride) = nullptr;
  // y[i] = act(y[i] + residual[i]) for i < n (residual may be null: y[i] = act(y[i])).
  void (*add_activate)(float* y, const float* residual, int64_t n, Activation act, float lo, float hi) = nullptr;
};
KILN_ISA_TABLE(F32LayoutKernels, f32_layout)

}  // namespace kiln::kernels::optimized
