// Broadcasting math beyond the four basic operators: pow.Tensor_Tensor, pow.Scalar, div.Tensor_mode
// (rounding_mode None, "trunc", "floor"), remainder (.Tensor, .Scalar: the sign of the divisor, as Python's %)
// fmod (.Tensor, .Scalar: the sign of the dividend, as C's fmod) and atan2, with PyTorch's floor/modulo conventions.
// Operands have the output dtype (the exporter casts); integer division by zero fails.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/elementwise.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

bool is_float(ScalarType t) { return t == ScalarType::Float32 || t == ScalarType::Float64; }

template <typename T>
T floor_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    // ATen's div_floor_floating.
    if (b == 0) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
    T floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > T(0.5)) floordiv += T(1);
    } else {
      floordiv = std::copysign(T(0), a / b);
    }
    return floordiv;
  } else {
    if (b == -1) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(a));  // no INT_MIN / -1 overflow
    T q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

template <typename T>
T trunc_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return std::trunc(a / b);
  else
    return b == -1 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(a)) : static_cast<T>(a / b);
}

template <typename T>
T python_mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T mod = std::fmod(a, b);
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
    return mod;
  } else {
    if (b == -1) return 0;
    T mod = static_cast<T>(a % b);
    if (mod != 0 && (b < 0) != (mod < 0)) mod = static_cast<T>(mod + b);
    return mod;
  }
}

// C's fmod: the result has the dividend's sign.
template <typename T>
T c_mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return std::fmod(a, b);
  else
    return b == -1 ? T(0) : static_cast<T>(a % b);  // no INT_MIN % -1 overflow
}

// Integer power by squaring, wrapping like PyTorch; negative exponents: 1 / a^|e| truncated.
template <typename T>
T int_pow(T a, T e) {
  using U = std::make_unsigned_t<T>;
  if (e < 0) return a == 1 ? 1 : a == -1 ? (e % 2 == 0 ? 1 : -1) : 0;
  U r = 1, base = static_cast<U>(a);
  for (auto n = static_cast<U>(e); n; n >>= 1) {
    if (n & 1) r *= base;
    base *= base;
  }
  return static_cast<T>(r);
}

// Any zero in an integer divisor tensor is an error (ATen raises ZeroDivisionError).
Status no_int_zero(const char* op, const Tensor& b) {
  bool zero = false;
  dispatch_real(b.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T* p = b.data_as<const T>();
      for (int64_t i = 0; i < b.numel() && !zero; ++i) zero = p[i] == 0;
    }
  });
  KILN_CHECK_OR_RETURN(!zero, KernelFailure, "%s: integer division by zero", op);
  return Status::ok();
}

enum class Mode { True, Trunc, Floor, Mod, Fmod, Pow, Atan2 };

Status binary_math(const char* op, Mode mode, const Tensor& a, const Tensor& b, Tensor& y) {
  KILN_RETURN_IF_ERROR(check_same_dtype(op, a, "self", b, "other"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, a, "self", y, "output"));
  const ScalarType t = a.dtype();
  const bool ints = t == ScalarType::Int64 || t == ScalarType::Int32;
  KILN_CHECK_OR_RETURN(is_float(t) || (ints && mode != Mode::True && mode != Mode::Atan2), KernelFailure,
                       "%s: unsupported dtype %s", op, describe(a).c_str());
  if (ints && mode != Mode::Pow && mode != Mode::Atan2) KILN_RETURN_IF_ERROR(no_int_zero(op, b));
  const Tensor* ins[2] = {&a, &b};
  Dims sizes;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 2, &sizes));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  dispatch_real(t, [&](auto tag) {
    using T = decltype(tag);
    switch (mode) {
      case Mode::True: binary_map<T>(a, b, y, sizes, [](T p, T q) { return p / q; }); break;
      case Mode::Trunc:
        binary_map<T>(a, b, y, sizes,
                      [](T p, T q) { return q == 0 && !std::is_floating_point_v<T> ? T(0) : trunc_div(p, q); });
        break;
      case Mode::Floor:
        binary_map<T>(a, b, y, sizes,
                      [](T p, T q) { return q == 0 && !std::is_floating_point_v<T> ? T(0) : floor_div(p, q); });
        break;
      case Mode::Mod:
        binary_map<T>(a, b, y, sizes,
                      [](T p, T q) { return q == 0 && !std::is_floating_point_v<T> ? T(0) : python_mod(p, q); });
        break;
      case Mode::Fmod:
        binary_map<T>(a, b, y, sizes,
                      [](T p, T q) { return q == 0 && !std::is_floating_point_v<T> ? T(0) : c_mod(p, q); });
        break;
      case Mode::Pow:
        if constexpr (std::is_floating_point_v<T>)
          binary_map<T>(a, b, y, sizes, [](T p, T q) { return std::pow(p, q); });
        else
          binary_map<T>(a, b, y, sizes, [](T p, T q) { return int_pow(p, q); });
        break;
      case Mode::Atan2:
        if constexpr (std::is_floating_point_v<T>)
          binary_map<T>(a, b, y, sizes, [](T p, T q) { return std::atan2(p, q); });
        break;
    }
  });
  return Status::ok();
}

