// The activations of the GEMM and convolution epilogues.
//
// relu, clamp, hardswish and hardsigmoid are applied in registers by the
// microkernels (register_activation.h); the others (gelu, gelu_tanh, silu,
// sigmoid, tanh) run here, over each finished tile while it is still in L1,
// through the level's vector math (f32_activation.h).
#pragma once

#include <cstdint>

#include "common/activation.h"
#include "optimized/f32_activation.h"
#include "optimized/register_activation.h"

namespace kiln {
namespace kernels {
namespace optimized {

// What the microkernels apply of `act` (all of it unless activation_after_tile).
RegisterActivation register_activation(const ActivationArg& act);

// True if `kind` is applied by activate_tile rather than in registers.
inline bool activation_after_tile(Activation kind) {
  return kind == Activation::Gelu || kind == Activation::GeluTanh || kind == Activation::Silu ||
         kind == Activation::Sigmoid || kind == Activation::Tanh;
}

// c[i * ldc + j] = act(c[i * ldc + j]) for i < rows, j < cols, by the kernels of one level.
void activate_tile(const F32ActivationKernels& k, const ActivationArg& act, float* c, int64_t ldc, int64_t rows,
                   int64_t cols);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
