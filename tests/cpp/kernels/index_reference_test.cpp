// The portable indexing kernels (embedding, index.Tensor, index_put, index_copy, slice_scatter,
// index_select, gather) against exact values, and the indices a corrupt program or bad input holds.
#include <cstring>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kEmbedding = "aten::embedding.default";
constexpr const char* kIndex = "aten::index.Tensor";
constexpr const char* kIndexPut = "aten::index_put.default";
constexpr const char* kIndexCopy = "aten::index_copy.default";
constexpr const char* kSliceScatter = "aten::slice_scatter.default";

KILN_TEST(portable_embedding) {
  TestTensor w = TestTensor::random({5, 3}), idx({2, 2}, ScalarType::Int64), y = out();
  const int64_t ids[] = {4, 0, 2, 4};
  std::memcpy(idx.i64(), ids, sizeof ids);
  Args a;
  a.tensor(w).tensor(idx).i(-1).b(false).b(false);
  KILN_EXPECT(run_portable(kEmbedding, a, {&y}).is_ok() && has_shape(y, {2, 2, 3}), "embedding");
  bool ok = true;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) ok &= y.f()[i * 3 + j] == w.f()[ids[i] * 3 + j];
  KILN_EXPECT(ok, "embedding values");
  idx.i64()[1] = 5;
  expect_rejected("embedding out of range", kEmbedding, a, {&y});
  // An output over the weight (the memory planner never does this).
  TestTensor i2({2}, ScalarType::Int64);
  Args into;
  into.tensor(w).tensor(i2).i(-1).b(false).b(false);
  expect_rejected("embedding into its weight", kEmbedding, into, {&w}, "shares memory");
}

KILN_TEST(portable_embedding_hostile_indices) {
  TestTensor w = TestTensor::random({5, 3}), idx({3}, ScalarType::Int64), idx32({2}, ScalarType::Int32), y = out();
  for (int64_t bad : {kBig, INT64_MIN, int64_t{-1}, int64_t{5}}) {
    idx.i64()[0] = 1, idx.i64()[1] = bad, idx.i64()[2] = 2;
    Args a;
    a.tensor(w).tensor(idx).i(-1).b(false).b(false);
    expect_rejected(format("embedding index %lld", (long long)bad), kEmbedding, a, {&y});
  }
  idx32.t.data_as<int32_t>()[0] = INT32_MIN;
  Args a32;
  a32.tensor(w).tensor(idx32).i(-1).b(false).b(false);
  expect_rejected("embedding i32 index INT32_MIN", kEmbedding, a32, {&y});
  idx.i64()[0] = 0, idx.i64()[1] = 4, idx.i64()[2] = 2;
  for (int64_t pad : {kBig, INT64_MIN, int64_t{5}, int64_t{-6}}) {
    Args a;
    a.tensor(w).tensor(idx).i(pad).b(false).b(false);
    expect_rejected(format("embedding padding_idx %lld", (long long)pad), kEmbedding, a, {&y});
  }
  for (int64_t pad : {int64_t{-1}, int64_t{0}, int64_t{4}, int64_t{-5}}) {
    Args a;
    a.tensor(w).tensor(idx).i(pad).b(false).b(false);
    KILN_EXPECT(run_portable(kEmbedding, a, {&y}).is_ok(), "embedding padding_idx %lld is valid", (long long)pad);
  }
}

