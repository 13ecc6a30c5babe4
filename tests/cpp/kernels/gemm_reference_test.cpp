// The portable matrix products (mm, bmm, addmm, matmul, linear, fused_linear) against naive loops,
// and the optimized ones against them on the same arguments; arguments they must refuse.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "reference.h"

namespace kiln::test {
namespace {

KILN_TEST(portable_gemm_random_shapes) {
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t m = uniform_int(1, 140), n = uniform_int(1, 140), k = trial % 7 == 0 ? 300 : uniform_int(1, 140);
    // Odd trials multiply by a transposed B: linear's x @ W^T.
    const bool bt = trial % 2 == 1;
    const char* op = bt ? "aten::linear.default" : "aten::mm.default";
    TestTensor a = TestTensor::random({m, k}),
               b = TestTensor::random(bt ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
    TestTensor y = out();
    Args args;
    args.tensor(a).tensor(b);
    if (bt) args.none();
    const std::string what = format("%s %lldx%lldx%lld", op, (long long)m, (long long)n, (long long)k);
    const Status s = run_portable(op, args, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {m, n}), "%s: %s", what.c_str(), s.to_string().c_str());
    std::vector<float> want(m * n);
    naive_mm(a.f(), b.f(), want.data(), m, k, n, bt);
    if (s.is_ok()) expect_close(what, y.f(), want.data(), m * n, kNaive);
    expect_tiers_agree(what, op, args, m * n, gemm_tolerance(k));
  }
}

KILN_TEST(portable_linear) {
  const int64_t n = 9, k = 7;
  for (bool bias : {false, true}) {
    for (auto xs : std::vector<std::vector<int64_t>>{{5, 7}, {2, 3, 7}, {7}, {1, 7}, {33, 7}}) {
      TestTensor x = TestTensor::random(xs), w = TestTensor::random({n, k}), b = TestTensor::random({n}), y = out();
      Args a;
      a.tensor(x).tensor(w);
      bias ? a.tensor(b) : a.none();
      const Status s = run_portable("aten::linear.default", a, {&y});
      KILN_EXPECT(s.is_ok(), "linear: %s", s.to_string().c_str());
      auto ys = xs;
      ys.back() = n;
      KILN_EXPECT(has_shape(y, ys), "linear shape %s", describe(y.t).c_str());
      const int64_t m = x.numel() / k;
      std::vector<float> want(m * n);
      naive_mm(x.f(), w.f(), want.data(), m, k, n, true);
      if (bias)
        for (int64_t i = 0; i < m * n; ++i) want[i] += b.f()[i % n];
      expect_close("linear", y.f(), want.data(), m * n, kNaive);
      expect_tiers_agree("linear " + shape_str(xs), "aten::linear.default", a, m * n, gemm_tolerance(k));
    }
  }
  TestTensor x = TestTensor::random({2, 6}), w = TestTensor::random({4, 7}), y = out();
  Args a;
  a.tensor(x).tensor(w).none();
  expect_rejected("linear K mismatch", "aten::linear.default", a, {&y}, "different in_features");
}

// fused_linear against aten::linear followed by the residual add and the activation computed here
// in double; then the arguments a corrupt file could hold.
KILN_TEST(portable_fused_linear) {
  TestTensor x = TestTensor::random({2, 3, 7}), w = TestTensor::random({5, 7}), b = TestTensor::random({5});
  TestTensor r = TestTensor::random({2, 3, 5});
  for (bool bias : {false, true}) {
    for (bool residual : {false, true}) {
      TestTensor plain = out();
      Args pa;
      pa.tensor(x).tensor(w);
      bias ? pa.tensor(b) : pa.none();
      KILN_EXPECT(run_portable("aten::linear.default", pa, {&plain}).is_ok(), "fused_linear: unfused");
      for (const ActivationCase& act : kActivationCases) {
        TestTensor y = out();
        Args a;
        a.tensor(x).tensor(w);
        bias ? a.tensor(b) : a.none();
        residual ? a.tensor(r) : a.none();
        a.str(act.name).d(act.lo).d(act.hi);
        const Status s = run_portable("kiln::fused_linear.default", a, {&y});
        KILN_EXPECT(s.is_ok() && y.shape() == plain.shape(), "fused_linear %s: %s", act.name, s.to_string().c_str());
        if (!s.is_ok()) continue;
        std::vector<float> want(static_cast<size_t>(plain.numel()));
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = static_cast<float>(act.ref(plain.f()[i] + (residual ? r.f()[i] : 0.0), act.lo, act.hi));
        const std::string what = std::string("fused_linear ") + act.name;
        expect_close(what, y.f(), want.data(), plain.numel(), kNaive);
        expect_tiers_agree(what, "kiln::fused_linear.default", a, plain.numel(), gemm_tolerance(7));
      }
    }
  }
  // Bad arguments: each is a KernelFailure, never a crash.
  auto expect_fused_linear_rejected = [&](TestTensor& res, const char* act, double lo, double hi, const char* what,
                                          const char* message) {
    TestTensor y = out();
    Args a;
    a.tensor(x).tensor(w).none().tensor(res).str(act).d(lo).d(hi);
    expect_rejected(std::string("fused_linear ") + what, "kiln::fused_linear.default", a, {&y}, message);
  };
  TestTensor broadcastable = TestTensor::random({1, 5});
  expect_fused_linear_rejected(broadcastable, "none", 0, 0, "with a broadcasting residual", "residual must have");
  expect_fused_linear_rejected(r, "swish", 0, 0, "with an unknown activation", "unknown activation");
  expect_fused_linear_rejected(r, "", 0, 0, "with an empty activation", "unknown activation");
  expect_fused_linear_rejected(r, "clamp", std::nan(""), 1, "with a NaN clamp bound", "must not be NaN");
  {
    // An f64 residual: the registry has no kernel for it; the kernel refuses it too.
    TestTensor wrong_dtype({2, 3, 5}, ScalarType::Float64), y = out();
    Args a;
    a.tensor(x).tensor(w).none().tensor(wrong_dtype).str("none").d(0).d(0);
    KILN_EXPECT(run_portable("kiln::fused_linear.default", a, {&y}).code() == Error::MissingKernel,
                "fused_linear with an f64 residual has no kernel");
    const Status s = run_portable("kiln::fused_linear.default",
                                  {ScalarType::Float32, ScalarType::Float32, ScalarType::Float32}, a, {&y});
    KILN_EXPECT(s.code() == Error::KernelFailure && s.message().find("residual must be f32") != std::string::npos,
                "fused_linear with an f64 residual must fail: %s", s.to_string().c_str());
  }
  {
    TestTensor y = out();
    Args a;  // a string argument given as an Int
    a.tensor(x).tensor(w).none().none().i(1).d(0).d(0);
    expect_rejected("fused_linear activation as an Int", "kiln::fused_linear.default", a, {&y}, "must be a String");
  }
}

KILN_TEST(portable_mm_bmm_addmm) {
  {
    TestTensor a = TestTensor::random({2, 3, 4}), b = TestTensor::random({4, 5}), y = out();
    Args args;
    args.tensor(a).tensor(b);
    const Status s = run_portable("aten::mm.default", args, {&y});
    KILN_EXPECT(
        s.code() == Error::KernelFailure && s.message() == "aten::mm.default: self must be 2-D, got f32[2, 3, 4]",
        "mm message: %s", s.to_string().c_str());
    expect_rejected("mm of a 3-D self", "aten::mm.default", args, {&y}, "self must be 2-D, got f32[2, 3, 4]");
  }
  {
    TestTensor a = TestTensor::random({3, 4, 5}), b = TestTensor::random({3, 5, 6}), y = out();
    Args args;
    args.tensor(a).tensor(b);
    KILN_EXPECT(run_portable("aten::bmm.default", args, {&y}).is_ok(), "bmm");
    std::vector<float> want(3 * 4 * 6);
    for (int i = 0; i < 3; ++i) naive_mm(a.f() + i * 20, b.f() + i * 30, want.data() + i * 24, 4, 5, 6);
    expect_close("bmm", y.f(), want.data(), 72, kNaive);
    expect_tiers_agree("bmm", "aten::bmm.default", args, 72, gemm_tolerance(5));
  }
  // addmm with self broadcast, beta 0.5 (which the optimized kernel declines) and alpha 2.
  for (auto ss : std::vector<std::vector<int64_t>>{{6}, {4, 1}, {4, 6}, {}}) {
    TestTensor s = TestTensor::random(ss), a = TestTensor::random({4, 5}), b = TestTensor::random({5, 6}), y = out();
    Args args;
    args.tensor(s).tensor(a).tensor(b).d(0.5).i(2);
    KILN_EXPECT(run_portable("aten::addmm.default", args, {&y}).is_ok(), "addmm");
    std::vector<float> want(24);
    naive_mm(a.f(), b.f(), want.data(), 4, 5, 6);
    for (int64_t i = 0; i < 24; ++i) want[i] = 2 * want[i] + 0.5f * bcast_at(s, {4, 6}, unravel(i, {4, 6}));
    expect_close("addmm", y.f(), want.data(), 24, kNaive);
    expect_tiers_agree("addmm self " + shape_str(ss), "aten::addmm.default", args, 24, gemm_tolerance(5),
                       /*may_decline=*/true);
  }
}

KILN_TEST(portable_matmul) {
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const std::vector<Case> cases = {
      {{4}, {4}, {}},
      {{3, 4}, {4}, {3}},
      {{4}, {4, 5}, {5}},
      {{2, 3, 4}, {4}, {2, 3}},
      {{4}, {2, 4, 5}, {2, 5}},
      {{3, 4}, {4, 5}, {3, 5}},
      {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},
  };
  for (const Case& c : cases) {
    TestTensor a = TestTensor::random(c.a), b = TestTensor::random(c.b), y = out();
    Args args;
    args.tensor(a).tensor(b);
    const std::string what = "matmul " + shape_str(c.a) + " @ " + shape_str(c.b);
    const Status s = run_portable("aten::matmul.default", args, {&y});
    KILN_EXPECT(s.is_ok(), "%s: %s", what.c_str(), s.to_string().c_str());
    KILN_EXPECT(has_shape(y, c.out), "matmul shape %s, want %s", describe(y.t).c_str(), shape_str(c.out).c_str());
    // Reference: promote to >= 2-D, broadcast batch, multiply.
    std::vector<int64_t> as = c.a, bs = c.b;
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    const size_t nb = std::max(ab.size(), bb.size());
    while (ab.size() < nb) ab.insert(ab.begin(), 1);
    while (bb.size() < nb) bb.insert(bb.begin(), 1);
    std::vector<int64_t> batch(nb);
    for (size_t d = 0; d < nb; ++d) batch[d] = std::max(ab[d], bb[d]);
    int64_t nbatch = 1;
    for (int64_t x : batch) nbatch *= x;
    std::vector<float> want(nbatch * m * n);
    for (int64_t i = 0; i < nbatch; ++i) {
      auto idx = unravel(i, batch);
      int64_t ao = 0, bo = 0, ast = m * k, bst = k * n;
      for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
        ao += (ab[d] == 1 ? 0 : idx[d]) * ast, ast *= ab[d];
        bo += (bb[d] == 1 ? 0 : idx[d]) * bst, bst *= bb[d];
      }
      naive_mm(a.f() + ao, b.f() + bo, want.data() + i * m * n, m, k, n);
    }
    expect_close("matmul", y.f(), want.data(), nbatch * m * n, kNaive);
    expect_tiers_agree(what, "aten::matmul.default", args, nbatch * m * n, gemm_tolerance(k));
  }
}

