// Shared by the GEMM and convolution tests: tolerances for sums of products, and
// comparing a fused operator against a reference the test composed itself.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {

// Tolerance for fp32 sums of k products of values in [-1, 1] computed in a
// different order (blocking, vector lanes, FMA or not): each rounding is
// within eps of its partial sum and they add up like a random walk, so the
// error grows like sqrt(k) * eps * sum|term|; sum|term| is about k / 4 for
// uniform inputs, plus up to 2 for a bias and a residual. Four times that
// bound, so a tolerance never fails on rounding, while one product too many
// or too few (about 1/4 on average) still fails at every k the tests use.
inline Tolerance gemm_tolerance(int64_t k) {
  const double eps = std::numeric_limits<float>::epsilon();
  const double atol = 4.0 * eps * std::sqrt(double(k)) * (double(k) / 4.0 + 2.0);
  return Tolerance{static_cast<float>(4 * eps), static_cast<float>(atol)};
}

// Runs the optimized kernel of `op` at every supported level and compares its
// single output with `want`; returns how many levels ran it.
inline int expect_optimized_matches(const std::string& what, const char* op, const Args& args, const TestTensor& want,
                                    Tolerance tol) {
  int ran = 0;
  for (Isa isa : supported_isas()) {
    TestTensor got = TestTensor::output(want.numel());
    KernelRun r = run_kernel(op, args, {&got}, kTierOptimized, isa);
    const std::string where = what + " [" + isa_name(isa) + "]";
    KILN_EXPECT(r.found && !r.declined && r.status.is_ok(), "%s: optimized %s: found %d, declined %d, %s",
                where.c_str(), op, r.found, r.declined, r.status.to_string().c_str());
    if (!r.found || r.declined || !r.status.is_ok()) continue;
    ++ran;
    KILN_EXPECT(got.shape() == want.shape(), "%s: shape %s, reference %s", where.c_str(), describe(got.t).c_str(),
                describe(want.t).c_str());
    if (got.shape() == want.shape()) expect_close(where, got.f(), want.f(), want.numel(), tol);
  }
  return ran;
}

// Runs the portable kernel of `op` into a new tensor of at most `capacity` elements.
inline TestTensor portable_output(const char* op, const Args& args, int64_t capacity) {
  TestTensor y = TestTensor::output(capacity);
  KernelRun r = run_kernel(op, args, {&y}, kTierPortable, Isa::Baseline);
  KILN_EXPECT(r.found && r.status.is_ok(), "portable %s: %s", op, r.status.to_string().c_str());
  return y;
}

// The activations of the fused operators, by name.
inline const char* const kActivations[] = {"none", "relu",    "clamp", "gelu",      "gelu_tanh",
                                           "silu", "sigmoid", "tanh",  "hardswish", "hardsigmoid"};

// The unfused reference of a fused epilogue: act(y + residual) through the
// portable add and activation kernels; `residual` may be null.
inline TestTensor reference_epilogue(TestTensor y, TestTensor* residual, const std::string& activation, double lo,
                                     double hi) {
  const int64_t n = y.numel();
  if (residual != nullptr) {
    Args args;
    args.tensor(y).tensor(*residual).d(1.0);
    y = portable_output("aten::add.Tensor", args, n);
  }
  if (activation == "none") return y;
  Args args;
  args.tensor(y);
  std::string op = "aten::" + activation + ".default";
  if (activation == "clamp") {
    args.d(lo).d(hi);
  } else if (activation == "gelu" || activation == "gelu_tanh") {
    op = "aten::gelu.default";
    args.str(activation == "gelu" ? "none" : "tanh");
  }
  return portable_output(op.c_str(), args, n);
}

// (m, n, k) of a product: x [m, k] @ W^T [k, n].
struct Mnk {
  int64_t m, n, k;
};

// linear(x, W, bias or none) for each shape, with and without a bias, with a constant weight and
// with one computed at run: every level against the portable kernel, within tolerance(shape,
// constant weight); `label` starts each case's name.
template <class ToleranceFn>
void expect_linear_variants_match(const char* label, const std::vector<Mnk>& shapes, ToleranceFn tolerance) {
  const int levels = static_cast<int>(supported_isas().size());
  for (const Mnk& s : shapes) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool bias = variant & 1, constant_weight = !(variant & 2);
      TestTensor x = TestTensor::random({s.m, s.k});
      TestTensor w = TestTensor::random({s.n, s.k}, constant_weight);
      TestTensor b = TestTensor::random({s.n}, true);
      Args args;
      args.tensor(x).tensor(w);
      if (bias)
        args.tensor(b);
      else
        args.none();
      const std::string what = format("%s m=%lld n=%lld k=%lld bias=%d constant=%d", label, (long long)s.m,
                                      (long long)s.n, (long long)s.k, bias, constant_weight);
      const int ran =
          expect_tiers_match(what, "aten::linear.default", args, {s.m * s.n}, tolerance(s, constant_weight));
      KILN_EXPECT(ran == levels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
    }
  }
}

}  // namespace kiln::test
