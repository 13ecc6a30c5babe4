// The reference of the bfloat16 GEMM (optimized/bf16_gemm.h) and the product mm, bmm and matmul
// share: plain loops that give the optimized tiles' bits, not their speed.
#include <algorithm>

#include "common/half.h"
#include "kiln/thread_pool.h"
#include "portable/gemm.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

float gemm_operand(float x) { return bfloat16_to_float(bf16_gemm_operand(x)); }

}  // namespace

// Each sum runs over the pairs of K in slices of bf16_gemm_slice_pairs, each slice from zero, the
// odd element's product added before the even one's, each addition rounded to float32 (products of
// bfloat16 values are exact: no fused multiply-add needed); a slice's sum is then added to the
// earlier slices' total, and the total is scaled by alpha and added to C, as the f32 epilogue does.
void gemm_bf16(const GemmProblem& p) noexcept {
  const int64_t m = p.m, n = p.n, k = p.k;
  const int64_t pairs = (k + 1) / 2, slice = bf16_gemm_slice_pairs(pairs);
  parallel_for(m, grain_for(n * std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* ai = p.a + i * p.a_rs;
      for (int64_t j = 0; j < n; ++j) {
        const float* bj = p.b + j * p.b_cs;
        float total = 0.0f;
        for (int64_t p0 = 0; p0 < pairs; p0 += slice) {
          float sum = 0.0f;
          for (int64_t q = p0; q < std::min(pairs, p0 + slice); ++q) {
            const int64_t e = 2 * q;
            // Past the end of an odd K the pair's high half is zero in both operands.
            if (e + 1 < k) sum += gemm_operand(ai[(e + 1) * p.a_cs]) * gemm_operand(bj[(e + 1) * p.b_rs]);
            sum += gemm_operand(ai[e * p.a_cs]) * gemm_operand(bj[e * p.b_rs]);
          }
          total = p0 == 0 ? sum : sum + total;
        }
        if (p.alpha != 1.0f) total *= p.alpha;
        float& out = p.c[i * p.c_rs + j];
        out = p.overwrite ? total : out + total;
      }
    }
  });
}

void matmul_product(const KernelContext& ctx, const MatmulShapes& s, const Tensor& a, const Tensor& b,
                    float* c) noexcept {
  if (ctx.gemm_precision != GemmPrecision::Bfloat16 || !b.is_constant() || s.batch_ndim != 0) {
    gemm_contiguous(s, a.data_as<const float>(), b.data_as<const float>(), c);
    return;
  }
  GemmProblem p;
  p.m = s.m, p.n = s.n, p.k = s.k;
  p.a = a.data_as<const float>(), p.a_rs = s.k, p.a_cs = 1;
  p.b = b.data_as<const float>(), p.b_rs = s.n, p.b_cs = 1;
  p.c = c, p.c_rs = s.n;
  p.overwrite = true;
  gemm_bf16(p);
}

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
