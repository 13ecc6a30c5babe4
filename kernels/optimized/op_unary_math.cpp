// Optimized float32 elementwise math: exp, erf, neg, abs, sqrt, rsqrt, reciprocal, pow.Tensor_Scalar.
#include <cmath>
#include <iterator>

#include "common/kernel_args.h"
#include "common/kernel_table.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_unary.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// y = op(x) on the pool; y already has x's shape (unary_setup).
void map_elements(Isa isa, UnaryMath op, const Tensor& x, Tensor& y, int exponent = 0) {
  const auto map = f32_unary_for(isa).map;
  const float* xp = x.data_as<const float>();
  float* yp = y.data_as<float>();
  parallel_for(x.numel(), kElementwiseGrain,
               [&](int64_t begin, int64_t end) { map(op, xp + begin, yp + begin, end - begin, exponent); });
}

// The operators that are one microkernel case each.
struct MathOp {
  const char* name;
  UnaryMath kind;
};
constexpr MathOp kMathOps[] = {
    {"aten::exp.default", UnaryMath::Exp},
    {"aten::erf.default", UnaryMath::Erf},
    {"aten::neg.default", UnaryMath::Neg},
    {"aten::abs.default", UnaryMath::Abs},
    {"aten::sqrt.default", UnaryMath::Sqrt},
    {"aten::rsqrt.default", UnaryMath::Rsqrt},
    {"aten::reciprocal.default", UnaryMath::Reciprocal},
};

template <size_t I>
Status math_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(kMathOps[I].name, in, out, 1, &x));
  map_elements(ctx.isa, kMathOps[I].kind, *x, *out[0]);
  return Status::ok();
}

// The exponent as one of the microkernel's cases, or false.
bool pow_case(double e, UnaryMath* op, int* exponent) {
  if (e == 0.5) return *op = UnaryMath::Sqrt, true;
  if (e == -0.5) return *op = UnaryMath::PowMinusHalf, true;
  if (e == -1.0 || e == -2.0) return *op = UnaryMath::PowRecip, *exponent = static_cast<int>(-e), true;
  if (e >= 0 && e <= kMaxPowExponent && e == std::floor(e))
    return *op = UnaryMath::PowInt, *exponent = static_cast<int>(e), true;
  return false;
}

Status pow_run(KernelContext& ctx, Inputs in, Outputs out) {
  constexpr const char* op = "aten::pow.Tensor_Scalar";
  const Tensor* x;
  double e;
  UnaryMath kind;
  int exponent = 0;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "exponent", &e));
  if (pow_case(e, &kind, &exponent)) {
    map_elements(ctx.isa, kind, *x, *out[0], exponent);
    return Status::ok();
  }
  // Any other exponent: std::pow, as the portable kernel does.
  const float fe = static_cast<float>(e);
  const float* xp = x->data_as<const float>();
  float* yp = out[0]->data_as<float>();
  parallel_for(x->numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] = std::pow(xp[i], fe);
  });
  return Status::ok();
}

}  // namespace

[[maybe_unused]] const bool kMathOpsRegistered = register_kernel_table<std::size(kMathOps)>([](auto i) {
  return internal::at_tier(kTierOptimized, KernelDef{KILN_ABI_VERSION, kMathOps[i].name, "f32", math_run<i>});
});
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::pow.Tensor_Scalar", "f32", pow_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
