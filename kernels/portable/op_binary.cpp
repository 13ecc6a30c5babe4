// Broadcasting arithmetic: add.Tensor, sub.Tensor (with alpha), mul.Tensor, div.Tensor.
#include "common/arith_args.h"
#include "common/elementwise.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

enum class Arith { Add, Sub, Mul, Div };

// Integer arithmetic wraps around like PyTorch's, without signed-overflow UB.
template <typename T>
T add(T p, T q) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::make_unsigned_t<T>(p) + std::make_unsigned_t<T>(q));
  else
    return p + q;
}
template <typename T>
T sub(T p, T q) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::make_unsigned_t<T>(p) - std::make_unsigned_t<T>(q));
  else
    return p - q;
}
template <typename T>
T mul(T p, T q) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::make_unsigned_t<T>(p) * std::make_unsigned_t<T>(q));
  else
    return p * q;
}

// Checks (self, other[, alpha]) of one dtype, broadcasts, resizes and computes.
Status arith(const char* op, Arith kind, Inputs in, Outputs out) {
  ArithArgs args;
  KILN_RETURN_IF_ERROR(arith_args(op, kind == Arith::Add || kind == Arith::Sub, kind != Arith::Div, in, out, &args));
  const Tensor &a = *args.a, &b = *args.b;
  const Dims& sizes = args.sizes;
  const double alpha = args.alpha;
  Tensor& y = *out[0];
  dispatch_real(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T al = saturate_cast<T>(alpha);
    switch (kind) {
      case Arith::Add:
        if (alpha == 1.0)
          binary_map<T>(a, b, y, sizes, [](T p, T q) { return add(p, q); });
        else
          binary_map<T>(a, b, y, sizes, [al](T p, T q) { return add(p, mul(al, q)); });
        break;
      case Arith::Sub:
        if (alpha == 1.0)
          binary_map<T>(a, b, y, sizes, [](T p, T q) { return sub(p, q); });
        else
          binary_map<T>(a, b, y, sizes, [al](T p, T q) { return sub(p, mul(al, q)); });
        break;
      case Arith::Mul: binary_map<T>(a, b, y, sizes, [](T p, T q) { return mul(p, q); }); break;
      case Arith::Div:
        if constexpr (std::is_floating_point_v<T>) binary_map<T>(a, b, y, sizes, [](T p, T q) { return p / q; });
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
