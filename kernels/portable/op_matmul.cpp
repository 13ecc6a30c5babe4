// aten::matmul.default: torch.matmul with 1-D operands and broadcast batch dims.
#include "common/kernel_args.h"
#include "common/matmul_args.h"
#include "portable/gemm.h"

namespace kiln {
namespace kernels {
namespace portable {

Status matmul_run(KernelContext& ctx, Inputs in, Outputs out) {
  constexpr const char* op = "aten::matmul.default";
  const Tensor *a, *b;
  MatmulShapes s;
  KILN_RETURN_IF_ERROR(matmul_args(op, /*at_prepare=*/false, in, out, &a, &b, &s));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], s.out_sizes.span()));
  matmul_product(ctx, s, *a, *b, out[0]->data_as<float>());
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::matmul.default", "f32,f32", matmul_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
