// kiln::fused_linear.default and kiln::fused_conv2d.default: act(linear or conv2d + residual),
// the operators the exporter's fusion passes produce (python/kiln/export/fused_ops.py).
#include "portable/conv2d.h"
#include "portable/linear.h"

namespace kiln {
namespace kernels {
namespace portable {

// (input, weight, bias?, residual?, activation, act_min, act_max)
Status fused_linear_run(KernelContext&, Inputs in, Outputs out) {
  LinearArgs a;
  KILN_RETURN_IF_ERROR(linear_args("kiln::fused_linear.default", /*fused=*/true, /*at_prepare=*/false, in, out, &a));
  linear_forward(a, *out[0]);
  return Status::ok();
}

// (input, weight, bias?, residual?, stride, padding, dilation, groups, activation, act_min, act_max)
Status fused_conv2d_run(KernelContext&, Inputs in, Outputs out) {
  Conv2dArgs a;
  KILN_RETURN_IF_ERROR(conv2d_args("kiln::fused_conv2d.default", /*fused=*/true, /*at_prepare=*/false, in, out, &a));
  conv2d_forward(a, *out[0]);
  return Status::ok();
}

// The dtypes of the tensors present: input and weight, then bias and/or residual.
KILN_REGISTER_KERNEL("kiln::fused_linear.default", "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_linear_run);
KILN_REGISTER_KERNEL("kiln::fused_conv2d.default", "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_conv2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
