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
struct Mnk {
  int64_t m, n, k;
};
const Mnk kShapes[] = {{1, 1, 1},     {1, 7, 3},       {2, 33, 17},     {3, 5, 4099},  {5, 31, 64},
                       {6, 16, 8},    {7, 32, 129},    {8, 64, 300},    {9, 17, 5},    {13, 97, 1000},
                       {16, 48, 257}, {1, 1031, 61},   {37, 1030, 31},  {200, 40, 260}, {64, 129, 576},
                       {97, 13, 2},   {1, 576, 1536}, {4, 1, 33}};

KILN_TEST(linear_matches_reference) {
  for (const Mnk& s : kShapes) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool bias = variant & 1, constant_weight = !(variant & 2);
      TestTensor x = TestTensor::random({s.m, s.k});
      TestTensor w = TestTensor::random({s.n, s.k}, constant_weight);
      TestTensor b = TestTensor::random({s.n}, true);
      Args args;
      args.tensor(x).tensor(w);
      if (bias) args.tensor(b); else args.none();
      const std::string what = format("linear m=%lld n=%lld k=%lld bias=%d constant=%d", (long long)s.m,
                                      (long long)s.n, (long long)s.k, bias, constant_weight);
      const int ran = expect_tiers_match(what, "aten::linear.default", args, {s.m * s.n}, gemm_tolerance(s.k));
      KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
    }
  }
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

}  // namespace
}  // namespace kiln::test
