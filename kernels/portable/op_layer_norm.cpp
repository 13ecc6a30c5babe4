// aten::layer_norm.default: normalise over the trailing normalized_shape dims (single output).
#include <cmath>

#include "common/kernel_args.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {

Status layer_norm_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::layer_norm.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  const Tensor *x, *w, *b;
  Span<const int64_t> shape;
  double eps;
  bool cudnn;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "normalized_shape", &shape));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 3, "bias", &b));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 4, "eps", &eps));
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
  const int64_t n = prod(x->sizes(), nd - ns, nd), m = prod(x->sizes(), 0, nd - ns);
  for (const Tensor* p : {w, b}) {
    if (p == nullptr) continue;
    KILN_RETURN_IF_ERROR(check_dtype(op, *p, p == w ? "weight" : "bias", ScalarType::Float32));
    bool match = p->dim() == ns;
    for (int i = 0; match && i < ns; ++i) match = p->sizes()[i] == shape[i];
    KILN_CHECK_OR_RETURN(match, KernelFailure, "%s: %s must be %s, got %s", op, p == w ? "weight" : "bias",
                         describe_ints(shape).c_str(), describe(*p).c_str());
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (n == 0) return Status::ok();

  const float* xp = x->data_as<const float>();
  const float* wp = w != nullptr ? w->data_as<const float>() : nullptr;
  const float* bp = b != nullptr ? b->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  parallel_for(m, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = xp + r * n;
      float* o = yp + r * n;
      // Two passes in double: exact enough that no Welford update is needed.
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += row[i];
      const double mean = sum / static_cast<double>(n);
      double sq = 0;
      for (int64_t i = 0; i < n; ++i) sq += (row[i] - mean) * (row[i] - mean);
      const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(n) + eps));
      const float fm = static_cast<float>(mean);
      for (int64_t i = 0; i < n; ++i) {
        float v = (row[i] - fm) * rstd;
        if (wp != nullptr) v *= wp[i];
        if (bp != nullptr) v += bp[i];
        o[i] = v;
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::layer_norm.default", "f32|f32,f32|f32,f32,f32", layer_norm_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
