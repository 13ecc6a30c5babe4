// The part of a fused activation that the microkernels apply in registers.
#pragma once

#include <cstdint>
#include <limits>

namespace kiln::kernels::optimized {

// After the clamp: nothing, or hardswish x * clamp(x + 3, 0, 6) / 6, or hardsigmoid clamp(x + 3, 0, 6) / 6.
enum class RegisterActivationKind : uint8_t { Clamp, Hardswish, Hardsigmoid };

// y = kind(clamp(x, lo, hi)); none, relu, clamp, hardswish and hardsigmoid are
// this alone; the other activations run after the tile (gemm_activation.h).
struct RegisterActivation {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  RegisterActivationKind kind = RegisterActivationKind::Clamp;
};

}  // namespace kiln::kernels::optimized
