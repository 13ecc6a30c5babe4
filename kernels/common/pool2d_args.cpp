// Argument checks of the 2-D pools (pool2d_args.h).
#include "pool2d_args.h"

namespace kiln {
namespace kernels {

Status adaptive_avg_pool2d_args(const char* op, Inputs in, Outputs out, AdaptivePool2dArgs* a) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  int64_t os[2];
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a->x));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 1, "output_size", os));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(pool_input(op, *a->x, &a->input));
  KILN_CHECK_OR_RETURN(os[0] >= 0 && os[1] >= 0, KernelFailure, "%s: output_size must be non-negative", op);
  a->oh = os[0], a->ow = os[1];
  return resize_output(op, &y, pool_output_sizes(*a->x, a->oh, a->ow).span());
}

Status pool2d_args(const char* op, Pool2d kind, bool at_prepare, Inputs in, Outputs out, Pool2dArgs* p) {
  const bool max = kind == Pool2d::Max;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, max ? 6 : 7, 1));
  int64_t k[2], s[2], pad[2], dil[2] = {1, 1};
  bool stride_empty;
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, op, in, 0, "self", &p->x));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 1, "kernel_size", k));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 2, "stride", s, /*empty_ok=*/true, &stride_empty));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 3, "padding", pad));
  if (max) {
    KILN_RETURN_IF_ERROR(pair_arg(op, in, 4, "dilation", dil));
    KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "ceil_mode", &p->ceil_mode));
  } else {
    KILN_RETURN_IF_ERROR(bool_arg(op, in, 4, "ceil_mode", &p->ceil_mode));
    KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "count_include_pad", &p->count_include_pad));
    KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 6, "divisor_override", &p->divisor, &p->has_divisor));
  }
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(pool_input(op, *p->x, &p->input));
  if (stride_empty) s[0] = k[0], s[1] = k[1];
  KILN_CHECK_OR_RETURN(!p->has_divisor || p->divisor != 0, KernelFailure, "%s: divisor_override must not be zero", op);
  const bool ceil = p->ceil_mode;
  KILN_RETURN_IF_ERROR(window_geometry(op, "height", p->input.h, k[0], s[0], pad[0], dil[0], ceil, true, &p->wh));
  KILN_RETURN_IF_ERROR(window_geometry(op, "width", p->input.w, k[1], s[1], pad[1], dil[1], ceil, true, &p->ww));
  if (at_prepare) return Status::ok();
  return resize_output(op, &y, pool_output_sizes(*p->x, p->wh.out, p->ww.out).span());
}

}  // namespace kernels
}  // namespace kiln
