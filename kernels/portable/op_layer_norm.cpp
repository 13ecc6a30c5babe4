// aten::layer_norm.default: normalise over the trailing normalized_shape dims (single output).
#include <cmath>

#include "common/layer_norm_args.h"

namespace kiln {
namespace kernels {
namespace portable {

Status layer_norm_run(KernelContext&, Inputs in, Outputs out) {
  LayerNormArgs a;
  KILN_RETURN_IF_ERROR(layer_norm_args("aten::layer_norm.default", in, out, &a));
  const int64_t n = a.n;
  if (n == 0) return Status::ok();

  const float* xp = a.x->data_as<const float>();
  const float* wp = a.weight != nullptr ? a.weight->data_as<const float>() : nullptr;
  const float* bp = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  float* yp = out[0]->data_as<float>();
  parallel_for(a.rows, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = xp + r * n;
      float* o = yp + r * n;
      // Two passes in double: exact enough that no Welford update is needed.
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += row[i];
      const double mean = sum / static_cast<double>(n);
      double sq = 0;
      for (int64_t i = 0; i < n; ++i) sq += (row[i] - mean) * (row[i] - mean);
      const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(n) + a.eps);
      for (int64_t i = 0; i < n; ++i) {
        // x - mean in double: a mean rounded to float would be off by up to half an ulp of the
        // mean, which is the whole spread of a row like 1e5 + N(0, 1).
        float v = static_cast<float>((row[i] - mean) * rstd);
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
