// Elementwise math: neg, abs, exp, log, sqrt, rsqrt, the trigonometric and hyperbolic functions, erf,
// reciprocal, sign, rounding, isnan, isinf and pow(tensor, scalar).
#include <cmath>

#include "common/elementwise.h"
#include "common/kernel_args.h"

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
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v));
    else
      return -v;
  });
}
Status abs_run(KernelContext&, Inputs in, Outputs out) {
  return math_op("aten::abs.default", in, out, true, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>)
      return v < 0 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v)) : v;
    else
      return std::abs(v);
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

// Float functions of the C library, one kernel each (the exporter casts integer inputs to float).
#define KILN_FLOAT_MATH(name, expr)                                                                      \
  Status name##_run(KernelContext&, Inputs in, Outputs out) {                                            \
    return math_op("aten::" #name ".default", in, out, false, [](auto v) { return decltype(v)(expr); }); \
  }
KILN_FLOAT_MATH(log1p, std::log1p(v))
KILN_FLOAT_MATH(expm1, std::expm1(v))
KILN_FLOAT_MATH(log2, std::log2(v))
KILN_FLOAT_MATH(log10, std::log10(v))
KILN_FLOAT_MATH(tan, std::tan(v))
KILN_FLOAT_MATH(asin, std::asin(v))
KILN_FLOAT_MATH(acos, std::acos(v))
KILN_FLOAT_MATH(atan, std::atan(v))
KILN_FLOAT_MATH(sinh, std::sinh(v))
KILN_FLOAT_MATH(cosh, std::cosh(v))
KILN_FLOAT_MATH(asinh, std::asinh(v))
KILN_FLOAT_MATH(acosh, std::acosh(v))
KILN_FLOAT_MATH(atanh, std::atanh(v))
#undef KILN_FLOAT_MATH

// Rounding keeps an integer tensor as it is (ATen returns it unchanged); round is half to even.
#define KILN_ROUNDING(name, expr)                                         \
  Status name##_run(KernelContext&, Inputs in, Outputs out) {             \
    return math_op("aten::" #name ".default", in, out, true, [](auto v) { \
      if constexpr (std::is_integral_v<decltype(v)>)                      \
        return v;                                                         \
      else                                                                \
        return decltype(v)(expr);                                         \
    });                                                                   \
  }
KILN_ROUNDING(floor, std::floor(v))
KILN_ROUNDING(ceil, std::ceil(v))
KILN_ROUNDING(trunc, std::trunc(v))
KILN_ROUNDING(round, std::nearbyint(v))
#undef KILN_ROUNDING

// isnan / isinf: a bool per element; integers and bools are neither.
template <typename Pred>
Status float_class(const char* op, Inputs in, Outputs out, Pred pred) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 1, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Bool));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  const ScalarType t = x->dtype();
  KILN_CHECK_OR_RETURN(t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Int64 ||
                           t == ScalarType::Int32 || t == ScalarType::Bool,
                       KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  bool* dst = y.data_as<bool>();
  const int64_t n = x->numel();
  if (t == ScalarType::Float32) {
    const float* src = x->data_as<const float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = pred(src[i]);
  } else if (t == ScalarType::Float64) {
    const double* src = x->data_as<const double>();
    for (int64_t i = 0; i < n; ++i) dst[i] = pred(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = false;
  }
  return Status::ok();
}

Status isnan_run(KernelContext&, Inputs in, Outputs out) {
  return float_class("aten::isnan.default", in, out, [](auto v) { return v != v; });
}
Status isinf_run(KernelContext&, Inputs in, Outputs out) {
  return float_class("aten::isinf.default", in, out, [](auto v) { return std::isinf(v); });
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
      if (e == 2.0)
        map_elements<T>(*x, y, [](T v) { return v * v; });
      else if (e == 3.0)
        map_elements<T>(*x, y, [](T v) { return v * v * v; });
      else if (e == 0.5)
        map_elements<T>(*x, y, [](T v) { return std::sqrt(v); });
      else if (e == 1.0)
        map_elements<T>(*x, y, [](T v) { return v; });
      else if (e == -1.0)
        map_elements<T>(*x, y, [](T v) { return T(1) / v; });
      else if (e == -2.0)
        map_elements<T>(*x, y, [](T v) { return T(1) / (v * v); });
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
KILN_REGISTER_KERNEL("aten::log1p.default", "f32|f64", log1p_run);
KILN_REGISTER_KERNEL("aten::expm1.default", "f32|f64", expm1_run);
KILN_REGISTER_KERNEL("aten::log2.default", "f32|f64", log2_run);
KILN_REGISTER_KERNEL("aten::log10.default", "f32|f64", log10_run);
KILN_REGISTER_KERNEL("aten::tan.default", "f32|f64", tan_run);
KILN_REGISTER_KERNEL("aten::asin.default", "f32|f64", asin_run);
KILN_REGISTER_KERNEL("aten::acos.default", "f32|f64", acos_run);
KILN_REGISTER_KERNEL("aten::atan.default", "f32|f64", atan_run);
KILN_REGISTER_KERNEL("aten::sinh.default", "f32|f64", sinh_run);
KILN_REGISTER_KERNEL("aten::cosh.default", "f32|f64", cosh_run);
KILN_REGISTER_KERNEL("aten::asinh.default", "f32|f64", asinh_run);
KILN_REGISTER_KERNEL("aten::acosh.default", "f32|f64", acosh_run);
KILN_REGISTER_KERNEL("aten::atanh.default", "f32|f64", atanh_run);
KILN_REGISTER_KERNEL("aten::floor.default", "f32|f64|i64|i32", floor_run);
KILN_REGISTER_KERNEL("aten::ceil.default", "f32|f64|i64|i32", ceil_run);
KILN_REGISTER_KERNEL("aten::trunc.default", "f32|f64|i64|i32", trunc_run);
KILN_REGISTER_KERNEL("aten::round.default", "f32|f64|i64|i32", round_run);
KILN_REGISTER_KERNEL("aten::isnan.default", "f32|f64|i64|i32|bool", isnan_run);
KILN_REGISTER_KERNEL("aten::isinf.default", "f32|f64|i64|i32|bool", isinf_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