// Shapes a corrupt program may give the products.
KILN_TEST(portable_products_reject_bad_shapes) {
  // An output shape that overflows, from operands that are each fine.
  TestTensor a = TestTensor::with_sizes({0, kHuge, 1}, ScalarType::Float32, 64);
  TestTensor b = TestTensor::with_sizes({0, 1, kHuge}, ScalarType::Float32, 64);
  TestTensor y = out();
  Args mm;
  mm.tensor(a).tensor(b);
  expect_rejected("matmul to [0, 2^40, 2^40]", "aten::matmul.default", mm, {&y});
  expect_rejected("bmm to [0, 2^40, 2^40]", "aten::bmm.default", mm, {&y});
  // Batch dims that do not broadcast.
  TestTensor p = TestTensor::random({2, 3, 4}), q = TestTensor::random({3, 4, 5});
  Args pq;
  pq.tensor(p).tensor(q);
  expect_rejected("matmul batch 2 vs 3", "aten::matmul.default", pq, {&y}, "not broadcastable");
  TestTensor z = TestTensor::random({0, 3, 4}), r = TestTensor::random({2, 4, 5});
  Args zr;
  zr.tensor(z).tensor(r);
  expect_rejected("matmul batch 0 vs 2", "aten::matmul.default", zr, {&y}, "not broadcastable");
}

}  // namespace
}  // namespace kiln::test
