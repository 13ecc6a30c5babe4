// The portable shape and copy kernels (permute, transpose, slice, select, cat, expand, view,
// squeeze, unsqueeze) against index arithmetic, and the sizes, dims and indices a corrupt program
// may hold.
#include <cstring>
#include <string>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kSlice = "aten::slice.Tensor";
constexpr const char* kSelect = "aten::select.int";
constexpr const char* kView = "aten::view.default";
constexpr const char* kExpand = "aten::expand.default";
constexpr const char* kCat = "aten::cat.default";

KILN_TEST(portable_copy_ops) {
  TestTensor x = TestTensor::random({2, 3, 4});
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({2, 0, 1});
    KILN_EXPECT(run_portable("aten::permute.default", a, {&y}).is_ok() && has_shape(y, {4, 2, 3}), "permute");
    bool ok = true;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) ok &= y.f()[(k * 2 + i) * 3 + j] == x.f()[(i * 3 + j) * 4 + k];
    KILN_EXPECT(ok, "permute values");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).i(-1).i(0);
    KILN_EXPECT(run_portable("aten::transpose.int", a, {&y}).is_ok() && has_shape(y, {4, 3, 2}), "transpose");
    bool ok = true;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) ok &= y.f()[(k * 3 + j) * 2 + i] == x.f()[(i * 3 + j) * 4 + k];
    KILN_EXPECT(ok, "transpose values");
  }
  // slice: (start, end, step) -> expected indices along dim 2 (size 4).
  struct SliceCase {
    bool has_start;
    int64_t start;
    bool has_end;
    int64_t end, step;
    std::vector<int64_t> idx;
  };
  for (const SliceCase& c : std::vector<SliceCase>{{true, 1, true, INT64_MAX, 1, {1, 2, 3}},
                                                   {false, 0, false, 0, 2, {0, 2}},
                                                   {true, -3, true, -1, 1, {1, 2}},
                                                   {true, -100, true, 100, 3, {0, 3}},
                                                   {true, 3, true, 1, 1, {}},
                                                   {true, 5, true, 9, 1, {}}}) {
    TestTensor y = out();
    Args a;
    a.tensor(x).i(-1);
    c.has_start ? a.i(c.start) : a.none();
    c.has_end ? a.i(c.end) : a.none();
    a.i(c.step);
    const Status s = run_portable(kSlice, a, {&y});
    const int64_t len = static_cast<int64_t>(c.idx.size());
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 3, len}), "slice shape %s: %s", describe(y.t).c_str(),
                s.to_string().c_str());
    bool ok = true;
    for (int r = 0; r < 6; ++r)
      for (int64_t j = 0; j < len; ++j) ok &= y.f()[r * len + j] == x.f()[r * 4 + c.idx[j]];
    KILN_EXPECT(ok, "slice values (start %lld)", static_cast<long long>(c.start));
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).i(1).i(-1);
    KILN_EXPECT(run_portable(kSelect, a, {&y}).is_ok() && has_shape(y, {2, 4}), "select");
    bool ok = true;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) ok &= y.f()[i * 4 + k] == x.f()[(i * 3 + 2) * 4 + k];
    KILN_EXPECT(ok, "select values");
    Args bad;
    bad.tensor(x).i(1).i(3);
    expect_rejected("select out of range", kSelect, bad, {&y});
  }
  {
    TestTensor a = TestTensor::random({2, 1, 4}), b = TestTensor::random({2, 2, 4}), empty({0}), y = out();
    Args args;
    args.tensors({&a, &empty, &b}).i(-2);
    KILN_EXPECT(run_portable(kCat, args, {&y}).is_ok() && has_shape(y, {2, 3, 4}), "cat shape %s",
                describe(y.t).c_str());
    bool ok = true;
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 4; ++k) ok &= y.f()[(i * 3 + 0) * 4 + k] == a.f()[i * 4 + k];
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 4; ++k) ok &= y.f()[(i * 3 + 1 + j) * 4 + k] == b.f()[(i * 2 + j) * 4 + k];
    }
    KILN_EXPECT(ok, "cat values");
  }
  {
    TestTensor a = TestTensor::random({3, 1}), y = out();
    Args args;
    args.tensor(a).ints({2, -1, 4}).b(false);
    KILN_EXPECT(run_portable(kExpand, args, {&y}).is_ok() && has_shape(y, {2, 3, 4}), "expand");
    bool ok = true;
    for (int i = 0; i < 24; ++i) ok &= y.f()[i] == a.f()[(i / 4) % 3];
    KILN_EXPECT(ok, "expand values");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({-1, 6});
    KILN_EXPECT(run_portable(kView, a, {&y}).is_ok() && has_shape(y, {4, 6}) && std::memcmp(y.f(), x.f(), 96) == 0,
                "view");
    Args bad;
    bad.tensor(x).ints({5, -1});
    expect_rejected("view bad shape", kView, bad, {&y});
    TestTensor one = TestTensor::random({2, 1, 3, 1});
    Args sq;
    sq.tensor(one).ints({1, -1, 0});
    KILN_EXPECT(run_portable("aten::squeeze.dims", sq, {&y}).is_ok() && has_shape(y, {2, 3}), "squeeze.dims");
    Args us;
    us.tensor(x).i(-1);
    KILN_EXPECT(run_portable("aten::unsqueeze.default", us, {&y}).is_ok() && has_shape(y, {2, 3, 4, 1}), "unsqueeze");
  }
  // Un-normalized slice and select arguments (dynamic shapes): clamp / wrap once like ATen.
  {
    TestTensor z = iota_f32({2, 5}), y = out();
    Args a;
    a.tensor(z).i(1).i(-2).i(INT64_MAX).i(1);
    KILN_EXPECT(run_portable(kSlice, a, {&y}).is_ok() && equals_f(y, {3, 4, 8, 9}), "slice [-2:INT64_MAX]");
    Args b;
    b.tensor(z).i(1).i(-100).i(-4).i(1);
    KILN_EXPECT(run_portable(kSlice, b, {&y}).is_ok() && equals_f(y, {0, 5}), "slice [-100:-4]");
    Args c;
    c.tensor(z).i(1).i(7).i(3).i(1);
    KILN_EXPECT(run_portable(kSlice, c, {&y}).is_ok() && has_shape(y, {2, 0}), "slice [7:3] is empty");
    Args d;
    d.tensor(z).i(1).i(-1);
    KILN_EXPECT(run_portable(kSelect, d, {&y}).is_ok() && equals_f(y, {4, 9}), "select -1");
    Args e;
    e.tensor(z).i(1).i(-6);
    expect_rejected("select -6 of 5", kSelect, e, {&y});
  }
}

