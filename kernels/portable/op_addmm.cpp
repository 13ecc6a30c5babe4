// aten::addmm.default: beta * self + alpha * (mat1 @ mat2), self broadcast to [M, N].
#include "common/broadcast.h"
#include "common/kernel_args.h"
#include "common/matmul_args.h"
#include "portable/gemm.h"

namespace kiln {
namespace kernels {
namespace portable {

Status addmm_run(KernelContext& ctx, Inputs in, Outputs out) {
  constexpr const char* op = "aten::addmm.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  const Tensor *self, *a, *b;
  double beta, alpha;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &self));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "mat1", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "mat2", &b));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 3, "beta", &beta));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 4, "alpha", &alpha));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *self, "self", ScalarType::Float32));
  MatmulShapes shapes;
  KILN_RETURN_IF_ERROR(mm_shapes(op, *a, "mat1", *b, "mat2", y, &shapes));
  const int64_t m = shapes.m, k = shapes.k, n = shapes.n;
  const Dims& sizes = shapes.out_sizes;
  KILN_CHECK_OR_RETURN(self->dim() <= 2, KernelFailure, "%s: self %s does not broadcast to [%lld, %lld]", op,
                       describe(*self).c_str(), static_cast<long long>(m), static_cast<long long>(n));
  for (int d = 0; d < self->dim(); ++d) {
    const int64_t s = self->sizes()[d], want = sizes[2 - self->dim() + d];
    KILN_CHECK_OR_RETURN(s == 1 || s == want, KernelFailure, "%s: self %s does not broadcast to [%lld, %lld]", op,
                         describe(*self).c_str(), static_cast<long long>(m), static_cast<long long>(n));
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));

  float* c = y.data_as<float>();
  // beta == 0 ignores self entirely (NaN/inf included), as PyTorch does.
  const bool use_self = beta != 0.0;
  if (use_self) {
    const Tensor* ins[1] = {self};
    const BroadcastPlan<1> plan = make_broadcast_plan<1>(sizes, ins);
    const float* s = self->data_as<const float>();
    const float fb = static_cast<float>(beta);
    const int64_t st = plan.strides[0][plan.ndim - 1];
    parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t len) {
      for (int64_t i = 0; i < len; ++i) c[o + i] = fb * s[off[0] + i * st];
    });
  }
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = a->data_as<const float>(), p.a_rs = k, p.a_cs = 1;
  p.b = b->data_as<const float>(), p.b_rs = n, p.b_cs = 1;
  p.c = c, p.c_rs = n;
  p.alpha = static_cast<float>(alpha);
  p.overwrite = !use_self;
  // Under GemmPrecision::Bfloat16 a constant mat2 is what the optimized kernel packs in bfloat16.
  if (ctx.gemm_precision == GemmPrecision::Bfloat16 && b->is_constant()) {
    gemm_bf16(p);
  } else {
    gemm(p);
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::addmm.default", "f32,f32,f32", addmm_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
