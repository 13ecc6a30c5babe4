// bfloat16 GEMM microkernels: the f32 GEMM driver (gemm_driver.h) on operands rounded to bfloat16,
// with float32 sums (KernelContext::gemm_precision, docs/kernels.md "bfloat16 GEMMs").
//
// Each float slot of A and of the packed B holds a pair of bfloat16 values, elements 2p (low half)
// and 2p + 1 (high half) of K: the driver runs the product over ceil(K / 2) pairs and never looks
// inside a slot. Each sum runs over slices of K of one length (bf16_gemm_slice_pairs, common/half.h),
// each from zero and then added to the earlier slices' sum; within a slice, pair after pair,
// sum += a[2p+1] * b[2p+1], then sum += a[2p] * b[2p], each step rounded to float32 (what
// AVX512_BF16's vdpbf16ps does). The products of two bfloat16 values are exact in float32, so a
// multiply-add and a multiply then an add give the same bits: every level, native or emulated, and
// the portable reference compute the same bits, except where a product overflows or a sum or
// product is subnormal (vdpbf16ps flushes those to zero). Operands are rounded by
// bf16_gemm_operand (common/half.h): nearest-even, subnormals to zero.
#pragma once

#include "kiln/cpu.h"
#include "optimized/f32_gemm.h"
#include "optimized/gemm_driver.h"

namespace kiln::kernels::optimized {

struct Bf16GemmKernels {
  // The tiles (over pairs), gemv4 and cache blocks (kc: kBf16GemmKcPairs). pack_rows is unused: B
  // is always packed by prepack_b_bf16 (below).
  F32GemmKernels gemm;
  // Rows [0, rows) of the float32 matrix src (row stride lds) from column 2 * p0, `pairs` pairs of
  // each (a last half pair past column k is zero), rounded to bfloat16: row i at dst + i * ld.
  void (*convert_rows)(const float* src, int64_t lds, int64_t k, int64_t rows, int64_t p0, int64_t pairs, float* dst,
                       int64_t ld) = nullptr;
  // Features the CPU must have for these kernels on top of the level's (AVX512_BF16 for the
  // vdpbf16ps tiles); 0 for the level's own code.
  CpuFeatures required_features = 0;
};

// Per level: `native` uses instructions beyond the level's features (its `required_features`), or has no
// tiles (gemm.mr == 0) where the level has none; `emulated` widens each pair to two floats and
// computes the same bits with the level's multiply-adds.
struct Bf16GemmLevel {
  Bf16GemmKernels native;
  Bf16GemmKernels emulated;
};
KILN_ISA_TABLE(Bf16GemmLevel, bf16_gemm)

// The kernels that level `isa` runs on this CPU: the native ones where the CPU has what they need.
inline const Bf16GemmKernels& bf16_gemm_kernels_for(Isa isa) {
  const Bf16GemmLevel& level = bf16_gemm_for(isa);
  const CpuFeatures need = level.native.required_features;
  if (level.native.gemm.mr > 0 && (detected_cpu_features() & need) == need) return level.native;
  return level.emulated;
}

// Packs the constant B[k][n] = source[k * rs + n * cs] in pairs (slices of kc pairs, each as panels
// of nr columns, as GemmProblem::packed_b), rounded by bf16_gemm_operand; once per loaded program
// (packed_constant). A linear's weight W [n, k] is B = W^T: rs 1, cs k.
Result<const float*> prepack_b_bf16(KernelContext& ctx, const Bf16GemmKernels& kernels, const Tensor& source,
                                    int64_t rs, int64_t cs, int64_t k, int64_t n);

// Runs `p`, a product of float32 rows (a, lda; K = p.k floats) with a B packed by prepack_b_bf16,
// converting each block of A to pairs as the driver copies it. `scratch_bytes`: as gemm()'s, from
// gemm_worker_scratch_bytes(kernels.gemm, n, true).
Status gemm_bf16(const Bf16GemmKernels& kernels, const GemmProblem& p, const KernelContext& ctx, size_t scratch_bytes);

}  // namespace kiln::kernels::optimized