KILN_TEST(portable_index_tensor) {
  TestTensor x = iota_f32({2, 3, 4});
  {  // x[:, [2, -1]]
    TestTensor i = i64s({2}, {2, -1}), y = out();
    Args a;
    a.tensor(x).tensors({nullptr, &i});
    const Status s = run_portable(kIndex, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 2, 4}), "index [:, i]: %s", s.to_string().c_str());
    KILN_EXPECT(equals_f(y, {8, 9, 10, 11, 8, 9, 10, 11, 20, 21, 22, 23, 20, 21, 22, 23}), "index [:, i] values");
  }
  {  // x[:, [[0], [2]], [1, 3, -4]] (i32 and i64 broadcast to [2, 3])
    TestTensor i({2, 1}, ScalarType::Int32), j = i64s({3}, {1, 3, -4}), y = out();
    i.t.data_as<int32_t>()[0] = 0, i.t.data_as<int32_t>()[1] = 2;
    Args a;
    a.tensor(x).tensors({nullptr, &i, &j});
    const Status s = run_portable(kIndex, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 2, 3}), "index broadcast: %s %s", s.to_string().c_str(),
                describe(y.t).c_str());
    KILN_EXPECT(equals_f(y, {1, 3, 0, 9, 11, 8, 13, 15, 12, 21, 23, 20}), "index broadcast values");
  }
  {  // x[[1]] with a trailing None: rows of dim 0
    TestTensor i = i64s({1}, {1}), y = out();
    Args a;
    a.tensor(x).tensors({&i, nullptr});
    KILN_EXPECT(run_portable(kIndex, a, {&y}).is_ok() && has_shape(y, {1, 3, 4}) && y.f()[0] == 12, "index [i, :]");
  }
  {  // x[m], m = [False, True], a mask over dim 0: x[1] as [1, 3, 4]
    TestTensor m({2}, ScalarType::Bool), y = out();
    uint8_t* mb = static_cast<uint8_t*>(m.t.data());
    mb[0] = 0, mb[1] = 1;
    Args a;
    a.tensor(x).tensors({&m});
    const Status s = run_portable(kIndex, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {1, 3, 4}) && y.f()[0] == 12 && y.f()[11] == 23, "index [m]: %s",
                s.to_string().c_str());
  }
  {  // x[[1], :, m], m = [T, F, F, T] over dim 2: index tensors apart, so the broadcast dim comes first
    TestTensor i = i64s({1}, {1}), m({4}, ScalarType::Bool), y = out();
    uint8_t* mb = static_cast<uint8_t*>(m.t.data());
    mb[0] = 1, mb[1] = 0, mb[2] = 0, mb[3] = 1;
    Args a;
    a.tensor(x).tensors({&i, nullptr, &m});
    const Status s = run_portable(kIndex, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 3}) && equals_f(y, {12, 16, 20, 15, 19, 23}), "index [i, :, m]: %s %s",
                s.to_string().c_str(), describe(y.t).c_str());
    TestTensor wrong({3}, ScalarType::Bool);
    Args b;
    b.tensor(x).tensors({&wrong});
    expect_rejected("a mask of the wrong shape", kIndex, b, {&y}, "does not match");
    TestTensor u8({4}, ScalarType::UInt8), z = out();  // a u8 mask: any non-zero byte selects
    uint8_t* ub = static_cast<uint8_t*>(u8.t.data());
    ub[0] = 0, ub[1] = 7, ub[2] = 0, ub[3] = 0;
    Args c;
    c.tensor(x).tensors({nullptr, nullptr, &u8});
    KILN_EXPECT(run_portable(kIndex, c, {&z}).is_ok() && has_shape(z, {2, 3, 1}) && equals_f(z, {1, 5, 9, 13, 17, 21}),
                "index [:, :, u8 mask]: %s", describe(z.t).c_str());
    std::memset(m.t.data(), 1, 4);
    TestTensor small = out(ScalarType::Float32, 11);  // 4 x 3 elements needed
    expect_rejected("a mask count beyond the planned bound", kIndex, a, {&small}, "planned for its bound");
  }
  // Errors: out of range (both signs), too many, float index, too small an output.
  for (int64_t bad : std::vector<int64_t>{3, -4, INT64_MAX, INT64_MIN}) {
    TestTensor i = i64s({2}, {0, bad}), y = out();
    Args a;
    a.tensor(x).tensors({nullptr, &i});
    expect_rejected(format("index %lld", static_cast<long long>(bad)), kIndex, a, {&y}, "out of bounds");
  }
  TestTensor i = i64s({1}, {0}), f({1}), y = out();
  Args c;
  c.tensor(x).tensors({&i, &i, &i, &i});
  expect_rejected("4 indices into a 3-D tensor", kIndex, c, {&y});
  Args d;
  d.tensor(x).tensors({&f});
  expect_rejected("f32 index", kIndex, d, {&y});
  TestTensor small = out(ScalarType::Float32, 3);
  Args e;
  e.tensor(x).tensors({&i});
  expect_rejected("index beyond the output capacity", kIndex, e, {&small}, "planned for its bound");
  Args g;
  g.tensor(x).i(0);
  expect_rejected("index with an Int for indices", kIndex, g, {&y});
}

