// Float arithmetic over rows of broadcast operands: add, sub (with alpha), mul, div.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };

struct F32BinaryKernels {
  // y[i] = a[i] op (alpha * b[i]) for i < n (alpha is read by Add and Sub, and skipped when 1, like
  // the portable kernel: a + alpha * b in two roundings). A `_scalar` operand is the one value *a
  // (or *b) for every i: the stride-0 side of a broadcast row.
  void (*row)(BinaryOp op, const float* a, bool a_scalar, const float* b, bool b_scalar, float* y, int64_t n,
              float alpha);
};
KILN_ISA_TABLE(F32BinaryKernels, f32_binary)

}  // namespace kiln::kernels::optimized
