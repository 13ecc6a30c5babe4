// The one cache-blocked float32 GEMM behind mm, bmm, addmm, linear, matmul and conv2d.
#pragma once

#include <cstdint>

#include "common/matmul_args.h"
#include "kiln/kernel.h"
#include "kiln/tensor.h"

namespace kiln {
namespace kernels {
namespace portable {

// Register tile of the micro-kernel: kGemmMR rows of C by kGemmNR columns.
constexpr int64_t kGemmMR = 6;
constexpr int64_t kGemmNR = 8;

// Packs the block B[k0 : k0+kc, n0 : n0+nc] of batch `batch` into `dst` as
// ceil(nc / kGemmNR) strips, each kc rows of kGemmNR floats, zero-padding
// columns past nc. Lets conv2d feed an implicit im2col into the same GEMM.
using GemmPackBFn = void (*)(const void* ctx, int64_t batch, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                             float* dst);

// C (+)= alpha * A @ B for every batch, with A [m, k], B [k, n], C [m, n] given
// by element strides (rs = row stride, cs = column stride), so transposed
// operands cost nothing extra. Batches: the flat batch index is unravelled over
// batch_sizes (row-major); A and B are offset by their per-dimension strides
// (0 broadcasts), C by c_batch_stride * flat index.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t a_rs = 0, a_cs = 1;
  const float* b = nullptr;
  int64_t b_rs = 0, b_cs = 1;
  float* c = nullptr;
  int64_t c_rs = 0;
  float alpha = 1.0f;
  // false: C += alpha * A @ B; true: C = alpha * A @ B (C's old contents are never read).
  bool overwrite = false;

  int batch_ndim = 0;
  int64_t batch_sizes[kMaxDims] = {};
  int64_t a_batch_strides[kMaxDims] = {};
  int64_t b_batch_strides[kMaxDims] = {};
  int64_t c_batch_stride = 0;

  // When set, B is produced by this packer instead of read through b/b_rs/b_cs.
  GemmPackBFn pack_b = nullptr;
  const void* pack_b_ctx = nullptr;
};

// Runs the problem on the runtime's thread pool. No heap allocation: packed
// panels live on the stack of each worker (80 KiB).
void gemm(const GemmProblem& p) noexcept;

// The same problem (one batch, B read through b/b_rs/b_cs) under GemmPrecision::Bfloat16: A and B
// rounded to bfloat16 and summed as optimized/bf16_gemm.h says, then C = alpha * sum (overwrite) or
// C + alpha * sum. The reference of the bfloat16 GEMM; the threads split rows only.
void gemm_bf16(const GemmProblem& p) noexcept;

// C = A @ B for contiguous A, B and C with the shapes and batch layout of `s` (mm, bmm, matmul).
void gemm_contiguous(const MatmulShapes& s, const float* a, const float* b, float* c) noexcept;

// C = A @ B for mm, bmm and matmul: gemm_contiguous, or, under GemmPrecision::Bfloat16 with a
// constant B and no batches (what the optimized kernels pack in bfloat16), gemm_bf16.
void matmul_product(const KernelContext& ctx, const MatmulShapes& s, const Tensor& a, const Tensor& b,
                    float* c) noexcept;

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
