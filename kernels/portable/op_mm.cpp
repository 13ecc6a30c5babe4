// aten::mm.default and aten::bmm.default: plain and batched matrix products.
#include "common/kernel_args.h"
#include "common/matmul_args.h"
#include "portable/gemm.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

Status product(const char* op, MatmulArgsFn read_args, const KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor *a, *b;
  MatmulShapes s;
  KILN_RETURN_IF_ERROR(read_args(op, /*at_prepare=*/false, in, out, &a, &b, &s));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], s.out_sizes.span()));
  matmul_product(ctx, s, *a, *b, out[0]->data_as<float>());
  return Status::ok();
}

}  // namespace

Status mm_run(KernelContext& ctx, Inputs in, Outputs out) { return product("aten::mm.default", mm_args, ctx, in, out); }
Status bmm_run(KernelContext& ctx, Inputs in, Outputs out) {
  return product("aten::bmm.default", bmm_args, ctx, in, out);
}

KILN_REGISTER_KERNEL("aten::mm.default", "f32,f32", mm_run);
KILN_REGISTER_KERNEL("aten::bmm.default", "f32,f32", bmm_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
