// Optimized float32 aten::layer_norm.default (single output): one microkernel call per row.
#include "common/layer_norm_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_norm.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

Status layer_norm_run(KernelContext& ctx, Inputs in, Outputs out) {
  LayerNormArgs a;
  KILN_RETURN_IF_ERROR(layer_norm_args("aten::layer_norm.default", in, out, &a));
  const int64_t n = a.n;
  if (n == 0) return Status::ok();

  const auto row = f32_norm_for(ctx.isa).layer_norm_row;
  const float* xp = a.x->data_as<const float>();
  const float* wp = a.weight != nullptr ? a.weight->data_as<const float>() : nullptr;
  const float* bp = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  float* yp = out[0]->data_as<float>();
  parallel_for(a.rows, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row(xp + r * n, yp + r * n, n, wp, bp, a.eps);
  });
  return Status::ok();
}

}  // namespace

// Weight and bias are optional; the registry matched every tensor argument as f32.
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::layer_norm.default", "f32|f32,f32|f32,f32,f32", layer_norm_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
