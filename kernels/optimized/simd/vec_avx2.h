// VecF32 for AVX2 + FMA3 (8 floats). Included only by translation units compiled with -mavx2 -mfma.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

struct VecF32 {
  static constexpr int kWidth = 8;
  __m256 v;

  static VecF32 zero() { return {_mm256_setzero_ps()}; }
  static VecF32 broadcast(float x) { return {_mm256_set1_ps(x)}; }
  static VecF32 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // The first n (0 <= n <= kWidth) lanes from p, zeros above; reads only those n floats.
  static VecF32 load_partial(const float* p, int n) { return {_mm256_maskload_ps(p, mask(n))}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store_partial(float* p, int n) const { _mm256_maskstore_ps(p, mask(n), v); }

  friend VecF32 operator+(VecF32 a, VecF32 b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend VecF32 operator-(VecF32 a, VecF32 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend VecF32 operator*(VecF32 a, VecF32 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend VecF32 operator/(VecF32 a, VecF32 b) { return {_mm256_div_ps(a.v, b.v)}; }
  static VecF32 fma(VecF32 a, VecF32 b, VecF32 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static VecF32 max(VecF32 a, VecF32 b) { return {_mm256_max_ps(a.v, b.v)}; }
  static VecF32 min(VecF32 a, VecF32 b) { return {_mm256_min_ps(a.v, b.v)}; }
  static VecF32 abs(VecF32 a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
  static VecF32 neg(VecF32 a) { return {_mm256_xor_ps(_mm256_set1_ps(-0.0f), a.v)}; }
  static VecF32 sqrt(VecF32 a) { return {_mm256_sqrt_ps(a.v)}; }
  static VecF32 round(VecF32 a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
  static VecF32 exp2_int(VecF32 n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(e, 23))};
  }
  static VecF32 select_lt(VecF32 a, VecF32 b, VecF32 yes, VecF32 no) {
    return {_mm256_blendv_ps(no.v, yes.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
  }
  static VecF32 select_nan(VecF32 a, VecF32 yes, VecF32 no) {
    return {_mm256_blendv_ps(no.v, yes.v, _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q))};
  }
  static VecF32 copysign(VecF32 a, VecF32 sign) {
    const __m256 m = _mm256_set1_ps(-0.0f);
    return {_mm256_or_ps(_mm256_andnot_ps(m, a.v), _mm256_and_ps(m, sign.v))};
  }
  // dst[c * dst_stride + r] = src[r * src_stride + c] for r, c < 4.
  static void transpose4x4(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
    __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + src_stride);
    __m128 r2 = _mm_loadu_ps(src + 2 * src_stride), r3 = _mm_loadu_ps(src + 3 * src_stride);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst, r0);
    _mm_storeu_ps(dst + dst_stride, r1);
    _mm_storeu_ps(dst + 2 * dst_stride, r2);
    _mm_storeu_ps(dst + 3 * dst_stride, r3);
  }
  static float reduce_add(VecF32 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(VecF32 a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Each lane holding two bfloat16 values (the element at the lower address in the low half): the
  // low one (bf16_low) or the high one (bf16_high) as a float.
  static VecF32 bf16_low(VecF32 a) { return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(a.v), 16))}; }
  static VecF32 bf16_high(VecF32 a) { return {_mm256_and_ps(a.v, _mm256_castsi256_ps(_mm256_set1_epi32(-65536)))}; }
  // The even (odd) lanes of the 2 * kWidth floats a, b: [a0, a2, ..., b0, b2, ...].
  static VecF32 even(VecF32 a, VecF32 b) {
    const __m256 s = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
    return {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)))};
  }
  static VecF32 odd(VecF32 a, VecF32 b) {
    const __m256 s = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(3, 1, 3, 1));
    return {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)))};
  }
  // The inverse: the lanes of a and b interleaved, the first (last) kWidth of them: [a0, b0, a1, b1, ...].
  static VecF32 zip_lo(VecF32 a, VecF32 b) {
    return {_mm256_permute2f128_ps(_mm256_unpacklo_ps(a.v, b.v), _mm256_unpackhi_ps(a.v, b.v), 0x20)};
  }
  static VecF32 zip_hi(VecF32 a, VecF32 b) {
    return {_mm256_permute2f128_ps(_mm256_unpacklo_ps(a.v, b.v), _mm256_unpackhi_ps(a.v, b.v), 0x31)};
  }

 private:
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
