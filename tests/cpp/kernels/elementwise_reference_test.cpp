// The portable elementwise kernels (activations, math, broadcasting arithmetic, division modes,
// remainder, pow) against naive loops and exact values, the optimized ones against them on the same
// arguments, and the scalar arguments and shapes a corrupt program may hold.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr Tolerance kExact{0, 0};
// The optimized kernels' tolerances (docs/kernels.md, "Elementwise").
constexpr Tolerance kTranscendental{1e-6f, 1e-6f}, kExp{3e-7f, 1e-38f};

KILN_TEST(portable_add_broadcast) {
  struct Case {
    std::vector<int64_t> a, b;
  };
  for (const Case& c :
       std::vector<Case>{{{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{2, 3}, {}}, {{5}, {5}}, {{1}, {3, 1, 2}}}) {
    TestTensor a = TestTensor::random(c.a), b = TestTensor::random(c.b), y = out();
    Args args;
    args.tensor(a).tensor(b).d(2.5);
    KILN_EXPECT(run_portable("aten::add.Tensor", args, {&y}).is_ok(), "add");
    const auto os = y.shape();
    const int64_t n = y.numel();
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      auto idx = unravel(i, os);
      want[i] = bcast_at(a, os, idx) + 2.5f * bcast_at(b, os, idx);
    }
    expect_close("add broadcast", y.f(), want.data(), n, kNaive);
    expect_tiers_agree("add " + shape_str(c.a) + " + 2.5 * " + shape_str(c.b), "aten::add.Tensor", args, n, kExact);
  }
  {
    TestTensor a({3}, ScalarType::Int64), b({}, ScalarType::Int64), y = out(ScalarType::Int64);
    a.i64()[0] = 1, a.i64()[1] = -2, a.i64()[2] = INT64_MAX;
    b.i64()[0] = 3;
    Args args;
    args.tensor(a).tensor(b).i(1);
    KILN_EXPECT(run_portable("aten::sub.Tensor", args, {&y}).is_ok(), "sub i64");
    KILN_EXPECT(y.i64()[0] == -2 && y.i64()[1] == -5 && y.i64()[2] == INT64_MAX - 3, "sub i64 values");
  }
  {
    // Mixed dtypes: the registry has no kernel for them; the kernel refuses them too.
    TestTensor a = TestTensor::random({2, 3}), bad({2, 3}, ScalarType::Int64), y = out();
    Args args;
    args.tensor(a).tensor(bad).i(1);
    KILN_EXPECT(run_portable("aten::add.Tensor", args, {&y}).code() == Error::MissingKernel,
                "add of f32 and i64 has no kernel");
    const Status s = run_portable("aten::add.Tensor", {ScalarType::Float32, ScalarType::Float32}, args, {&y});
    KILN_EXPECT(s.code() == Error::KernelFailure && s.message().find("must have the same dtype") != std::string::npos,
                "add mixed dtypes must fail: %s", s.to_string().c_str());
  }
}

KILN_TEST(portable_unary) {
  TestTensor x = TestTensor::random({100});
  x.f()[0] = -3.5f, x.f()[1] = 3.5f, x.f()[2] = 0.0f;
  struct U {
    const char* name;
    const char* op;
    std::function<double(double)> ref;
    Tolerance tiers;  // between the portable and the optimized kernel
  };
  const std::vector<U> ops = {
      {"relu", "aten::relu.default", [](double v) { return v < 0 ? 0 : v; }, kExact},
      {"sigmoid", "aten::sigmoid.default", [](double v) { return 1 / (1 + std::exp(-v)); }, kTranscendental},
      {"tanh", "aten::tanh.default", [](double v) { return std::tanh(v); }, kTranscendental},
      {"silu", "aten::silu.default", [](double v) { return v / (1 + std::exp(-v)); }, kTranscendental},
      {"hardswish", "aten::hardswish.default", [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; },
       kExact},
      {"hardsigmoid", "aten::hardsigmoid.default", [](double v) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; },
       kExact},
      {"neg", "aten::neg.default", [](double v) { return -v; }, kExact},
      {"exp", "aten::exp.default", [](double v) { return std::exp(v); }, kExp},
      {"abs", "aten::abs.default", [](double v) { return std::fabs(v); }, kExact},
  };
  for (const U& u : ops) {
    TestTensor y = out();
    Args a;
    a.tensor(x);
    KILN_EXPECT(run_portable(u.op, a, {&y}).is_ok(), "%s", u.name);
    std::vector<float> want(100);
    for (int i = 0; i < 100; ++i) want[i] = static_cast<float>(u.ref(x.f()[i]));
    expect_close(u.name, y.f(), want.data(), 100, kNaive);
    expect_tiers_agree(u.name, u.op, a, 100, u.tiers);
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).str("tanh");
    KILN_EXPECT(run_portable("aten::gelu.default", a, {&y}).is_ok(), "gelu tanh");
    std::vector<float> want(100);
    for (int i = 0; i < 100; ++i) {
      const double v = x.f()[i];
      want[i] = static_cast<float>(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    }
    expect_close("gelu tanh", y.f(), want.data(), 100, kNaive);
    expect_tiers_agree("gelu tanh", "aten::gelu.default", a, 100, kTranscendental);
    Args bad;
    bad.tensor(x).str("fast");
    expect_rejected("gelu bad mode", "aten::gelu.default", bad, {&y}, "approximate must be");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).none().d(0.25);
    KILN_EXPECT(run_portable("aten::clamp.default", a, {&y}).is_ok(), "clamp");
    bool ok = true;
    for (int i = 0; i < 100; ++i) ok &= y.f()[i] == std::min(x.f()[i], 0.25f);
    KILN_EXPECT(ok, "clamp values");
    expect_tiers_agree("clamp", "aten::clamp.default", a, 100, kExact);
  }
  {
    TestTensor y = out(ScalarType::Float32, 4);
    Args a;
    a.tensor(x);
    expect_rejected("relu into an output without capacity", "aten::relu.default", a, {&y}, "cannot resize output");
  }
}

