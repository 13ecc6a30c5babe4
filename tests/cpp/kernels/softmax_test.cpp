// Optimized softmax / log_softmax against the portable kernels: the last dim and strided dims,
// rows from 1 element to large ones, -inf (masked) entries, fully masked rows, NaN and +inf rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Within a few ulp per element: exp differs by about 1 ulp from glibc's and the sums are
// accumulated in another order (float partial sums of 256 terms, then float64). log_softmax is
// (x - max) - log(sum): a few ulp of the result plus the error of log(sum), which is absolute.
constexpr Tolerance kSoftmaxTol{2e-6f, 1e-9f};
constexpr Tolerance kLogSoftmaxTol{2e-6f, 2e-6f};

void check(std::vector<int64_t> shape, int64_t dim, bool specials) {
  TestTensor x = TestTensor::random(shape, false, -8.0f, 8.0f);
  if (specials && x.numel() >= 8) {
    x.f()[0] = -kInf;  // one masked entry
    x.f()[x.numel() / 2] = -kInf;
    if (shape.back() >= 2 && dim == -1) {  // a fully masked row (the second one, if any)
      const int64_t n = shape.back();
      if (x.numel() >= 2 * n)
        for (int64_t i = n; i < 2 * n; ++i) x.f()[i] = -kInf;
      if (x.numel() >= 4 * n) x.f()[2 * n + 1] = kNaN, x.f()[3 * n + 2] = kInf;  // NaN and +inf rows
    }
  }
  for (const char* op : {"aten::_softmax.default", "aten::_log_softmax.default"}) {
    Args args;
    args.tensor(x).i(dim).b(false);
    std::string shape_text;
    for (int64_t s : shape) shape_text += format("%lld ", (long long)s);
    const int ran =
        expect_tiers_match(format("%s [%s] dim=%lld", op, shape_text.c_str(), (long long)dim), op, args, {x.numel()},
                           std::string(op).find("log") != std::string::npos ? kLogSoftmaxTol : kSoftmaxTol);
    KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels", op, ran);
  }
}

KILN_TEST(softmax_last_dim_matches_reference) {
  for (int64_t n : {1, 2, 7, 15, 16, 17, 31, 33, 100, 128, 257, 1000, 4099, 50000})
    for (int64_t rows : {1, 3, 12}) check({rows, n}, -1, true);
  check({1, 12, 128, 128}, -1, true);  // MiniLM's attention probabilities
  check({5}, 0, false);
  check({}, 0, false);
}

KILN_TEST(softmax_strided_dims_match_reference) {
  check({4, 7, 5}, 1, true);
  check({3, 300, 19}, 1, true);
  check({2, 17, 3, 33}, 1, true);
  check({6, 130}, 0, true);
  check({1, 1000, 65}, 1, false);
  check({2, 3, 4, 5}, -3, true);
  check({1, 2, 1}, 1, false);
}

// log_softmax in float64 from the same float inputs, along `len` elements `stride` apart.
std::vector<float> log_softmax_f64(const TestTensor& x, int64_t outer, int64_t len, int64_t stride) {
  std::vector<float> y(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < stride; ++c) {
      const float* in = x.f() + o * len * stride + c;
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < len; ++i) mx = std::max<double>(mx, in[i * stride]);
      for (int64_t i = 0; i < len; ++i) sum += std::exp(in[i * stride] - mx);
      for (int64_t i = 0; i < len; ++i)
        y[(o * len + i) * stride + c] = static_cast<float>(in[i * stride] - mx - std::log(sum));
    }
  }
  return y;
}

// Logits far from 0: x - (max + log(sum)) rounds log(sum) into max first, an error of half an ulp of
// max (1.5e-4 at 1e4; at 1e8, where the ulp is 8, the largest entry comes out 0 instead of
// -log(sum)); (x - max) - log(sum) keeps the float64 result's precision.
KILN_TEST(log_softmax_of_large_logits) {
  const int levels = static_cast<int>(supported_isas().size());
  for (float offset : {1e4f, 1e6f, 1e8f, -1e8f, 3e38f}) {
    for (int64_t n : {2, 17, 100, 1000, 50000}) {
      TestTensor x({3, n});
      // Values 8 apart at 1e8 and at 3e38 as far apart as floats get: ties and near-ties of the max.
      for (int64_t i = 0; i < x.numel(); ++i) x.f()[i] = offset + (offset > 1e37f ? 0.0f : uniform(-20.0f, 20.0f));
      if (offset > 1e37f) {
        for (int64_t i = 0; i < x.numel(); i += 3) x.f()[i] = std::nextafter(offset, 0.0f);
      }
      const std::vector<float> want = log_softmax_f64(x, 3, n, 1);
      Args args;
      args.tensor(x).i(-1).b(false);
      const std::string what = format("log_softmax of %g + [-20, 20] n=%lld", offset, (long long)n);
      KILN_EXPECT(expect_every_tier_close(what, "aten::_log_softmax.default", args, want.data(), x.numel(),
                                          kLogSoftmaxTol) == levels,
                  "%s: not every level ran", what.c_str());
    }
  }
  // Along a strided dim: the columns kernel.
  for (float offset : {1e4f, 1e8f}) {
    TestTensor x({2, 300, 19});
    for (int64_t i = 0; i < x.numel(); ++i) x.f()[i] = offset + uniform(-20.0f, 20.0f);
    const std::vector<float> want = log_softmax_f64(x, 2, 300, 19);
    Args args;
    args.tensor(x).i(1).b(false);
    const std::string what = format("log_softmax of %g + [-20, 20] over dim 1 of [2, 300, 19]", offset);
    KILN_EXPECT(expect_every_tier_close(what, "aten::_log_softmax.default", args, want.data(), x.numel(),
                                        kLogSoftmaxTol) == levels,
                "%s: not every level ran", what.c_str());
  }
}

}  // namespace
}  // namespace kiln::test
