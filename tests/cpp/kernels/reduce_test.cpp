// Optimized mean.dim (trailing dims) against the portable kernel; other dims fall back to it.
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {
namespace {

KILN_TEST(mean_trailing_dims_matches_reference) {
  struct Case {
    std::vector<int64_t> shape, dims;
    bool keepdim;
  };
  const Case cases[] = {
      {{1, 37, 576}, {-1}, true},
      {{1, 1, 576}, {2}, true},
      {{3, 7}, {1}, false},
      {{5, 1}, {-1}, true},
      {{2, 3, 4, 5}, {2, 3}, false},
      {{2, 3, 4, 5}, {3, 2}, true},
      {{1, 96, 4, 4}, {-1, -2}, true},
      {{4, 17}, {-1}, false},
      {{2, 40000}, {1}, false},
      {{6}, {0}, false},
  };
  for (const Case& c : cases) {
    TestTensor x = TestTensor::random(c.shape, false, -2.0f, 3.0f);
    Args args;
    args.tensor(x).ints(c.dims).b(c.keepdim).none();
    std::string what = "mean.dim [";
    for (int64_t s : c.shape) what += format("%lld ", (long long)s);
    what += "]";
    const int ran = expect_tiers_match(what, "aten::mean.dim", args, {x.numel()}, Tolerance{1e-6f, 1e-7f});
    KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels",
                what.c_str(), ran);
  }
  // Not trailing: the portable kernel serves it.
  TestTensor x = TestTensor::random({3, 4, 5});
  Args args;
  args.tensor(x).ints({1}).b(false).none();
  const int ran = expect_tiers_match("mean.dim over a middle dim", "aten::mean.dim", args, {15}, Tolerance{0, 0}, true);
  KILN_EXPECT(ran == 0, "mean.dim over a middle dim: the optimized kernel ran at %d levels", ran);
}

}  // namespace
}  // namespace kiln::test
