// Broadcasting arithmetic: add.Tensor, sub.Tensor (with alpha), mul.Tensor, div.Tensor.
#include <cmath>

#include "common/kernel_args.h"
#include "common/elementwise.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

enum class Arith { Add, Sub, Mul, Div };

// Integer arithmetic wraps around like PyTorch's, without signed-overflow UB.
template <typename T> T add(T p, T q) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(std::make_unsigned_t<T>(p) + std::make_unsigned_t<T>(q));
  else return p + q;
}
template <typename T> T sub(T p, T q) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(std::make_unsigned_t<T>(p) - std::make_unsigned_t<T>(q));
  else return p - q;
}
template <typename T> T mul(T p, T q) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(std::make_unsigned_t<T>(p) * std::make_unsigned_t<T>(q));
  else return p * q;
}

// Checks (self, other[, alpha]) of one dtype, broadcasts, resizes and computes.
Status arith(const char* op, Arith kind, Inputs in, Outputs out) {
  const bool has_alpha = kind == Arith::Add || kind == Arith::Sub;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, has_alpha ? 3 : 2, 1));
  const Tensor *a, *b;
  double alpha = 1.0;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  if (has_alpha) KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "alpha", &alpha));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a, "self", *b, "other"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a, "self", y, "output"));
  const ScalarType t = a->dtype();
  const bool is_float = t == ScalarType::Float32 || t == ScalarType::Float64;
  const bool is_int = t == ScalarType::Int64 || t == ScalarType::Int32;
  KILN_CHECK_OR_RETURN(is_float || (is_int && kind != Arith::Div), KernelFailure, "%s: unsupported dtype %s", op,
                       describe(*a).c_str());
  KILN_CHECK_OR_RETURN(is_float || alpha == std::floor(alpha), KernelFailure,
                       "%s: alpha must be an integer for integer tensors, got %g", op, alpha);
  const Tensor* ins[2] = {a, b};
  Dims sizes;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 2, &sizes));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));

  dispatch_real(t, [&](auto tag) {
    using T = decltype(tag);
    const T al = saturate_cast<T>(alpha);
    switch (kind) {
      case Arith::Add:
        if (alpha == 1.0) binary_map<T>(*a, *b, y, sizes, [](T p, T q) { return add(p, q); });
        else binary_map<T>(*a, *b, y, sizes, [al](T p, T q) { return add(p, mul(al, q)); });
        break;
      case Arith::Sub:
        if (alpha == 1.0) binary_map<T>(*a, *b, y, sizes, [](T p, T q) { return sub(p, q); });
        else binary_map<T>(*a, *b, y, sizes, [al](T p, T q) { return sub(p, mul(al, q)); });
        break;
      case Arith::Mul: binary_map<T>(*a, *b, y, sizes, [](T p, T q) { return mul(p, q); }); break;
      case Arith::Div:
        if constexpr (std::is_floating_point_v<T>) binary_map<T>(*a, *b, y, sizes, [](T p, T q) { return p / q; });
        break;
    }
  });
  return Status::ok();
}

}  // namespace

Status add_tensor_run(KernelContext&, Inputs in, Outputs out) { return arith("aten::add.Tensor", Arith::Add, in, out); }
Status sub_tensor_run(KernelContext&, Inputs in, Outputs out) { return arith("aten::sub.Tensor", Arith::Sub, in, out); }
Status mul_tensor_run(KernelContext&, Inputs in, Outputs out) { return arith("aten::mul.Tensor", Arith::Mul, in, out); }
Status div_tensor_run(KernelContext&, Inputs in, Outputs out) { return arith("aten::div.Tensor", Arith::Div, in, out); }

KILN_REGISTER_KERNEL("aten::add.Tensor", "f32,f32|f64,f64|i64,i64|i32,i32", add_tensor_run);
KILN_REGISTER_KERNEL("aten::sub.Tensor", "f32,f32|f64,f64|i64,i64|i32,i32", sub_tensor_run);
KILN_REGISTER_KERNEL("aten::mul.Tensor", "f32,f32|f64,f64|i64,i64|i32,i32", mul_tensor_run);
KILN_REGISTER_KERNEL("aten::div.Tensor", "f32,f32|f64,f64", div_tensor_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
