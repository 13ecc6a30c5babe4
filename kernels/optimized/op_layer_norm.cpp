// Optimized float32 aten::layer_norm.default (single output): one microkernel call per row.
#include "common/kernel_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_norm.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

Status layer_norm_run(KernelContext& ctx, Inputs in, Outputs out) {
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
  const int64_t n = prod(x->sizes(), nd - ns, nd), m = prod(x->sizes(), 0, nd - ns);
  for (const Tensor* p : {w, b}) {
    if (p == nullptr) continue;
    bool match = p->dim() == ns;
    for (int i = 0; match && i < ns; ++i) match = p->sizes()[i] == shape[i];
    KILN_CHECK_OR_RETURN(match, KernelFailure, "%s: %s must be %s, got %s", op, p == w ? "weight" : "bias",
                         describe_ints(shape).c_str(), describe(*p).c_str());
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (n == 0) return Status::ok();

  const auto row = f32_norm_for(ctx.isa).layer_norm_row;
  const float* xp = x->data_as<const float>();
  const float* wp = w != nullptr ? w->data_as<const float>() : nullptr;
  const float* bp = b != nullptr ? b->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  parallel_for(m, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row(xp + r * n, yp + r * n, n, wp, bp, eps);
  });
  return Status::ok();
}

}  // namespace

// Weight and bias are optional; the registry matched every tensor argument as f32.
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::layer_norm.default", "f32|f32,f32|f32,f32,f32", layer_norm_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
