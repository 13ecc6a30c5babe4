// The portable softmax, log_softmax and layer_norm against naive loops, the optimized ones against
// them on the same arguments, and the arguments of those and of batch_norm a corrupt program may hold.
#include <cmath>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kSoftmax = "aten::_softmax.default";
constexpr const char* kLogSoftmax = "aten::_log_softmax.default";
constexpr const char* kLayerNorm = "aten::layer_norm.default";
constexpr const char* kBatchNorm = "aten::_native_batch_norm_legit_no_training.default";
// The optimized kernels' tolerances (docs/kernels.md, "Normalization and softmax").
constexpr Tolerance kSoftmaxTol{2e-6f, 1e-9f}, kLogSoftmaxTol{2e-6f, 2e-6f}, kLayerNormTol{1e-5f, 1e-5f};

KILN_TEST(portable_softmax_layer_norm) {
  TestTensor x = TestTensor::random({3, 5, 4});
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool log : {false, true}) {
      const char* op = log ? kLogSoftmax : kSoftmax;
      TestTensor y = out();
      Args a;
      a.tensor(x).i(dim).b(false);
      KILN_EXPECT(run_portable(op, a, {&y}).is_ok(), "softmax");
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const std::vector<int64_t> s = {3, 5, 4};
      std::vector<float> want(60);
      for (int64_t i = 0; i < 60; ++i) {
        auto idx = unravel(i, s);
        double sum = 0;
        for (int64_t k = 0; k < s[d]; ++k) {
          auto j = idx;
          j[d] = k;
          sum += std::exp(x.f()[(j[0] * 5 + j[1]) * 4 + j[2]]);
        }
        want[i] = log ? static_cast<float>(x.f()[i] - std::log(sum)) : static_cast<float>(std::exp(x.f()[i]) / sum);
      }
      const std::string what = format("%s dim %lld", log ? "log_softmax" : "softmax", (long long)dim);
      expect_close(what, y.f(), want.data(), 60, kNaive);
      expect_tiers_agree(what, op, a, 60, log ? kLogSoftmaxTol : kSoftmaxTol);
    }
  }
  TestTensor w = TestTensor::random({5, 4}), b = TestTensor::random({5, 4}), y = out();
  Args a;
  a.tensor(x).ints({5, 4}).tensor(w).tensor(b).d(1e-5).b(true);
  KILN_EXPECT(run_portable(kLayerNorm, a, {&y}).is_ok(), "layer_norm");
  std::vector<float> want(60);
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 20; ++i) mean += x.f()[r * 20 + i];
    mean /= 20;
    for (int i = 0; i < 20; ++i) var += (x.f()[r * 20 + i] - mean) * (x.f()[r * 20 + i] - mean);
    var /= 20;
    for (int i = 0; i < 20; ++i)
      want[r * 20 + i] = static_cast<float>((x.f()[r * 20 + i] - mean) / std::sqrt(var + 1e-5) * w.f()[i] + b.f()[i]);
  }
  expect_close("layer_norm", y.f(), want.data(), 60, kNaive);
  expect_tiers_agree("layer_norm", kLayerNorm, a, 60, kLayerNormTol);
}

// Dims, tensor sizes and parameter shapes from a corrupt file: each a KernelFailure (or a defined
// result), never undefined behaviour or an out-of-bounds access.
KILN_TEST(portable_norms_hostile_arguments) {
  TestTensor x = TestTensor::random({2, 3, 4});
  for (int64_t v : {kBig, INT64_MIN, int64_t{3}, int64_t{-4}}) {
    TestTensor y = out();
    Args sm;
    sm.tensor(x).i(v).b(false);
    expect_rejected(format("softmax dim %lld", (long long)v), kSoftmax, sm, {&y}, "out of range");
  }
  {
    // Sizes that multiply past int64 (possible next to a zero size), or more bytes than the storage holds.
    TestTensor overflow = TestTensor::with_sizes({kHuge, kHuge, 0}, ScalarType::Float32, 64);
    TestTensor unbacked = TestTensor::with_sizes({4, 4}, ScalarType::Float32, 16);
    for (TestTensor* t : {&overflow, &unbacked}) {
      TestTensor y = out();
      Args sm;
      sm.tensor(*t).i(-1).b(false);
      expect_rejected("softmax of " + describe(t->t), kSoftmax, sm, {&y});
    }
  }
  TestTensor y = out();
  for (auto shape : std::vector<std::vector<int64_t>>{{}, {5}, {3, 5}, {1, 2, 3, 4}, {kBig}, {-4}, {2, 3, 4, 4}}) {
    Args a;
    a.tensor(x).ints(shape).none().none().d(1e-5).b(false);
    expect_rejected("layer_norm normalized_shape " + shape_str(shape), kLayerNorm, a, {&y}, "normalized_shape");
  }
  TestTensor w = TestTensor::random({4, 3});  // 12 elements and 2 dims like [3, 4], but another shape
  Args a;
  a.tensor(x).ints({3, 4}).tensor(w).none().d(NAN).b(false);
  expect_rejected("layer_norm weight of another shape", kLayerNorm, a, {&y}, "weight must be [3, 4]");
  Args ok;
  ok.tensor(x).ints({4}).none().none().d(-INFINITY).b(false);
  KILN_EXPECT(run_portable(kLayerNorm, ok, {&y}).is_ok(), "layer_norm with eps -inf computes (NaN), no UB");
  TestTensor c3 = TestTensor::random({3}), c4 = TestTensor::random({4});
  Args bn;
  bn.tensor(x).tensor(c3).tensor(c3).tensor(c3).tensor(c4).d(0.1).d(1e-5);
  expect_rejected("batch_norm running_var of the wrong size", kBatchNorm, bn, {&y});
  Args bn_ok;
  bn_ok.tensor(x).none().none().tensor(c3).tensor(c3).d(NAN).d(INFINITY);
  KILN_EXPECT(run_portable(kBatchNorm, bn_ok, {&y}).is_ok(), "batch_norm with NaN/inf scalars computes");
  TestTensor e({0, 0, 4});
  Args bn_empty;
  bn_empty.tensor(e).none().none().tensor(c3).tensor(c3).d(0.1).d(1e-5);
  expect_rejected("batch_norm with 0 channels and [3] stats", kBatchNorm, bn_empty, {&y});
}

}  // namespace
}  // namespace kiln::test
