// VecF32 for AVX-512 (16 floats). Included only by translation units compiled with -mavx512f/bw/dq/vl.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

struct VecF32 {
  static constexpr int kWidth = 16;
  __m512 v;

  static VecF32 zero() { return {_mm512_setzero_ps()}; }
  static VecF32 broadcast(float x) { return {_mm512_set1_ps(x)}; }
  static VecF32 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  // The first n (0 <= n <= kWidth) lanes from p, zeros above; reads only those n floats.
  static VecF32 load_partial(const float* p, int n) { return {_mm512_maskz_loadu_ps(mask(n), p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store_partial(float* p, int n) const { _mm512_mask_storeu_ps(p, mask(n), v); }

  friend VecF32 operator+(VecF32 a, VecF32 b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend VecF32 operator-(VecF32 a, VecF32 b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend VecF32 operator*(VecF32 a, VecF32 b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend VecF32 operator/(VecF32 a, VecF32 b) { return {_mm512_div_ps(a.v, b.v)}; }
  // a * b + c with one rounding.
  static VecF32 fma(VecF32 a, VecF32 b, VecF32 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  // NaN-propagating like std::fmax is not needed by callers: these return b when either is NaN.
  static VecF32 max(VecF32 a, VecF32 b) { return {_mm512_max_ps(a.v, b.v)}; }
  static VecF32 min(VecF32 a, VecF32 b) { return {_mm512_min_ps(a.v, b.v)}; }
  static VecF32 abs(VecF32 a) { return {_mm512_abs_ps(a.v)}; }
  // -a by flipping the sign bit (so -0 for 0, unlike 0 - a).
  static VecF32 neg(VecF32 a) {
    return {_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(INT32_MIN)))};
  }
  static VecF32 sqrt(VecF32 a) { return {_mm512_sqrt_ps(a.v)}; }
  // Round to nearest integer (ties to even), as a float.
  static VecF32 round(VecF32 a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
  // 2^n for integral n in [-126, 127].
  static VecF32 exp2_int(VecF32 n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(e, 23))};
  }
  // Lanes where a < b (or a is NaN for `is_nan`) take `yes`, the others `no`.
  static VecF32 select_lt(VecF32 a, VecF32 b, VecF32 yes, VecF32 no) {
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), no.v, yes.v)};
  }
  static VecF32 select_nan(VecF32 a, VecF32 yes, VecF32 no) {
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q), no.v, yes.v)};
  }
  // Copies the sign bit of `sign` onto |a|.
  static VecF32 copysign(VecF32 a, VecF32 sign) {
    const __m512i m = _mm512_set1_epi32(INT32_MIN);
    return {_mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(m, _mm512_castps_si512(a.v)),
                                                _mm512_and_si512(m, _mm512_castps_si512(sign.v))))};
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
  static float reduce_add(VecF32 a) { return _mm512_reduce_add_ps(a.v); }
  static float reduce_max(VecF32 a) { return _mm512_reduce_max_ps(a.v); }
  // Each lane holding two bfloat16 values (the element at the lower address in the low half): the
  // low one (bf16_low) or the high one (bf16_high) as a float.
  static VecF32 bf16_low(VecF32 a) { return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(a.v), 16))}; }
  static VecF32 bf16_high(VecF32 a) {
    return {_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(-65536)))};
  }
  // The even (odd) lanes of the 2 * kWidth floats a, b: [a0, a2, ..., b0, b2, ...].
  static VecF32 even(VecF32 a, VecF32 b) {
    return {
        _mm512_permutex2var_ps(a.v, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b.v)};
  }
  static VecF32 odd(VecF32 a, VecF32 b) {
    return {
        _mm512_permutex2var_ps(a.v, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b.v)};
  }
  // The inverse: the lanes of a and b interleaved, the first (last) kWidth of them: [a0, b0, a1, b1, ...].
  static VecF32 zip_lo(VecF32 a, VecF32 b) {
    return {
        _mm512_permutex2var_ps(a.v, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), b.v)};
  }
  static VecF32 zip_hi(VecF32 a, VecF32 b) {
    return {_mm512_permutex2var_ps(a.v, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31),
                                   b.v)};
  }

 private:
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
};

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
