// f32 depthwise convolution microkernels: output rows of one channel from a padded input band.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"
#include "optimized/register_activation.h"

namespace kiln::kernels::optimized {

// `rows` output rows of one channel (each ow floats at y + r * ow):
//   y[r][x] = act(bias + sum_ij w[i][j] * band[r * sh + i * dh][tap_offsets[j] + x] + residual[r][x])
// The band holds the input rows the window reads, zero-padded and with the
// columns of each stride phase gathered (conv_depthwise.cpp builds it), so
// every tap reads a contiguous run: read_columns(ow) floats from
// tap_offsets[j] on each band row.
struct DwconvRows {
  const float* band = nullptr;
  int64_t row_stride = 0;
  const int64_t* tap_offsets = nullptr;  // kw of them
  int64_t kh = 0, kw = 0;
  int64_t sh = 1, dh = 1;          // band rows per output row and per tap row
  const float* weights = nullptr;  // kh x kw
  float bias = 0.0f;
  float* y = nullptr;
  int64_t ow = 0, rows = 0;
  const float* residual = nullptr;  // same layout as y, or null
  RegisterActivation act;
};

// Band rows [0, rows) from input rows ih0 + r of an h x w plane (zeros above and
// below it): each band row is sw phases of phase_len floats, phase q holding
// the padded columns q, q + sw, ... (input column = padded column - pw).
struct DwconvBand {
  const float* plane = nullptr;
  int64_t h = 0, w = 0;
  int64_t ih0 = 0, rows = 0;
  int64_t pw = 0, sw = 1, phase_len = 0;
  float* dst = nullptr;
  // Write only the input's values: the zeros around them are in place from a
  // band of the same geometry (the previous plane's).
  bool values_only = false;
};

struct F32DwconvKernels {
  // Columns `rows` reads per band row for output rows of ow columns (whole blocks: at least ow).
  int64_t (*read_columns)(int64_t ow) = nullptr;
  void (*rows)(const DwconvRows& a) = nullptr;
  void (*fill_band)(const DwconvBand& b) = nullptr;
};
KILN_ISA_TABLE(F32DwconvKernels, f32_dwconv)

}  // namespace kiln::kernels::optimized
