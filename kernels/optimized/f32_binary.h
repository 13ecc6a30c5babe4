// Float arithmetic over rows of broadcast operands: add, sub (with alpha), mul, div.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };

struct F32BinaryKernels {
  // For r < rows and i < n: y[r * n + i] = a_r[i] op (alpha * b_r[i]) where a_r = a + r * a_row_stride
  // (b likewise). alpha is read by Add and Sub, and skipped when 1, like the portable kernel (which
  // computes a + alpha * b in two roundings). A `_scalar` operand is the one value a_r[0] (b_r[0])
  // for every i: the stride-0 side of a broadcast row.
  void (*rows)(BinaryOp op, const float* a, int64_t a_row_stride, bool a_scalar, const float* b, int64_t b_row_stride,
               bool b_scalar, float* y, int64_t rows, int64_t n, float alpha);
};
KILN_ISA_TABLE(F32BinaryKernels, f32_binary)

}  // namespace kiln::kernels::optimized
