// The portable conv2d and fused_conv2d against naive loops, the optimized ones against them on the
// same arguments, and the window arguments a corrupt program may hold.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "reference.h"

namespace kiln::test {
namespace {

struct ConvCase {
  int64_t n, c, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias, unbatched;
};

KILN_TEST(portable_conv2d) {
  const std::vector<ConvCase> cases = {
      {2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 4, 10, 11, 6, 3, 2, 2, 3, 1, 0, 2, 1, 2, false, false},    // groups, stride, dilation
      {2, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, true, false},       // depthwise
      {1, 4, 9, 9, 8, 5, 3, 2, 1, 2, 1, 1, 2, 4, true, false},       // depthwise x2 multiplier, stride 2, dilation
      {1, 8, 5, 6, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},      // pointwise
      {2, 8, 5, 6, 12, 1, 1, 1, 1, 0, 0, 1, 1, 4, false, false},     // grouped pointwise
      {1, 3, 8, 8, 5, 3, 3, 2, 2, 0, 0, 1, 1, 1, true, true},        // unbatched CHW
      {1, 16, 20, 20, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},  // several GEMM tiles
      {1, 2, 4, 4, 2, 3, 3, 3, 3, 3, 3, 1, 1, 1, true, false},       // padding > output coverage
  };
  for (const ConvCase& c : cases) {
    std::vector<int64_t> xs = {c.n, c.c, c.h, c.w};
    if (c.unbatched) xs.erase(xs.begin());
    TestTensor x = TestTensor::random(xs), w = TestTensor::random({c.cout, c.c / c.groups, c.kh, c.kw});
    TestTensor b = TestTensor::random({c.cout}), y = out();
    Args args;
    args.tensor(x).tensor(w);
    c.bias ? args.tensor(b) : args.none();
    args.ints({c.sh, c.sw}).ints({c.ph, c.pw}).ints({c.dh, c.dw}).i(c.groups);
    const Status s = run_portable("aten::conv2d.default", args, {&y});
    KILN_EXPECT(s.is_ok(), "conv2d: %s", s.to_string().c_str());
    const int64_t oh = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
    const int64_t ow = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
    std::vector<int64_t> ys = {c.n, c.cout, oh, ow};
    if (c.unbatched) ys.erase(ys.begin());
    KILN_EXPECT(has_shape(y, ys), "conv2d shape %s", describe(y.t).c_str());
    const int64_t cin_g = c.c / c.groups, cout_g = c.cout / c.groups;
    std::vector<float> want(c.n * c.cout * oh * ow);
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t co = 0; co < c.cout; ++co)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double acc = c.bias ? b.f()[co] : 0.0;
            const int64_t g = co / cout_g;
            for (int64_t ci = 0; ci < cin_g; ++ci)
              for (int64_t p = 0; p < c.kh; ++p)
                for (int64_t q = 0; q < c.kw; ++q) {
                  const int64_t ih = i * c.sh - c.ph + p * c.dh, iw = j * c.sw - c.pw + q * c.dw;
                  if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                  acc += double(x.f()[((n * c.c + g * cin_g + ci) * c.h + ih) * c.w + iw]) *
                         w.f()[((co * cin_g + ci) * c.kh + p) * c.kw + q];
                }
            want[((n * c.cout + co) * oh + i) * ow + j] = static_cast<float>(acc);
          }
    expect_close("conv2d", y.f(), want.data(), static_cast<int64_t>(want.size()), kNaive);
    expect_tiers_agree("conv2d " + shape_str(xs), "aten::conv2d.default", args, static_cast<int64_t>(want.size()),
                       gemm_tolerance(cin_g * c.kh * c.kw));
  }
  // groups that do not divide the channels.
  TestTensor x = TestTensor::random({1, 4, 5, 5}), w = TestTensor::random({3, 2, 3, 3}), y = out();
  Args args;
  args.tensor(x).tensor(w).none().ints({1}).ints({0}).ints({1}).i(2);
  expect_rejected("conv2d bad groups", "aten::conv2d.default", args, {&y}, "do not match groups=2");
}

