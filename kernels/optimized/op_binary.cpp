// Optimized float32 broadcasting arithmetic: add.Tensor, sub.Tensor (with alpha), mul.Tensor, div.Tensor.
// Broadcasting is planned as rows (common/broadcast.h): same shapes become one long row, a scalar or
// a trailing vector (bias, norm weight) a row per outer index, each row one microkernel call.
#include "common/broadcast.h"
#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "optimized/f32_binary.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

Status arith(KernelContext& ctx, const char* op, BinaryOp kind, Inputs in, Outputs out) {
  const bool has_alpha = kind == BinaryOp::Add || kind == BinaryOp::Sub;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, has_alpha ? 3 : 2, 1));
  const Tensor *a, *b;
  double alpha = 1.0;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  if (has_alpha) KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "alpha", &alpha));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a, "self", y, "output"));
  const Tensor* ins[2] = {a, b};
  Dims sizes;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 2, &sizes));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));

  const BroadcastPlan<2> plan = make_broadcast_plan<2>(sizes, ins);
  // Operands are contiguous, so a row's stride is 1, or 0 where that operand is broadcast.
  const bool a_scalar = plan.strides[0][plan.ndim - 1] == 0, b_scalar = plan.strides[1][plan.ndim - 1] == 0;
  const auto row = f32_binary_for(ctx.isa).row;
  const float al = saturate_cast<float>(alpha);
  const float* ap = a->data_as<const float>();
  const float* bp = b->data_as<const float>();
  float* yp = y.data_as<float>();
  parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
    row(kind, ap + off[0], a_scalar, bp + off[1], b_scalar, yp + o, n, al);
  });
  return Status::ok();
}

Status add_run(KernelContext& ctx, Inputs in, Outputs out) {
  return arith(ctx, "aten::add.Tensor", BinaryOp::Add, in, out);
}
Status sub_run(KernelContext& ctx, Inputs in, Outputs out) {
  return arith(ctx, "aten::sub.Tensor", BinaryOp::Sub, in, out);
}
Status mul_run(KernelContext& ctx, Inputs in, Outputs out) {
  return arith(ctx, "aten::mul.Tensor", BinaryOp::Mul, in, out);
}
Status div_run(KernelContext& ctx, Inputs in, Outputs out) {
  return arith(ctx, "aten::div.Tensor", BinaryOp::Div, in, out);
}

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::add.Tensor", "f32,f32", add_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::sub.Tensor", "f32,f32", sub_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::mul.Tensor", "f32,f32", mul_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::div.Tensor", "f32,f32", div_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
