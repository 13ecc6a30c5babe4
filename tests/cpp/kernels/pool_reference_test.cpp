// The portable 2-D pools against values computed with PyTorch and naive loops, the optimized ones
// against them on the same arguments, and the window arguments a corrupt program may hold.
#include <cmath>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kMax = "aten::max_pool2d.default";
constexpr const char* kAvg = "aten::avg_pool2d.default";
constexpr const char* kAdaptive = "aten::adaptive_avg_pool2d.default";
constexpr Tolerance kExact{0, 0};
constexpr Tolerance kSumTol{2e-6f, 1e-6f};  // the optimized sums' order (docs/kernels.md, "Pooling")

KILN_TEST(portable_pools) {
  // Expected values computed with PyTorch on arange(25).view(1, 1, 5, 5).
  TestTensor x = iota_f32({1, 1, 5, 5});
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({2}).ints({}).ints({0}).ints({1}).b(true);
    KILN_EXPECT(run_portable(kMax, a, {&y}).is_ok(), "max_pool2d ceil");
    const float want[] = {6, 8, 9, 16, 18, 19, 21, 23, 24};
    KILN_EXPECT(has_shape(y, {1, 1, 3, 3}), "max_pool2d ceil shape %s", describe(y.t).c_str());
    expect_close("max_pool2d ceil", y.f(), want, 9, kNaive);
    expect_tiers_agree("max_pool2d ceil", kMax, a, 9, kExact);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({3, 3}).ints({2, 2}).ints({1, 1}).ints({2, 2}).b(false);
    KILN_EXPECT(run_portable(kMax, a, {&y}).is_ok(), "max_pool2d dilated");
    // Windows start at -1 and 1 with taps -1, 1, 3 / 1, 3, 5: only rows/cols 1 and 3 are real.
    const float want[] = {18, 18, 18, 18};
    KILN_EXPECT(has_shape(y, {1, 1, 2, 2}), "max_pool2d dilated shape %s", describe(y.t).c_str());
    expect_close("max_pool2d dilated", y.f(), want, 4, kNaive);
    expect_tiers_agree("max_pool2d dilated", kMax, a, 4, kExact);
  }
  {
    // avg_pool2d(k=3, s=2, p=1, ceil_mode=True, count_include_pad=True) -> 3x3.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({3}).ints({2}).ints({1}).b(true).b(true).none();
    KILN_EXPECT(run_portable(kAvg, a, {&y}).is_ok(), "avg_pool2d");
    // The ceil_mode window past the edge still counts the right padding column.
    const float want[] = {12.f / 9, 27.f / 9, 24.f / 9, 63.f / 9, 108.f / 9, 81.f / 9, 72.f / 9, 117.f / 9, 84.f / 9};
    KILN_EXPECT(has_shape(y, {1, 1, 3, 3}), "avg_pool2d shape %s", describe(y.t).c_str());
    expect_close("avg_pool2d include_pad", y.f(), want, 9, kNaive);
    expect_tiers_agree("avg_pool2d include_pad", kAvg, a, 9, kSumTol);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({3}).ints({2}).ints({1}).b(true).b(false).none();
    KILN_EXPECT(run_portable(kAvg, a, {&y}).is_ok(), "avg_pool2d");
    const float want[] = {12.f / 4, 27.f / 6, 24.f / 4, 63.f / 6, 108.f / 9, 81.f / 6, 72.f / 4, 117.f / 6, 84.f / 4};
    expect_close("avg_pool2d exclude_pad", y.f(), want, 9, kNaive);
    expect_tiers_agree("avg_pool2d exclude_pad", kAvg, a, 9, kSumTol);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({2}).ints({}).ints({0}).b(false).b(true).i(3);
    KILN_EXPECT(run_portable(kAvg, a, {&y}).is_ok(), "avg_pool2d divisor");
    const float want[] = {12.f / 3, 20.f / 3, 52.f / 3, 60.f / 3};
    expect_close("avg_pool2d divisor_override", y.f(), want, 4, kNaive);
    expect_tiers_agree("avg_pool2d divisor_override", kAvg, a, 4, kSumTol);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({3, 2});
    KILN_EXPECT(run_portable(kAdaptive, a, {&y}).is_ok(), "adaptive_avg_pool2d");
    // rows [0,2) [1,4) [3,5); cols [0,3) [2,5)
    auto avg = [&](int h0, int h1, int w0, int w1) {
      float s = 0;
      for (int i = h0; i < h1; ++i)
        for (int j = w0; j < w1; ++j) s += x.f()[i * 5 + j];
      return s / ((h1 - h0) * (w1 - w0));
    };
    const float want[] = {avg(0, 2, 0, 3), avg(0, 2, 2, 5), avg(1, 4, 0, 3),
                          avg(1, 4, 2, 5), avg(3, 5, 0, 3), avg(3, 5, 2, 5)};
    KILN_EXPECT(has_shape(y, {1, 1, 3, 2}), "adaptive shape");
    expect_close("adaptive_avg_pool2d", y.f(), want, 6, kNaive);
    expect_tiers_agree("adaptive_avg_pool2d", kAdaptive, a, 6, kSumTol);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({2}).ints({}).ints({2}).ints({1}).b(false);
    expect_rejected("max_pool2d padding > kernel/2", kMax, a, {&y}, "at most half the kernel size");
  }
}

