// Every Activation of common/activation.h as a VecF32 function, for the microkernels of one level
// (include after simd/vec_<isa>.h).
#pragma once

#include "common/activation.h"
#include "optimized/simd/vec_math.h"

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

// Calls f with the vector function of the activation (the portable formulas, vec_math.h), as a
// lambda so that it is inlined (a function pointer would be called per vector).
template <typename F>
inline void with_activation(Activation act, float lo, float hi, F f) {
  using V = VecF32;
  switch (act) {
    case Activation::None: return f([](V v) { return v; });
    case Activation::Relu: return f([](V v) { return V::max(V::zero(), v); });
    case Activation::Clamp: {
      const V vlo = V::broadcast(lo), vhi = V::broadcast(hi);
      return f([=](V v) { return V::min(vhi, V::max(vlo, v)); });
    }
    case Activation::Gelu: return f([](V v) { return vgelu(v); });
    case Activation::GeluTanh: return f([](V v) { return vgelu_tanh(v); });
    case Activation::Silu: return f([](V v) { return vsilu(v); });
    case Activation::Sigmoid: return f([](V v) { return vsigmoid(v); });
    case Activation::Tanh: return f([](V v) { return vtanh(v); });
    case Activation::Hardswish: return f([](V v) { return vhardswish(v); });
    case Activation::Hardsigmoid: return f([](V v) { return vhardsigmoid(v); });
  }
}

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
