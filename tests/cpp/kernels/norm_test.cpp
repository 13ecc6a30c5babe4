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
  KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels", what.c_str(),
              ran);
}

KILN_TEST(layer_norm_matches_reference) {
  for (int64_t n : {1, 2, 3, 15, 16, 17, 33, 384, 576, 1000, 4097})
    for (int64_t rows : {1, 5})
      check({rows, n}, 1, true, true, true);
  check({1, 128, 384}, 1, true, true, false, 1e-12);  // MiniLM
  check({2, 7, 9}, 2, true, true, true);
  check({3, 31}, 1, false, false, true);
  check({3, 31}, 1, true, false, false);
  check({3, 31}, 1, false, true, false);
  check({40, 2000}, 1, true, true, false);  // rows split over the pool
}

}  // namespace
}  // namespace kiln::test
