// kiln::fused_linear.default and kiln::fused_conv2d.default: act(linear or conv2d + residual),
// the operators the exporter's fusion passes produce (python/kiln/export/fused_ops.py).
#include "common/activation.h"
#include "common/kernel_args.h"
#include "portable/conv2d.h"
#include "portable/linear.h"
#include "portable/portable_ops.h"

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
  constexpr const char* op = "kiln::fused_conv2d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 11, 1));
  const Tensor *x, *w, *bias, *residual;
  Conv2dParams params;
  ActivationArg act;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &bias));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 3, "residual", &residual));
  KILN_RETURN_IF_ERROR(conv2d_params(op, in, 4, &params));
  KILN_RETURN_IF_ERROR(activation_arg(op, in, 8, &act));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(conv2d_forward(op, *x, *w, bias, residual, params, y));
  apply_activation(act, y.data_as<float>(), y.numel());
  return Status::ok();
}

// The dtypes of the tensors present: input and weight, then bias and/or residual.
KILN_REGISTER_KERNEL("kiln::fused_linear.default", "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_linear_run);
KILN_REGISTER_KERNEL("kiln::fused_conv2d.default", "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_conv2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