// A [1, 2, 8, 4] KV cache of -1 with v [1, 2, 3, 4] written at positions 2, 3 and 4 of dim 2.
TestTensor fresh_cache() {
  TestTensor c({1, 2, 8, 4});
  for (int64_t i = 0; i < c.numel(); ++i) c.f()[i] = -1;
  return c;
}

void expect_cache(const TestTensor& c, const TestTensor& v, const char* what) {
  bool ok = has_shape(c, {1, 2, 8, 4});
  for (int64_t h = 0; ok && h < 2; ++h)
    for (int64_t t = 0; t < 8; ++t)
      for (int64_t d = 0; d < 4; ++d) {
        const float want = t >= 2 && t <= 4 ? v.f()[(h * 3 + (t - 2)) * 4 + d] : -1.0f;
        ok = ok && c.f()[(h * 8 + t) * 4 + d] == want;
      }
  KILN_EXPECT(ok, "%s: cache contents", what);
}

KILN_TEST(portable_index_put_index_copy) {
  TestTensor v = iota_f32({1, 2, 3, 4}), pos = i64s({3}, {2, 3, -4});
  {
    TestTensor c = fresh_cache(), y = out();
    Args a;
    a.tensor(c).tensors({nullptr, nullptr, &pos}).tensor(v).b(false);
    const Status s = run_portable(kIndexPut, a, {&y});
    KILN_EXPECT(s.is_ok(), "index_put: %s", s.to_string().c_str());
    expect_cache(y, v, "index_put copy");
  }
  {  // in place: the output is self (same Tensor, and a second Tensor over the same bytes)
    TestTensor c = fresh_cache();
    Args a;
    a.tensor(c).tensors({nullptr, nullptr, &pos}).tensor(v).b(false);
    const Status s = run_portable(kIndexPut, a, {&c});
    KILN_EXPECT(s.is_ok(), "index_put in place: %s", s.to_string().c_str());
    expect_cache(c, v, "index_put in place");
    TestTensor c2 = fresh_cache(), alias = c2.alias(0, {1, 2, 8, 4});
    Args b;
    b.tensor(c2).tensors({nullptr, nullptr, &pos}).tensor(v).b(false);
    KILN_EXPECT(run_portable(kIndexPut, b, {&alias}).is_ok(), "index_put into an aliasing tensor");
    expect_cache(c2, v, "index_put aliasing tensor");
    // A partial overlap with self, or an output over the values, is refused.
    TestTensor shifted = c2.alias(1, {1, 2, 8, 4});
    expect_rejected("index_put output overlapping self partially", kIndexPut, b, {&shifted}, "shares memory");
    expect_rejected("index_put output over the values", kIndexPut, b, {&v}, "shares memory");
  }
  {  // accumulate with a duplicate index, broadcast scalar values
    TestTensor x({4}), one(std::vector<int64_t>{}), i = i64s({3}, {1, 1, -1}), y = out();
    one.f()[0] = 2.5f;
    Args a;
    a.tensor(x).tensors({&i}).tensor(one).b(true);
    KILN_EXPECT(run_portable(kIndexPut, a, {&y}).is_ok() && equals_f(y, {0, 5, 0, 2.5f}), "index_put accumulate");
    TestTensor bad = i64s({1}, {4}), v3({3});
    Args b;
    b.tensor(x).tensors({&bad}).tensor(one).b(false);
    expect_rejected("index_put index 4 into [4]", kIndexPut, b, {&y});
    Args c;
    c.tensor(x).tensors({&i}).tensor(v3).b(false);
    KILN_EXPECT(run_portable(kIndexPut, c, {&y}).is_ok(), "index_put [3] values for 3 indices");
    TestTensor v2({2});
    Args d;
    d.tensor(x).tensors({&i}).tensor(v2).b(false);
    expect_rejected("index_put values [2] for 3 indices", kIndexPut, d, {&y});
    TestTensor vi({3}, ScalarType::Int64);
    Args e;
    e.tensor(x).tensors({&i}).tensor(vi).b(false);
    expect_rejected("index_put i64 values into f32", kIndexPut, e, {&y});
  }
  {  // index_copy: the same cache update along dim 2, copied and in place.
    TestTensor c = fresh_cache(), y = out(), at = i64s({3}, {2, 3, 4});
    Args a;
    a.tensor(c).i(2).tensor(at).tensor(v);
    KILN_EXPECT(run_portable(kIndexCopy, a, {&y}).is_ok(), "index_copy");
    expect_cache(y, v, "index_copy");
    KILN_EXPECT(run_portable(kIndexCopy, a, {&c}).is_ok(), "index_copy in place");
    expect_cache(c, v, "index_copy in place");
    for (int64_t bad_index : {8, -1}) {
      TestTensor bad = i64s({3}, {2, 3, bad_index});
      Args b;
      b.tensor(c).i(2).tensor(bad).tensor(v);
      expect_rejected(format("index_copy index %d into 8", int(bad_index)), kIndexCopy, b, {&y});
    }
    Args d;
    d.tensor(c).i(1).tensor(at).tensor(v);
    expect_rejected("index_copy source of the wrong shape", kIndexCopy, d, {&y});
  }
}

