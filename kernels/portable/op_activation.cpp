// Activation functions: relu, hardtanh, clamp, sigmoid, tanh, gelu, silu, hardswish, hardsigmoid, leaky_relu, elu.
#include <tuple>

#include "common/activation.h"
#include "common/elementwise.h"
#include "common/kernel_args.h"
#include "common/kernel_table.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

bool is_float(ScalarType t) { return t == ScalarType::Float32 || t == ScalarType::Float64; }

// y = f(x) for an f32/f64 x; f is generic over float and double.
template <typename F>
Status float_activation(const char* op, const Tensor& x, Tensor& y, F f) {
  KILN_CHECK_OR_RETURN(is_float(x.dtype()), KernelFailure, "%s: self must be f32 or f64, got %s", op,
                       describe(x).c_str());
  dispatch_real(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) map_elements<T>(x, y, [&](T v) { return f(v); });
  });
  return Status::ok();
}

// A one-argument float activation kernel.
template <typename F>
Status unary_float_activation(const char* op, Inputs in, Outputs out, F f) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  return float_activation(op, *x, *out[0], f);
}

// Clamps to [lo, hi]; NaN passes through, and lo > hi yields hi, as in PyTorch.
template <typename T>
void clamp_into(const Tensor& x, Tensor& y, const ClampBounds& b) {
  const T l = saturate_cast<T>(b.lo), h = saturate_cast<T>(b.hi);
  const bool has_lo = b.has_lo, has_hi = b.has_hi;
  map_elements<T>(x, y, [=](T v) {
    if (has_lo && v < l) v = l;
    if (has_hi && v > h) v = h;
    return v;
  });
}

Status clamp_common(const char* op, const Tensor& x, Tensor& y, const ClampBounds& b) {
  const bool ok = dispatch_real(x.dtype(), [&](auto tag) { clamp_into<decltype(tag)>(x, y, b); });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(x).c_str());
  return Status::ok();
}

}  // namespace

Status relu_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::relu.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  ClampBounds at_zero;
  at_zero.has_lo = true;
  return clamp_common(op, *x, *out[0], at_zero);
}

Status hardtanh_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::hardtanh.default";
  const Tensor* x;
  ClampBounds b;
  KILN_RETURN_IF_ERROR(hardtanh_args(op, in, out, &x, &b));
  return clamp_common(op, *x, *out[0], b);
}

Status clamp_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::clamp.default";
  const Tensor* x;
  ClampBounds b;
  KILN_RETURN_IF_ERROR(clamp_args(op, in, out, &x, &b));
  return clamp_common(op, *x, *out[0], b);
}

// The activations of one float argument, each registered for f32|f64.
template <typename F>
struct FloatActivation {
  const char* name;
  F f;
};
template <typename F>
constexpr FloatActivation<F> activation(const char* name, F f) {
  return {name, f};
}
constexpr auto kFloatActivations =
    std::make_tuple(activation("aten::sigmoid.default", [](auto v) { return act::sigmoid(v); }),
                    activation("aten::tanh.default", [](auto v) { return act::tanh(v); }),
                    activation("aten::silu.default", [](auto v) { return act::silu(v); }),
                    activation("aten::hardswish.default", [](auto v) { return act::hardswish(v); }),
                    activation("aten::hardsigmoid.default", [](auto v) { return act::hardsigmoid(v); }));

template <size_t I>
Status float_activation_run(KernelContext&, Inputs in, Outputs out) {
  constexpr auto& a = std::get<I>(kFloatActivations);
  return unary_float_activation(a.name, in, out, a.f);
}

Status gelu_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::gelu.default";
  const Tensor* x;
  bool tanh;
  KILN_RETURN_IF_ERROR(gelu_args(op, in, out, &x, &tanh));
  if (tanh) return float_activation(op, *x, *out[0], [](auto v) { return act::gelu_tanh(v); });
  return float_activation(op, *x, *out[0], [](auto v) { return act::gelu(v); });
}

// leaky_relu(self, negative_slope): x > 0 ? x : x * negative_slope (NaN stays NaN).
Status leaky_relu_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::leaky_relu.default";
  const Tensor* x;
  double slope;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "negative_slope", &slope));
  return float_activation(op, *x, *out[0], [slope](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : v * static_cast<T>(slope);
  });
}

// elu(self, alpha, scale, input_scale): x > 0 ? x * scale : expm1(x * input_scale) * alpha * scale, as ATen
// (selu is elu with its constants).
Status elu_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::elu.default";
  const Tensor* x;
  double alpha, scale, input_scale;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 4, &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "alpha", &alpha));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "scale", &scale));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 3, "input_scale", &input_scale));
  return float_activation(op, *x, *out[0], [=](auto v) {
    using T = decltype(v);
    const T neg = static_cast<T>(alpha) * static_cast<T>(scale), pos = static_cast<T>(scale);
    return v <= T(0) ? std::expm1(v * static_cast<T>(input_scale)) * neg : v * pos;
  });
}

KILN_REGISTER_KERNEL("aten::relu.default", "f32|f64|i64|i32", relu_run);
KILN_REGISTER_KERNEL("aten::hardtanh.default", "f32|f64|i64|i32", hardtanh_run);
KILN_REGISTER_KERNEL("aten::clamp.default", "f32|f64|i64|i32", clamp_run);
KILN_REGISTER_KERNEL("aten::gelu.default", "f32|f64", gelu_run);
KILN_REGISTER_KERNEL("aten::leaky_relu.default", "f32|f64", leaky_relu_run);
KILN_REGISTER_KERNEL("aten::elu.default", "f32|f64", elu_run);
[[maybe_unused]] const bool kFloatActivationsRegistered =
    register_kernel_table<std::tuple_size_v<decltype(kFloatActivations)>>([](auto i) {
      return KernelDef{KILN_ABI_VERSION, std::get<i>(kFloatActivations).name, "f32|f64", float_activation_run<i>};
    });

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
