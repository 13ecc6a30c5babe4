// Activation functions: PyTorch's scalar definitions, shared by the aten activation kernels and
// the fused linear/conv2d epilogues, and the activation argument of the fused operators.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernel_args.h"

namespace kiln {
namespace kernels {

// ---- scalar reference definitions (the formulas PyTorch documents), for float and double.
// NaN passes through relu and clamp, as in PyTorch.
namespace act {
template <typename T>
inline T relu(T v) {
  return v < T(0) ? T(0) : v;
}
// min(max(v, lo), hi); lo > hi yields hi.
template <typename T>
inline T clamp(T v, T lo, T hi) {
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return v;
}
template <typename T>
inline T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}
template <typename T>
inline T silu(T v) {
  return v / (T(1) + std::exp(-v));
}  // v * sigmoid(v)
template <typename T>
inline T tanh(T v) {
  return std::tanh(v);
}
// 0.5 v (1 + erf(v / sqrt(2)))
template <typename T>
inline T gelu(T v) {
  return T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476)));
}
// 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3)))
template <typename T>
inline T gelu_tanh(T v) {
  return T(0.5) * v * (T(1) + std::tanh(T(0.7978845608028654) * (v + T(0.044715) * v * v * v)));
}
template <typename T>
inline T hardsigmoid(T v) {
  return std::min(std::max(v + T(3), T(0)), T(6)) / T(6);
}
template <typename T>
inline T hardswish(T v) {
  return v * std::min(std::max(v + T(3), T(0)), T(6)) / T(6);
}
}  // namespace act

// ---- the activation of kiln::fused_linear / kiln::fused_conv2d

enum class Activation : uint8_t { None, Relu, Clamp, Gelu, GeluTanh, Silu, Sigmoid, Tanh, Hardswish, Hardsigmoid };

// An activation with its clamp bounds (read for Clamp only).
struct ActivationArg {
  Activation kind = Activation::None;
  float lo = 0.0f, hi = 0.0f;
};

// Reads (str activation, float act_min, float act_max) at in[i], in[i+1], in[i+2]:
// the name is one of "none", "relu", "clamp", "gelu", "gelu_tanh", "silu",
// "sigmoid", "tanh", "hardswish", "hardsigmoid" (KernelFailure naming an unknown
// one); clamp bounds must not be NaN (beyond the float range they are infinite).
Status activation_arg(const char* op, Inputs in, size_t i, ActivationArg* out);

// y[i] = a(y[i]) for i in [0, n), on the thread pool.
void apply_activation(const ActivationArg& a, float* y, int64_t n);

// ---- the arguments of the aten activations that take more than self (both tiers read them here)

// Clamp bounds as given; a missing one does not bound.
struct ClampBounds {
  bool has_lo = false, has_hi = false;
  double lo = 0, hi = 0;
};
// aten::hardtanh.default (self, min_val, max_val), after unary_setup.
Status hardtanh_args(const char* op, Inputs in, Outputs out, const Tensor** x, ClampBounds* b);
// aten::clamp.default (self, min?, max?), after unary_setup; at least one bound.
Status clamp_args(const char* op, Inputs in, Outputs out, const Tensor** x, ClampBounds* b);
// aten::gelu.default (self, approximate), after unary_setup: approximate is "none" or "tanh".
Status gelu_args(const char* op, Inputs in, Outputs out, const Tensor** x, bool* tanh);

}  // namespace kernels
}  // namespace kiln
