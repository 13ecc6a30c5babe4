// Optimized activations against the portable ones: every activation kernel at sizes around the vector
// widths and the pool's chunks, with NaN, infinities, signed zeros and large values mixed in.
#include <cmath>
#include <functional>
#include <limits>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const int64_t kSizes[] = {1, 3, 7, 15, 16, 17, 63, 1000, 40000, 70001};

// x in [-10, 10] with special values at the front (where they fit) and in the tail.
TestTensor input(int64_t n) {
  TestTensor x = TestTensor::random({n}, false, -10.0f, 10.0f);
  const float specials[] = {kNaN, -kInf, kInf, -0.0f, 0.0f, 1e-40f, -1e-40f, 100.0f, -100.0f, 3.0f, -3.0f};
  for (int64_t i = 0; i < n && i < 11; ++i) x.f()[i] = specials[i];
  if (n > 20) x.f()[n - 1] = kNaN, x.f()[n - 2] = -kInf;
  return x;
}

// Runs `op` (self, then `extra` arguments) over every size; the optimized kernel must run at every level.
void check(const char* op, Tolerance tol, const std::function<void(Args&)>& extra = nullptr) {
  for (int64_t n : kSizes) {
    TestTensor x = input(n);
    Args args;
    args.tensor(x);
    if (extra) extra(args);
    const int ran = expect_tiers_match(format("%s n=%lld", op, (long long)n), op, args, {n}, tol);
    KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels", op, ran);
  }
}

// exp-, tanh- and erf-based activations: a few ulp apart (docs/kernels.md, "Elementwise"); gelu's
// 1 + erf(x) cancels for negative x, which the absolute tolerance covers.
constexpr Tolerance kTranscendental{1e-6f, 1e-6f};
constexpr Tolerance kExact{0, 0};

KILN_TEST(relu_matches_reference) { check("aten::relu.default", kExact); }
KILN_TEST(clamp_matches_reference) {
  check("aten::clamp.default", kExact, [](Args& a) { a.d(-2.5).d(4.0); });
  check("aten::clamp.default", kExact, [](Args& a) { a.none().d(0.5); });
  check("aten::clamp.default", kExact, [](Args& a) { a.d(-1).none(); });
  check("aten::clamp.default", kExact, [](Args& a) { a.d(3).d(-3); });       // min > max gives max
  check("aten::clamp.default", kExact, [](Args& a) { a.d(1e300).none(); });  // beyond the float range
  check("aten::hardtanh.default", kExact, [](Args& a) { a.d(-1).d(1); });
  check("aten::hardtanh.default", kExact, [](Args& a) { a.d(0).d(6); });
}
KILN_TEST(sigmoid_tanh_silu_match_reference) {
  check("aten::sigmoid.default", kTranscendental);
  check("aten::tanh.default", kTranscendental);
  check("aten::silu.default", kTranscendental);
}
KILN_TEST(gelu_matches_reference) {
  check("aten::gelu.default", kTranscendental, [](Args& a) { a.str("none"); });
  check("aten::gelu.default", kTranscendental, [](Args& a) { a.str("tanh"); });
}
KILN_TEST(hardswish_hardsigmoid_match_reference) {
  check("aten::hardswish.default", kExact);
  check("aten::hardsigmoid.default", kExact);
}

KILN_TEST(gelu_rejects_unknown_approximation) {
  TestTensor x = input(5), y = TestTensor::output(5);
  Args args;
  args.tensor(x).str("erf");
  for (Isa isa : supported_isas()) {
    const KernelRun r = run_kernel("aten::gelu.default", args, {&y}, kTierOptimized, isa);
    KILN_EXPECT(r.found && r.status.code() == Error::KernelFailure &&
                    std::string(r.status.message()).find("approximate") != std::string::npos,
                "gelu with approximate=\"erf\": %s", r.status.message().c_str());
  }
}

}  // namespace
}  // namespace kiln::test
