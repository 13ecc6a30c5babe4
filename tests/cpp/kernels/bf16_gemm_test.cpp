// Linear layers under GemmPrecision::Bfloat16: the optimized bfloat16 tiles (vdpbf16ps, and the
// emulation every other level runs) against the portable reference, bit for bit (bf16_gemm.h: one
// order of sums everywhere), and every tier against a sum the test computes itself in double from
// operands it rounds to bfloat16 its own way.
#include <cmath>
#include <cstdio>
#include <string>

#include "gemm_test_util.h"
#include "harness.h"
#include "optimized/bf16_gemm.h"

namespace kiln::test {
namespace {

const int kLevels = static_cast<int>(supported_isas().size());

// One row (the streamed gemv4 path), odd K (a last half pair), K past one slice of pairs at every
// level (kc 128..256 pairs), N not a multiple of the 32-column panels, a few rows around the tile
// heights (4 and 8).
const Mnk kShapes[] = {{1, 1, 1},     {1, 7, 3},      {2, 33, 17},   {3, 5, 1027},  {5, 31, 64},
                       {8, 64, 300},  {9, 17, 5},     {13, 97, 999}, {1, 1031, 61}, {1, 576, 1536},
                       {37, 130, 31}, {64, 129, 576}, {4, 1, 33}};

// x rounded to bfloat16 independently of the code under test: 8 significant bits, ties to even
// (nearbyint under the default rounding mode), subnormal floats to zero.
double to_bf16(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL || x == 0.0f) return 0.0;
  int e = 0;
  const double m = std::frexp(static_cast<double>(x), &e);  // [0.5, 1)
  return std::ldexp(std::nearbyint(m * 256.0), e - 8);
}

KILN_TEST(bf16_linear_matches_reference) {
  ScopedGemmPrecision bf16(GemmPrecision::Bfloat16);
  // A weight computed at run time stays float32 in both tiers (sums in other orders).
  expect_linear_variants_match(
      "bf16 linear", {std::begin(kShapes), std::end(kShapes)},
      [](const Mnk& s, bool constant) { return constant ? Tolerance{0.0f, 0.0f} : gemm_tolerance(s.k); });
}

// act(x @ W^T + bias + residual) with the activation after the product, as fusion makes it: exact for
// relu, within the vector functions' tolerance for gelu.
KILN_TEST(bf16_fused_linear_matches_reference) {
  ScopedGemmPrecision bf16(GemmPrecision::Bfloat16);
  for (const Mnk& s : {Mnk{1, 384, 384}, Mnk{7, 50, 129}, Mnk{128, 96, 64}}) {
    for (const char* act : {"relu", "gelu"}) {
      TestTensor x = TestTensor::random({s.m, s.k});
      TestTensor w = TestTensor::random({s.n, s.k}, true), b = TestTensor::random({s.n}, true);
      TestTensor r = TestTensor::random({s.m, s.n});
      Args args;
      args.tensor(x).tensor(w).tensor(b).tensor(r).str(act).d(0).d(0);
      const std::string what =
          format("bf16 fused_linear m=%lld n=%lld k=%lld %s", (long long)s.m, (long long)s.n, (long long)s.k, act);
      const Tolerance tol = std::string(act) == "relu" ? Tolerance{0.0f, 0.0f} : Tolerance{1e-5f, 1e-6f};
      const int ran = expect_tiers_match(what, "kiln::fused_linear.default", args, {s.m * s.n}, tol);
      KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
    }
  }
}

// mm, addmm and matmul with a constant B: the same bf16 product, bit for bit; a batched constant B
// (bmm) stays float32 in both tiers.
KILN_TEST(bf16_matmuls_with_a_constant_b_match_reference) {
  ScopedGemmPrecision bf16(GemmPrecision::Bfloat16);
  const Tolerance exact{0.0f, 0.0f};
  for (const Mnk& s : {Mnk{1, 40, 7}, Mnk{9, 33, 130}, Mnk{64, 70, 600}}) {
    TestTensor a = TestTensor::random({s.m, s.k}), b = TestTensor::random({s.k, s.n}, true);
    const std::string shape = format("m=%lld n=%lld k=%lld", (long long)s.m, (long long)s.n, (long long)s.k);
    Args mm;
    mm.tensor(a).tensor(b);
    KILN_EXPECT(expect_tiers_match("bf16 mm " + shape, "aten::mm.default", mm, {s.m * s.n}, exact) == kLevels,
                "bf16 mm %s: not every level ran", shape.c_str());
    for (double alpha : {1.0, 0.5}) {
      for (double beta : {1.0, 0.0}) {
        TestTensor self = TestTensor::random({s.m, s.n});
        Args addmm;
        addmm.tensor(self).tensor(a).tensor(b).d(beta).d(alpha);
        const std::string what = format("bf16 addmm %s alpha=%g beta=%g", shape.c_str(), alpha, beta);
        KILN_EXPECT(expect_tiers_match(what, "aten::addmm.default", addmm, {s.m * s.n}, exact) == kLevels,
                    "%s: not every level ran", what.c_str());
      }
    }
    // [2, m, k] @ [k, n]: the batch folds into the rows.
    TestTensor a3 = TestTensor::random({2, s.m, s.k});
    Args matmul;
    matmul.tensor(a3).tensor(b);
    KILN_EXPECT(
        expect_tiers_match("bf16 matmul " + shape, "aten::matmul.default", matmul, {2 * s.m * s.n}, exact) == kLevels,
        "bf16 matmul %s: not every level ran", shape.c_str());
    TestTensor b3 = TestTensor::random({2, s.k, s.n}, true), a2 = TestTensor::random({2, s.m, s.k});
    Args bmm;
    bmm.tensor(a2).tensor(b3);
    KILN_EXPECT(expect_tiers_match("bmm, constant B " + shape, "aten::bmm.default", bmm, {2 * s.m * s.n},
                                   gemm_tolerance(s.k)) == kLevels,
                "bmm %s: not every level ran", shape.c_str());
  }
}

// Every tier against the test's own sum over rounded operands: a tier that skipped the rounding
// (float32 products) would be off by about 2^-9 of each product, far beyond the tolerance.
KILN_TEST(bf16_linear_rounds_both_operands) {
  ScopedGemmPrecision bf16(GemmPrecision::Bfloat16);
  for (const Mnk& s : {Mnk{1, 40, 64}, Mnk{6, 33, 77}, Mnk{19, 70, 513}}) {
    TestTensor x = TestTensor::random({s.m, s.k});
    TestTensor w = TestTensor::random({s.n, s.k}, true), b = TestTensor::random({s.n}, true);
    std::vector<float> want(static_cast<size_t>(s.m * s.n));
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = b.f()[j];
        for (int64_t e = 0; e < s.k; ++e) sum += to_bf16(x.f()[i * s.k + e]) * to_bf16(w.f()[j * s.k + e]);
        want[static_cast<size_t>(i * s.n + j)] = static_cast<float>(sum);
      }
    }
    Args args;
    args.tensor(x).tensor(w).tensor(b);
    const std::string what =
        format("bf16 linear m=%lld n=%lld k=%lld vs double", (long long)s.m, (long long)s.n, (long long)s.k);
    const int ran =
        expect_every_tier_close(what, "aten::linear.default", args, want.data(), s.m * s.n, gemm_tolerance(s.k));
    KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
  }
}

