// Optimized float32 elementwise math: exp, erf, neg, abs, sqrt, rsqrt, reciprocal, pow.Tensor_Scalar.
#include <cmath>

#include "common/kernel_args.h"
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

template <UnaryMath kOp>
Status math_run(KernelContext& ctx, Inputs in, Outputs out, const char* op) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  map_elements(ctx.isa, kOp, *x, *out[0]);
  return Status::ok();
}

Status exp_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Exp>(ctx, in, out, "aten::exp.default");
}
Status erf_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Erf>(ctx, in, out, "aten::erf.default");
}
Status neg_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Neg>(ctx, in, out, "aten::neg.default");
}
Status abs_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Abs>(ctx, in, out, "aten::abs.default");
}
Status sqrt_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Sqrt>(ctx, in, out, "aten::sqrt.default");
}
Status rsqrt_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Rsqrt>(ctx, in, out, "aten::rsqrt.default");
}
Status reciprocal_run(KernelContext& ctx, Inputs in, Outputs out) {
  return math_run<UnaryMath::Reciprocal>(ctx, in, out, "aten::reciprocal.default");
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

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::exp.default", "f32", exp_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::erf.default", "f32", erf_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::neg.default", "f32", neg_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::abs.default", "f32", abs_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::sqrt.default", "f32", sqrt_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::rsqrt.default", "f32", rsqrt_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::reciprocal.default", "f32", reciprocal_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::pow.Tensor_Scalar", "f32", pow_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
