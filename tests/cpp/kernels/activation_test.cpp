// Optimized activations against the portable ones.
#include <cmath>
#include <limits>

#include "harness.h"

namespace kiln::test {
namespace {

KILN_TEST(relu_matches_reference) {
  for (int64_t n : {1, 3, 15, 16, 17, 63, 1000, 40000}) {
    TestTensor x = TestTensor::random({n});
    x.f()[0] = std::numeric_limits<float>::quiet_NaN();  // passes through
    if (n > 2) x.f()[1] = -std::numeric_limits<float>::infinity(), x.f()[2] = -0.0f;
    Args args;
    args.tensor(x);
    const int ran = expect_tiers_match(format("relu n=%lld", (long long)n), "aten::relu.default", args, {n},
                                       Tolerance{0, 0});
    KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "relu: the optimized kernel ran at %d levels", ran);
  }
}

}  // namespace
}  // namespace kiln::test
