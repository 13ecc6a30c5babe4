// The portable reductions (sum, mean, argmax/argmin, max/min.dim, amax/amin, topk, cumsum,
// linalg_vector_norm) against naive loops and exact values, the optimized mean against them, and
// the dims and dtypes a corrupt program may hold.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kSumDim = "aten::sum.dim_IntList";
constexpr const char* kMeanDim = "aten::mean.dim";
constexpr const char* kSum = "aten::sum.default";
constexpr Tolerance kMeanTol{1e-6f, 1e-7f};  // docs/kernels.md, "Normalization and softmax"

KILN_TEST(portable_sum_mean) {
  TestTensor x = TestTensor::random({2, 3, 4, 5});
  const std::vector<int64_t> xs = {2, 3, 4, 5};
  for (auto dims : std::vector<std::vector<int64_t>>{{1}, {-1}, {2, 3}, {0, 2}, {0, 1, 2, 3}, {0}, {}}) {
    for (bool keep : {false, true}) {
      for (bool mean : {false, true}) {
        TestTensor y = out();
        Args a;
        a.tensor(x).ints(dims).b(keep).none();
        const Status s = run_portable(mean ? kMeanDim : kSumDim, a, {&y});
        KILN_EXPECT(s.is_ok(), "reduce: %s", s.to_string().c_str());
        bool red[4] = {dims.empty(), dims.empty(), dims.empty(), dims.empty()};
        for (int64_t d : dims) red[d < 0 ? d + 4 : d] = true;
        std::vector<int64_t> os;
        for (int d = 0; d < 4; ++d)
          if (!red[d])
            os.push_back(xs[d]);
          else if (keep)
            os.push_back(1);
        KILN_EXPECT(has_shape(y, os), "reduce shape %s", describe(y.t).c_str());
        int64_t n = 1, count = 1;
        for (int d = 0; d < 4; ++d)
          if (!red[d])
            n *= xs[d];
          else
            count *= xs[d];
        std::vector<double> acc(n, 0.0);
        for (int64_t i = 0; i < 120; ++i) {
          auto idx = unravel(i, xs);
          int64_t o = 0;
          for (int d = 0; d < 4; ++d)
            if (!red[d]) o = o * xs[d] + idx[d];
          acc[o] += x.f()[i];
        }
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(mean ? acc[i] / count : acc[i]);
        expect_close(mean ? "mean.dim" : "sum.dim", y.f(), want.data(), n, kNaive);
        if (mean) {  // the optimized mean serves the trailing dims only
          expect_tiers_agree(format("mean.dim %s keepdim %d", shape_str(dims).c_str(), keep), kMeanDim, a, n, kMeanTol,
                             /*may_decline=*/true);
        }
      }
    }
  }
  {
    TestTensor b({2, 2}, ScalarType::Bool), y = out(ScalarType::Int64);
    b.t.data_as<bool>()[0] = true, b.t.data_as<bool>()[3] = true;
    Args a;
    a.tensor(b).none();
    KILN_EXPECT(run_portable(kSum, a, {&y}).is_ok() && y.t.dim() == 0 && y.i64()[0] == 2, "sum(bool) -> i64");
  }
}

