// aten::group_norm.default: normalise each group of channels of every sample (x: [N, C, *]), then
// scale and shift per channel. f32, two passes in double per group (as layer_norm).
#include <cmath>

#include "common/kernel_args.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {

// group_norm(input, num_groups, weight?, bias?, eps, cudnn_enabled).
Status group_norm_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::group_norm.default";
  const Tensor *x, *w, *b;
  int64_t groups;
  double eps;
  bool cudnn_enabled;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "num_groups", &groups));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 3, "bias", &b));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 4, "eps", &eps));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "cudnn_enabled", &cudnn_enabled));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x->dim() >= 2, KernelFailure, "%s: input must be [N, C, *], got %s", op, describe(*x).c_str());
  const int64_t n = x->size(0), c = x->size(1);
  KILN_CHECK_OR_RETURN(groups > 0 && c % groups == 0, KernelFailure,
                       "%s: num_groups %lld must be positive and divide the %lld channels of %s", op,
                       static_cast<long long>(groups), static_cast<long long>(c), describe(*x).c_str());
  for (const Tensor* p : {w, b}) {
    if (p == nullptr) continue;
    KILN_RETURN_IF_ERROR(check_dtype(op, *p, p == w ? "weight" : "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(p->dim() == 1 && p->size(0) == c, KernelFailure, "%s: %s must be [%lld], got %s", op,
                         p == w ? "weight" : "bias", static_cast<long long>(c), describe(*p).c_str());
  }
  // Any eps, as ATen: a negative one that makes var + eps negative gives NaN there too.
  KILN_CHECK_OR_RETURN(eps == eps, KernelFailure, "%s: eps must not be NaN", op);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (x->numel() == 0) return Status::ok();
  const int64_t per_channel = prod(x->sizes(), 2, x->dim()), channels = c / groups, count = channels * per_channel;
  const float* xp = x->data_as<const float>();
  const float* wp = w != nullptr ? w->data_as<const float>() : nullptr;
  const float* bp = b != nullptr ? b->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  parallel_for(n * groups, grain_for(2 * count), [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const float* src = xp + g * count;  // a group's channels are contiguous: [N, G, C / G, *]
      float* dst = yp + g * count;
      double sum = 0;
      for (int64_t i = 0; i < count; ++i) sum += src[i];
      const double mean = sum / static_cast<double>(count);
      double sq = 0;
      for (int64_t i = 0; i < count; ++i) sq += (src[i] - mean) * (src[i] - mean);
      const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(count) + eps);
      for (int64_t k = 0; k < channels; ++k) {
        const int64_t ch = (g % groups) * channels + k;
        const double scale = rstd * (wp != nullptr ? wp[ch] : 1.0f);
        const double shift = (bp != nullptr ? bp[ch] : 0.0f) - mean * scale;
        for (int64_t i = k * per_channel; i < (k + 1) * per_channel; ++i)
          dst[i] = static_cast<float>(src[i] * scale + shift);
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::group_norm.default", "f32|f32,f32|f32,f32,f32", group_norm_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
