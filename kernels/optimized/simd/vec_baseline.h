// VecF32 for the baseline level (4 floats): SSE2 on x86-64, plain C++ elsewhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

#if defined(__SSE2__)

struct VecF32 {
  static constexpr int kWidth = 4;
  __m128 v;

  static VecF32 zero() { return {_mm_setzero_ps()}; }
  static VecF32 broadcast(float x) { return {_mm_set1_ps(x)}; }
  static VecF32 load(const float* p) { return {_mm_loadu_ps(p)}; }
  static VecF32 load_partial(const float* p, int n) {
    float t[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; ++i) t[i] = p[i];
    return {_mm_loadu_ps(t)};
  }
  void store(float* p) const { _mm_storeu_ps(p, v); }
  void store_partial(float* p, int n) const {
    float t[4];
    _mm_storeu_ps(t, v);
    for (int i = 0; i < n; ++i) p[i] = t[i];
  }

  friend VecF32 operator+(VecF32 a, VecF32 b) { return {_mm_add_ps(a.v, b.v)}; }
  friend VecF32 operator-(VecF32 a, VecF32 b) { return {_mm_sub_ps(a.v, b.v)}; }
  friend VecF32 operator*(VecF32 a, VecF32 b) { return {_mm_mul_ps(a.v, b.v)}; }
  friend VecF32 operator/(VecF32 a, VecF32 b) { return {_mm_div_ps(a.v, b.v)}; }
  // No FMA at this level: two roundings.
  static VecF32 fma(VecF32 a, VecF32 b, VecF32 c) { return {_mm_add_ps(_mm_mul_ps(a.v, b.v), c.v)}; }
  static VecF32 max(VecF32 a, VecF32 b) { return {_mm_max_ps(a.v, b.v)}; }
  static VecF32 min(VecF32 a, VecF32 b) { return {_mm_min_ps(a.v, b.v)}; }
  static VecF32 abs(VecF32 a) { return {_mm_andnot_ps(_mm_set1_ps(-0.0f), a.v)}; }
  static VecF32 neg(VecF32 a) { return {_mm_xor_ps(_mm_set1_ps(-0.0f), a.v)}; }
  static VecF32 sqrt(VecF32 a) { return {_mm_sqrt_ps(a.v)}; }
  // cvtps rounds to nearest even under the default rounding mode; |a| < 2^31 in every caller.
  static VecF32 round(VecF32 a) { return {_mm_cvtepi32_ps(_mm_cvtps_epi32(a.v))}; }
  static VecF32 exp2_int(VecF32 n) {
    const __m128i e = _mm_add_epi32(_mm_cvtps_epi32(n.v), _mm_set1_epi32(127));
    return {_mm_castsi128_ps(_mm_slli_epi32(e, 23))};
  }
  static VecF32 select_lt(VecF32 a, VecF32 b, VecF32 yes, VecF32 no) {
    const __m128 m = _mm_cmplt_ps(a.v, b.v);
    return {_mm_or_ps(_mm_and_ps(m, yes.v), _mm_andnot_ps(m, no.v))};
  }
  static VecF32 select_nan(VecF32 a, VecF32 yes, VecF32 no) {
    const __m128 m = _mm_cmpunord_ps(a.v, a.v);
    return {_mm_or_ps(_mm_and_ps(m, yes.v), _mm_andnot_ps(m, no.v))};
  }
  static VecF32 copysign(VecF32 a, VecF32 sign) {
    const __m128 m = _mm_set1_ps(-0.0f);
    return {_mm_or_ps(_mm_andnot_ps(m, a.v), _mm_and_ps(m, sign.v))};
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
    __m128 s = _mm_add_ps(a.v, _mm_movehl_ps(a.v, a.v));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(VecF32 a) {
    __m128 s = _mm_max_ps(a.v, _mm_movehl_ps(a.v, a.v));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  // Each lane holding two bfloat16 values (the element at the lower address in the low half): the
  // low one (bf16_low) or the high one (bf16_high) as a float.
  static VecF32 bf16_low(VecF32 a) { return {_mm_castsi128_ps(_mm_slli_epi32(_mm_castps_si128(a.v), 16))}; }
  static VecF32 bf16_high(VecF32 a) { return {_mm_and_ps(a.v, _mm_castsi128_ps(_mm_set1_epi32(-65536)))}; }
  // The even (odd) lanes of the 2 * kWidth floats a, b: [a0, a2, b0, b2].
  static VecF32 even(VecF32 a, VecF32 b) { return {_mm_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0))}; }
  static VecF32 odd(VecF32 a, VecF32 b) { return {_mm_shuffle_ps(a.v, b.v, _MM_SHUFFLE(3, 1, 3, 1))}; }
  // The inverse: the lanes of a and b interleaved, the first (last) kWidth of them: [a0, b0, a1, b1].
  static VecF32 zip_lo(VecF32 a, VecF32 b) { return {_mm_unpacklo_ps(a.v, b.v)}; }
  static VecF32 zip_hi(VecF32 a, VecF32 b) { return {_mm_unpackhi_ps(a.v, b.v)}; }
};

