// Optimized float32 broadcasting arithmetic: add.Tensor, sub.Tensor (with alpha), mul.Tensor, div.Tensor.
// Broadcasting is planned as rows (common/broadcast.h): same shapes become one long row, a scalar or
// a trailing vector (bias, norm weight) a row per outer index. The microkernel takes a block of rows
// that share a stride pattern (the plan's last two dims), so short rows cost no call each.
#include <algorithm>

#include "common/arith_args.h"
#include "common/broadcast.h"
#include "common/dtype_dispatch.h"
#include "optimized/f32_binary.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

Status arith(KernelContext& ctx, const char* op, BinaryOp kind, Inputs in, Outputs out) {
  ArithArgs args;
  KILN_RETURN_IF_ERROR(
      arith_args(op, kind == BinaryOp::Add || kind == BinaryOp::Sub, kind != BinaryOp::Div, in, out, &args));
  const Tensor *a = args.a, *b = args.b;
  const Tensor* ins[2] = {a, b};
  const BroadcastPlan<2> plan = make_broadcast_plan<2>(args.sizes, ins);
  const auto kernel = f32_binary_for(ctx.isa).rows;
  const float al = saturate_cast<float>(args.alpha);
  const float* ap = a->data_as<const float>();
  const float* bp = b->data_as<const float>();
  float* yp = out[0]->data_as<float>();
  const int nd = plan.ndim;
  const int64_t inner = plan.inner();
  if (inner == 0 || plan.rows() == 0) return Status::ok();
  // Operands are contiguous, so along a row each moves by 1, or by 0 where it is broadcast.
  const bool a_scalar = plan.strides[0][nd - 1] == 0, b_scalar = plan.strides[1][nd - 1] == 0;
  // Rows come in blocks along the plan's second-to-last dim (one stride per operand); the dims
  // before it are walked per block.
  const int64_t block_rows = nd >= 2 ? plan.sizes[nd - 2] : 1;
  const int64_t sa = nd >= 2 ? plan.strides[0][nd - 2] : 0, sb = nd >= 2 ? plan.strides[1][nd - 2] : 0;
  const auto row_offsets = [&](int64_t r, int64_t* oa, int64_t* ob) {
    int64_t block = r / block_rows;
    *oa = (r % block_rows) * sa, *ob = (r % block_rows) * sb;
    for (int d = nd - 3; d >= 0; --d) {
      const int64_t i = block % plan.sizes[d];
      block /= plan.sizes[d];
      *oa += i * plan.strides[0][d], *ob += i * plan.strides[1][d];
    }
  };
  const int64_t rows = plan.rows();
  if (inner > kElementwiseGrain) {  // long rows: pieces of a row per task
    const int64_t pieces = (inner + kElementwiseGrain - 1) / kElementwiseGrain;
    const int64_t len = (inner + pieces - 1) / pieces;
    parallel_for(rows * pieces, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t r = t / pieces, begin = (t % pieces) * len, n = std::min(len, inner - begin);
        int64_t oa, ob;
        row_offsets(r, &oa, &ob);
        kernel(kind, ap + oa + (a_scalar ? 0 : begin), 0, a_scalar, bp + ob + (b_scalar ? 0 : begin), 0, b_scalar,
               yp + r * inner + begin, 1, n, al);
      }
    });
    return Status::ok();
  }
  parallel_for(rows, grain_for(inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {
      const int64_t count = std::min(r1 - r, block_rows - r % block_rows);
      int64_t oa, ob;
      row_offsets(r, &oa, &ob);
      kernel(kind, ap + oa, sa, a_scalar, bp + ob, sb, b_scalar, yp + r * inner, count, inner, al);
      r += count;
    }
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
