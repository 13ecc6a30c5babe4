// The harness's own comparison: a NaN or infinity that the reference lacks (or the reverse) fails
// wherever it is, also after or before a larger finite error.
#include <cmath>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kNaN = NAN, kInf = INFINITY;

bool infinitely_far_at(const float* got, const float* want, int64_t n, int64_t i) {
  const Mismatch m = worst_mismatch(got, want, n, Tolerance{1e-3f, 1e-3f});
  return m.at == i && m.excess == INFINITY;
}

KILN_TEST(harness_comparison_is_nan_aware) {
  const float want[4] = {1, 2, 3, 4};
  const float first_nan[4] = {kNaN, 2, 3, 4}, nan_after_error[4] = {100, kNaN, 3, 4}, inf_got[4] = {1, 2, kInf, 4};
  KILN_EXPECT(infinitely_far_at(first_nan, want, 4, 0), "a NaN result must fail");
  KILN_EXPECT(infinitely_far_at(nan_after_error, want, 4, 1), "a NaN after a finite error must be the worst");
  KILN_EXPECT(infinitely_far_at(inf_got, want, 4, 2), "an infinite result must fail");
  KILN_EXPECT(infinitely_far_at(want, first_nan, 4, 0), "a number where the reference is NaN must fail");
  const float want_special[3] = {kNaN, kInf, -kInf}, neg_inf[3] = {kNaN, -kInf, -kInf};
  KILN_EXPECT(worst_mismatch(want_special, want_special, 3, Tolerance{0, 0}).at < 0,
              "NaN and infinities match themselves");
  KILN_EXPECT(infinitely_far_at(neg_inf, want_special, 3, 1), "-inf must not match inf");
  // Finite errors: the worst excess over atol + rtol |want| (here 0.2 at index 3: |3 - 4| - 0.2 * 4).
  const float off[4] = {1, 2.5f, 3, 3};
  const Mismatch m = worst_mismatch(off, want, 4, Tolerance{0.2f, 0});
  KILN_EXPECT(m.at == 3 && std::fabs(m.excess - 0.2) < 1e-6, "worst finite excess 0.2 at 3, got %g at %lld", m.excess,
              static_cast<long long>(m.at));
  KILN_EXPECT(worst_mismatch(off, want, 4, Tolerance{0.25f, 0}).at < 0, "within rtol 0.25 everywhere");
}

}  // namespace
}  // namespace kiln::test
