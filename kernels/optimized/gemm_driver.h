// The f32 GEMM behind the optimized linear, matmul and conv2d kernels: packing of B,
// cache blocking, threading and the fused epilogue around the f32_gemm.h microkernels.
//
//   for each task (batch, rows [m0, m1), panels [p0, p1)) on the pool
//     for each block of nc columns
//       for each slice of kc rows of K          (pack the B block, unless prepacked)
//         for each block of mc rows of A         (copied or made, so that its rows never alias in L1)
//           for each panel of nr columns         (its kc x nr micro-panel serves every strip)
//             for each strip of mr rows          (the microkernel; epilogue on the last slice)
// One row against a prepacked B (a decode step) reads four panels at a time (gemv4).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/activation.h"
#include "common/internal_api.h"
#include "kiln/kernel.h"
#include "optimized/f32_gemm.h"

namespace kiln {
namespace kernels {
namespace optimized {

// Writes B[k0 : k0+kc, n0 : n0+nc] of batch `batch` as ceil(nc / nr) panels of
// kc x nr floats, zero-padded past column nc (implicit im2col, matmul operands).
using PackBFn = void (*)(const void* ctx, int64_t batch, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr,
                         float* dst);

// Writes A[m0 : m0+mc, k0 : k0+kc] of batch `batch`, row i at dst + i * ld
// (the transposed implicit im2col of small convolutions).
using PackAFn = void (*)(const void* ctx, int64_t batch, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst,
                         int64_t ld);

// Batched problems: batch index b is unravelled over `sizes` (row-major) and
// each operand is offset by its per-dimension element strides (0 broadcasts).
struct GemmBatches {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t a_strides[kMaxDims] = {};
  int64_t b_strides[kMaxDims] = {};     // for strided or prepacked B (see GemmProblem::b)
  int64_t bias_strides[kMaxDims] = {};  // per-row biases of grouped convolutions
  int64_t c_stride = 0;                 // C and the residual: contiguous [batch][m][n]
  int64_t count() const;
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  // A: rows a + i * lda, K contiguous; or, when pack_a is set, made block by block.
  const float* a = nullptr;
  int64_t lda = 0;
  PackAFn pack_a = nullptr;
  const void* pack_a_ctx = nullptr;
  float* c = nullptr;  // rows c + i * ldc
  int64_t ldc = 0;
  GemmBatches batches;

  // B, one of: prepacked by prepack_b (slices of kc rows of K, each as panels:
  // slice k0 at packed_b + k0 * padded n, its panel p at + p * (its rows) * nr);
  // a packer; or a strided matrix B[k][n] = b[k * b_rs + n * b_cs].
  const float* packed_b = nullptr;
  PackBFn pack_b = nullptr;
  const void* pack_b_ctx = nullptr;
  const float* b = nullptr;
  int64_t b_rs = 0, b_cs = 0;

  // Epilogue: C = act(alpha * (A @ B) + bias + residual).
  float alpha = 1.0f;
  const float* bias = nullptr;  // bias[j] per column, or bias[i] per row
  bool bias_per_row = false;
  const float* residual = nullptr;  // same layout as C (row stride ldc)
  ActivationArg act;
};

// Packs B[0:kc, 0:nc] = b[k * rs + j * cs] into panels as PackBFn describes.
KILN_INTERNAL_API void pack_b_panels(const float* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, int nr,
                                     float* dst);

// Packs the constant B[k][n] = source[k * rs + n * cs] (k, n >= 1) once per
// loaded program (packed_constant), for GemmProblem::packed_b; `batches` of
// them, batch b from source + b * batch_stride, one after the other (a batched
// problem then offsets packed_b by its b_strides: k * padded n per batch).
KILN_INTERNAL_API Result<const float*> prepack_b(KernelContext& ctx, const F32GemmKernels& kernels,
                                                 const Tensor& source, int64_t rs, int64_t cs, int64_t k, int64_t n,
                                                 int64_t batches = 1, int64_t batch_stride = 0);

// The same into dst (prepacked_b_floats of them), for a kernel that packs a B it computes at load
// (Winograd's transformed weights).
KILN_INTERNAL_API int64_t prepacked_b_floats(const F32GemmKernels& kernels, int64_t k, int64_t n, int64_t batches = 1);
KILN_INTERNAL_API void prepack_b_into(const F32GemmKernels& kernels, const float* b, int64_t rs, int64_t cs, int64_t k,
                                      int64_t n, int64_t batches, int64_t batch_stride, float* dst);

// Per-worker scratch that gemm() needs for problems of at most `n` columns:
// blocks of A, and of B unless it is prepacked.
KILN_INTERNAL_API size_t gemm_worker_scratch_bytes(const F32GemmKernels& kernels, int64_t n, bool b_prepacked);

// Runs the problem on the pool. `scratch_bytes` is the per-worker scratch that
// ctx provides, gemm_worker_scratch_bytes of at least this problem's columns
// (KernelFailure otherwise).
KILN_INTERNAL_API Status gemm(const F32GemmKernels& kernels, const GemmProblem& p, const KernelContext& ctx,
                              size_t scratch_bytes);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