#else  // plain C++: four floats the compiler may vectorize

struct VecF32 {
  static constexpr int kWidth = 4;
  float v[4];

  static VecF32 zero() { return {{0, 0, 0, 0}}; }
  static VecF32 broadcast(float x) { return {{x, x, x, x}}; }
  static VecF32 load(const float* p) { return {{p[0], p[1], p[2], p[3]}}; }
  static VecF32 load_partial(const float* p, int n) {
    VecF32 r = zero();
    for (int i = 0; i < n; ++i) r.v[i] = p[i];
    return r;
  }
  void store(float* p) const { std::memcpy(p, v, sizeof(v)); }
  void store_partial(float* p, int n) const {
    for (int i = 0; i < n; ++i) p[i] = v[i];
  }
  template <typename F>
  static VecF32 map(VecF32 a, VecF32 b, F f) {
    VecF32 r;
    for (int i = 0; i < 4; ++i) r.v[i] = f(a.v[i], b.v[i]);
    return r;
  }
  friend VecF32 operator+(VecF32 a, VecF32 b) {
    return map(a, b, [](float x, float y) { return x + y; });
  }
  friend VecF32 operator-(VecF32 a, VecF32 b) {
    return map(a, b, [](float x, float y) { return x - y; });
  }
  friend VecF32 operator*(VecF32 a, VecF32 b) {
    return map(a, b, [](float x, float y) { return x * y; });
  }
  friend VecF32 operator/(VecF32 a, VecF32 b) {
    return map(a, b, [](float x, float y) { return x / y; });
  }
  static VecF32 fma(VecF32 a, VecF32 b, VecF32 c) { return a * b + c; }
  static VecF32 max(VecF32 a, VecF32 b) {
    return map(a, b, [](float x, float y) { return x > y ? x : y; });
  }
  static VecF32 min(VecF32 a, VecF32 b) {
    return map(a, b, [](float x, float y) { return x < y ? x : y; });
  }
  static VecF32 abs(VecF32 a) {
    return map(a, a, [](float x, float) { return std::fabs(x); });
  }
  static VecF32 neg(VecF32 a) {
    return map(a, a, [](float x, float) { return -x; });
  }
  static VecF32 sqrt(VecF32 a) {
    return map(a, a, [](float x, float) { return std::sqrt(x); });
  }
  static VecF32 round(VecF32 a) {
    return map(a, a, [](float x, float) { return std::nearbyint(x); });
  }
  static VecF32 exp2_int(VecF32 n) {
    return map(n, n, [](float x, float) {
      const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(x) + 127) << 23;
      float r;
      std::memcpy(&r, &bits, 4);
      return r;
    });
  }
  static VecF32 select_lt(VecF32 a, VecF32 b, VecF32 yes, VecF32 no) {
    VecF32 r;
    for (int i = 0; i < 4; ++i) r.v[i] = a.v[i] < b.v[i] ? yes.v[i] : no.v[i];
    return r;
  }
  static VecF32 select_nan(VecF32 a, VecF32 yes, VecF32 no) {
    VecF32 r;
    for (int i = 0; i < 4; ++i) r.v[i] = a.v[i] != a.v[i] ? yes.v[i] : no.v[i];
    return r;
  }
  static VecF32 copysign(VecF32 a, VecF32 sign) {
    return map(a, sign, [](float x, float s) { return std::copysign(x, s); });
  }
  static void transpose4x4(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
  static float reduce_add(VecF32 a) { return (a.v[0] + a.v[2]) + (a.v[1] + a.v[3]); }
  static float reduce_max(VecF32 a) {
    float m = a.v[0];
    for (int i = 1; i < 4; ++i) m = a.v[i] > m ? a.v[i] : m;
    return m;
  }
  // Each lane holding two bfloat16 values (the element at the lower address in the low half): the
  // low one (bf16_low) or the high one (bf16_high) as a float.
  static VecF32 bf16_low(VecF32 a) { return bf16_lanes(a, 16, 0xffffffffu); }
  static VecF32 bf16_high(VecF32 a) { return bf16_lanes(a, 0, 0xffff0000u); }
  static VecF32 bf16_lanes(VecF32 a, int shift, uint32_t mask) {
    VecF32 r;
    for (int i = 0; i < 4; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &a.v[i], 4);
      bits = (bits << shift) & mask;
      std::memcpy(&r.v[i], &bits, 4);
    }
    return r;
  }
  static VecF32 even(VecF32 a, VecF32 b) { return {{a.v[0], a.v[2], b.v[0], b.v[2]}}; }
  static VecF32 odd(VecF32 a, VecF32 b) { return {{a.v[1], a.v[3], b.v[1], b.v[3]}}; }
  static VecF32 zip_lo(VecF32 a, VecF32 b) { return {{a.v[0], b.v[0], a.v[1], b.v[1]}}; }
  static VecF32 zip_hi(VecF32 a, VecF32 b) { return {{a.v[2], b.v[2], a.v[3], b.v[3]}}; }
};

#endif

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
