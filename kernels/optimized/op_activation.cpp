// Optimized float32 activations: relu, hardtanh, clamp (Scalar bounds).
#include <limits>

#include "common/kernel_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_clamp.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The clamp microkernel over x, on the pool, into y (already resized).
void clamp_elements(Isa isa, const Tensor& x, Tensor& y, float lo, float hi) {
  const auto clamp = f32_clamp_for(isa).clamp;
  const float* xp = x.data_as<const float>();
  float* yp = y.data_as<float>();
  parallel_for(x.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    clamp(xp + begin, yp + begin, end - begin, lo, hi);
  });
}

Status relu_run(KernelContext& ctx, Inputs in, Outputs out) {
  constexpr const char* op = "aten::relu.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  clamp_elements(ctx.isa, *x, *out[0], 0.0f, kInf);
  return Status::ok();
}

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::relu.default", "f32", relu_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
