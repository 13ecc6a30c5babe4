// Argument checks of linear and fused_linear (linear_args.h).
#include "linear_args.h"

namespace kiln {
namespace kernels {

Status linear_args(const char* op, bool fused, bool at_prepare, Inputs in, Outputs out, LinearArgs* a) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, fused ? 7 : 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, op, in, 0, "input", &a->x));
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, op, in, 1, "weight", &a->weight));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(at_prepare, op, in, 2, "bias", &a->bias));
  a->residual = nullptr;
  if (fused) {
    KILN_RETURN_IF_ERROR(optional_tensor_arg(at_prepare, op, in, 3, "residual", &a->residual));
    KILN_RETURN_IF_ERROR(activation_arg(op, in, 4, &a->act));
  }
  const Tensor &x = *a->x, &w = *a->weight;
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, w, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x.dim() >= 1, KernelFailure, "%s: input must be at least 1-D, got %s", op, describe(x).c_str());
  KILN_CHECK_OR_RETURN(w.dim() == 2, KernelFailure, "%s: weight must be 2-D, got %s", op, describe(w).c_str());
  a->n = w.size(0), a->k = w.size(1);
  KILN_CHECK_OR_RETURN(x.size(-1) == a->k, KernelFailure, "%s: input %s and weight %s have different in_features", op,
                       describe(x).c_str(), describe(w).c_str());
  if (a->bias != nullptr) {
    const Tensor& b = *a->bias;
    KILN_RETURN_IF_ERROR(check_dtype(op, b, "bias", ScalarType::Float32));
    // A bias broadcasts against [.., N]: [N], or a single element.
    KILN_CHECK_OR_RETURN((b.dim() == 1 && (b.size(0) == a->n || b.size(0) == 1)) || b.dim() == 0, KernelFailure,
                         "%s: bias must be [%lld], got %s", op, static_cast<long long>(a->n), describe(b).c_str());
  }
  Dims sizes(x.sizes());
  sizes[sizes.n - 1] = a->n;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  KILN_RETURN_IF_ERROR(check_residual(op, a->residual, y));
  a->m = prod(x.sizes(), 0, x.dim() - 1);
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
