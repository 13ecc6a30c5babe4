// The portable comparisons, logical and bitwise operators, maximum/minimum, where and masked_fill
// against exact values, and the arguments a corrupt program may hold (odd bool bytes, shapes that
// do not broadcast).
#include <cmath>
#include <cstring>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

KILN_TEST(portable_comparisons) {
  TestTensor a = i64s({2, 3}, {1, 2, 3, 4, 5, 6}), b = i64s({3}, {2, 2, 7}), y = out(ScalarType::Bool);
  struct {
    const char* op;
    std::vector<int> want;
  } cases[] = {{"aten::eq.Tensor", {0, 1, 0, 0, 0, 0}}, {"aten::ne.Tensor", {1, 0, 1, 1, 1, 1}},
               {"aten::lt.Tensor", {1, 0, 1, 0, 0, 1}}, {"aten::le.Tensor", {1, 1, 1, 0, 0, 1}},
               {"aten::gt.Tensor", {0, 0, 0, 1, 1, 0}}, {"aten::ge.Tensor", {0, 1, 0, 1, 1, 0}}};
  for (auto& c : cases) {
    Args args;
    args.tensor(a).tensor(b);
    KILN_EXPECT(run_portable(c.op, args, {&y}).is_ok() && has_shape(y, {2, 3}) && equals_b(y, c.want), "%s", c.op);
  }
  {  // mixed i32 vs f32 compares in f32; f32 vs a Double scalar rounds the scalar to f32
    TestTensor i({3}, ScalarType::Int32), f({3});
    i.t.data_as<int32_t>()[0] = 1, i.t.data_as<int32_t>()[1] = 2, i.t.data_as<int32_t>()[2] = 3;
    f.f()[0] = 1.5f, f.f()[1] = 2.0f, f.f()[2] = NAN;
    Args m;
    m.tensor(i).tensor(f);
    KILN_EXPECT(run_portable("aten::le.Tensor", m, {&y}).is_ok() && equals_b(y, {1, 1, 0}), "le i32 vs f32");
    f.f()[0] = 0.1f;
    Args s;
    s.tensor(f).d(0.1);
    KILN_EXPECT(run_portable("aten::eq.Scalar", s, {&y}).is_ok() && equals_b(y, {1, 0, 0}), "eq.Scalar f32 vs 0.1");
    Args t;
    t.tensor(i).d(1.5);
    KILN_EXPECT(run_portable("aten::gt.Scalar", t, {&y}).is_ok() && equals_b(y, {0, 1, 1}), "gt.Scalar i32 vs 1.5");
    Args u;
    u.tensor(a).i(INT64_MAX);
    KILN_EXPECT(run_portable("aten::lt.Scalar", u, {&y}).is_ok() && equals_b(y, {1, 1, 1, 1, 1, 1}),
                "lt.Scalar i64 vs INT64_MAX");
    TestTensor yf = out();
    Args w;
    w.tensor(a).tensor(b);
    expect_rejected("eq into an f32 output", "aten::eq.Tensor", w, {&yf});
    TestTensor c = i64s({2}, {1, 2});
    Args x;
    x.tensor(a).tensor(c);
    expect_rejected("eq [2,3] with [2]", "aten::eq.Tensor", x, {&y});
  }
  {
    TestTensor p({3}), q({3}), y2 = out();
    p.f()[0] = 1, p.f()[1] = NAN, p.f()[2] = -1;
    q.f()[0] = 2, q.f()[1] = 0, q.f()[2] = NAN;
    Args m;
    m.tensor(p).tensor(q);
    KILN_EXPECT(run_portable("aten::maximum.default", m, {&y2}).is_ok() && equals_f(y2, {2, NAN, NAN}),
                "maximum propagates NaN");
    KILN_EXPECT(run_portable("aten::minimum.default", m, {&y2}).is_ok() && equals_f(y2, {1, NAN, NAN}),
                "minimum propagates NaN");
    Args n;
    n.tensor(p).tensor(a);
    expect_rejected("maximum of f32 and i64 (the exporter casts)", "aten::maximum.default", n, {&y2});
    Args l;
    l.tensor(p);
    KILN_EXPECT(run_portable("aten::logical_not.default", l, {&y}).is_ok() && equals_b(y, {0, 0, 0}),
                "logical_not f32 (NaN is true)");
    TestTensor m1({3}, ScalarType::Bool), m2({3}, ScalarType::Bool);
    m1.t.data_as<uint8_t>()[0] = 1, m1.t.data_as<uint8_t>()[1] = 7;  // a corrupt bool byte reads as true
    m2.t.data_as<uint8_t>()[1] = 1;
    Args ba;
    ba.tensor(m1).tensor(m2);
    KILN_EXPECT(run_portable("aten::bitwise_and.Tensor", ba, {&y}).is_ok() && equals_b(y, {0, 1, 0}),
                "bitwise_and bool");
    KILN_EXPECT(run_portable("aten::logical_or.default", ba, {&y}).is_ok() && equals_b(y, {1, 1, 0}), "logical_or");
    KILN_EXPECT(run_portable("aten::logical_xor.default", ba, {&y}).is_ok() && equals_b(y, {1, 0, 0}), "logical_xor");
    Args bn;
    bn.tensor(m1);
    KILN_EXPECT(run_portable("aten::bitwise_not.default", bn, {&y}).is_ok() && equals_b(y, {0, 0, 1}),
                "bitwise_not bool");
    TestTensor yi = out(ScalarType::Int64);
    Args bi;
    bi.tensor(a);
    KILN_EXPECT(run_portable("aten::bitwise_not.default", bi, {&yi}).is_ok() && equals_i(yi, {-2, -3, -4, -5, -6, -7}),
                "bitwise_not i64");
    Args bf;
    bf.tensor(p);
    expect_rejected("bitwise_not f32", "aten::bitwise_not.default", bf, {&y2});
  }
}

