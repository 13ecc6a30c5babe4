// Optimized layer_norm against the portable kernel: rows from 1 to large, with and without weight
// and bias, multi-dim normalized shapes, constant rows (zero variance) and NaN/inf inputs.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Mean and variance are summed in another order than the portable kernel's (float partial sums,
// then float64): the normalized values differ by a few ulp of their size.
constexpr Tolerance kNormTol{1e-5f, 1e-5f};

void check(std::vector<int64_t> shape, int normalized_dims, bool weight, bool bias, bool specials, double eps = 1e-5) {
  TestTensor x = TestTensor::random(shape, false, -3.0f, 5.0f);
  std::vector<int64_t> norm(shape.end() - normalized_dims, shape.end());
  int64_t n = 1;
  for (int64_t s : norm) n *= s;
  if (specials && x.numel() >= 3 * n) {
    for (int64_t i = 0; i < n; ++i) x.f()[i] = 2.5f;  // a constant row: variance 0
    x.f()[n + 1] = kNaN;
    x.f()[2 * n] = kInf;
  }
  TestTensor w = TestTensor::random(norm, true, 0.5f, 1.5f), b = TestTensor::random(norm, true, -1.0f, 1.0f);
  Args args;
  args.tensor(x).ints(norm);
  weight ? args.tensor(w) : args.none();
  bias ? args.tensor(b) : args.none();
  args.d(eps).b(true);
  std::string what = "layer_norm [";
  for (int64_t s : shape) what += format("%lld ", (long long)s);
  what += format("] over %d dims, weight %d bias %d", normalized_dims, weight, bias);
  const int ran = expect_tiers_match(what, "aten::layer_norm.default", args, {x.numel()}, kNormTol);
  KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels",
              what.c_str(), ran);
}

KILN_TEST(layer_norm_matches_reference) {
  for (int64_t n : {1, 2, 3, 15, 16, 17, 33, 384, 576, 1000, 4097})
    for (int64_t rows : {1, 5}) check({rows, n}, 1, true, true, true);
  check({1, 128, 384}, 1, true, true, false, 1e-12);  // MiniLM
  check({2, 7, 9}, 2, true, true, true);
  check({3, 31}, 1, false, false, true);
  check({3, 31}, 1, true, false, false);
  check({3, 31}, 1, false, true, false);
  check({40, 2000}, 1, true, true, false);  // rows split over the pool
}

// layer_norm in float64 from the same float inputs: the mean and the variance of each row in two
// passes, then (x - mean) / sqrt(var + eps).
std::vector<float> layer_norm_f64(const TestTensor& x, int64_t n, double eps) {
  std::vector<float> y(static_cast<size_t>(x.numel()));
  for (int64_t r = 0; r < x.numel() / n; ++r) {
    const float* row = x.f() + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += row[i];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = static_cast<float>((row[i] - mean) / std::sqrt(var + eps));
  }
  return y;
}

Args layer_norm_plain(TestTensor& x, int64_t n, double eps) {
  Args args;
  args.tensor(x).ints({n}).none().none().d(eps).b(true);
  return args;
}

// A row far from 0 keeps its spread only if x - mean is formed before anything rounds the mean: a
// constant row is exactly 0 (not |y| of 0.3 to 1 from a mean that is a few ulp off and a variance
// of its error), and rows of 1e5 + noise are normalized to the float64 result's precision (a mean
// rounded to float moves them by up to 4e-3 / sigma).
KILN_TEST(layer_norm_rows_far_from_zero) {
  const int levels = static_cast<int>(supported_isas().size());
  for (float c : {12345.67f, 1e10f, -3.3e5f, 7.1e-30f}) {
    for (int64_t n : {1, 5, 16, 17, 384, 1000, 4097}) {
      TestTensor x({3, n});
      for (int64_t i = 0; i < x.numel(); ++i) x.f()[i] = c;
      const std::vector<float> zeros(static_cast<size_t>(x.numel()), 0.0f);
      Args args = layer_norm_plain(x, n, 1e-5);
      const std::string what = format("layer_norm of constant rows %g n=%lld", c, (long long)n);
      KILN_EXPECT(expect_every_tier_close(what, "aten::layer_norm.default", args, zeros.data(), x.numel(),
                                          Tolerance{0, 0}) == levels,
                  "%s: not every level ran", what.c_str());
    }
  }
  for (float offset : {1e5f, -2.5e4f, 3e6f}) {
    for (int64_t n : {7, 64, 384, 1000, 4097}) {
      TestTensor x({4, n});
      // sigma 1 (uniform on [-1.73, 1.73]); at 3e6 the floats are 0.25 apart, still a spread of 14 steps.
      for (int64_t i = 0; i < x.numel(); ++i) x.f()[i] = offset + uniform(-1.73f, 1.73f);
      const std::vector<float> want = layer_norm_f64(x, n, 1e-5);
      Args args = layer_norm_plain(x, n, 1e-5);
      const std::string what = format("layer_norm of rows %g + noise n=%lld", offset, (long long)n);
      KILN_EXPECT(
          expect_every_tier_close(what, "aten::layer_norm.default", args, want.data(), x.numel(), kNormTol) == levels,
          "%s: not every level ran", what.c_str());
    }
  }
}

}  // namespace
}  // namespace kiln::test