// A Scalar argument as a 0-d tensor of dtype t (no allocation: `storage` holds the value).
Status scalar_tensor(const char* op, const Value* v, ScalarType t, uint64_t* storage, Tensor* out) {
  double d = v->to_double();
  bool ok = dispatch_real(t, [&](auto tag) {
    using T = decltype(tag);
    const T x = v->kind == ValueKind::Int && std::is_integral_v<T> ? static_cast<T>(v->i) : saturate_cast<T>(d);
    std::memcpy(storage, &x, sizeof x);
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, scalar_type_name(t));
  out->reset(storage, Span<const int64_t>(), t, sizeof *storage);
  return Status::ok();
}

}  // namespace

Status pow_tensor_tensor_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::pow.Tensor_Tensor";
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "exponent", &b));
  return binary_math(op, Mode::Pow, *a, *b, *out[0]);
}

// pow.Scalar(self: Scalar, exponent: Tensor).
Status pow_scalar_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::pow.Scalar";
  const Tensor* b;
  double unused;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 0, "self", &unused));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "exponent", &b));
  uint64_t storage;
  Tensor a;
  KILN_RETURN_IF_ERROR(scalar_tensor(op, in[0], b->dtype(), &storage, &a));
  return binary_math(op, Mode::Pow, a, *b, *out[0]);
}

Status div_tensor_mode_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::div.Tensor_mode";
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  Mode mode = Mode::True;
  if (!in[2]->is_none()) {
    const char* s;
    size_t n;
    KILN_RETURN_IF_ERROR(string_arg(op, in, 2, "rounding_mode", &s, &n));
    if (n == 5 && std::memcmp(s, "trunc", 5) == 0)
      mode = Mode::Trunc;
    else if (n == 5 && std::memcmp(s, "floor", 5) == 0)
      mode = Mode::Floor;
    else
      return Status(Error::KernelFailure, format("%s: rounding_mode must be None, \"trunc\" or \"floor\", got \"%.*s\"",
                                                 op, static_cast<int>(std::min<size_t>(n, 64)), s));
  }
  return binary_math(op, mode, *a, *b, *out[0]);
}

Status remainder_tensor_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::remainder.Tensor";
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  return binary_math(op, Mode::Mod, *a, *b, *out[0]);
}

namespace {

// The (self: Tensor, other: Scalar) forms: other becomes a 0-d tensor of self's dtype.
Status tensor_scalar_math(const char* op, Mode mode, Inputs in, Outputs out) {
  const Tensor* a;
  double unused;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "other", &unused));
  uint64_t storage;
  Tensor b;
  KILN_RETURN_IF_ERROR(scalar_tensor(op, in[1], a->dtype(), &storage, &b));
  return binary_math(op, mode, *a, b, *out[0]);
}

}  // namespace

Status remainder_scalar_run(KernelContext&, Inputs in, Outputs out) {
  return tensor_scalar_math("aten::remainder.Scalar", Mode::Mod, in, out);
}

Status fmod_tensor_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::fmod.Tensor";
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  return binary_math(op, Mode::Fmod, *a, *b, *out[0]);
}

Status atan2_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::atan2.default";
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  return binary_math(op, Mode::Atan2, *a, *b, *out[0]);
}

Status fmod_scalar_run(KernelContext&, Inputs in, Outputs out) {
  return tensor_scalar_math("aten::fmod.Scalar", Mode::Fmod, in, out);
}

KILN_REGISTER_KERNEL("aten::pow.Tensor_Tensor", "f32,f32|f64,f64|i64,i64|i32,i32", pow_tensor_tensor_run);
KILN_REGISTER_KERNEL("aten::pow.Scalar", "f32|f64|i64|i32", pow_scalar_run);
KILN_REGISTER_KERNEL("aten::div.Tensor_mode", "f32,f32|f64,f64|i64,i64|i32,i32", div_tensor_mode_run);
KILN_REGISTER_KERNEL("aten::remainder.Tensor", "f32,f32|f64,f64|i64,i64|i32,i32", remainder_tensor_run);
KILN_REGISTER_KERNEL("aten::remainder.Scalar", "f32|f64|i64|i32", remainder_scalar_run);
KILN_REGISTER_KERNEL("aten::fmod.Tensor", "f32,f32|f64,f64|i64,i64|i32,i32", fmod_tensor_run);
KILN_REGISTER_KERNEL("aten::fmod.Scalar", "f32|f64|i64|i32", fmod_scalar_run);
KILN_REGISTER_KERNEL("aten::atan2.default", "f32,f32|f64,f64", atan2_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
