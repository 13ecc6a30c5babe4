// Optimized add/sub/mul/div against the portable kernels: equal shapes, scalars, trailing vectors,
// and random broadcasts in every position (ranks 0 to 5, sizes around the vector widths).
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
const char* const kOps[] = {"aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor"};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += format(i ? ", %lld" : "%lld", (long long)s[i]);
  return r + "]";
}

// Values in [-4, 4] with zeros, NaN and infinities sprinkled in (0/0, x/0, inf - inf, 0 * inf).
TestTensor operand(const std::vector<int64_t>& shape) {
  TestTensor t = TestTensor::random(shape, false, -4.0f, 4.0f);
  const float specials[] = {0.0f, -0.0f, kInf, -kInf, kNaN};
  for (int64_t i = 0; i < t.numel(); ++i)
    if (next_random() % 23 == 0) t.f()[i] = specials[next_random() % 5];
  return t;
}

// Every op (add and sub with alpha 1 and 2.5) on a and b; the result is exact, since each element is
// the same float operations in the same order.
void check_all(const std::vector<int64_t>& sa, const std::vector<int64_t>& sb, int64_t out_numel) {
  TestTensor a = operand(sa), b = operand(sb);
  for (const char* op : kOps) {
    const bool has_alpha = op == kOps[0] || op == kOps[1];
    for (double alpha : {1.0, 2.5}) {
      if (!has_alpha && alpha != 1.0) continue;
      Args args;
      args.tensor(a).tensor(b);
      if (has_alpha) args.d(alpha);
      const int ran =
          expect_tiers_match(format("%s %s %s alpha=%g", op, shape_str(sa).c_str(), shape_str(sb).c_str(), alpha), op,
                             args, {out_numel}, Tolerance{0, 0});
      KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels", op,
                  ran);
    }
  }
}

KILN_TEST(binary_common_shapes_match_reference) {
  struct Case {
    std::vector<int64_t> a, b;
  };
  const Case cases[] = {
      {{70001}, {70001}},  // one long row, split over the pool
      {{3, 40000}, {3, 1}},
      {{2, 2, 40000}, {40000}},  // long broadcast rows, split too
      {{1}, {1}},
      {{17}, {17}},
      {{3, 5}, {3, 5}},
      {{1000}, {}},
      {{}, {1000}},
      {{}, {}},  // 0-d operands
      {{37, 576}, {576}},
      {{5, 3}, {3}},
      {{9, 13}, {1, 13}},  // trailing vector (bias, norm weight)
      {{37, 576}, {37, 1}},
      {{7, 15}, {7, 1}},
      {{1, 37, 1}, {1, 37, 64}},         // per-row scalar (RMSNorm's x * r)
      {{1, 12, 33, 33}, {1, 1, 1, 33}},  // attention mask bias
      {{1, 96, 8, 8}, {1, 96, 1, 1}},    // squeeze-and-excite gate
      {{1, 9, 37, 64}, {37, 64}},        // rotary tables
      {{4, 1}, {1, 6}},
      {{1, 6}, {4, 1}},  // outer product broadcasts
  };
  for (const Case& c : cases) {
    std::vector<int64_t> out = c.a.size() >= c.b.size() ? c.a : c.b;
    const size_t lead_a = out.size() - c.a.size(), lead_b = out.size() - c.b.size();
    for (size_t d = 0; d < out.size(); ++d) {
      const int64_t x = d >= lead_a ? c.a[d - lead_a] : 1, y = d >= lead_b ? c.b[d - lead_b] : 1;
      out[d] = x == 1 ? y : x;
    }
    check_all(c.a, c.b, numel(out));
  }
}

KILN_TEST(binary_random_broadcasts_match_reference) {
  const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 16, 17, 31};
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = static_cast<int>(uniform_int(0, 5));
    std::vector<int64_t> out(rank), a, b;
    for (int d = 0; d < rank; ++d) out[d] = sizes[uniform_int(0, 8)];
    // Each operand drops some leading dims and has some dims of 1.
    const int ra = static_cast<int>(uniform_int(0, rank)), rb = static_cast<int>(uniform_int(0, rank));
    for (int d = rank - ra; d < rank; ++d) a.push_back(uniform_int(0, 2) == 0 ? 1 : out[d]);
    for (int d = rank - rb; d < rank; ++d) b.push_back(uniform_int(0, 2) == 0 ? 1 : out[d]);
    // The output is the broadcast of a and b, not `out` (dims both made 1 stay 1).
    std::vector<int64_t> res(std::max(a.size(), b.size()), 1);
    for (size_t d = 0; d < res.size(); ++d) {
      const size_t da = res.size() - a.size(), db = res.size() - b.size();
      const int64_t x = d >= da ? a[d - da] : 1, y = d >= db ? b[d - db] : 1;
      res[d] = x == 1 ? y : x;
    }
    check_all(a, b, numel(res));
  }
}

KILN_TEST(binary_rejects_incompatible_shapes) {
  TestTensor a = operand({3, 4}), b = operand({5}), y = TestTensor::output(64);
  Args args;
  args.tensor(a).tensor(b).d(1.0);
  for (Isa isa : supported_isas()) {
    const KernelRun r = run_kernel("aten::add.Tensor", args, {&y}, kTierOptimized, isa);
    KILN_EXPECT(r.found && r.status.code() == Error::KernelFailure, "add [3,4] + [5]: %s", r.status.message().c_str());
  }
}

}  // namespace
}  // namespace kiln::test
