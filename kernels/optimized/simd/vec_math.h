// Vector math on VecF32, written once for every level: exp, tanh, erf and the activations built on
// them (sigmoid, silu, gelu, gelu_tanh, hardswish, hardsigmoid). Included by microkernels/*.inc after
// their level's vec_<isa>.h, so each level compiles its own copy.
//
// Special values follow PyTorch: exp(-inf) = 0, exp(inf) = inf, tanh(+-inf) = +-1, erf(+-inf) = +-1,
// sigmoid(-inf) = 0, and NaN in gives NaN out. The activations use the same formulas as the portable
// kernels (kernels/common/activation.h), operation for operation, so they also share their edge
// cases: gelu(-inf), silu(-inf) and hardswish(-inf) are NaN (-inf * 0), as in PyTorch. The measured
// error of each function against a float64 reference is in docs/kernels.md ("Vector math").
#pragma once

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

// p(x) = c[0] + c[1] x + ... + c[N-1] x^(N-1), by Horner's rule.
template <int N>
inline VecF32 polynomial(VecF32 x, const float (&c)[N]) {
  VecF32 p = VecF32::broadcast(c[N - 1]);
  for (int i = N - 2; i >= 0; --i) p = VecF32::fma(p, x, VecF32::broadcast(c[i]));
  return p;
}

// e^x = 2^n e^r with n = round(x / ln 2), |r| <= ln(2) / 2 (Cephes expf). x is clamped to
// [-104, 89] first: outside, e^x rounds to 0 or inf anyway, and 2^n (n in [-150, 129]) is applied
// as two factors 2^(n/2) that are normal floats, so results in the subnormal range are rounded once.
inline VecF32 vexp(VecF32 x) {
  using V = VecF32;
  constexpr float kPoly[] = {5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f,
                             8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};
  // A NaN x becomes -104 here (max returns its second operand) and is put back at the end.
  const V xc = V::min(V::max(x, V::broadcast(-104.0f)), V::broadcast(89.0f));
  const V n = V::round(xc * V::broadcast(1.44269504088896341f));
  // r = x - n ln2 in two steps; 0.693359375 has 9 significant bits, so n * it is exact.
  V r = V::fma(n, V::broadcast(-0.693359375f), xc);
  r = V::fma(n, V::broadcast(2.12194440e-4f), r);
  const V er = V::fma(polynomial(r, kPoly), r * r, r) + V::broadcast(1.0f);
  const V n1 = V::round(n * V::broadcast(0.5f));
  const V y = er * V::exp2_int(n1) * V::exp2_int(n - n1);
  return V::select_nan(x, x, y);
}

// tanh: an odd polynomial for |x| < 0.625 (Cephes tanhf), 1 - 2 / (e^(2|x|) + 1) above, sign restored.
inline VecF32 vtanh(VecF32 x) {
  using V = VecF32;
  constexpr float kPoly[] = {-3.33332819422e-1f, 1.33314422036e-1f, -5.37397155531e-2f, 2.06390887954e-2f,
                             -5.70498872745e-3f};
  const V one = V::broadcast(1.0f);
  const V ax = V::abs(x);
  const V z = x * x;
  const V small = V::fma(polynomial(z, kPoly) * z, x, x);
  const V large = one - V::broadcast(2.0f) / (vexp(ax + ax) + one);  // NaN stays NaN
  // The sign is copied onto both branches: the polynomial's gives +0 for -0.
  return V::copysign(V::select_lt(ax, V::broadcast(0.625f), small, large), x);
}

// erf: |x| P(x^2) below 1 (P(0) = 2 / sqrt(pi)); 1 - e^(-x^2) Q(|x| - 2.465) from 1 to 3.93 (Q fits erfc(x) e^(x^2));
// beyond 3.93, erf rounds to 1. Coefficients: least-squares fits refined towards minimax in float64.
inline VecF32 verf(VecF32 x) {
  using V = VecF32;
  constexpr float kSmall[] = {1.28379166e-01f,  -3.761262715e-01f, 1.128360029e-01f, -2.685444856e-02f,
                              5.189542003e-03f, -8.020894932e-04f, 7.889285468e-05f};
  constexpr float kLarge[] = {2.134404546e-01f,  -7.611649662e-02f, 2.578573145e-02f,
                              -8.463153735e-03f, 2.427857921e-03f,  -7.696846818e-04f,
                              4.918428663e-04f,  1.951457178e-04f,  1.068429979e-04f};
  const V ax = V::min(V::abs(x), V::broadcast(3.93f));  // NaN becomes 3.93 here, restored below
  const V a2 = ax * ax;
  const V small = V::fma(ax, polynomial(a2, kSmall), ax);  // |x| (1 + (P - 1)): the big term is exact
  const V tail = vexp(V::neg(a2)) * polynomial(ax - V::broadcast(2.465f), kLarge);
  const V y = V::select_lt(ax, V::broadcast(1.0f), small, V::broadcast(1.0f) - tail);
  return V::select_nan(x, x, V::copysign(y, x));
}

// ---- activations: the portable formulas (common/activation.h), operation for operation.

inline VecF32 vsigmoid(VecF32 x) {
  const VecF32 one = VecF32::broadcast(1.0f);
  return one / (one + vexp(VecF32::neg(x)));
}
inline VecF32 vsilu(VecF32 x) { return x / (VecF32::broadcast(1.0f) + vexp(VecF32::neg(x))); }
inline VecF32 vgelu(VecF32 x) {
  using V = VecF32;
  return V::broadcast(0.5f) * x * (V::broadcast(1.0f) + verf(x * V::broadcast(0.7071067811865476f)));
}
inline VecF32 vgelu_tanh(VecF32 x) {
  using V = VecF32;
  const V inner = V::broadcast(0.7978845608028654f) * (x + V::broadcast(0.044715f) * x * x * x);
  return V::broadcast(0.5f) * x * (V::broadcast(1.0f) + vtanh(inner));
}
// min(max(x + 3, 0), 6) with NaN passing through: max/min return their second operand on NaN.
inline VecF32 relu6_shifted(VecF32 x) {
  using V = VecF32;
  return V::min(V::broadcast(6.0f), V::max(V::zero(), x + V::broadcast(3.0f)));
}
inline VecF32 vhardsigmoid(VecF32 x) { return relu6_shifted(x) / VecF32::broadcast(6.0f); }
inline VecF32 vhardswish(VecF32 x) { return x * relu6_shifted(x) / VecF32::broadcast(6.0f); }

// max(a, b) where a NaN in either wins (VecF32::max returns b when either is NaN).
inline VecF32 vmax_nan(VecF32 a, VecF32 b) { return VecF32::select_nan(a, a, VecF32::max(a, b)); }

// y[i] = f(x[i]) for i < n, full vectors then one partial vector. y may be x.
template <typename F>
inline void map_vectors(const float* x, float* y, int64_t n, F f) {
  using V = VecF32;
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) f(V::load(x + i)).store(y + i);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    f(V::load_partial(x + i, rest)).store_partial(y + i, rest);
  }
}

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
