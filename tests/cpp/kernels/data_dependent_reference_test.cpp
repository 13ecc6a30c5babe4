// The portable kernels whose output size depends on the data (nonzero, masked_select, _unique2; the masks
// of index.Tensor are in index_reference_test.cpp) against exact values, and outputs planned too small.
#include <cmath>
#include <cstring>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kNonzero = "aten::nonzero.default";
constexpr const char* kMaskedSelect = "aten::masked_select.default";
constexpr const char* kUnique = "aten::_unique2.default";

TestTensor f32s(std::vector<int64_t> sizes, const std::vector<float>& values) {
  TestTensor t(std::move(sizes));
  for (size_t i = 0; i < values.size(); ++i) t.f()[i] = values[i];
  return t;
}

TestTensor bools(std::vector<int64_t> sizes, const std::vector<int>& values) {
  TestTensor t(std::move(sizes), ScalarType::Bool);
  for (size_t i = 0; i < values.size(); ++i) static_cast<uint8_t*>(t.t.data())[i] = values[i] ? 1 : 0;
  return t;
}

KILN_TEST(portable_nonzero) {
  const float nan = std::nanf("");
  TestTensor x = f32s({2, 3}, {0.0f, -0.0f, nan, 1.0f, 0.0f, -2.0f}), y = out(ScalarType::Int64);
  Args a;
  a.tensor(x);
  const Status s = run_portable(kNonzero, a, {&y});
  KILN_EXPECT(s.is_ok() && has_shape(y, {3, 2}) && equals_i(y, {0, 2, 1, 0, 1, 2}), "nonzero: %s %s",
              s.to_string().c_str(), describe(y.t).c_str());
  TestTensor zeros({0, 3}), z = out(ScalarType::Int64);
  Args e;
  e.tensor(zeros);
  KILN_EXPECT(run_portable(kNonzero, e, {&z}).is_ok() && has_shape(z, {0, 2}), "nonzero of an empty tensor");
  TestTensor scalar = f32s({}, {3.0f}), w = out(ScalarType::Int64);
  Args c;
  c.tensor(scalar);
  KILN_EXPECT(run_portable(kNonzero, c, {&w}).is_ok() && has_shape(w, {1, 0}), "nonzero of a 0-D tensor");
  TestTensor small = out(ScalarType::Int64, 5);  // 3 rows of 2 needed
  expect_rejected("nonzero beyond the planned bound", kNonzero, a, {&small}, "planned for its bound");
  TestTensor wrong = out(ScalarType::Float32);
  expect_rejected("nonzero into an f32 output", kNonzero, a, {&wrong});
}

KILN_TEST(portable_masked_select) {
  TestTensor x = iota_f32({2, 3}), m = bools({3}, {1, 0, 1}), y = out();
  Args a;
  a.tensor(x).tensor(m);
  const Status s = run_portable(kMaskedSelect, a, {&y});
  KILN_EXPECT(s.is_ok() && has_shape(y, {4}) && equals_f(y, {0, 2, 3, 5}), "masked_select broadcast: %s",
              s.to_string().c_str());
  TestTensor column = bools({2, 1}, {0, 1}), v = out();
  Args b;
  b.tensor(x).tensor(column);
  KILN_EXPECT(run_portable(kMaskedSelect, b, {&v}).is_ok() && equals_f(v, {3, 4, 5}), "masked_select column mask");
  TestTensor small = out(ScalarType::Float32, 3);
  expect_rejected("masked_select beyond the planned bound", kMaskedSelect, a, {&small}, "planned for its bound");
  TestTensor wrong = bools({2}, {1, 1});
  Args c;
  c.tensor(x).tensor(wrong);
  expect_rejected("masked_select with a mask that does not broadcast", kMaskedSelect, c, {&y});
  TestTensor fmask({3});
  Args d;
  d.tensor(x).tensor(fmask);
  expect_rejected("masked_select with an f32 mask", kMaskedSelect, d, {&y}, "bool or u8");
}

KILN_TEST(portable_unique) {
  const float nan = std::nanf("");
  TestTensor x = f32s({2, 3}, {3.0f, nan, 1.0f, 3.0f, -0.0f, 0.0f});
  TestTensor v = out(), inv = out(ScalarType::Int64), cnt = out(ScalarType::Int64);
  Args a;
  a.tensor(x).b(true).b(true).b(true);
  const Status s = run_portable(kUnique, a, {&v, &inv, &cnt});
  KILN_EXPECT(s.is_ok() && equals_f(v, {-0.0f, 1.0f, 3.0f, nan}) && has_shape(inv, {2, 3}) &&
                  equals_i(inv, {2, 3, 1, 2, 0, 0}) && equals_i(cnt, {2, 1, 2, 1}),
              "unique: %s %s %s", s.to_string().c_str(), describe(v.t).c_str(), describe(cnt.t).c_str());
  Args plain;
  plain.tensor(x).b(false).b(false).b(false);
  KILN_EXPECT(run_portable(kUnique, plain, {&v, &inv, &cnt}).is_ok() && has_shape(v, {4}) && has_shape(inv, {0}) &&
                  has_shape(cnt, {0}),
              "unique without inverse and counts: empty outputs");
  TestTensor small = out(ScalarType::Float32, 3);
  expect_rejected("unique beyond the planned bound", kUnique, a, {&small, &inv, &cnt}, "planned for its bound");
  Args bad;
  bad.tensor(x).i(1).b(true).b(true);
  expect_rejected("unique with an Int for sorted", kUnique, bad, {&v, &inv, &cnt});
}

}  // namespace
}  // namespace kiln::test
