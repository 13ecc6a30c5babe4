// f32 depthwise convolution microkernels: output rows of one channel from a padded input band.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

// `rows` output rows of one channel (each ow floats at y + r * ow):
//   y[r][x] = clamp(bias + sum_ij w[i][j] * band[r * sh + i * dh][tap_offsets[j] + x] + residual[r][x], lo, hi)
// The band holds the input rows the window reads, zero-padded and with the
// columns of each stride phase gathered (op_conv2d.cpp builds it), so every
// tap reads a contiguous run; each band row has at least `width` readable
// floats past tap_offsets[j] + ow (rounded up to `width`).
struct DwconvRows {
  const float* band = nullptr;
  int64_t row_stride = 0;
  const int64_t* tap_offsets = nullptr;  // kw of them
  int64_t kh = 0, kw = 0;
  int64_t sh = 1, dh = 1;  // band rows per output row and per tap row
  const float* weights = nullptr;  // kh x kw
  float bias = 0.0f;
  float* y = nullptr;
  int64_t ow = 0, rows = 0;
  const float* residual = nullptr;  // same layout as y, or null
  float lo = 0.0f, hi = 0.0f;       // -inf, +inf for no clamp
};

struct F32DwconvKernels {
  int width = 0;  // floats per vector
  void (*rows)(const DwconvRows& a) = nullptr;
};
KILN_ISA_TABLE(F32DwconvKernels, f32_dwconv)

}  // namespace kiln::kernels::optimized
