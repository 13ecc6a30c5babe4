// Argument checks of conv2d and fused_conv2d (conv2d_args.h).
#include "conv2d_args.h"

#include "window.h"

namespace kiln {
namespace kernels {

Status conv2d_args(const char* op, bool fused, bool at_prepare, Inputs in, Outputs out, Conv2dArgs* a) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, fused ? 11 : 7, 1));
  int64_t stride[2], pad[2], dil[2], groups;
  const size_t at = fused ? 4 : 3;  // the first int argument
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, op, in, 0, "input", &a->x));
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, op, in, 1, "weight", &a->weight));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(at_prepare, op, in, 2, "bias", &a->bias));
  a->residual = nullptr;
  if (fused) KILN_RETURN_IF_ERROR(optional_tensor_arg(at_prepare, op, in, 3, "residual", &a->residual));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, at, "stride", stride));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, at + 1, "padding", pad));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, at + 2, "dilation", dil));
  KILN_RETURN_IF_ERROR(int_arg(op, in, at + 3, "groups", &groups));
  if (fused) KILN_RETURN_IF_ERROR(activation_arg(op, in, at + 4, &a->act));
  const Tensor &x = *a->x, &wt = *a->weight;
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, wt, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x.dim() == 3 || x.dim() == 4, KernelFailure, "%s: input must be 3-D or 4-D, got %s", op,
                       describe(x).c_str());
  KILN_CHECK_OR_RETURN(wt.dim() == 4, KernelFailure, "%s: weight must be 4-D, got %s", op, describe(wt).c_str());
  KILN_CHECK_OR_RETURN(groups > 0, KernelFailure, "%s: groups must be positive, got %lld", op,
                       static_cast<long long>(groups));
  Conv2dShape& g = a->shape;
  const bool batched = x.dim() == 4;
  g.images = batched ? x.size(0) : 1;
  g.c = x.size(-3), g.h = x.size(-2), g.w = x.size(-1);
  g.cout = wt.size(0), g.cin_g = wt.size(1), g.kh = wt.size(2), g.kw = wt.size(3);
  g.groups = groups;
  // Division only: groups may be any positive int64, so cin_g * groups could overflow.
  KILN_CHECK_OR_RETURN(g.c % groups == 0 && g.cout % groups == 0 && g.cin_g == g.c / groups, KernelFailure,
                       "%s: input %s and weight %s do not match groups=%lld", op, describe(x).c_str(),
                       describe(wt).c_str(), static_cast<long long>(groups));
  if (a->bias != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *a->bias, "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(a->bias->dim() == 1 && a->bias->size(0) == g.cout, KernelFailure,
                         "%s: bias must be [%lld], got %s", op, static_cast<long long>(g.cout),
                         describe(*a->bias).c_str());
  }
  Window wh, ww;
  KILN_RETURN_IF_ERROR(window_geometry(op, "height", g.h, g.kh, stride[0], pad[0], dil[0], false, false, &wh));
  KILN_RETURN_IF_ERROR(window_geometry(op, "width", g.w, g.kw, stride[1], pad[1], dil[1], false, false, &ww));
  g.sh = stride[0], g.sw = stride[1], g.ph = pad[0], g.pw = pad[1], g.dh = dil[0], g.dw = dil[1];
  g.oh = wh.out, g.ow = ww.out;
  Dims sizes;
  if (batched) sizes.push(g.images);
  sizes.push(g.cout);
  sizes.push(g.oh);
  sizes.push(g.ow);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  KILN_RETURN_IF_ERROR(check_residual(op, a->residual, y));
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
