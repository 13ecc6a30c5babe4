// aten::_native_batch_norm_legit_no_training.default: inference batch norm over dim 1 (writes output 0 only).
#include <algorithm>
#include <cmath>

#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {

Status batch_norm_no_training_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::_native_batch_norm_legit_no_training.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1, /*extra_outputs_ok=*/true));
  const Tensor *x, *w, *b, *mean, *var;
  double momentum, eps;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 1, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &b));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 3, "running_mean", &mean));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 4, "running_var", &var));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 5, "momentum", &momentum));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 6, "eps", &eps));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x->dim() >= 2, KernelFailure, "%s: input must be at least 2-D, got %s", op,
                       describe(*x).c_str());
  const int64_t c = x->size(1);
  const char* names[4] = {"weight", "bias", "running_mean", "running_var"};
  const Tensor* params[4] = {w, b, mean, var};
  for (int i = 0; i < 4; ++i) {
    if (params[i] == nullptr) continue;
    KILN_RETURN_IF_ERROR(check_dtype(op, *params[i], names[i], ScalarType::Float32));
    KILN_CHECK_OR_RETURN(params[i]->dim() == 1 && params[i]->size(0) == c, KernelFailure,
                         "%s: %s must be [%lld], got %s", op, names[i], static_cast<long long>(c),
                         describe(*params[i]).c_str());
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));

  const int64_t inner = prod(x->sizes(), 2, x->dim()), planes = x->size(0) * c;
  const float* xp = x->data_as<const float>();
  const float* wp = w != nullptr ? w->data_as<const float>() : nullptr;
  const float* bp = b != nullptr ? b->data_as<const float>() : nullptr;
  const float* mp = mean->data_as<const float>();
  const float* vp = var->data_as<const float>();
  float* yp = y.data_as<float>();
  parallel_for(
      planes, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)), [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t ch = p % c;
          // Folded into one multiply-add per element.
          const double inv = 1.0 / std::sqrt(static_cast<double>(vp[ch]) + eps);
          const float scale = static_cast<float>(inv * (wp != nullptr ? wp[ch] : 1.0f));
          const float shift =
              static_cast<float>((bp != nullptr ? bp[ch] : 0.0f) - mp[ch] * inv * (wp != nullptr ? wp[ch] : 1.0f));
          const float* src = xp + p * inner;
          float* dst = yp + p * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] = src[i] * scale + shift;
        }
      });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::_native_batch_norm_legit_no_training.default",
                     "f32,f32,f32|f32,f32,f32,f32|f32,f32,f32,f32,f32", batch_norm_no_training_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
