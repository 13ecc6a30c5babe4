// Elementwise math: neg, abs, exp, log, sqrt, rsqrt, the trigonometric and hyperbolic functions, erf,
// reciprocal, sign, rounding, isnan, isinf and pow(tensor, scalar).
#include <cmath>
#include <tuple>
#include <type_traits>

#include "common/elementwise.h"
#include "common/kernel_args.h"
#include "common/kernel_table.h"

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

// One operator: its name, whether it takes i64/i32 as well as f32/f64, and its element function
// (generic over the element type).
template <typename F>
struct MathOp {
  const char* name;
  bool ints;
  F f;
};
template <typename F>
constexpr MathOp<F> math(const char* name, bool ints, F f) {
  return {name, ints, f};
}

// A float function of the C library (the exporter casts integer inputs to float).
#define KILN_FLOAT_MATH(name, expr) math("aten::" #name ".default", false, [](auto v) { return decltype(v)(expr); })
// Rounding keeps an integer tensor as it is (ATen returns it unchanged); round is half to even.
#define KILN_ROUNDING(name, expr)                    \
  math("aten::" #name ".default", true, [](auto v) { \
    if constexpr (std::is_integral_v<decltype(v)>)   \
      return v;                                      \
    else                                             \
      return decltype(v)(expr);                      \
  })

constexpr auto kMathOps = std::make_tuple(
    // Unsigned wrap-around keeps neg(INT_MIN) and abs(INT_MIN) defined.
    math("aten::neg.default", true,
         [](auto v) {
           using T = decltype(v);
           if constexpr (std::is_integral_v<T>)
             return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v));
           else
             return -v;
         }),
    math("aten::abs.default", true,
         [](auto v) {
           using T = decltype(v);
           if constexpr (std::is_integral_v<T>)
             return v < 0 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v)) : v;
           else
             return std::abs(v);
         }),
    // NaN stays NaN (both comparisons are false... and 0 - 0 would lose it), as in PyTorch.
    math("aten::sign.default", true,
         [](auto v) {
           using T = decltype(v);
           if constexpr (std::is_floating_point_v<T>)
             if (v != v) return v;
           return static_cast<T>((T(0) < v) - (v < T(0)));
         }),
    math("aten::rsqrt.default", false, [](auto v) { return decltype(v)(1 / std::sqrt(v)); }),
    math("aten::reciprocal.default", false, [](auto v) { return decltype(v)(1) / v; }),
    KILN_FLOAT_MATH(exp, std::exp(v)), KILN_FLOAT_MATH(log, std::log(v)), KILN_FLOAT_MATH(sqrt, std::sqrt(v)),
    KILN_FLOAT_MATH(cos, std::cos(v)), KILN_FLOAT_MATH(sin, std::sin(v)), KILN_FLOAT_MATH(erf, std::erf(v)),
    KILN_FLOAT_MATH(log1p, std::log1p(v)), KILN_FLOAT_MATH(expm1, std::expm1(v)), KILN_FLOAT_MATH(log2, std::log2(v)),
    KILN_FLOAT_MATH(log10, std::log10(v)), KILN_FLOAT_MATH(tan, std::tan(v)), KILN_FLOAT_MATH(asin, std::asin(v)),
    KILN_FLOAT_MATH(acos, std::acos(v)), KILN_FLOAT_MATH(atan, std::atan(v)), KILN_FLOAT_MATH(sinh, std::sinh(v)),
    KILN_FLOAT_MATH(cosh, std::cosh(v)), KILN_FLOAT_MATH(asinh, std::asinh(v)), KILN_FLOAT_MATH(acosh, std::acosh(v)),
    KILN_FLOAT_MATH(atanh, std::atanh(v)), KILN_ROUNDING(floor, std::floor(v)), KILN_ROUNDING(ceil, std::ceil(v)),
    KILN_ROUNDING(trunc, std::trunc(v)), KILN_ROUNDING(round, std::nearbyint(v)));
#undef KILN_FLOAT_MATH
#undef KILN_ROUNDING

template <size_t I>
Status math_run(KernelContext&, Inputs in, Outputs out) {
  constexpr auto& op = std::get<I>(kMathOps);
  return math_op(op.name, in, out, op.ints, op.f);
}

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

}  // namespace

[[maybe_unused]] const bool kMathOpsRegistered =
    register_kernel_table<std::tuple_size_v<decltype(kMathOps)>>([](auto i) {
      return KernelDef{KILN_ABI_VERSION, std::get<i>(kMathOps).name,
                       std::get<i>(kMathOps).ints ? "f32|f64|i64|i32" : "f32|f64", math_run<i>};
    });
KILN_REGISTER_KERNEL("aten::pow.Tensor_Scalar", "f32|f64", pow_tensor_scalar_run);
KILN_REGISTER_KERNEL("aten::isnan.default", "f32|f64|i64|i32|bool", isnan_run);
KILN_REGISTER_KERNEL("aten::isinf.default", "f32|f64|i64|i32|bool", isinf_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
