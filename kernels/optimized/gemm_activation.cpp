// Activations applied over finished GEMM tiles (gemm_activation.h).
#include "optimized/gemm_activation.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

template <typename F>
void map_tile(float* c, int64_t ldc, int64_t rows, int64_t cols, F f) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j) row[j] = f(row[j]);
  }
}

}  // namespace

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

void activate_tile(const ActivationArg& act, float* c, int64_t ldc, int64_t rows, int64_t cols) {
  switch (act.kind) {
    case Activation::None: return;
    case Activation::Relu: return map_tile(c, ldc, rows, cols, [](float v) { return act::relu(v); });
    case Activation::Clamp: {
      const float lo = act.lo, hi = act.hi;
      return map_tile(c, ldc, rows, cols, [=](float v) { return act::clamp(v, lo, hi); });
    }
    case Activation::Gelu: return map_tile(c, ldc, rows, cols, [](float v) { return act::gelu(v); });
    case Activation::GeluTanh: return map_tile(c, ldc, rows, cols, [](float v) { return act::gelu_tanh(v); });
    case Activation::Silu: return map_tile(c, ldc, rows, cols, [](float v) { return act::silu(v); });
    case Activation::Sigmoid: return map_tile(c, ldc, rows, cols, [](float v) { return act::sigmoid(v); });
    case Activation::Tanh: return map_tile(c, ldc, rows, cols, [](float v) { return act::tanh(v); });
    case Activation::Hardswish: return map_tile(c, ldc, rows, cols, [](float v) { return act::hardswish(v); });
    case Activation::Hardsigmoid: return map_tile(c, ldc, rows, cols, [](float v) { return act::hardsigmoid(v); });
  }
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
