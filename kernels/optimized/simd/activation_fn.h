// Every Activation of common/activation.h as a VecF32 function, for the microkernels of one level
// (include after simd/vec_<isa>.h).
#pragma once

#include "common/activation.h"
#include "optimized/simd/vec_math.h"

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

// Calls f with the vector function of the activation if it is one min or max (None, Relu,
// Clamp), cheap enough to fuse into any microkernel's stores; returns false for the others.
template <typename F>
inline bool with_minmax_activation(Activation act, float lo, float hi, F f) {
  using V = VecF32;
  switch (act) {
    case Activation::None: f([](V v) { return v; }); return true;
    case Activation::Relu: f([](V v) { return V::max(V::zero(), v); }); return true;
    case Activation::Clamp: {
      const V vlo = V::broadcast(lo), vhi = V::broadcast(hi);
      f([=](V v) { return V::min(vhi, V::max(vlo, v)); });
      return true;
    }
    default: return false;
  }
}

// Calls f with the vector function of the activation (the portable formulas, vec_math.h), as a
// lambda so that it is inlined (a function pointer would be called per vector).
template <typename F>
inline void with_activation(Activation act, float lo, float hi, F f) {
  using V = VecF32;
  if (with_minmax_activation(act, lo, hi, f)) return;
  switch (act) {
    case Activation::Gelu: return f([](V v) { return vgelu(v); });
    case Activation::GeluTanh: return f([](V v) { return vgelu_tanh(v); });
    case Activation::Silu: return f([](V v) { return vsilu(v); });
    case Activation::Sigmoid: return f([](V v) { return vsigmoid(v); });
    case Activation::Tanh: return f([](V v) { return vtanh(v); });
    case Activation::Hardswish: return f([](V v) { return vhardswish(v); });
    case Activation::Hardsigmoid: return f([](V v) { return vhardsigmoid(v); });
    default: return;
  }
}

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