// Scalar arguments and shapes from a corrupt file: each a KernelFailure or a defined result.
KILN_TEST(portable_elementwise_hostile_arguments) {
  {
    // Sizes that multiply past int64 (possible next to a zero size), or more bytes than the storage holds.
    TestTensor overflow = TestTensor::with_sizes({kHuge, kHuge, 0}, ScalarType::Float32, 64);
    TestTensor unbacked = TestTensor::with_sizes({4, 4}, ScalarType::Float32, 16);
    for (TestTensor* t : {&overflow, &unbacked}) {
      TestTensor y = out();
      Args r;
      r.tensor(*t);
      expect_rejected("relu of " + describe(t->t), "aten::relu.default", r, {&y});
    }
  }
  {
    // An output that aliases the input (the memory planner never does this).
    TestTensor b = TestTensor::random({2, 3});
    Args r;
    r.tensor(b);
    expect_rejected("in-place relu", "aten::relu.default", r, {&b}, "shares memory");
  }
  TestTensor xi({4}, ScalarType::Int32), yi = out(ScalarType::Int32);
  const int32_t vi[] = {-5, 0, 7, INT32_MAX};
  std::memcpy(xi.t.data(), vi, sizeof vi);
  Args h;
  h.tensor(xi).d(-1e300).d(1e300);
  KILN_EXPECT(run_portable("aten::hardtanh.default", h, {&yi}).is_ok() && std::memcmp(yi.t.data(), vi, sizeof vi) == 0,
              "hardtanh i32 +-1e300");
  Args c;
  c.tensor(xi).d(NAN).d(INFINITY);
  KILN_EXPECT(run_portable("aten::clamp.default", c, {&yi}).is_ok(), "clamp i32 NaN/inf");
  TestTensor xf = TestTensor::random({4}), yf = out();
  for (double e : {double(NAN), double(INFINITY), -double(INFINITY), 1e300, -1e300}) {
    Args p;
    p.tensor(xf).d(e);
    KILN_EXPECT(run_portable("aten::pow.Tensor_Scalar", p, {&yf}).is_ok(), "pow %g", e);
    expect_tiers_agree(format("pow %g", e), "aten::pow.Tensor_Scalar", p, 4, kExact);
    Args cl;
    cl.tensor(xf).d(e).d(e);
    KILN_EXPECT(run_portable("aten::clamp.default", cl, {&yf}).is_ok(), "clamp %g", e);
    expect_tiers_agree(format("clamp %g", e), "aten::clamp.default", cl, 4, kExact);
  }
  TestTensor ai = i64s({2}, {INT64_MIN, 1}), bi = i64s({2}, {-1, INT64_MAX}), yl = out(ScalarType::Int64);
  for (double alpha : {1e300, -1e300, double(INFINITY), 2.0}) {
    Args add;
    add.tensor(ai).tensor(bi).d(alpha);
    KILN_EXPECT(run_portable("aten::add.Tensor", add, {&yl}).is_ok(), "add i64 alpha %g", alpha);
  }
  Args nan_alpha;
  nan_alpha.tensor(ai).tensor(bi).d(NAN);
  expect_rejected("sub i64 alpha NaN", "aten::sub.Tensor", nan_alpha, {&yl}, "alpha must be an integer");
  TestTensor a = TestTensor::random({2, 3}), b = TestTensor::random({4, 3}), y = out();
  Args add;
  add.tensor(a).tensor(b).i(1);
  expect_rejected("add [2,3] + [4,3]", "aten::add.Tensor", add, {&y});
}

