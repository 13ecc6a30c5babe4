// The shapes of aten::mm, aten::bmm, aten::matmul (and addmm's product), checked once for both tiers.
#pragma once

#include <cstdint>

#include "kernel_args.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

// C[batch.., M, N] = A[batch.., M, K] @ B[batch.., K, N] for contiguous operands: batch index b is
// unravelled over batch_sizes (row-major); A and B move by their per-dim strides (0 where
// broadcast), C by c_batch_stride.
struct MatmulShapes {
  int64_t m = 0, n = 0, k = 0;
  int batch_ndim = 0;
  int64_t batch_sizes[kMaxDims] = {};
  int64_t a_batch_strides[kMaxDims] = {};
  int64_t b_batch_strides[kMaxDims] = {};
  int64_t c_batch_stride = 0;
  Dims out_sizes;  // the output's shape (not applied: the caller resizes)
};

// Reads and checks the two tensor arguments and gives the product's shapes: aten::mm (self [M, K],
// mat2 [K, N]); aten::bmm (self [B, M, K], mat2 [B, K, N]); aten::matmul (torch.matmul of self and
// other: a 1-D self is a row [1, K] and a 1-D other a column [K, 1], the unit dim dropped from the
// result again; batch dims broadcast; [..., M, K] @ [K, N] folds self's batch dims into M). Operands
// and output are f32. `at_prepare`: see tensor_arg.
Status mm_args(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
               MatmulShapes* s);
Status bmm_args(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
                MatmulShapes* s);
Status matmul_args(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
                   MatmulShapes* s);
// Any of the three.
using MatmulArgsFn = Status (*)(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a,
                                const Tensor** b, MatmulShapes* s);
// mm's checks of given operands a [M, K] and b [K, N] (named an, bn: addmm's mat1 and mat2), y f32.
Status mm_shapes(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn, const Tensor& y,
                 MatmulShapes* s);

}  // namespace kernels
}  // namespace kiln