// Where the CPU has AVX512_BF16, the avx512_vnni level runs the vdpbf16ps tiles (so the comparisons
// above covered them) and the avx512 level the emulation.
KILN_TEST(bf16_native_tiles_chosen_where_the_cpu_has_them) {
  using kernels::optimized::bf16_gemm_kernels_for;
  const bool cpu_has = (detected_cpu_features() & KILN_CPU_FEATURE_BIT(Avx512Bf16)) != 0;
  bool vnni_level_runs = false;
  for (Isa isa : supported_isas()) vnni_level_runs |= isa == Isa::Avx512Vnni;
  if (!cpu_has || !vnni_level_runs) {
    std::printf("  note: the vdpbf16ps tiles are not exercised here (%s)\n",
                !cpu_has ? "the CPU lacks avx512_bf16" : "this build or CPU has no avx512_vnni level");
    return;
  }
  KILN_EXPECT(bf16_gemm_kernels_for(Isa::Avx512Vnni).required_features == KILN_CPU_FEATURE_BIT(Avx512Bf16),
              "avx512_vnni on a CPU with avx512_bf16 did not get the vdpbf16ps tiles");
  KILN_EXPECT(bf16_gemm_kernels_for(Isa::Avx512).required_features == 0, "avx512 got tiles beyond its features");
}

}  // namespace
}  // namespace kiln::test
