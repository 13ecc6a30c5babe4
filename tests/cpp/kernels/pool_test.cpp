// Optimized adaptive_avg_pool2d, max_pool2d and avg_pool2d against the portable kernels: global
// pooling (the CNN heads and squeeze-excite blocks), uneven adaptive regions, windows with padding,
// stride, dilation and ceil_mode, divisor rules, batched and unbatched inputs, NaN and infinities.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Float partial sums against the portable float64 sums: a few ulp of the summed magnitudes (|x| <= 3).
constexpr Tolerance kSumTol{2e-6f, 1e-6f};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r;
  for (int64_t d : s) r += format("%lld ", (long long)d);
  return r;
}

TestTensor input(const std::vector<int64_t>& shape, bool specials) {
  TestTensor x = TestTensor::random(shape, false, -3.0f, 3.0f);
  if (specials && x.numel() > 40) x.f()[5] = kNaN, x.f()[17] = kInf, x.f()[33] = -kInf;
  return x;
}

void expect_ran(int ran, const std::string& what) {
  KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels",
              what.c_str(), ran);
}

KILN_TEST(adaptive_avg_pool2d_matches_reference) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t oh, ow;
  };
  const Case cases[] = {{{1, 96, 16, 16}, 1, 1}, {{1, 576, 4, 4}, 1, 1}, {{2, 3, 7, 9}, 1, 1}, {{5, 1, 1}, 1, 1},
                        {{1, 4, 13, 17}, 3, 5},  {{3, 10, 10}, 4, 4},    {{1, 2, 5, 5}, 7, 6}, {{1, 3, 33, 65}, 2, 1}};
  for (const Case& c : cases) {
    TestTensor x = input(c.shape, false);
    Args args;
    args.tensor(x).ints({c.oh, c.ow});
    const std::string what =
        format("adaptive_avg_pool2d [%s] -> %lldx%lld", shape_str(c.shape).c_str(), (long long)c.oh, (long long)c.ow);
    expect_ran(expect_tiers_match(what, "aten::adaptive_avg_pool2d.default", args, {x.numel() * 50}, kSumTol), what);
  }
}

struct Window {
  std::vector<int64_t> shape, kernel, stride, pad, dil;
  bool ceil;
};
const Window kWindows[] = {
    {{1, 8, 16, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},  // ResNet stem
    {{1, 8, 16, 16}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false}, {{2, 3, 17, 19}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
    {{2, 3, 17, 19}, {3, 2}, {2, 3}, {1, 0}, {1, 1}, true},  {{3, 11, 23}, {5, 5}, {3, 3}, {2, 2}, {1, 1}, true},
    {{1, 2, 9, 9}, {3, 3}, {}, {0, 0}, {1, 1}, true},         // stride defaults to the kernel
    {{1, 2, 20, 21}, {3, 3}, {1, 2}, {1, 1}, {2, 3}, false},  // dilation (max_pool2d only)
    {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false},   {{1, 4, 40, 70}, {4, 4}, {4, 4}, {2, 2}, {1, 1}, true},
};

KILN_TEST(max_pool2d_matches_reference) {
  for (const Window& c : kWindows) {
    TestTensor x = input(c.shape, true);
    Args args;
    args.tensor(x).ints(c.kernel).ints(c.stride).ints(c.pad).ints(c.dil).b(c.ceil);
    const std::string what = format("max_pool2d [%s] k %lld", shape_str(c.shape).c_str(), (long long)c.kernel[0]);
    expect_ran(expect_tiers_match(what, "aten::max_pool2d.default", args, {x.numel()}, Tolerance{0, 0}), what);
  }
}

KILN_TEST(avg_pool2d_matches_reference) {
  for (const Window& c : kWindows) {
    if (c.dil[0] != 1 || c.dil[1] != 1) continue;
    for (int mode = 0; mode < 3; ++mode) {  // count_include_pad, exclude pad, divisor_override
      TestTensor x = input(c.shape, false);
      Args args;
      args.tensor(x).ints(c.kernel).ints(c.stride).ints(c.pad).b(c.ceil).b(mode == 0);
      if (mode == 2)
        args.i(3);
      else
        args.none();
      const std::string what =
          format("avg_pool2d [%s] k %lld mode %d", shape_str(c.shape).c_str(), (long long)c.kernel[0], mode);
      expect_ran(expect_tiers_match(what, "aten::avg_pool2d.default", args, {x.numel()}, kSumTol), what);
    }
  }
}

}  // namespace
}  // namespace kiln::test
