// VecF32 for aarch64 Advanced SIMD (4 floats, fused multiply-add).
#pragma once

#include <arm_neon.h>

#include <cstdint>

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

struct VecF32 {
  static constexpr int kWidth = 4;
  float32x4_t v;

  static VecF32 zero() { return {vdupq_n_f32(0.0f)}; }
  static VecF32 broadcast(float x) { return {vdupq_n_f32(x)}; }
  static VecF32 load(const float* p) { return {vld1q_f32(p)}; }
  static VecF32 load_partial(const float* p, int n) {
    float t[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; ++i) t[i] = p[i];
    return {vld1q_f32(t)};
  }
  void store(float* p) const { vst1q_f32(p, v); }
  void store_partial(float* p, int n) const {
    float t[4];
    vst1q_f32(t, v);
    for (int i = 0; i < n; ++i) p[i] = t[i];
  }

  friend VecF32 operator+(VecF32 a, VecF32 b) { return {vaddq_f32(a.v, b.v)}; }
  friend VecF32 operator-(VecF32 a, VecF32 b) { return {vsubq_f32(a.v, b.v)}; }
  friend VecF32 operator*(VecF32 a, VecF32 b) { return {vmulq_f32(a.v, b.v)}; }
  friend VecF32 operator/(VecF32 a, VecF32 b) { return {vdivq_f32(a.v, b.v)}; }
  static VecF32 fma(VecF32 a, VecF32 b, VecF32 c) { return {vfmaq_f32(c.v, a.v, b.v)}; }
  // x86 semantics (return b when either is NaN), so every level agrees.
  static VecF32 max(VecF32 a, VecF32 b) { return {vbslq_f32(vcgtq_f32(a.v, b.v), a.v, b.v)}; }
  static VecF32 min(VecF32 a, VecF32 b) { return {vbslq_f32(vcltq_f32(a.v, b.v), a.v, b.v)}; }
  static VecF32 abs(VecF32 a) { return {vabsq_f32(a.v)}; }
  static VecF32 neg(VecF32 a) { return {vnegq_f32(a.v)}; }
  static VecF32 sqrt(VecF32 a) { return {vsqrtq_f32(a.v)}; }
  static VecF32 round(VecF32 a) { return {vrndnq_f32(a.v)}; }
  static VecF32 exp2_int(VecF32 n) {
    const int32x4_t e = vaddq_s32(vcvtnq_s32_f32(n.v), vdupq_n_s32(127));
    return {vreinterpretq_f32_s32(vshlq_n_s32(e, 23))};
  }
  static VecF32 select_lt(VecF32 a, VecF32 b, VecF32 yes, VecF32 no) {
    return {vbslq_f32(vcltq_f32(a.v, b.v), yes.v, no.v)};
  }
  static VecF32 select_nan(VecF32 a, VecF32 yes, VecF32 no) { return {vbslq_f32(vceqq_f32(a.v, a.v), no.v, yes.v)}; }
  static VecF32 copysign(VecF32 a, VecF32 sign) { return {vbslq_f32(vdupq_n_u32(0x80000000u), sign.v, a.v)}; }
  // dst[c * dst_stride + r] = src[r * src_stride + c] for r, c < 4.
  static void transpose4x4(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
    const float32x4x2_t t01 = vtrnq_f32(vld1q_f32(src), vld1q_f32(src + src_stride));
    const float32x4x2_t t23 = vtrnq_f32(vld1q_f32(src + 2 * src_stride), vld1q_f32(src + 3 * src_stride));
    vst1q_f32(dst, vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
    vst1q_f32(dst + dst_stride, vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
    vst1q_f32(dst + 2 * dst_stride, vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
    vst1q_f32(dst + 3 * dst_stride, vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
  }
  static float reduce_add(VecF32 a) { return vaddvq_f32(a.v); }
  static float reduce_max(VecF32 a) { return vmaxvq_f32(a.v); }
  // Each lane holding two bfloat16 values (the element at the lower address in the low half): the
  // low one (bf16_low) or the high one (bf16_high) as a float.
  static VecF32 bf16_low(VecF32 a) { return {vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_f32(a.v), 16))}; }
  static VecF32 bf16_high(VecF32 a) {
    return {vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a.v), vdupq_n_u32(0xffff0000u)))};
  }
  // The even (odd) lanes of the 2 * kWidth floats a, b: [a0, a2, b0, b2].
  static VecF32 even(VecF32 a, VecF32 b) { return {vuzp1q_f32(a.v, b.v)}; }
  static VecF32 odd(VecF32 a, VecF32 b) { return {vuzp2q_f32(a.v, b.v)}; }
  // The inverse: the lanes of a and b interleaved, the first (last) kWidth of them: [a0, b0, a1, b1].
  static VecF32 zip_lo(VecF32 a, VecF32 b) { return {vzip1q_f32(a.v, b.v)}; }
  static VecF32 zip_hi(VecF32 a, VecF32 b) { return {vzip2q_f32(a.v, b.v)}; }
};

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
