// Argument checks of softmax and log_softmax (softmax_args.h).
#include "softmax_args.h"

namespace kiln {
namespace kernels {

Status softmax_args(const char* op, Inputs in, Outputs out, SoftmaxArgs* a) {
  const Tensor* x;
  int64_t dim;
  bool half_to_float;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "half_to_float", &half_to_float));
  KILN_CHECK_OR_RETURN(!half_to_float, KernelFailure, "%s: half_to_float is only supported for f16 inputs", op);
  KILN_CHECK_OR_RETURN(x->dtype() == ScalarType::Float32 || x->dtype() == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  int64_t d;
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  const int nd = x->dim();
  a->x = x;
  a->len = nd == 0 ? 1 : x->sizes()[d];
  a->outer = nd == 0 ? 1 : prod(x->sizes(), 0, static_cast<int>(d));
  a->inner = nd == 0 ? 1 : prod(x->sizes(), static_cast<int>(d) + 1, nd);
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
