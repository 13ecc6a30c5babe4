// Activations applied over finished GEMM tiles (gemm_activation.h).
#include "optimized/gemm_activation.h"

namespace kiln {
namespace kernels {
namespace optimized {

RegisterActivation register_activation(const ActivationArg& act) {
  RegisterActivation r;
  switch (act.kind) {
    case Activation::Relu: r.lo = 0.0f; break;
    case Activation::Clamp: r.lo = act.lo, r.hi = act.hi; break;
    case Activation::Hardswish: r.kind = RegisterActivationKind::Hardswish; break;
    case Activation::Hardsigmoid: r.kind = RegisterActivationKind::Hardsigmoid; break;
    default: break;
  }
  return r;
}

void activate_tile(const F32ActivationKernels& k, const ActivationArg& act, float* c, int64_t ldc, int64_t rows,
                   int64_t cols) {
  if (act.kind == Activation::None) return;
  for (int64_t i = 0; i < rows; ++i) k.apply(act.kind, c + i * ldc, cols, act.lo, act.hi);
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
