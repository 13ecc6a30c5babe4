// Argument checks of the broadcasting arithmetic operators (arith_args.h).
#include "arith_args.h"

#include <cmath>

#include "broadcast.h"

namespace kiln {
namespace kernels {

Status arith_args(const char* op, bool has_alpha, bool integers_ok, Inputs in, Outputs out, ArithArgs* a) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, has_alpha ? 3 : 2, 1));
  a->alpha = 1.0;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a->a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &a->b));
  if (has_alpha) KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "alpha", &a->alpha));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a->a, "self", *a->b, "other"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a->a, "self", y, "output"));
  const ScalarType t = a->a->dtype();
  const bool is_float = t == ScalarType::Float32 || t == ScalarType::Float64;
  const bool is_int = t == ScalarType::Int64 || t == ScalarType::Int32;
  KILN_CHECK_OR_RETURN(is_float || (is_int && integers_ok), KernelFailure, "%s: unsupported dtype %s", op,
                       describe(*a->a).c_str());
  KILN_CHECK_OR_RETURN(is_float || a->alpha == std::floor(a->alpha), KernelFailure,
                       "%s: alpha must be an integer for integer tensors, got %g", op, a->alpha);
  const Tensor* ins[2] = {a->a, a->b};
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 2, &a->sizes));
  return resize_output(op, &y, a->sizes.span());
}

}  // namespace kernels
}  // namespace kiln