// Dims, dtype codes and tensor sizes from a corrupt file; integer sums that overflow.
KILN_TEST(portable_sum_mean_hostile_arguments) {
  TestTensor x = TestTensor::random({2, 3, 4});
  for (int64_t v : {kBig, INT64_MIN, int64_t{3}, int64_t{-4}}) {
    TestTensor y = out();
    Args rd;
    rd.tensor(x).ints({v}).b(false).none();
    expect_rejected(format("sum dim %lld", (long long)v), kSumDim, rd, {&y}, "out of range");
  }
  TestTensor y = out();
  Args dup;
  dup.tensor(x).ints({1, -2}).b(false).none();
  expect_rejected("mean with a repeated dim", kMeanDim, dup, {&y}, "more than once");
  Args bad_dtype;
  bad_dtype.tensor(x).ints({1}).b(false).i(kBig);
  expect_rejected("sum dtype INT64_MAX", kSumDim, bad_dtype, {&y}, "not a dtype code");
  Args neg_dtype;
  neg_dtype.tensor(x).ints({1}).b(false).i(-1);
  expect_rejected("sum dtype -1", kSumDim, neg_dtype, {&y}, "not a dtype code");
  // Sizes that multiply past int64 (possible next to a zero size), or more bytes than the storage holds.
  TestTensor overflow = TestTensor::with_sizes({kHuge, kHuge, 0}, ScalarType::Float32, 64);
  TestTensor unbacked = TestTensor::with_sizes({4, 4}, ScalarType::Float32, 16);
  for (TestTensor* t : {&overflow, &unbacked}) {
    Args rd;
    rd.tensor(*t).ints({0}).b(false).none();
    expect_rejected("sum of " + describe(t->t), kSumDim, rd, {&y});
  }
  {
    // Bool bytes that are neither 0 nor 1 (a corrupt constant) read as true.
    TestTensor b({3}, ScalarType::Bool), yi = out(ScalarType::Int64);
    const uint8_t bytes[] = {0, 2, 255};
    std::memcpy(b.t.data(), bytes, 3);
    Args s;
    s.tensor(b).none();
    KILN_EXPECT(run_portable(kSum, s, {&yi}).is_ok() && yi.i64()[0] == 2, "sum of odd bool bytes");
  }
  {
    // Integer sums wrap around (like PyTorch) instead of overflowing.
    TestTensor a = i64s({3}, {INT64_MAX, INT64_MAX, 2}), yi = out(ScalarType::Int64);
    Args s;
    s.tensor(a).none();
    KILN_EXPECT(run_portable(kSum, s, {&yi}).is_ok() && yi.i64()[0] == 0, "i64 sum wraps: got %lld",
                (long long)yi.i64()[0]);
    TestTensor c = i64s({2, 3}, std::vector<int64_t>(6, INT64_MIN));
    Args d;
    d.tensor(c).ints({0}).b(false).none();
    KILN_EXPECT(run_portable(kSumDim, d, {&yi}).is_ok() && yi.i64()[0] == 0, "i64 sum over a strided dim wraps");
  }
}