// Sizes, dims and indices from a corrupt file: each a KernelFailure (or a defined result), never
// undefined behaviour, an out-of-bounds access or an absurdly long loop.
KILN_TEST(portable_shape_ops_hostile_arguments) {
  TestTensor x = TestTensor::random({2, 3, 4});
  // view: products of file sizes, -1 inference.
  for (auto sz : std::vector<std::vector<int64_t>>{{kBig, kBig},
                                                   {-1, kBig},
                                                   {kHuge, kHuge, 0},
                                                   {0, kHuge, kHuge},
                                                   {-1, 0},
                                                   {-1, -1},
                                                   {-2, 12},
                                                   {INT64_MIN, 1},
                                                   {1, 1, 1, 1, 1, 1, 1, 1, 24}}) {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints(sz);
    expect_rejected("view " + shape_str(sz), kView, a, {&y});
  }
  {
    // An empty input may take a zero-sized shape, but not one whose other sizes overflow.
    TestTensor e({0, 3}), y = out();
    Args ok;
    ok.tensor(e).ints({3, 0, 5});
    KILN_EXPECT(run_portable(kView, ok, {&y}).is_ok() && has_shape(y, {3, 0, 5}), "view of empty");
    Args bad;
    bad.tensor(e).ints({kHuge, 0, kHuge});
    expect_rejected("view [2^40, 0, 2^40]", kView, bad, {&y});
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).value(misaligned_ints());
    expect_rejected("view with a misaligned size list", kView, a, {&y}, "misaligned");
  }
  {
    // expand: sizes from the file.
    TestTensor a = TestTensor::random({3, 1});
    for (auto sz : std::vector<std::vector<int64_t>>{{kBig, 3, 4},
                                                     {kHuge, kHuge, 3, 4},
                                                     {kHuge, 0, 3, kHuge},
                                                     {-1, 3, 4},
                                                     {3, kBig},
                                                     {3, -2},
                                                     {4, 1},
                                                     {1, 1, 1, 1, 1, 1, 1, 3, 4}}) {
      TestTensor y = out();
      Args args;
      args.tensor(a).ints(sz).b(false);
      expect_rejected("expand to " + shape_str(sz), kExpand, args, {&y});
    }
    // A huge size is fine next to a zero one: no elements.
    TestTensor y = out();
    Args args;
    args.tensor(a).ints({0, 3, kHuge}).b(false);
    const Status s = run_portable(kExpand, args, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {0, 3, kHuge}), "expand [3, 1] to [0, 3, 2^40]: %s", s.to_string().c_str());
  }
  // slice: start/end/step anywhere in int64.
  struct SliceCase {
    int64_t dim, start, end, step;
    std::vector<int64_t> idx;  // expected indices along the last dim (size 4), empty = empty result
    bool ok;
  };
  for (const SliceCase& c : std::vector<SliceCase>{{-1, 0, kBig, kBig, {0}, true},
                                                   {-1, 1, kBig, kBig, {1}, true},
                                                   {-1, INT64_MIN, kBig, 2, {0, 2}, true},
                                                   {-1, INT64_MIN, INT64_MIN, 1, {}, true},
                                                   {-1, kBig, INT64_MIN, 1, {}, true},
                                                   {-1, -1, kBig, kBig - 1, {3}, true},
                                                   {-1, 0, 4, INT64_MIN, {}, false},
                                                   {-1, 0, 4, 0, {}, false},
                                                   {kBig, 0, 4, 1, {}, false},
                                                   {INT64_MIN, 0, 4, 1, {}, false}}) {
    TestTensor y = out();
    Args a;
    a.tensor(x).i(c.dim).i(c.start).i(c.end).i(c.step);
    if (!c.ok) {
      expect_rejected(format("slice dim %lld step %lld", (long long)c.dim, (long long)c.step), kSlice, a, {&y});
      continue;
    }
    const Status s = run_portable(kSlice, a, {&y});
    const int64_t len = static_cast<int64_t>(c.idx.size());
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 3, len}), "slice (%lld, %lld, %lld): %s %s", (long long)c.start,
                (long long)c.end, (long long)c.step, s.to_string().c_str(), describe(y.t).c_str());
    bool ok = s.is_ok();
    for (int r = 0; ok && r < 6; ++r)
      for (int64_t j = 0; j < len; ++j) ok &= y.f()[r * len + j] == x.f()[r * 4 + c.idx[j]];
    KILN_EXPECT(ok, "slice values (%lld, %lld, %lld)", (long long)c.start, (long long)c.end, (long long)c.step);
  }
  // select, squeeze, unsqueeze, transpose: dims and indices.
  for (int64_t v : {kBig, INT64_MIN, int64_t{3}, int64_t{-4}}) {
    TestTensor y = out();
    Args sel;
    sel.tensor(x).i(v).i(0);
    expect_rejected(format("select dim %lld", (long long)v), kSelect, sel, {&y});
    Args idx;
    idx.tensor(x).i(0).i(v == 3 ? 2 : v);
    if (v != 3) expect_rejected(format("select index %lld", (long long)v), kSelect, idx, {&y});
    Args sq;
    sq.tensor(x).ints({0, v});
    expect_rejected(format("squeeze dim %lld", (long long)v), "aten::squeeze.dims", sq, {&y});
    Args us;
    us.tensor(x).i(v == 3 ? 4 : v == -4 ? -5 : v);
    expect_rejected(format("unsqueeze dim %lld", (long long)v), "aten::unsqueeze.default", us, {&y});
    Args tr;
    tr.tensor(x).i(0).i(v);
    expect_rejected(format("transpose dim %lld", (long long)v), "aten::transpose.int", tr, {&y});
  }
  for (auto dims :
       std::vector<std::vector<int64_t>>{{0, 1, 1}, {0, 1}, {0, 1, 2, 3}, {0, 1, -1 - 3}, {2, -1, 0}, {kBig, 0, 1}}) {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints(dims);
    expect_rejected("permute " + shape_str(dims), "aten::permute.default", a, {&y});
  }
}

