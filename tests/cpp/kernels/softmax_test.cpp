// Optimized softmax / log_softmax against the portable kernels: the last dim and strided dims,
// rows from 1 element to large ones, -inf (masked) entries, fully masked rows, NaN and +inf rows.
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
// x - (max + log(sum)): its error is absolute, a few ulp of the row's max + log(sum) (inputs here
// are within [-8, 8]).
constexpr Tolerance kSoftmaxTol{2e-6f, 1e-9f};
constexpr Tolerance kLogSoftmaxTol{2e-6f, 2e-6f};

void check(std::vector<int64_t> shape, int64_t dim, bool specials) {
  TestTensor x = TestTensor::random(shape, false, -8.0f, 8.0f);
  if (specials && x.numel() >= 8) {
    x.f()[0] = -kInf;                                // one masked entry
    x.f()[x.numel() / 2] = -kInf;
    if (shape.back() >= 2 && dim == -1) {            // a fully masked row (the second one, if any)
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
    const int ran = expect_tiers_match(format("%s [%s] dim=%lld", op, shape_text.c_str(), (long long)dim), op, args,
                                       {x.numel()}, std::string(op).find("log") != std::string::npos ? kLogSoftmaxTol : kSoftmaxTol);
    KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels", op, ran);
  }
}

KILN_TEST(softmax_last_dim_matches_reference) {
  for (int64_t n : {1, 2, 7, 15, 16, 17, 31, 33, 100, 128, 257, 1000, 4099, 50000})
    for (int64_t rows : {1, 3, 12})
      check({rows, n}, -1, true);
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

}  // namespace
}  // namespace kiln::test
