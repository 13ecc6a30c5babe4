// The portable scaled_dot_product_attention against a naive softmax(q k^T * scale + mask) v in
// double, the optimized one against it on the same arguments, and arguments it must refuse.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kSdpa = "aten::scaled_dot_product_attention.default";
constexpr Tolerance kSdpaTol{1e-5f, 2e-6f};  // docs/kernels.md, "Attention"

// One head: y [L, Ev] = softmax(q k^T * scale, keys that `keep`) v; a row that keeps nothing is 0.
void naive_attention(const float* q, const float* k, const float* v, float* y, int64_t L, int64_t S, int64_t E,
                     int64_t Ev, double scale, const std::function<bool(int64_t, int64_t)>& keep) {
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> w(S);
    double mx = -INFINITY, sum = 0;
    for (int64_t s = 0; s < S; ++s) {
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += double(q[l * E + e]) * k[s * E + e];
      w[s] = keep(l, s) ? dot * scale : -INFINITY;
      mx = std::max(mx, w[s]);
    }
    for (int64_t s = 0; s < S; ++s) sum += w[s] = std::isinf(mx) ? 0 : std::exp(w[s] - mx);
    for (int64_t e = 0; e < Ev; ++e) {
      double acc = 0;
      for (int64_t s = 0; s < S; ++s) acc += w[s] * v[s * Ev + e];
      y[l * Ev + e] = sum > 0 ? static_cast<float>(acc / sum) : 0.0f;
    }
  }
}

KILN_TEST(portable_sdpa) {
  const int64_t B = 2, H = 4, Hkv = 2, L = 5, S = 7, E = 8, Ev = 6;
  TestTensor q = TestTensor::random({B, H, L, E}), k = TestTensor::random({B, Hkv, S, E});
  TestTensor v = TestTensor::random({B, Hkv, S, Ev}), mask({L, S}, ScalarType::Bool);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t s = 0; s < S; ++s)
      mask.t.data_as<uint8_t>()[l * S + s] = (s + l) % 3 != 0 && l != 2;  // row 2 fully masked
  for (int variant = 0; variant < 3; ++variant) {
    const bool causal = variant == 1, with_mask = variant == 2;
    TestTensor y = out();
    Args a;
    a.tensor(q).tensor(k).tensor(v);
    with_mask ? a.tensor(mask) : a.none();
    a.d(0.0).b(causal);
    variant == 0 ? a.d(0.3) : a.none();
    a.b(true);
    const Status s = run_portable(kSdpa, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {B, H, L, Ev}), "sdpa variant %d: %s", variant, s.to_string().c_str());
    std::vector<float> want(B * H * L * Ev);
    const double scale = variant == 0 ? 0.3 : 1.0 / std::sqrt(double(E));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = b * Hkv + h / (H / Hkv);
        naive_attention(q.f() + (b * H + h) * L * E, k.f() + kv * S * E, v.f() + kv * S * Ev,
                        want.data() + (b * H + h) * L * Ev, L, S, E, Ev, scale, [&](int64_t l, int64_t s) {
                          if (causal) return s <= l;
                          if (with_mask) return mask.t.data_as<uint8_t>()[l * S + s] != 0;
                          return true;
                        });
      }
    // Within 1e-5 max(1, |want|): float scores against the double softmax above.
    expect_close(format("sdpa variant %d", variant), y.f(), want.data(), static_cast<int64_t>(want.size()),
                 Tolerance{5e-6f, 5e-6f});
    expect_tiers_agree(format("sdpa variant %d", variant), kSdpa, a, B * H * L * Ev, kSdpaTol);
  }
  TestTensor y = out();
  Args drop;
  drop.tensor(q).tensor(k).tensor(v).none().d(0.1).b(false).none().b(true);
  expect_rejected("sdpa dropout 0.1", kSdpa, drop, {&y}, "dropout_p must be 0");
  Args nogqa;
  nogqa.tensor(q).tensor(k).tensor(v).none().d(0.0).b(false).none().b(false);
  expect_rejected("sdpa H != Hkv without enable_gqa", kSdpa, nogqa, {&y}, "incompatible");
  TestTensor m2({3, S}, ScalarType::Bool);
  Args badmask;
  badmask.tensor(q).tensor(k).tensor(v).tensor(m2).d(0.0).b(false).none().b(true);
  expect_rejected("sdpa mask [3, S]", kSdpa, badmask, {&y}, "cannot be broadcast");
  TestTensor k2 = TestTensor::random({B, Hkv, S, E + 1});
  Args bade;
  bade.tensor(q).tensor(k2).tensor(v).none().d(0.0).b(false).none().b(true);
  expect_rejected("sdpa key with another E", kSdpa, bade, {&y}, "incompatible");
}

}  // namespace
}  // namespace kiln::test
