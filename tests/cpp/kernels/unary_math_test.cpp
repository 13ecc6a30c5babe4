// Optimized elementwise math (exp, erf, neg, abs, sqrt, rsqrt, reciprocal, pow.Tensor_Scalar)
// against the portable kernels, with special values, at every level.
#include <cmath>
#include <functional>
#include <limits>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const int64_t kSizes[] = {1, 2, 15, 16, 17, 33, 1000, 40000, 70001};

TestTensor input(int64_t n, float lo, float hi) {
  TestTensor x = TestTensor::random({n}, false, lo, hi);
  const float specials[] = {kNaN, -kInf, kInf, -0.0f, 0.0f, 1e-40f, -1e-40f, 90.0f, -110.0f, 1.0f, -1.0f};
  for (int64_t i = 0; i < n && i < 11; ++i) x.f()[i] = specials[i];
  if (n > 20) x.f()[n - 1] = kNaN, x.f()[n - 2] = -0.0f;
  return x;
}

void check(const char* op, Tolerance tol, float lo, float hi, const std::function<void(Args&)>& extra = nullptr,
           const char* what = "") {
  for (int64_t n : kSizes) {
    TestTensor x = input(n, lo, hi);
    Args args;
    args.tensor(x);
    if (extra) extra(args);
    const int ran = expect_tiers_match(format("%s%s n=%lld", op, what, (long long)n), op, args, {n}, tol);
    KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels", op, ran);
  }
}

constexpr Tolerance kExact{0, 0};

KILN_TEST(exp_erf_match_reference) {
  // The vector exp is within 1 ulp and erf within 1.3 ulp of float64; glibc within 0.5 and 0.9.
  check("aten::exp.default", Tolerance{3e-7f, 1e-38f}, -100.0f, 90.0f);  // subnormal results: absolute
  check("aten::erf.default", Tolerance{3e-7f, 0}, -5.0f, 5.0f);
}

KILN_TEST(exact_math_matches_reference) {
  for (const char* op : {"aten::neg.default", "aten::abs.default", "aten::sqrt.default", "aten::rsqrt.default",
                         "aten::reciprocal.default"})
    check(op, kExact, -1e3f, 1e3f);
}

KILN_TEST(pow_tensor_scalar_matches_reference) {
  // Exact where the portable kernel multiplies too (2, 3, 0.5, 1, -1, -2, and 0 like std::pow);
  // repeated squaring against std::pow for other integers; 1 / sqrt against std::pow for -0.5.
  for (double e : {2.0, 3.0, 0.5, 1.0, -1.0, -2.0, 0.0})
    check("aten::pow.Tensor_Scalar", kExact, -20.0f, 20.0f, [=](Args& a) { a.d(e); }, format(" e=%g", e).c_str());
  for (double e : {4.0, 5.0, 7.0, 16.0, -0.5, 2.5, 17.0, -3.0})
    check(
        "aten::pow.Tensor_Scalar", Tolerance{1e-6f, 1e-38f}, -4.0f, 4.0f, [=](Args& a) { a.d(e); },
        format(" e=%g", e).c_str());
  check("aten::pow.Tensor_Scalar", kExact, -4.0f, 4.0f, [](Args& a) { a.i(2); }, " e=int 2");
}

}  // namespace
}  // namespace kiln::test
