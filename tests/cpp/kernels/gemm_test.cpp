// Optimized GEMM kernels (linear, fused_linear, mm, addmm, bmm, matmul) against the portable ones.
#include <cmath>
#include <limits>

#include "common/activation.h"
#include "gemm_test_util.h"
#include "harness.h"

namespace kiln::test {
namespace {

const int kLevels = static_cast<int>(supported_isas().size());

// (m, n, k): sizes 1, primes, around the register tiles (8x32, 6x16, 6x8) and
// cache blocks (kc 128/256, mc 96..192, nc 512/1024), and K much larger than N.
const Mnk kShapes[] = {{1, 1, 1},      {1, 7, 3},      {2, 33, 17},    {3, 5, 4099},   {5, 31, 64},    {6, 16, 8},
                       {7, 32, 129},   {8, 64, 300},   {9, 17, 5},     {13, 97, 1000}, {16, 48, 257},  {1, 1031, 61},
                       {37, 1030, 31}, {200, 40, 260}, {64, 129, 576}, {97, 13, 2},    {1, 576, 1536}, {4, 1, 33}};

KILN_TEST(linear_matches_reference) {
  expect_linear_variants_match("linear", {std::begin(kShapes), std::end(kShapes)},
                               [](const Mnk& s, bool) { return gemm_tolerance(s.k); });
}

KILN_TEST(linear_split_over_many_threads) {
  // Past 2 threads the GEMM may cut rows and columns at once (split_work): every cut must still
  // cover C exactly once. Shapes whose best cut is 2-D at some of these counts: MiniLM's linears,
  // a ResNet-like stride-2 convolution's product, odd sizes.
  const int before = num_threads();
  for (int threads : {3, 5, 16}) {
    set_num_threads(threads);
    for (const Mnk& s : {Mnk{128, 384, 384}, Mnk{128, 784, 64}, Mnk{13, 97, 1000}, Mnk{77, 250, 300}}) {
      TestTensor x = TestTensor::random({s.m, s.k});
      TestTensor w = TestTensor::random({s.n, s.k}, true), b = TestTensor::random({s.n}, true);
      Args args;
      args.tensor(x).tensor(w).tensor(b);
      const std::string what =
          format("linear m=%lld n=%lld k=%lld on %d threads", (long long)s.m, (long long)s.n, (long long)s.k, threads);
      const int ran = expect_tiers_match(what, "aten::linear.default", args, {s.m * s.n}, gemm_tolerance(s.k));
      KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
    }
  }
  set_num_threads(before);
}

KILN_TEST(linear_batched_input) {
  // [2, 3, m, k] inputs: the leading dims are more rows.
  for (int64_t m : {1, 5, 8}) {
    TestTensor x = TestTensor::random({2, 3, m, 40});
    TestTensor w = TestTensor::random({35, 40}, true), b = TestTensor::random({35}, true);
    Args args;
    args.tensor(x).tensor(w).tensor(b);
    const int ran = expect_tiers_match(format("linear [2, 3, %lld, 40]", (long long)m), "aten::linear.default", args,
                                       {6 * m * 35}, gemm_tolerance(40));
    KILN_EXPECT(ran == kLevels, "linear batched: ran at %d levels", ran);
  }
}

KILN_TEST(linear_fewer_rows_than_prepared) {
  // Prepared at the bound of a dynamic dim, run with fewer rows (prefill chunks, decode).
  for (const Mnk& s : {Mnk{64, 100, 70}, Mnk{17, 576, 300}, Mnk{9, 40, 1000}}) {
    for (int64_t rows : {int64_t{1}, int64_t{2}, s.m - 1}) {
      TestTensor x = TestTensor::random({s.m, s.k});
      TestTensor w = TestTensor::random({s.n, s.k}, true), b = TestTensor::random({s.n}, true);
      Args args;
      args.tensor(x).tensor(w).tensor(b);
      const std::string what = format("linear prepared m=%lld run m=%lld n=%lld k=%lld", (long long)s.m,
                                      (long long)rows, (long long)s.n, (long long)s.k);
      const int ran = expect_tiers_match(what, "aten::linear.default", args, {s.m * s.n}, gemm_tolerance(s.k), false,
                                         {{&x, {rows, s.k}}});
      KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
    }
  }
}

KILN_TEST(linear_propagates_nan_and_inf_per_row) {
  // A NaN or infinity in one row of x must reach exactly that row of y.
  const int64_t m = 11, n = 45, k = 20;
  TestTensor x = TestTensor::random({m, k});
  x.f()[3 * k + 5] = std::numeric_limits<float>::quiet_NaN();
  x.f()[9 * k + 0] = std::numeric_limits<float>::infinity();
  TestTensor w = TestTensor::random({n, k}, true, 0.5f, 1.0f);  // positive: row 9 is +inf everywhere
  Args args;
  args.tensor(x).tensor(w).none();
  const int ran = expect_tiers_match("linear nan/inf", "aten::linear.default", args, {m * n}, gemm_tolerance(k));
  KILN_EXPECT(ran == kLevels, "linear nan/inf: ran at %d levels", ran);
}

KILN_TEST(linear_declines_what_it_does_not_serve) {
  TestTensor x = TestTensor::random({4, 6}), w = TestTensor::random({5, 6}, true), b = TestTensor::random({1}, true);
  Args args;
  args.tensor(x).tensor(w).tensor(b);  // a scalar bias broadcast over 5 features
  const int ran = expect_tiers_match("linear scalar bias", "aten::linear.default", args, {20}, gemm_tolerance(6), true);
  KILN_EXPECT(ran == 0, "linear with a scalar bias: the optimized kernel ran at %d levels", ran);
}

KILN_TEST(mm_matches_reference) {
  for (const Mnk& s : kShapes) {
    for (bool constant : {false, true}) {
      TestTensor a = TestTensor::random({s.m, s.k}), b = TestTensor::random({s.k, s.n}, constant);
      Args args;
      args.tensor(a).tensor(b);
      const std::string what =
          format("mm m=%lld n=%lld k=%lld constant=%d", (long long)s.m, (long long)s.n, (long long)s.k, constant);
      const int ran = expect_tiers_match(what, "aten::mm.default", args, {s.m * s.n}, gemm_tolerance(s.k));
      KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
    }
  }
  // An empty sum (K = 0) is zeros.
  TestTensor a({3, 0}), b({0, 4});
  Args args;
  args.tensor(a).tensor(b);
  const int ran = expect_tiers_match("mm k=0", "aten::mm.default", args, {12}, gemm_tolerance(0));
  KILN_EXPECT(ran == kLevels, "mm k=0: ran at %d levels", ran);
}

KILN_TEST(bmm_matches_reference) {
  for (int64_t batch : {1, 3}) {
    for (const Mnk& s : {Mnk{1, 1, 1}, Mnk{5, 31, 64}, Mnk{16, 16, 64}, Mnk{13, 97, 300}, Mnk{64, 64, 16}}) {
      TestTensor a = TestTensor::random({batch, s.m, s.k}), b = TestTensor::random({batch, s.k, s.n});
      Args args;
      args.tensor(a).tensor(b);
      const std::string what = format("bmm batch=%lld m=%lld n=%lld k=%lld", (long long)batch, (long long)s.m,
                                      (long long)s.n, (long long)s.k);
      const int ran = expect_tiers_match(what, "aten::bmm.default", args, {batch * s.m * s.n}, gemm_tolerance(s.k));
      KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
    }
  }
}

KILN_TEST(matmul_broadcasting_matches_reference) {
  struct Case {
    std::vector<int64_t> a, b;
    bool b_constant;
  };
  const Case cases[] = {{{7, 33}, {33, 19}, false},
                        {{7, 33}, {33, 19}, true},
                        {{33}, {33, 19}, false},
                        {{7, 33}, {33}, false},
                        {{33}, {33}, false},
                        {{3, 7, 33}, {33, 40}, true},
                        {{3, 7, 33}, {33, 40}, false},
                        {{3, 7, 33}, {3, 33, 40}, false},
                        {{2, 1, 9, 20}, {3, 20, 11}, false},
                        {{1, 9, 20}, {4, 20, 11}, true},
                        {{5, 9, 20}, {20}, false},
                        {{20}, {3, 20, 11}, false},
                        {{1, 12, 16, 64}, {1, 12, 64, 16}, false},
                        {{2, 3, 1, 50}, {2, 3, 50, 9}, false}};
  for (const Case& c : cases) {
    TestTensor a = TestTensor::random(c.a), b = TestTensor::random(c.b, c.b_constant);
    Args args;
    args.tensor(a).tensor(b);
    const std::string what =
        format("matmul %s @ %s constant=%d", describe(a.t).c_str(), describe(b.t).c_str(), c.b_constant);
    const int64_t k = c.a.back();
    const int ran = expect_tiers_match(what, "aten::matmul.default", args, {a.numel() * b.numel()}, gemm_tolerance(k));
    KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
  }
}

KILN_TEST(matmul_fewer_rows_than_prepared) {
  // Attention with a dynamic sequence length: [heads, s, d] @ [heads, d, s] prepared at the bound.
  TestTensor q = TestTensor::random({4, 40, 32}), k = TestTensor::random({4, 32, 40});
  Args args;
  args.tensor(q).tensor(k);
  const int ran = expect_tiers_match("matmul shrunk", "aten::matmul.default", args, {4 * 40 * 40}, gemm_tolerance(32),
                                     false, {{&q, {4, 9, 32}}, {&k, {4, 32, 9}}});
  KILN_EXPECT(ran == kLevels, "matmul shrunk: ran at %d levels", ran);
}

KILN_TEST(addmm_matches_reference) {
  const int64_t m = 13, n = 37, k = 45;
  struct Case {
    std::vector<int64_t> self;
    double beta, alpha;
    bool served;
  };
  const Case cases[] = {{{n}, 1, 1, true},   {{1, n}, 1, 1, true}, {{m, 1}, 1, 1, true}, {{m, n}, 1, 1, true},
                        {{n}, 1, 0.5, true}, {{m, n}, 0, 2, true}, {{n}, 2, 1, false},   {{1}, 1, 1, false},
                        {{}, 1, 1, false},   {{1, 1}, 1, 1, false}};
  for (const Case& c : cases) {
    for (bool constant : {false, true}) {
      TestTensor self = TestTensor::random(c.self, true);
      TestTensor a = TestTensor::random({m, k}), b = TestTensor::random({k, n}, constant);
      Args args;
      args.tensor(self).tensor(a).tensor(b).d(c.beta).d(c.alpha);
      const std::string what =
          format("addmm self %s beta %g alpha %g constant=%d", describe(self.t).c_str(), c.beta, c.alpha, constant);
      const int ran = expect_tiers_match(what, "aten::addmm.default", args, {m * n}, gemm_tolerance(k), !c.served);
      KILN_EXPECT(ran == (c.served ? kLevels : 0), "%s: ran at %d levels", what.c_str(), ran);
    }
  }
}

KILN_TEST(fused_linear_matches_unfused_reference) {
  // act(x @ W^T + bias + residual) against the portable linear, add and activation.
  // The last two span several row blocks and column blocks (activations are applied per block).
  const Mnk shapes[] = {{1, 45, 30}, {9, 33, 70}, {64, 100, 600}, {37, 1100, 24}, {1, 1100, 24}};
  int case_index = 0;
  for (const Mnk& s : shapes) {
    for (const char* act : kActivations) {
      for (int variant = 0; variant < 4; ++variant, ++case_index) {
        const bool bias = variant & 1, residual = variant & 2;
        TestTensor x = TestTensor::random({s.m, s.k}, false, -2.0f, 2.0f);
        TestTensor w = TestTensor::random({s.n, s.k}, case_index % 3 != 0);  // some weights computed at run
        TestTensor b = TestTensor::random({s.n}, true), r = TestTensor::random({s.m, s.n});
        const double lo = -0.5, hi = 0.75;
        Args linear;
        linear.tensor(x).tensor(w);
        if (bias)
          linear.tensor(b);
        else
          linear.none();
        TestTensor want = reference_epilogue(portable_output("aten::linear.default", linear, s.m * s.n),
                                             residual ? &r : nullptr, act, lo, hi);
        Args fused;
        fused.tensor(x).tensor(w);
        if (bias)
          fused.tensor(b);
        else
          fused.none();
        if (residual)
          fused.tensor(r);
        else
          fused.none();
        fused.str(act).d(lo).d(hi);
        const std::string what = format("fused_linear m=%lld n=%lld k=%lld %s bias=%d residual=%d", (long long)s.m,
                                        (long long)s.n, (long long)s.k, act, bias, residual);
        // Inputs in [-2, 2]: the terms are four times larger than gemm_tolerance assumes.
        Tolerance tol = gemm_tolerance(s.k);
        tol.atol *= 4;
        const int ran = expect_optimized_matches(what, "kiln::fused_linear.default", fused, want, tol);
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

KILN_TEST(fused_linear_rejects_bad_arguments) {
  TestTensor x = TestTensor::random({4, 6}), w = TestTensor::random({5, 6}, true), r = TestTensor::random({4, 4});
  Args args;
  args.tensor(x).tensor(w).none().tensor(r).str("relu").d(0).d(0);
  TestTensor y = TestTensor::output(20);
  KernelRun run = run_kernel("kiln::fused_linear.default", args, {&y}, kTierOptimized, Isa::Baseline);
  KILN_EXPECT(run.declined, "a residual of the wrong shape: declined %d, %s", run.declined,
              run.status.to_string().c_str());
  Args unknown;
  unknown.tensor(x).tensor(w).none().none().str("swish").d(0).d(0);
  run = run_kernel("kiln::fused_linear.default", unknown, {&y}, kTierOptimized, Isa::Baseline);
  KILN_EXPECT(run.declined && run.status.message().find("unknown activation") != std::string::npos,
              "an unknown activation: %s", run.status.to_string().c_str());
}

}  // namespace
}  // namespace kiln::test