KILN_TEST(portable_dim_reductions) {
  TestTensor x({2, 4});
  const float xv[] = {1, 3, 3, 0, 1, NAN, 2, NAN};
  std::memcpy(x.f(), xv, sizeof xv);
  TestTensor yi = out(ScalarType::Int64), y = out();
  {
    Args a;
    a.tensor(x).i(1).b(false);
    KILN_EXPECT(run_portable("aten::argmax.default", a, {&yi}).is_ok() && equals_i(yi, {1, 1}),
                "argmax: first max, first NaN");
    KILN_EXPECT(run_portable("aten::argmin.default", a, {&yi}).is_ok() && equals_i(yi, {3, 1}), "argmin");
    Args b;
    b.tensor(x).none().b(true);
    KILN_EXPECT(run_portable("aten::argmax.default", b, {&yi}).is_ok() && has_shape(yi, {1, 1}) && equals_i(yi, {5}),
                "argmax flat keepdim");
    TestTensor e({0, 3});
    Args c;
    c.tensor(e).none().b(false);
    expect_rejected("argmax of an empty tensor", "aten::argmax.default", c, {&yi});
    Args d;
    d.tensor(x).i(2).b(false);
    expect_rejected("argmax dim 2 of a 2-D tensor", "aten::argmax.default", d, {&yi}, "out of range");
  }
  {
    TestTensor vals = out(), idx = out(ScalarType::Int64);
    Args a;
    a.tensor(x).i(1).b(true);
    KILN_EXPECT(run_portable("aten::max.dim", a, {&vals, &idx}).is_ok() && has_shape(idx, {2, 1}) &&
                    equals_i(idx, {1, 1}) && equals_f(vals, {3, NAN}),
                "max.dim");
    expect_rejected("max.dim with one output", "aten::max.dim", a, {&vals}, "output(s)");
    Args b;
    b.tensor(x).ints({0, 1}).b(false);
    KILN_EXPECT(run_portable("aten::amax.default", b, {&y}).is_ok() && has_shape(y, {}) && std::isnan(y.f()[0]),
                "amax over all dims is NaN");
    TestTensor z = iota_f32({2, 3, 2});
    Args c;
    c.tensor(z).ints({0, 2}).b(false);
    KILN_EXPECT(run_portable("aten::amin.default", c, {&y}).is_ok() && equals_f(y, {0, 2, 4}),
                "amin over dims 0 and 2");
    Args d;
    d.tensor(z).ints({0, 0}).b(false);
    expect_rejected("amin with a repeated dim", "aten::amin.default", d, {&y}, "more than once");
  }
  {
    TestTensor z({2, 5});
    const float zv[] = {0.5f, -1, 4, 2, 3, 9, 8, 7, 6, 5};
    std::memcpy(z.f(), zv, sizeof zv);
    TestTensor vals = out(), idx = out(ScalarType::Int64);
    constexpr const char* kTopk = "aten::topk.default";
    Args a;
    a.tensor(z).i(3).i(-1).b(true).b(true);
    const Status s = run_portable(kTopk, a, {&vals, &idx});
    KILN_EXPECT(s.is_ok() && equals_f(vals, {4, 3, 2, 9, 8, 7}) && equals_i(idx, {2, 4, 3, 0, 1, 2}),
                "topk largest: %s", s.to_string().c_str());
    Args b;
    b.tensor(z).i(1).i(0).b(false).b(true);
    KILN_EXPECT(run_portable(kTopk, b, {&vals, &idx}).is_ok() && has_shape(vals, {1, 5}) &&
                    equals_f(vals, {0.5f, -1, 4, 2, 3}) && equals_i(idx, {0, 0, 0, 0, 0}),
                "topk smallest along dim 0");
    for (int64_t k : std::vector<int64_t>{6, -1, INT64_MAX}) {
      Args c;
      c.tensor(z).i(k).i(-1).b(true).b(true);
      expect_rejected(format("topk k=%lld", static_cast<long long>(k)), kTopk, c, {&vals, &idx});
    }
    Args d;
    d.tensor(z).i(0).i(-1).b(true).b(true);
    KILN_EXPECT(run_portable(kTopk, d, {&vals, &idx}).is_ok() && has_shape(vals, {2, 0}), "topk k=0");
    // Larger rows against a sort.
    TestTensor r = TestTensor::random({3, 200});
    Args e;
    e.tensor(r).i(50).i(1).b(true).b(true);
    KILN_EXPECT(run_portable(kTopk, e, {&vals, &idx}).is_ok(), "topk 50 of 200");
    bool ok = true;
    for (int row = 0; row < 3; ++row) {
      std::vector<float> sorted(r.f() + row * 200, r.f() + row * 200 + 200);
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      for (int j = 0; j < 50; ++j)
        ok = ok && vals.f()[row * 50 + j] == sorted[j] && r.f()[row * 200 + idx.i64()[row * 50 + j]] == sorted[j];
    }
    KILN_EXPECT(ok, "topk 50 of 200 matches a sort");
  }
  {
    constexpr const char* kCumsum = "aten::cumsum.default";
    TestTensor c({2, 3}, ScalarType::Int32);
    const int32_t cv[] = {1, 2, 3, INT32_MAX, 1, -5};
    std::memcpy(c.t.data(), cv, sizeof cv);
    Args a;
    a.tensor(c).i(1).none();
    KILN_EXPECT(
        run_portable(kCumsum, a, {&yi}).is_ok() && equals_i(yi, {1, 3, 6, INT32_MAX, INT32_MAX + 1LL, INT32_MAX - 4LL}),
        "cumsum i32 -> i64");
    TestTensor f = iota_f32({2, 3});
    Args b;
    b.tensor(f).i(0).i(static_cast<int64_t>(ScalarType::Float32));
    KILN_EXPECT(run_portable(kCumsum, b, {&y}).is_ok() && equals_f(y, {0, 1, 2, 3, 5, 7}), "cumsum f32 dim 0");
    Args d;
    d.tensor(f).i(0).i(static_cast<int64_t>(ScalarType::Float64));
    expect_rejected("cumsum dtype f64 into f32", kCumsum, d, {&y});
  }
  {
    constexpr const char* kNorm = "aten::linalg_vector_norm.default";
    TestTensor f({2, 2});
    const float fv[] = {3, -4, 0, -2};
    std::memcpy(f.f(), fv, sizeof fv);
    Args a;
    a.tensor(f).d(2.0).ints({1}).b(false).none();
    KILN_EXPECT(run_portable(kNorm, a, {&y}).is_ok() && equals_f(y, {5, 2}), "vector_norm ord 2");
    Args b;
    b.tensor(f).d(INFINITY).none().b(true).none();
    KILN_EXPECT(run_portable(kNorm, b, {&y}).is_ok() && has_shape(y, {1, 1}) && equals_f(y, {4}), "vector_norm inf");
    Args c;
    c.tensor(f).i(1).ints({0}).b(false).none();
    KILN_EXPECT(run_portable(kNorm, c, {&y}).is_ok() && equals_f(y, {3, 6}), "vector_norm ord 1 (Int)");
  }
}

}  // namespace
}  // namespace kiln::test
