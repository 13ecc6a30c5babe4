// Argument checks of layer_norm (layer_norm_args.h).
#include "layer_norm_args.h"

namespace kiln {
namespace kernels {

Status layer_norm_args(const char* op, Inputs in, Outputs out, LayerNormArgs* a) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  const Tensor *x, *w, *b;
  Span<const int64_t> shape;
  bool cudnn;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "normalized_shape", &shape));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 3, "bias", &b));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 4, "eps", &a->eps));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "cudnn_enable", &cudnn));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  const int nd = x->dim();
  // Compare as size_t first: a list length past INT_MAX must not wrap into range.
  KILN_CHECK_OR_RETURN(shape.size() >= 1 && shape.size() <= static_cast<size_t>(nd), KernelFailure,
                       "%s: normalized_shape %s does not fit input %s", op, describe_ints(shape).c_str(),
                       describe(*x).c_str());
  const int ns = static_cast<int>(shape.size());
  for (int i = 0; i < ns; ++i)
    KILN_CHECK_OR_RETURN(x->sizes()[nd - ns + i] == shape[i], KernelFailure,
                         "%s: normalized_shape %s does not match the trailing dims of input %s", op,
                         describe_ints(shape).c_str(), describe(*x).c_str());
  // normalized_shape equals trailing sizes of the (validated) input: these products fit.
  a->n = prod(x->sizes(), nd - ns, nd), a->rows = prod(x->sizes(), 0, nd - ns);
  for (const Tensor* p : {w, b}) {
    if (p == nullptr) continue;
    KILN_RETURN_IF_ERROR(check_dtype(op, *p, p == w ? "weight" : "bias", ScalarType::Float32));
    bool match = p->dim() == ns;
    for (int i = 0; match && i < ns; ++i) match = p->sizes()[i] == shape[i];
    KILN_CHECK_OR_RETURN(match, KernelFailure, "%s: %s must be %s, got %s", op, p == w ? "weight" : "bias",
                         describe_ints(shape).c_str(), describe(*p).c_str());
  }
  a->x = x, a->weight = w, a->bias = b;
  return resize_output(op, &y, x->sizes());
}

}  // namespace kernels
}  // namespace kiln
