// Matrix transposes on VecF32 for the microkernels of one level (include after simd/vec_<isa>.h).
#pragma once

#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

#if defined(__AVX2__)
// dst[c * dst_stride + r] = src[r * src_stride + c] for r, c < 8: 24 shuffles for 64 floats
// (4 x 4 blocks take 32).
inline void transpose8x8(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[0..3]: columns 0, 1, 2, 3 of rows 0-3 (low lanes) and 4-7 of the same rows (high lanes);
  // r[4..7] likewise for rows 4-7.
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * dst_stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * dst_stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols: 8 x 8 blocks where
// the level has AVX2, then 4 x 4 blocks (VecF32::transpose4x4), scalar edges. Used to move
// between NCHW planes (rows = channels, cols = pixels) and pixel-major vectors of channels.
inline void transpose(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                      int64_t dst_stride) {
  int64_t r = 0;
#if defined(__AVX2__)
  for (; r + 8 <= rows; r += 8) {
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8)
      transpose8x8(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, dst_stride);
    for (; c + 4 <= cols; c += 4) {
      VecF32::transpose4x4(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, dst_stride);
      VecF32::transpose4x4(src + (r + 4) * src_stride + c, src_stride, dst + c * dst_stride + r + 4, dst_stride);
    }
    for (; c < cols; ++c)
      for (int64_t q = r; q < r + 8; ++q) dst[c * dst_stride + q] = src[q * src_stride + c];
  }
#endif
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
