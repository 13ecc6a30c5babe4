// Activation functions: relu, hardtanh, clamp, sigmoid, tanh, gelu, silu, hardswish, hardsigmoid.
#include <algorithm>
#include <cstring>

#include "common/activation.h"
#include "common/elementwise.h"
#include "common/kernel_args.h"
#include "portable/portable_ops.h"

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
void clamp_into(const Tensor& x, Tensor& y, bool has_lo, double lo, bool has_hi, double hi) {
  const T l = saturate_cast<T>(lo), h = saturate_cast<T>(hi);
  map_elements<T>(x, y, [=](T v) {
    if (has_lo && v < l) v = l;
    if (has_hi && v > h) v = h;
    return v;
  });
}

Status clamp_common(const char* op, const Tensor& x, Tensor& y, bool has_lo, double lo, bool has_hi, double hi) {
  const bool ok = dispatch_real(x.dtype(), [&](auto tag) { clamp_into<decltype(tag)>(x, y, has_lo, lo, has_hi, hi); });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(x).c_str());
  return Status::ok();
}

}  // namespace

Status relu_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::relu.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  return clamp_common(op, *x, *out[0], true, 0.0, false, 0.0);
}

Status hardtanh_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::hardtanh.default";
  const Tensor* x;
  double lo, hi;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "min_val", &lo));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "max_val", &hi));
  return clamp_common(op, *x, *out[0], true, lo, true, hi);
}

Status clamp_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::clamp.default";
  const Tensor* x;
  double lo = 0, hi = 0;
  bool has_lo, has_hi;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 1, "min", &lo, &has_lo));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 2, "max", &hi, &has_hi));
  KILN_CHECK_OR_RETURN(has_lo || has_hi, KernelFailure, "%s: at least one of min and max must be given", op);
  return clamp_common(op, *x, *out[0], has_lo, lo, has_hi, hi);
}

Status sigmoid_run(KernelContext&, Inputs in, Outputs out) {
  return unary_float_activation("aten::sigmoid.default", in, out, [](auto v) { return act::sigmoid(v); });
}
Status tanh_run(KernelContext&, Inputs in, Outputs out) {
  return unary_float_activation("aten::tanh.default", in, out, [](auto v) { return act::tanh(v); });
}
Status silu_run(KernelContext&, Inputs in, Outputs out) {
  return unary_float_activation("aten::silu.default", in, out, [](auto v) { return act::silu(v); });
}
Status hardswish_run(KernelContext&, Inputs in, Outputs out) {
  return unary_float_activation("aten::hardswish.default", in, out, [](auto v) { return act::hardswish(v); });
}
Status hardsigmoid_run(KernelContext&, Inputs in, Outputs out) {
  return unary_float_activation("aten::hardsigmoid.default", in, out, [](auto v) { return act::hardsigmoid(v); });
}

Status gelu_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::gelu.default";
  const Tensor* x;
  const char* mode;
  size_t len;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(string_arg(op, in, 1, "approximate", &mode, &len));
  const bool none = len == 4 && std::memcmp(mode, "none", 4) == 0;
  const bool tanh = len == 4 && std::memcmp(mode, "tanh", 4) == 0;
  KILN_CHECK_OR_RETURN(none || tanh, KernelFailure, "%s: approximate must be \"none\" or \"tanh\", got \"%.*s\"", op,
                       static_cast<int>(std::min<size_t>(len, 64)), mode);  // a corrupt string may be long
  if (tanh) return float_activation(op, *x, *out[0], [](auto v) { return act::gelu_tanh(v); });
  return float_activation(op, *x, *out[0], [](auto v) { return act::gelu(v); });
}

KILN_REGISTER_KERNEL("aten::relu.default", "f32|f64|i64|i32", relu_run);
KILN_REGISTER_KERNEL("aten::hardtanh.default", "f32|f64|i64|i32", hardtanh_run);
KILN_REGISTER_KERNEL("aten::clamp.default", "f32|f64|i64|i32", clamp_run);
KILN_REGISTER_KERNEL("aten::sigmoid.default", "f32|f64", sigmoid_run);
KILN_REGISTER_KERNEL("aten::tanh.default", "f32|f64", tanh_run);
KILN_REGISTER_KERNEL("aten::gelu.default", "f32|f64", gelu_run);
KILN_REGISTER_KERNEL("aten::silu.default", "f32|f64", silu_run);
KILN_REGISTER_KERNEL("aten::hardswish.default", "f32|f64", hardswish_run);
KILN_REGISTER_KERNEL("aten::hardsigmoid.default", "f32|f64", hardsigmoid_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
