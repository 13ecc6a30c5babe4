// Winograd F(2x2, 3x3) transforms over pixel-major vectors of channels (conv_winograd_channels.cpp):
// the same B^T d B and A^T M A as f32_winograd.h, one vector lane per channel instead of per tile,
// for images with too few tiles to fill vectors of tiles.
#pragma once

#include <cstdint>

#include "common/activation.h"
#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

// The tiles of one tile row of an image: V[xi][tile][ci] at v + xi * xi_stride + tile * c + ci,
// tiles tx = 0 .. tw - 1 from the zero-padded pixel-major input rows 2 ty .. 2 ty + 3
// (pixel (r, s) of the tile row's rows at rows + (r * wp + s) * c).
struct WinogradChannelsInput {
  const float* rows = nullptr;
  int64_t wp = 0, c = 0, tw = 0;
  float* v = nullptr;  // at the tile row's first tile
  int64_t xi_stride = 0;
};

// The outputs of one tile row: out[(oy * ow + ox) * cout + co] = act(A^T M A + bias) for the
// output rows 2 ty, 2 ty + 1 (those below oh) and columns below ow, from M[xi][tile][co].
struct WinogradChannelsOutput {
  const float* m = nullptr;  // at the tile row's first tile
  int64_t xi_stride = 0, cout = 0, tw = 0;
  const float* bias = nullptr;  // cout floats, or null
  float* out = nullptr;         // at output row 2 ty, column 0
  int64_t rows = 0, ow = 0;     // output rows of this tile row (1 or 2), columns
  Activation act = Activation::None;
  float lo = 0.0f, hi = 0.0f;
};

struct F32WinogradChannelsKernels {
  void (*input)(const WinogradChannelsInput& a) = nullptr;
  void (*output)(const WinogradChannelsOutput& a) = nullptr;
};
KILN_ISA_TABLE(F32WinogradChannelsKernels, f32_winograd_channels)

}  // namespace kiln::kernels::optimized