// Kernel sizes, strides, paddings and output sizes from a corrupt file: each is a KernelFailure (or
// a defined result), never undefined behaviour, an out-of-bounds access or an absurdly long loop.
KILN_TEST(portable_pools_hostile_windows) {
  TestTensor x = iota_f32({1, 1, 5, 5});
  struct PoolArgs {
    std::vector<int64_t> k, s, pad, dil;
    const char* what;
  };
  for (const PoolArgs& c : std::vector<PoolArgs>{
           {{kBig}, {}, {0}, {1}, "kernel INT64_MAX"},
           {{kHuge}, {}, {kHuge / 2}, {1}, "kernel 2^40 (above kMaxWindowParam)"},
           {{0}, {}, {0}, {1}, "kernel 0"},
           {{-2}, {}, {0}, {1}, "negative kernel"},
           {{2}, {kBig}, {0}, {1}, "stride INT64_MAX"},
           {{2}, {-1}, {0}, {1}, "negative stride"},
           {{3}, {1}, {kBig}, {1}, "padding INT64_MAX"},
           {{3}, {1}, {2}, {1}, "padding over half the kernel"},
           {{3}, {1}, {1}, {kBig}, "dilation INT64_MAX"},
           {{7}, {1}, {0}, {1}, "kernel larger than the input"},
       }) {
    for (bool ceil : {false, true}) {
      TestTensor y = out();
      Args a;
      a.tensor(x).ints(c.k).ints(c.s).ints(c.pad).ints(c.dil).b(ceil);
      expect_rejected(format("max_pool2d %s (ceil_mode %d)", c.what, ceil), kMax, a, {&y});
      Args b;
      b.tensor(x).ints(c.k).ints(c.s).ints(c.pad).b(ceil).b(true).none();
      if (c.dil[0] == 1) expect_rejected(format("avg_pool2d %s (ceil_mode %d)", c.what, ceil), kAvg, b, {&y});
    }
  }
  {
    // A 2^29 kernel (within the limit) padded around a 5x5 input: one window
    // that covers the whole input. Only its 25 real taps may be visited.
    const int64_t k = int64_t{1} << 29, p = k / 2;
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({k}).ints({}).ints({p}).ints({1}).b(false);
    Status s = run_portable(kMax, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {1, 1, 1, 1}) && y.f()[0] == 24.0f, "max_pool2d huge kernel: %s",
                s.to_string().c_str());
    expect_tiers_agree("max_pool2d huge kernel", kMax, a, 1, kExact, /*may_decline=*/true);
    Args b;
    b.tensor(x).ints({k}).ints({}).ints({p}).b(false).b(false).none();
    s = run_portable(kAvg, b, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {1, 1, 1, 1}) && y.f()[0] == 12.0f, "avg_pool2d huge kernel: %s",
                s.to_string().c_str());
    Args c;  // count_include_pad: the divisor is the padded window, k * k (2^58)
    c.tensor(x).ints({k}).ints({}).ints({p}).b(false).b(true).none();
    s = run_portable(kAvg, c, {&y});
    const double want = 300.0 / (double(k) * double(k));
    KILN_EXPECT(s.is_ok() && std::fabs(y.f()[0] - want) <= 1e-6 * want, "avg_pool2d huge kernel include_pad: %s %g",
                s.to_string().c_str(), y.f()[0]);
    Args d;  // divisor_override INT64_MIN is a valid (if odd) divisor
    d.tensor(x).ints({2}).ints({}).ints({0}).b(false).b(true).i(INT64_MIN);
    KILN_EXPECT(run_portable(kAvg, d, {&y}).is_ok(), "avg_pool2d divisor INT64_MIN");
    expect_tiers_agree("avg_pool2d divisor INT64_MIN", kAvg, d, 4, kSumTol);
  }
  // adaptive_avg_pool2d: output sizes from the file.
  for (auto os : std::vector<std::vector<int64_t>>{{kBig, kBig}, {kHuge, kHuge}, {-1, 2}, {kBig, 1}}) {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints(os);
    expect_rejected("adaptive_avg_pool2d output_size " + shape_str(os), kAdaptive, a, {&y});
  }
  {
    // A huge output size next to a zero one: an empty (valid) result.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({kHuge, 0});
    const Status s = run_portable(kAdaptive, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {1, 1, kHuge, 0}), "adaptive_avg_pool2d [2^40, 0]: %s",
                s.to_string().c_str());
    // More outputs than inputs: overlapping regions, compared with the formula.
    Args b;
    b.tensor(x).ints({7, 3});
    KILN_EXPECT(run_portable(kAdaptive, b, {&y}).is_ok() && has_shape(y, {1, 1, 7, 3}), "adaptive upsampling");
    std::vector<float> want(21);
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 3; ++j) {
        const int h0 = i * 5 / 7, h1 = ((i + 1) * 5 + 6) / 7, w0 = j * 5 / 3, w1 = ((j + 1) * 5 + 2) / 3;
        double sum = 0;
        for (int a2 = h0; a2 < h1; ++a2)
          for (int b2 = w0; b2 < w1; ++b2) sum += x.f()[a2 * 5 + b2];
        want[i * 3 + j] = static_cast<float>(sum / ((h1 - h0) * (w1 - w0)));
      }
    expect_close("adaptive_avg_pool2d upsampling", y.f(), want.data(), 21, kNaive);
    expect_tiers_agree("adaptive_avg_pool2d upsampling", kAdaptive, b, 21, kSumTol);
  }
}

}  // namespace
}  // namespace kiln::test
