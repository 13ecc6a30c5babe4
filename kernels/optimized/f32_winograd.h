// Winograd F(2x2, 3x3) transforms for 3x3 stride-1 convolutions (conv_winograd.cpp).
//
// Per 2x2 block of outputs (a tile) and input channel, the 4x4 input patch d
// becomes V = B^T d B; per output channel the 16 products M = sum_ci U V (16
// GEMMs, U = G g G^T the transformed weights) become Y = A^T M A, with
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1]:
// 16 multiplications per tile and channel pair instead of 36.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"
#include "optimized/register_activation.h"

namespace kiln::kernels::optimized {

// The tiles of one input channel: V[xi] (xi = 4 * row + column of the 4x4
// transform) for tile (ty, tx) at v + xi * xi_stride + ty * tw + tx.
struct WinogradInput {
  // The zero-padded input plane as stride-2 phases (f32_dwconv.h's DwconvBand
  // with sw 2): padded row r at band + r * row_stride, its even columns at +0,
  // odd ones at + phase_len; rows 0 .. 2 * th + 1 and columns up to
  // tw rounded up to the vector width, plus one, must be readable.
  const float* band = nullptr;
  int64_t row_stride = 0, phase_len = 0;
  int64_t th = 0, tw = 0;
  float* v = nullptr;
  int64_t xi_stride = 0;
};

// The outputs of one output channel from its M[xi] (same layout as V):
// y = act(A^T M A + bias + residual) over an oh x ow plane.
struct WinogradOutput {
  const float* m = nullptr;
  int64_t xi_stride = 0;
  int64_t th = 0, tw = 0;
  float bias = 0.0f;
  float* y = nullptr;
  int64_t oh = 0, ow = 0;
  const float* residual = nullptr;  // same layout as y, or null
  RegisterActivation act;
};

struct F32WinogradKernels {
  int width = 0;  // tiles per vector
  void (*input)(const WinogradInput& a) = nullptr;
  void (*output)(const WinogradOutput& a) = nullptr;
};
KILN_ISA_TABLE(F32WinogradKernels, f32_winograd)

}  // namespace kiln::kernels::optimized
