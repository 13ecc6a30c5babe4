// The portable factories (arange, full, full_like, scalar_tensor) and _to_copy against exact values,
// with the sizes, steps and dtype codes a corrupt program may hold.
#include <cmath>
#include <cstring>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kArange = "aten::arange.start_step";
constexpr const char* kFull = "aten::full.default";
constexpr const char* kToCopy = "aten::_to_copy.default";

KILN_TEST(portable_factories) {
  {
    TestTensor y = out(ScalarType::Int64);
    Args a;
    a.i(0).i(10).i(3).none().none().none().none();
    KILN_EXPECT(run_portable(kArange, a, {&y}).is_ok() && equals_i(y, {0, 3, 6, 9}), "arange(0, 10, 3)");
    Args b;
    b.i(5).i(-1).i(-2).i(static_cast<int64_t>(ScalarType::Int64)).none().none().none();
    KILN_EXPECT(run_portable(kArange, b, {&y}).is_ok() && equals_i(y, {5, 3, 1}), "arange(5, -1, -2)");
    TestTensor f = out();
    Args c;
    c.d(0.0).d(1.0).d(0.25).none().none().none().none();
    KILN_EXPECT(run_portable(kArange, c, {&f}).is_ok() && equals_f(f, {0, 0.25f, 0.5f, 0.75f}), "arange(0., 1., .25)");
    Args d;
    d.i(0).i(4).none().none().none().none();
    KILN_EXPECT(run_portable("aten::arange.start", d, {&f}).is_ok() && equals_f(f, {0, 1, 2, 3}), "arange.start f32");
    // Errors: step 0, wrong direction, NaN, huge sizes, a dtype that is not the output's.
    for (auto args : std::vector<std::vector<double>>{{0, 10, 0}, {0, 10, -1}, {0, NAN, 1}, {0, 1e300, 1e-300}}) {
      Args e;
      e.d(args[0]).d(args[1]).d(args[2]).none().none().none().none();
      expect_rejected(format("arange(%g, %g, %g)", args[0], args[1], args[2]), kArange, e, {&f});
    }
    Args g;
    g.i(INT64_MIN).i(INT64_MAX).i(1).none().none().none().none();
    expect_rejected("arange(INT64_MIN, INT64_MAX)", kArange, g, {&y});
    Args h;
    h.i(0).i(INT64_MAX).i(1).none().none().none().none();
    expect_rejected("arange(0, INT64_MAX) beyond the capacity", kArange, h, {&y});
    Args k;
    k.i(0).i(3).i(1).i(static_cast<int64_t>(ScalarType::Float32)).none().none().none();
    expect_rejected("arange dtype f32 into an i64 output", kArange, k, {&y});
  }
  TestTensor y = out();
  Args a;
  a.ints({2, 3}).d(1.5).none().none().none().none();
  KILN_EXPECT(run_portable(kFull, a, {&y}).is_ok() && equals_f(y, {1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}), "full");
  for (auto sizes :
       std::vector<std::vector<int64_t>>{{kBig, kBig}, {-1}, {1 << 30, 1 << 30}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    Args b;
    b.ints(sizes).d(1.0).none().none().none().none();
    expect_rejected("full " + shape_str(sizes), kFull, b, {&y});
  }
  TestTensor yi = out(ScalarType::Int64);
  Args c;
  c.ints({2}).i(INT64_MIN + 1).none().none().none().none();
  KILN_EXPECT(run_portable(kFull, c, {&yi}).is_ok() && equals_i(yi, {INT64_MIN + 1, INT64_MIN + 1}), "full i64 exact");
  TestTensor x({3, 1}, ScalarType::Int64), yb = out(ScalarType::Bool);
  Args d;
  d.tensor(x).i(2).none().none().none().none().none();
  KILN_EXPECT(
      run_portable("aten::full_like.default", d, {&yb}).is_ok() && has_shape(yb, {3, 1}) && equals_b(yb, {1, 1, 1}),
      "full_like bool");
  Args e;
  e.d(-2.0).none().none().none().none();
  KILN_EXPECT(run_portable("aten::scalar_tensor.default", e, {&y}).is_ok() && has_shape(y, {}) && y.f()[0] == -2.0f,
              "scalar_tensor");
}

// _to_copy: float -> integer conversions saturate (NaN -> 0), never undefined behaviour.
KILN_TEST(portable_to_copy) {
  {
    TestTensor f({4}), y = out(ScalarType::Int32);
    const float vals[] = {1.9f, -2.7f, 1e20f, NAN};
    std::memcpy(f.f(), vals, sizeof vals);
    Args a;
    a.tensor(f).i(static_cast<int64_t>(ScalarType::Int32)).none().none().none().b(false).none();
    KILN_EXPECT(run_portable(kToCopy, a, {&y}).is_ok(), "_to_copy");
    const int32_t* o = y.t.data_as<int32_t>();
    KILN_EXPECT(o[0] == 1 && o[1] == -2 && o[2] == INT32_MAX && o[3] == 0, "_to_copy values %d %d %d %d", o[0], o[1],
                o[2], o[3]);
  }
  const double vals[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 9.3e18, -9.3e18, 300.7, -200.2, 2.5};
  TestTensor f({10}, ScalarType::Float64);
  std::memcpy(f.t.data(), vals, sizeof vals);
  struct Want {
    ScalarType dt;
    std::vector<int64_t> v;
  };
  for (const Want& w : std::vector<Want>{
           {ScalarType::Int64, {0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 300, -200, 2}},
           {ScalarType::Int32, {0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 300, -200, 2}},
           {ScalarType::Int8, {0, 127, -128, 127, -128, 127, -128, 127, -128, 2}},
           {ScalarType::UInt8, {0, 255, 0, 255, 0, 255, 0, 255, 0, 2}},
           {ScalarType::Bool, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}}) {
    TestTensor y = out(w.dt);
    Args a;
    a.tensor(f).i(static_cast<int64_t>(w.dt)).none().none().none().b(false).none();
    const Status s = run_portable(kToCopy, a, {&y});
    KILN_EXPECT(s.is_ok(), "_to_copy f64 -> %s: %s", scalar_type_name(w.dt), s.to_string().c_str());
    for (int i = 0; s.is_ok() && i < 10; ++i) {
      int64_t got = 0;
      switch (w.dt) {
        case ScalarType::Int64: got = y.i64()[i]; break;
        case ScalarType::Int32: got = y.t.data_as<int32_t>()[i]; break;
        case ScalarType::Int8: got = y.t.data_as<int8_t>()[i]; break;
        default: got = y.t.data_as<uint8_t>()[i]; break;
      }
      KILN_EXPECT(got == w.v[i], "_to_copy f64 -> %s [%d]: got %lld, want %lld", scalar_type_name(w.dt), i,
                  (long long)got, (long long)w.v[i]);
    }
  }
  for (int64_t code : {kBig, INT64_MIN, int64_t{-1}, int64_t{kNumScalarTypes}}) {
    TestTensor y = out();
    Args a;
    a.tensor(f).i(code).none().none().none().b(false).none();
    expect_rejected(format("_to_copy dtype %lld", (long long)code), kToCopy, a, {&y}, "not a dtype code");
  }
  {
    // Bool bytes that are neither 0 nor 1 (a corrupt constant) read as true.
    TestTensor b({3}, ScalarType::Bool), y = out(ScalarType::Int64);
    const uint8_t bytes[] = {0, 2, 255};
    std::memcpy(b.t.data(), bytes, 3);
    Args a;
    a.tensor(b).i(static_cast<int64_t>(ScalarType::Int64)).none().none().none().b(false).none();
    KILN_EXPECT(run_portable(kToCopy, a, {&y}).is_ok() && y.i64()[0] == 0 && y.i64()[1] == 1 && y.i64()[2] == 1,
                "_to_copy of odd bool bytes");
  }
}

}  // namespace
}  // namespace kiln::test
