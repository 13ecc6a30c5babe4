// f32 depthwise convolution over blocks of channels: one vector lane per channel.
//
// The row kernel (f32_dwconv.h) vectorizes along output rows, which wastes most
// of a vector on the small planes of a CNN's later stages (7 or 14 columns) and
// pays a deinterleave per stride-2 row. Here a block of `channels` <= W
// consecutive planes (multiplier 1) is transposed into a pixel-major tile, one
// vector of channels per pixel, so that every tap of every output pixel is one
// FMA on a full vector whatever the plane's size and stride.
//   gather:  input rows [ih0, ih0 + rows) of the block -> tile[r][col][lane], the
//            padding as zeros (col = padded column: input column + pw)
//   pixels:  output rows of the band from the tile -> out[p][lane], with the bias
//            and, unless `raw`, the activation
// then f32_layout.h moves out[p][lane] into the block's NCHW planes (and, with a residual,
// applies y = act(y + residual) there).
#pragma once

#include <cstdint>

#include "common/activation.h"
#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct DwChannelsGather {
  const float* x = nullptr;  // the block's first input plane
  int64_t plane = 0;         // floats between planes (h * w)
  int64_t channels = 0;      // 1..W
  int64_t h = 0, w = 0;
  int64_t ih0 = 0, rows = 0;  // input rows of the band (outside [0, h): zeros)
  int64_t pw = 0;             // zero columns on the left
  int64_t wp = 0;             // tile columns: pw + w + zero columns on the right
  float* tile = nullptr;      // rows x wp x W floats
};

struct DwChannelsPixels {
  const float* tile = nullptr;
  int64_t wp = 0;
  const float* weights = nullptr;  // kh * kw vectors of W floats, tap-major
  const float* bias = nullptr;     // the block's channels (channels floats), or null
  int64_t channels = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t rows = 0, ow = 0;           // output rows of the band, from tile row 0
  float* out = nullptr;               // rows * ow vectors of W floats
  Activation act = Activation::None;  // applied unless Activation::None
  float lo = 0.0f, hi = 0.0f;         // Clamp bounds
};

struct F32DwconvChannelsKernels {
  int width = 0;  // W: channels per block
  void (*gather)(const DwChannelsGather& g) = nullptr;
  void (*pixels)(const DwChannelsPixels& p) = nullptr;
};
KILN_ISA_TABLE(F32DwconvChannelsKernels, f32_dwconv_channels)

}  // namespace kiln::kernels::optimized
