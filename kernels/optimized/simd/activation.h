// RegisterActivation on VecF32, for the microkernels of one level (include after simd/vec_<isa>.h).
#pragma once

#include "optimized/register_activation.h"

namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE {

// max/min return their second operand on NaN: x always goes second, so NaN
// passes through as in PyTorch. Dividing by 6 is a multiplication by 1/6 here
// (within an ulp of the reference's division).
inline VecF32 activate(VecF32 x, const RegisterActivation& a) {
  x = VecF32::min(VecF32::broadcast(a.hi), VecF32::max(VecF32::broadcast(a.lo), x));
  if (a.kind == RegisterActivationKind::Clamp) return x;
  const VecF32 gate = VecF32::min(VecF32::broadcast(6.0f), VecF32::max(VecF32::zero(), x + VecF32::broadcast(3.0f))) *
                      VecF32::broadcast(1.0f / 6.0f);
  return a.kind == RegisterActivationKind::Hardswish ? x * gate : gate;
}

}  // namespace kiln::kernels::optimized::KILN_ISA_NAMESPACE
