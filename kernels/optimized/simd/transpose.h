// Matrix transposes on VecF32 for the microkernels of one level (include after simd/vec_<isa>.h).
#pragma once

#include <cstdint>

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols: 4 x 4 blocks
// (VecF32::transpose4x4), scalar edges. Used to move between NCHW planes (rows = channels,
// cols = pixels) and pixel-major vectors of channels.
inline void transpose(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                      int64_t dst_stride) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4)
      VecF32::transpose4x4(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, dst_stride);
    for (; c < cols; ++c)
      for (int64_t q = r; q < r + 4; ++q) dst[c * dst_stride + q] = src[q * src_stride + c];
  }
  for (; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
}

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