// fused_conv2d against aten::conv2d followed by the residual add and the activation in double.
KILN_TEST(portable_fused_conv2d) {
  TestTensor x = TestTensor::random({2, 4, 6, 5});
  TestTensor wc = TestTensor::random({6, 2, 3, 3}), bc = TestTensor::random({6}), rc = TestTensor::random({2, 6, 3, 5});
  // Depthwise, 2 output channels per input channel.
  TestTensor wd = TestTensor::random({8, 1, 3, 3}), bd = TestTensor::random({8}), rd = TestTensor::random({2, 8, 6, 5});
  struct Case {
    const char* what;
    TestTensor *w, *b, *r;
    std::vector<int64_t> stride;
    int64_t groups;
  };
  const Case cases[] = {{"fused_conv2d", &wc, &bc, &rc, {2, 1}, 2},
                        {"fused_conv2d depthwise", &wd, &bd, &rd, {1, 1}, 4}};
  for (const Case& c : cases) {
    for (bool bias : {false, true}) {
      for (bool residual : {false, true}) {
        TestTensor plain = out();
        Args pa;
        pa.tensor(x).tensor(*c.w);
        bias ? pa.tensor(*c.b) : pa.none();
        pa.ints(c.stride).ints({1, 1}).ints({1, 1}).i(c.groups);
        KILN_EXPECT(run_portable("aten::conv2d.default", pa, {&plain}).is_ok(), "%s: unfused", c.what);
        for (const ActivationCase& act : kActivationCases) {
          TestTensor y = out();
          Args a;
          a.tensor(x).tensor(*c.w);
          bias ? a.tensor(*c.b) : a.none();
          residual ? a.tensor(*c.r) : a.none();
          a.ints(c.stride).ints({1, 1}).ints({1, 1}).i(c.groups).str(act.name).d(act.lo).d(act.hi);
          const Status s = run_portable("kiln::fused_conv2d.default", a, {&y});
          KILN_EXPECT(s.is_ok() && y.shape() == plain.shape(), "%s %s: %s", c.what, act.name, s.to_string().c_str());
          if (!s.is_ok()) continue;
          std::vector<float> want(static_cast<size_t>(plain.numel()));
          for (size_t i = 0; i < want.size(); ++i)
            want[i] = static_cast<float>(act.ref(plain.f()[i] + (residual ? c.r->f()[i] : 0.0), act.lo, act.hi));
          const std::string what = std::string(c.what) + " " + act.name;
          expect_close(what, y.f(), want.data(), plain.numel(), kNaive);
          expect_tiers_agree(what, "kiln::fused_conv2d.default", a, plain.numel(), gemm_tolerance(18));
        }
      }
    }
  }
  TestTensor y = out(), r = TestTensor::random({2, 6, 3, 4});
  Args a;  // a residual of another shape
  a.tensor(x).tensor(wc).none().tensor(r).ints({2, 1}).ints({1, 1}).ints({1, 1}).i(2).str("relu").d(0).d(0);
  expect_rejected("fused_conv2d residual mismatch", "kiln::fused_conv2d.default", a, {&y}, "residual must have");
}

// Window arguments at the limits of int64: each is a KernelFailure (or a defined result), never
// undefined behaviour, an out-of-bounds access or an absurdly long loop (the sanitizer build runs
// these).
KILN_TEST(portable_conv2d_hostile_windows) {
  TestTensor x = iota_f32({1, 1, 5, 5}), w = TestTensor::random({2, 1, 3, 3});
  struct ConvArgs {
    std::vector<int64_t> stride, pad, dil;
    int64_t groups;
    const char* what;
  };
  for (const ConvArgs& c : std::vector<ConvArgs>{
           {{1}, {kBig}, {1}, 1, "padding INT64_MAX"},
           {{1}, {kBig / 2}, {1}, 1, "padding INT64_MAX/2 (the reported 2 * pad overflow)"},
           {{1}, {kHuge}, {1}, 1, "padding 2^40"},
           {{1}, {-1}, {1}, 1, "negative padding"},
           {{kBig}, {0}, {1}, 1, "stride INT64_MAX"},
           {{0}, {0}, {1}, 1, "stride 0"},
           {{1}, {0}, {kBig}, 1, "dilation INT64_MAX"},
           {{1}, {0}, {kHuge}, 1, "dilation 2^40"},
           {{1}, {0}, {-3}, 1, "negative dilation"},
           {{1}, {0}, {1}, kBig, "groups INT64_MAX"},
           {{1}, {0}, {1}, INT64_MIN, "groups INT64_MIN"},
           {{1}, {0}, {1}, 0, "groups 0"},
       }) {
    TestTensor y = out();
    Args a;
    a.tensor(x).tensor(w).none().ints(c.stride).ints(c.pad).ints(c.dil).i(c.groups);
    expect_rejected(std::string("conv2d ") + c.what, "aten::conv2d.default", a, {&y});
  }
  {
    // Large but valid padding: the output grows past the planned capacity.
    TestTensor y = out(ScalarType::Float32, 1024);
    Args a;
    a.tensor(x).tensor(w).none().ints({1}).ints({1 << 20}).ints({1}).i(1);
    expect_rejected("conv2d output beyond capacity", "aten::conv2d.default", a, {&y}, "cannot resize output");
  }
  {
    // A huge dilation with matching padding: a valid 1x1-per-tap output.
    TestTensor y = out();
    Args a;
    a.tensor(x).tensor(w).none().ints({1}).ints({1 << 29}).ints({1 << 29}).i(1);
    const Status s = run_portable("aten::conv2d.default", a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {1, 2, 5, 5}), "conv2d huge dilation: %s %s", s.to_string().c_str(),
                describe(y.t).c_str());
    expect_tiers_agree("conv2d huge dilation", "aten::conv2d.default", a, 50, gemm_tolerance(9), /*may_decline=*/true);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).tensor(x).none().value(misaligned_ints()).ints({0}).ints({1}).i(1);
    expect_rejected("conv2d with a misaligned stride list", "aten::conv2d.default", a, {&y}, "misaligned");
  }
}

}  // namespace
}  // namespace kiln::test
