// Shared by the *_reference_test.cpp files: each portable kernel, called through the registry,
// against a naive loop written in the test (and, where an optimized kernel exists, the tiers
// against each other), plus the arguments a corrupt program may hold.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {

// Portable kernels against naive double-precision loops: |got - want| <= 5e-5 (1 + |want|), within
// 1e-4 max(1, |want|) (float sums of a few hundred terms are far closer).
constexpr Tolerance kNaive{5e-5f, 5e-5f};

// Scalar arguments a corrupt program may hold.
constexpr int64_t kBig = INT64_MAX;
constexpr int64_t kHuge = int64_t{1} << 40;

// An output of `capacity` elements (kernels resize it).
inline TestTensor out(ScalarType dtype = ScalarType::Float32, int64_t capacity = 1 << 20) {
  return TestTensor::output(capacity, dtype);
}

// An int list of two elements the (corrupt) file left misaligned: kernels must refuse it before any read.
inline Value misaligned_ints() {
  alignas(8) static int64_t storage[4] = {4, 6, 0, 0};
  Value v;
  v.kind = ValueKind::IntList;
  v.ints.data = reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(storage) + 4);
  v.ints.size = 2;
  return v;
}

inline bool has_shape(const TestTensor& t, const std::vector<int64_t>& sizes) { return t.shape() == sizes; }
inline std::string shape_str(const std::vector<int64_t>& s) { return describe_sizes({s.data(), s.size()}); }

// 0, 1, 2, ... in row-major order.
inline TestTensor iota_f32(std::vector<int64_t> sizes) {
  TestTensor t(std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) t.f()[i] = static_cast<float>(i);
  return t;
}

inline TestTensor i64s(std::vector<int64_t> sizes, const std::vector<int64_t>& values) {
  TestTensor t(std::move(sizes), ScalarType::Int64);
  for (size_t i = 0; i < values.size(); ++i) t.i64()[i] = values[i];
  return t;
}

// Exact equality of every element (NaN matches NaN).
inline bool equals_f(const TestTensor& t, const std::vector<float>& want) {
  if (t.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(t.f()[i] == want[i] || (std::isnan(t.f()[i]) && std::isnan(want[i])))) return false;
  return true;
}
inline bool equals_i(const TestTensor& t, const std::vector<int64_t>& want) {
  if (t.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (t.i64()[i] != want[i]) return false;
  return true;
}
inline bool equals_b(const TestTensor& t, const std::vector<int>& want) {
  if (t.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (t.t.data_as<uint8_t>()[i] != want[i]) return false;
  return true;
}

// The optimized kernel of `op` against the portable one on the same arguments (one output of at
// most `capacity` elements); it must run at every level unless `may_decline`.
inline void expect_tiers_agree(const std::string& what, const char* op, const Args& args, int64_t capacity,
                               Tolerance tol, bool may_decline = false) {
  const int ran = expect_tiers_match(what, op, args, {capacity}, tol, may_decline);
  const int levels = static_cast<int>(supported_isas().size());
  KILN_EXPECT(may_decline || ran == levels, "%s: the optimized kernel ran at %d of %d levels", what.c_str(), ran,
              levels);
}

// ---- naive references

// Row-major strides of a shape.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// The index of element i of shape s.
inline std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& s) {
  std::vector<int64_t> idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) idx[d] = i % s[d], i /= s[d];
  return idx;
}

// The value of `b` at position `idx` of the broadcast output shape `os`.
inline float bcast_at(const TestTensor& b, const std::vector<int64_t>& os, const std::vector<int64_t>& idx) {
  const std::vector<int64_t> bs = b.shape(), st = strides_of(bs);
  int64_t off = 0;
  for (size_t d = 0; d < bs.size(); ++d) off += (bs[d] == 1 ? 0 : idx[d + os.size() - bs.size()]) * st[d];
  return b.f()[off];
}

// c [m, n] = a [m, k] @ b [k, n] (b [n, k] transposed when `bt`), summed in double.
inline void naive_mm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, bool bt = false) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[i * k + p]) * (bt ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = static_cast<float>(s);
    }
}

// The fused operators' activations (kiln::fused_linear, kiln::fused_conv2d) in double, with the
// clamp bounds each is called with.
struct ActivationCase {
  const char* name;
  double lo, hi;
  double (*ref)(double v, double lo, double hi);
};
inline const ActivationCase kActivationCases[] = {
    {"none", 0, 0, [](double v, double, double) { return v; }},
    {"relu", 0, 0, [](double v, double, double) { return v < 0 ? 0.0 : v; }},
    {"clamp", -0.25, 0.5, [](double v, double lo, double hi) { return std::min(std::max(v, lo), hi); }},
    {"clamp", -1e300, 0.5, [](double v, double, double hi) { return std::min(v, hi); }},  // beyond float: unbounded
    {"gelu", 0, 0, [](double v, double, double) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
    {"gelu_tanh", 0, 0,
     [](double v, double, double) {
       return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
     }},
    {"silu", 0, 0, [](double v, double, double) { return v / (1 + std::exp(-v)); }},
    {"sigmoid", 0, 0, [](double v, double, double) { return 1 / (1 + std::exp(-v)); }},
    {"tanh", 0, 0, [](double v, double, double) { return std::tanh(v); }},
    {"hardswish", 0, 0, [](double v, double, double) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }},
    {"hardsigmoid", 0, 0, [](double v, double, double) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; }},
};

}  // namespace kiln::test