// cat's dim, its list and sizes that add up past int64; outputs that alias an argument.
KILN_TEST(portable_cat_expand_hostile_arguments) {
  TestTensor a = TestTensor::random({2, 3}), y = out();
  Args empty;
  empty.tensors({}).i(0);
  expect_rejected("cat of an empty list", kCat, empty, {&y});
  for (int64_t d : {kBig, INT64_MIN, int64_t{2}, int64_t{-3}}) {
    Args args;
    args.tensors({&a, &a}).i(d);
    expect_rejected(format("cat dim %lld", (long long)d), kCat, args, {&y});
  }
  TestTensor big = TestTensor::with_sizes({int64_t{1} << 59, 0}, ScalarType::Float32, 64);
  Args many;
  many.tensors(std::vector<TestTensor*>(16, &big)).i(0);
  expect_rejected("cat whose size adds up past int64", kCat, many, {&y});
  // Many empty tensors and one real one: cheap, and correct.
  TestTensor e({2, 0});
  std::vector<TestTensor*> list(1000, &e);
  list.push_back(&a);
  Args lots;
  lots.tensors(list).i(1);
  KILN_EXPECT(run_portable(kCat, lots, {&y}).is_ok() && has_shape(y, {2, 3}) && std::memcmp(y.f(), a.f(), 24) == 0,
              "cat with many empty tensors");
  // Sizes that multiply past int64 (possible next to a zero size), or more bytes than the storage holds.
  TestTensor overflow = TestTensor::with_sizes({kHuge, kHuge, 0}, ScalarType::Float32, 64);
  TestTensor unbacked = TestTensor::with_sizes({4, 4}, ScalarType::Float32, 16);
  for (TestTensor* t : {&overflow, &unbacked}) {
    Args cat;
    cat.tensors({t}).i(0);
    expect_rejected("cat of " + describe(t->t), kCat, cat, {&y});
  }
  // Outputs that alias an argument (the memory planner never does this).
  TestTensor p = TestTensor::random({2, 3}), q = TestTensor::random({2, 3});
  Args into;
  into.tensors({&p, &q}).i(0);
  expect_rejected("cat into one of its inputs", kCat, into, {&p}, "shares memory");
  TestTensor half = q.alias(3, {3});  // the second half of q's bytes
  Args ex;
  ex.tensor(half).ints({2, 3}).b(false);
  expect_rejected("expand into overlapping memory", kExpand, ex, {&q}, "shares memory");
}

}  // namespace
}  // namespace kiln::test