KILN_TEST(portable_binary_math) {
  TestTensor a({4}), b({4}), y = out();
  const float av[] = {7, -7, 7.5f, -7.5f}, bv[] = {2, 2, -2, -2};
  std::memcpy(a.f(), av, sizeof av);
  std::memcpy(b.f(), bv, sizeof bv);
  constexpr const char* kDivMode = "aten::div.Tensor_mode";
  Args fl;
  fl.tensor(a).tensor(b).str("floor");
  KILN_EXPECT(run_portable(kDivMode, fl, {&y}).is_ok() && equals_f(y, {3, -4, -4, 3}), "div floor");
  Args tr;
  tr.tensor(a).tensor(b).str("trunc");
  KILN_EXPECT(run_portable(kDivMode, tr, {&y}).is_ok() && equals_f(y, {3, -3, -3, 3}), "div trunc");
  Args no;
  no.tensor(a).tensor(b).none();
  KILN_EXPECT(run_portable(kDivMode, no, {&y}).is_ok() && equals_f(y, {3.5f, -3.5f, -3.75f, 3.75f}), "div true");
  Args bad;
  bad.tensor(a).tensor(b).str("round");
  expect_rejected("div rounding_mode round", kDivMode, bad, {&y}, "rounding_mode");
  Args rm;
  rm.tensor(a).tensor(b);
  KILN_EXPECT(run_portable("aten::remainder.Tensor", rm, {&y}).is_ok() && equals_f(y, {1, 1, -0.5f, -1.5f}),
              "remainder f32");
  TestTensor ia = i64s({4}, {7, -7, INT64_MIN, 5}), ib = i64s({4}, {2, 2, -1, -3}), yi = out(ScalarType::Int64);
  Args fi;
  fi.tensor(ia).tensor(ib).str("floor");
  KILN_EXPECT(run_portable(kDivMode, fi, {&yi}).is_ok() && equals_i(yi, {3, -4, INT64_MIN, -2}), "div floor i64");
  Args ri;
  ri.tensor(ia).tensor(ib);
  KILN_EXPECT(run_portable("aten::remainder.Tensor", ri, {&yi}).is_ok() && equals_i(yi, {1, 1, 0, -1}),
              "remainder i64");
  TestTensor iz = i64s({4}, {1, 0, 1, 1});
  Args zi;
  zi.tensor(ia).tensor(iz).str("trunc");
  expect_rejected("integer division by zero", kDivMode, zi, {&yi}, "division by zero");
  Args ps;
  ps.d(2.0).tensor(b);
  KILN_EXPECT(run_portable("aten::pow.Scalar", ps, {&y}).is_ok() && equals_f(y, {4, 4, 0.25f, 0.25f}), "pow.Scalar");
  Args pt;
  pt.tensor(b).tensor(b);
  KILN_EXPECT(run_portable("aten::pow.Tensor_Tensor", pt, {&y}).is_ok() && equals_f(y, {4, 4, 0.25f, 0.25f}),
              "pow.Tensor_Tensor");
  Args pi;
  pi.tensor(ia).tensor(iz);
  KILN_EXPECT(run_portable("aten::pow.Tensor_Tensor", pi, {&yi}).is_ok() && equals_i(yi, {7, 1, INT64_MIN, 5}),
              "pow i64");
  Args sc;
  sc.tensor(a).d(2.0);
  KILN_EXPECT(run_portable("aten::remainder.Scalar", sc, {&y}).is_ok() && equals_f(y, {1, 1, 1.5f, 0.5f}),
              "remainder.Scalar");
  TestTensor u({3}), yu = out();
  u.f()[0] = -2, u.f()[1] = 0, u.f()[2] = NAN;
  Args sg;
  sg.tensor(u);
  KILN_EXPECT(run_portable("aten::sign.default", sg, {&yu}).is_ok() && equals_f(yu, {-1, 0, NAN}), "sign");
  KILN_EXPECT(run_portable("aten::reciprocal.default", sg, {&yu}).is_ok() && equals_f(yu, {-0.5f, INFINITY, NAN}),
              "reciprocal");
  expect_tiers_agree("reciprocal", "aten::reciprocal.default", sg, 3, kExact);
  KILN_EXPECT(run_portable("aten::cos.default", sg, {&yu}).is_ok() && std::fabs(yu.f()[0] - std::cos(-2.0f)) < 1e-6f,
              "cos");
}

}  // namespace
}  // namespace kiln::test
