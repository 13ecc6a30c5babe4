// f32 direct convolution for few input channels (a CNN's stem: 3 channels of a 224 x 224 image):
// output channels in vectors, one broadcast input value per tap and pixel.
//
// As a GEMM such a convolution has K = cin * kh * kw of only 27 or 147 and millions of im2col
// entries to pack; here the input is read in place (a zero-padded copy, made once per call) and
// the weights, packed once at load as [block][tap][NV * W], are the vectors: per tap, NV weight
// vectors and P broadcasts of input values feed P x NV FMAs.
#pragma once

#include <cstdint>

#include "common/activation.h"
#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

// Output rows of one block of output channels, pixel-major: out[(r * ow + x) * cols + lane]
// = act(bias[lane] + sum over taps (ci, i, j) of
//       x[ci][(r0 + r) * sh + i * dh][x * sw + j * dw] * weights[(ci * kh + i) * kw + j][lane]).
struct ConvDirectRows {
  const float* x = nullptr;  // the zero-padded input planes, hp x wp each
  int64_t hp = 0, wp = 0;
  int64_t cin = 0, kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t r0 = 0, rows = 0, ow = 0;
  const float* weights = nullptr;  // cin * kh * kw rows of `cols` floats
  int64_t vectors = 0;             // NV: vectors per pixel, 1..max_vectors; cols = NV * W
  const float* bias = nullptr;     // the block's channels, or null
  int64_t channels = 0;            // valid lanes of the block
  float* out = nullptr;
  Activation act = Activation::None;  // min/max ones in registers, the others over the rows written
  float lo = 0.0f, hi = 0.0f;
};

struct F32ConvDirectKernels {
  int width = 0;        // W
  int max_vectors = 0;  // NV of a block
  void (*rows)(const ConvDirectRows& a) = nullptr;
};
KILN_ISA_TABLE(F32ConvDirectKernels, f32_conv_direct)

}  // namespace kiln::kernels::optimized
