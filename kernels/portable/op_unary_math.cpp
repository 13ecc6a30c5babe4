// Elementwise math: neg, abs, exp, log, sqrt, rsqrt, cos, sin, erf, reciprocal, sign and pow(tensor, scalar).
#include <cmath>

#include "common/kernel_args.h"
#include "common/elementwise.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// Runs `f` for f32/f64 (and, when `ints` is set, for i64/i32).
template <typename F>
Status math_op(const char* op, Inputs in, Outputs out, bool ints, F f) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  const ScalarType t = x->dtype();
  const bool ok = t == ScalarType::Float32 || t == ScalarType::Float64 ||
                  (ints && (t == ScalarType::Int64 || t == ScalarType::Int32));
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  dispatch_real(t, [&](auto tag) { map_elements<decltype(tag)>(*x, *out[0], [&](auto v) { return f(v); }); });
  return Status::ok();
}

}  // namespace

Status neg_run(KernelContext&, Inputs in, Outputs out) {
  // Unsigned wrap-around keeps neg(INT_MIN) defined.
  return math_op("aten::neg.default", in, out, true, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v));
    else return -v;
  });
}
Status abs_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::abs.default", in, out, true, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>) return v < 0 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v)) : v;
    else return std::abs(v);
  });
}
Status exp_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::exp.default", in, out, false, [](auto v) { return decltype(v)(std::exp(v)); });
}
Status log_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::log.default", in, out, false, [](auto v) { return decltype(v)(std::log(v)); });
}
Status sqrt_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::sqrt.default", in, out, false, [](auto v) { return decltype(v)(std::sqrt(v)); });
}
Status rsqrt_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::rsqrt.default", in, out, false, [](auto v) { return decltype(v)(1 / std::sqrt(v)); });
}

Status cos_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::cos.default", in, out, false, [](auto v) { return decltype(v)(std::cos(v)); });
}
Status sin_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::sin.default", in, out, false, [](auto v) { return decltype(v)(std::sin(v)); });
}
Status erf_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::erf.default", in, out, false, [](auto v) { return decltype(v)(std::erf(v)); });
}
Status reciprocal_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::reciprocal.default", in, out, false, [](auto v) { return decltype(v)(1) / v; });
}
Status sign_run(KernelContext&, Inputs in, Outputs out) {
  // NaN stays NaN (both comparisons are false... and 0 - 0 would lose it), as in PyTorch.
  return math_op("aten::sign.default", in, out, true, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>)
      if (v != v) return v;
    return static_cast<T>((T(0) < v) - (v < T(0)));
  });
}

Status pow_tensor_scalar_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::pow.Tensor_Scalar";
  const Tensor* x;
  double e;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "exponent", &e));
  KILN_CHECK_OR_RETURN(x->dtype() == ScalarType::Float32 || x->dtype() == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  dispatch_real(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      Tensor& y = *out[0];
      // Common exponents avoid std::pow (and match PyTorch's special cases).
      if (e == 2.0) map_elements<T>(*x, y, [](T v) { return v * v; });
      else if (e == 3.0) map_elements<T>(*x, y, [](T v) { return v * v * v; });
      else if (e == 0.5) map_elements<T>(*x, y, [](T v) { return std::sqrt(v); });
      else if (e == 1.0) map_elements<T>(*x, y, [](T v) { return v; });
      else if (e == -1.0) map_elements<T>(*x, y, [](T v) { return T(1) / v; });
      else if (e == -2.0) map_elements<T>(*x, y, [](T v) { return T(1) / (v * v); });
      else {
        const T te = static_cast<T>(e);
        map_elements<T>(*x, y, [=](T v) { return std::pow(v, te); });
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::neg.default", "f32|f64|i64|i32", neg_run);
KILN_REGISTER_KERNEL("aten::abs.default", "f32|f64|i64|i32", abs_run);
KILN_REGISTER_KERNEL("aten::exp.default", "f32|f64", exp_run);
KILN_REGISTER_KERNEL("aten::log.default", "f32|f64", log_run);
KILN_REGISTER_KERNEL("aten::sqrt.default", "f32|f64", sqrt_run);
KILN_REGISTER_KERNEL("aten::rsqrt.default", "f32|f64", rsqrt_run);
KILN_REGISTER_KERNEL("aten::cos.default", "f32|f64", cos_run);
KILN_REGISTER_KERNEL("aten::sin.default", "f32|f64", sin_run);
KILN_REGISTER_KERNEL("aten::erf.default", "f32|f64", erf_run);
KILN_REGISTER_KERNEL("aten::reciprocal.default", "f32|f64", reciprocal_run);
KILN_REGISTER_KERNEL("aten::sign.default", "f32|f64|i64|i32", sign_run);
KILN_REGISTER_KERNEL("aten::pow.Tensor_Scalar", "f32|f64", pow_tensor_scalar_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