KILN_TEST(portable_slice_scatter_index_select_gather) {
  {  // slice_scatter with ATen clamping: start -3 (wraps), end INT64_MAX, step 2.
    TestTensor x({2, 5}), src = iota_f32({2, 2}), y = out();
    Args a;
    a.tensor(x).tensor(src).i(1).i(-3).i(INT64_MAX).i(2);
    const Status s = run_portable(kSliceScatter, a, {&y});
    KILN_EXPECT(s.is_ok() && equals_f(y, {0, 0, 0, 0, 1, 0, 0, 2, 0, 3}), "slice_scatter: %s", s.to_string().c_str());
    KILN_EXPECT(run_portable(kSliceScatter, a, {&x}).is_ok() && equals_f(x, {0, 0, 0, 0, 1, 0, 0, 2, 0, 3}),
                "slice_scatter in place");
    TestTensor src3 = iota_f32({2, 3});
    Args b;
    b.tensor(x).tensor(src3).i(1).i(-3).i(INT64_MAX).i(2);
    expect_rejected("slice_scatter src of the wrong shape", kSliceScatter, b, {&y});
    Args c;
    c.tensor(x).tensor(src).i(1).i(0).i(2).i(0);
    expect_rejected("slice_scatter step 0", kSliceScatter, c, {&y});
    TestTensor empty({2, 0});
    Args d;
    d.tensor(x).tensor(empty).i(1).i(INT64_MIN).i(INT64_MIN).i(1);
    KILN_EXPECT(run_portable(kSliceScatter, d, {&y}).is_ok(), "slice_scatter of an empty slice at INT64_MIN");
  }
  TestTensor x = iota_f32({2, 3}), i = i64s({3}, {2, 0, 2}), y = out();
  Args a;
  a.tensor(x).i(1).tensor(i);
  KILN_EXPECT(run_portable("aten::index_select.default", a, {&y}).is_ok() && equals_f(y, {2, 0, 2, 5, 3, 5}),
              "index_select");
  for (int64_t bad_index : {3, -1}) {
    TestTensor bad = i64s({1}, {bad_index});
    Args b;
    b.tensor(x).i(1).tensor(bad);
    expect_rejected(format("index_select %d of 3 (ATen does not wrap)", int(bad_index)), "aten::index_select.default",
                    b, {&y});
  }
  TestTensor gi = i64s({2, 2}, {2, 0, 2, 1});
  Args g;
  g.tensor(x).i(1).tensor(gi).b(false);
  KILN_EXPECT(run_portable("aten::gather.default", g, {&y}).is_ok() && equals_f(y, {2, 0, 5, 4}), "gather");
  TestTensor gbad = i64s({2, 2}, {0, 0, 0, -1});
  Args h;
  h.tensor(x).i(1).tensor(gbad).b(false);
  expect_rejected("gather -1 (ATen does not wrap)", "aten::gather.default", h, {&y});
  TestTensor gbig = i64s({3, 1}, {0, 0, 0});
  Args k;
  k.tensor(x).i(1).tensor(gbig).b(false);
  expect_rejected("gather index larger than self", "aten::gather.default", k, {&y});
}

}  // namespace
}  // namespace kiln::test