KILN_TEST(portable_where_masked_fill) {
  {
    TestTensor cond({2, 1}, ScalarType::Bool), a = TestTensor::random({3}), b = TestTensor::random({}), y = out();
    cond.t.data_as<bool>()[0] = true;
    Args args;
    args.tensor(cond).tensor(a).tensor(b);
    KILN_EXPECT(run_portable("aten::where.self", args, {&y}).is_ok() && has_shape(y, {2, 3}), "where");
    bool ok = true;
    for (int j = 0; j < 3; ++j) ok &= y.f()[j] == a.f()[j] && y.f()[3 + j] == b.f()[0];
    KILN_EXPECT(ok, "where values");
    Args mf;
    mf.tensor(a).tensor(cond).d(-7.0);
    KILN_EXPECT(run_portable("aten::masked_fill.Scalar", mf, {&y}).is_ok() && has_shape(y, {2, 3}), "masked_fill");
    ok = true;
    for (int j = 0; j < 3; ++j) ok &= y.f()[j] == -7.0f && y.f()[3 + j] == a.f()[j];
    KILN_EXPECT(ok, "masked_fill values");
  }
  {
    // Bool tensors whose bytes are neither 0 nor 1 (a corrupt constant) read as true.
    TestTensor b({3}, ScalarType::Bool);
    const uint8_t bytes[] = {0, 2, 255};
    std::memcpy(b.t.data(), bytes, 3);
    TestTensor x = TestTensor::random({3}), o = TestTensor::random({3}), fy = out();
    Args w;
    w.tensor(b).tensor(x).tensor(o);
    KILN_EXPECT(run_portable("aten::where.self", w, {&fy}).is_ok() && fy.f()[0] == o.f()[0] && fy.f()[1] == x.f()[1] &&
                    fy.f()[2] == x.f()[2],
                "where with odd bool bytes");
    Args m;
    m.tensor(x).tensor(b).d(5.0);
    KILN_EXPECT(
        run_portable("aten::masked_fill.Scalar", m, {&fy}).is_ok() && fy.f()[0] == x.f()[0] && fy.f()[2] == 5.0f,
        "masked_fill with odd bool bytes");
    TestTensor by = out(ScalarType::Bool);
    Args mb;  // masked_fill of a bool tensor copies the odd bytes as proper bools
    mb.tensor(b).tensor(b).d(0.0);
    KILN_EXPECT(run_portable("aten::masked_fill.Scalar", mb, {&by}).is_ok(), "masked_fill bool");
  }
  {
    TestTensor xi({4}, ScalarType::Int32), yi = out(ScalarType::Int32), mask({4}, ScalarType::Bool);
    const int32_t vi[] = {-5, 0, 7, INT32_MAX};
    std::memcpy(xi.t.data(), vi, sizeof vi);
    mask.t.data_as<uint8_t>()[1] = 1;
    Args m;
    m.tensor(xi).tensor(mask).d(-INFINITY);
    KILN_EXPECT(run_portable("aten::masked_fill.Scalar", m, {&yi}).is_ok() && yi.t.data_as<int32_t>()[1] == INT32_MIN,
                "masked_fill i32 -inf saturates");
  }
  {
    TestTensor a = TestTensor::random({2, 3}), cond({3, 3}, ScalarType::Bool), y = out();
    Args w;
    w.tensor(cond).tensor(a).tensor(a);
    expect_rejected("where [3,3] with [2,3]", "aten::where.self", w, {&y});
    Args m;
    m.tensor(a).tensor(cond).d(1.0);
    expect_rejected("masked_fill [2,3] with [3,3]", "aten::masked_fill.Scalar", m, {&y});
  }
}

}  // namespace
}  // namespace kiln::test
