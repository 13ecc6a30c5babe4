// Optimized float32 aten::_softmax.default and aten::_log_softmax.default, over any dim.
#include <algorithm>

#include "common/softmax_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_softmax.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr int64_t kColumnsPerTask = 64;  // neighbouring columns of a strided softmax per task

Status softmax_common(KernelContext& ctx, const char* op, bool log, Inputs in, Outputs out) {
  SoftmaxArgs a;
  KILN_RETURN_IF_ERROR(softmax_args(op, in, out, &a));
  if (a.x->numel() == 0) return Status::ok();
  const int64_t outer = a.outer, len = a.len, inner = a.inner;
  const F32SoftmaxKernels& k = f32_softmax_for(ctx.isa);
  const float* xp = a.x->data_as<const float>();
  float* yp = out[0]->data_as<float>();
  if (inner == 1) {
    parallel_for(outer, grain_for(len), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) k.row(xp + r * len, yp + r * len, len, log);
    });
    return Status::ok();
  }
  const int64_t tasks_per_outer = (inner + kColumnsPerTask - 1) / kColumnsPerTask;
  parallel_for(outer * tasks_per_outer, grain_for(len * kColumnsPerTask), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / tasks_per_outer, c0 = (t % tasks_per_outer) * kColumnsPerTask;
      const int64_t base = o * len * inner + c0;
      k.columns(xp + base, yp + base, len, inner, std::min(kColumnsPerTask, inner - c0), log);
    }
  });
  return Status::ok();
}

Status softmax_run(KernelContext& ctx, Inputs in, Outputs out) {
  return softmax_common(ctx, "aten::_softmax.default", false, in, out);
}
Status log_softmax_run(KernelContext& ctx, Inputs in, Outputs out) {
  return softmax_common(ctx, "aten::_log_softmax.default", true, in, out);
}

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::_softmax.default", "f32", softmax_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::_log_softmax.default", "f32", log_softmax_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
