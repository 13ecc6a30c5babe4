// The portable padding, resizing and reordering kernels (constant_pad_nd, upsample_nearest2d,
// upsample_bilinear2d, flip, roll, tril, triu), logsumexp, clamp.Tensor, fmod, sort, cumprod,
// var.correction and group_norm: values at the limits of their scalar arguments against index
// arithmetic, and the arguments a corrupt program may hold.
// (Ordinary values are compared with eager PyTorch in tests/test_operators.py.)
#include <cmath>
#include <limits>
#include <vector>

#include "reference.h"

namespace kiln::test {
namespace {

constexpr const char* kPad = "aten::constant_pad_nd.default";
constexpr const char* kNearest = "aten::upsample_nearest2d.default";
constexpr const char* kBilinear = "aten::upsample_bilinear2d.default";
constexpr const char* kFlip = "aten::flip.default";
constexpr const char* kRoll = "aten::roll.default";
constexpr const char* kTril = "aten::tril.default";
constexpr const char* kTriu = "aten::triu.default";
constexpr const char* kLogsumexp = "aten::logsumexp.default";
constexpr const char* kClampTensor = "aten::clamp.Tensor";
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

KILN_TEST(portable_constant_pad_nd) {
  TestTensor x = iota_f32({2, 3});
  {
    // Pads that cancel out at the limits of int64: one column, whose index maps outside the input.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({kMin, kBig, 0, 0}).d(2.5);
    const Status s = run_portable(kPad, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 2}) && equals_f(y, {2.5f, 2.5f, 2.5f, 2.5f}), "pad [min, max]: %s %s",
                s.to_string().c_str(), describe(y.t).c_str());
  }
  {
    // Crop one row and one column on one side, pad on the other.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({-1, 1, 1, -1}).d(-1);
    const Status s = run_portable(kPad, a, {&y});
    KILN_EXPECT(s.is_ok() && has_shape(y, {2, 3}) && equals_f(y, {-1, -1, -1, 1, 2, -1}), "pad crop: %s",
                s.to_string().c_str());
  }
  {
    // Cropped to nothing.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({-3, 0});
    a.d(0);
    KILN_EXPECT(run_portable(kPad, a, {&y}).is_ok() && has_shape(y, {2, 0}), "pad to empty");
  }
  {
    TestTensor n = i64s({2}, {5, -6});
    TestTensor y = out(ScalarType::Int64);
    Args a;
    a.tensor(n).ints({1, 2}).d(1e30);  // saturates, as a cast of the value would in a float program
    KILN_EXPECT(run_portable(kPad, a, {&y}).is_ok() && equals_i(y, {INT64_MAX, 5, -6, INT64_MAX, INT64_MAX}),
                "pad i64 with a value beyond its range");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({1});
    a.d(0);
    expect_rejected("pad of odd length", kPad, a, {&y}, "even length");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({1, 1, 1, 1, 1, 1});
    a.d(0);
    expect_rejected("pad of three dims of a 2-D tensor", kPad, a, {&y}, "at most twice the rank");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({kBig, kBig}).d(0);
    expect_rejected("pad overflowing int64", kPad, a, {&y}, "padded size overflows");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({-2, -2}).d(0);
    expect_rejected("crop past the size", kPad, a, {&y}, "negative");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({kHuge, kHuge, kHuge, kHuge}).d(0);
    expect_rejected("pad to a huge shape", kPad, a, {&y}, "output shape");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).value(misaligned_ints()).d(0);
    expect_rejected("misaligned pad", kPad, a, {&y}, "misaligned");
  }
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({1, 1}).tensor(TestTensor({1}));
    expect_rejected("tensor value", kPad, a, {&y}, "must be a Scalar");
  }
}

KILN_TEST(portable_upsample) {
  TestTensor x = iota_f32({1, 2, 3, 4});
  {
    // Nearest: out = in copies, out = 2 in halves the index, else floor(dst * in / out) in float.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({6, 3}).none().none();
    KILN_EXPECT(run_portable(kNearest, a, {&y}).is_ok() && has_shape(y, {1, 2, 6, 3}), "nearest shape");
    bool ok = true;
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 3; ++j) {
          const int sj = static_cast<int>(std::floor(j * (4.0f / 3.0f)));
          ok &= y.f()[(c * 6 + i) * 3 + j] == x.f()[(c * 3 + i / 2) * 4 + sj];
        }
    KILN_EXPECT(ok, "nearest values");
  }
  // Scales a corrupt file may hold: tiny (1 / scale is inf), NaN, negative or zero (ignored, as ATen
  // ignores scales <= 0), huge: every index stays inside the input.
  for (double scale : {1e-300, std::nan(""), -1.0, 0.0, 1e300}) {
    for (const char* op : {kNearest, kBilinear}) {
      TestTensor y = out();
      Args a;
      a.tensor(x).ints({5, 7});
      if (op == kBilinear) a.b(false);
      a.d(scale).d(scale);
      const Status s = run_portable(op, a, {&y});
      bool in_range = s.is_ok() && has_shape(y, {1, 2, 5, 7});
      for (int64_t i = 0; in_range && i < y.numel(); ++i) in_range = y.f()[i] >= 0 && y.f()[i] <= 23;
      KILN_EXPECT(in_range, "%s with scale %g: %s", op, scale, s.to_string().c_str());
    }
  }
  {
    // Bilinear, align_corners: the corners are the input's corners, the middle the mean of its neighbours.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({5, 7}).b(true).none().none();
    KILN_EXPECT(run_portable(kBilinear, a, {&y}).is_ok() && has_shape(y, {1, 2, 5, 7}), "bilinear shape");
    KILN_EXPECT(
        y.f()[0] == 0 && y.f()[6] == 3 && y.f()[28] == 8 && y.f()[34] == 11 && std::abs(y.f()[7 + 1] - 2.5f) < 1e-6f,
        "bilinear align_corners values %g %g %g %g %g", y.f()[0], y.f()[6], y.f()[28], y.f()[34], y.f()[8]);
  }
  for (const char* op : {kNearest, kBilinear}) {
    auto args = [&](TestTensor& in, std::vector<int64_t> size) {
      Args a;
      a.tensor(in).ints(std::move(size));
      if (op == kBilinear) a.b(false);
      a.none().none();
      return a;
    };
    TestTensor y = out();
    expect_rejected(std::string(op) + " output 0", op, args(x, {0, 3}), {&y}, "greater than 0");
    expect_rejected(std::string(op) + " output -1", op, args(x, {3, -1}), {&y}, "greater than 0");
    expect_rejected(std::string(op) + " huge output", op, args(x, {kHuge, kHuge}), {&y}, "output shape");
    expect_rejected(std::string(op) + " one size", op, args(x, {3}), {&y}, "2 elements");
    TestTensor flat = iota_f32({2, 3, 4});
    expect_rejected(std::string(op) + " 3-D input", op, args(flat, {3, 3}), {&y}, "4-D");
    TestTensor empty({1, 2, 0, 4});
    expect_rejected(std::string(op) + " empty input plane", op, args(empty, {3, 3}), {&y}, "greater than 0");
  }
  {
    TestTensor n = i64s({1, 1, 1, 2}, {4, 5});
    TestTensor y = out(ScalarType::Int64);
    Args a;
    a.tensor(n).ints({2, 3}).b(false).none().none();
    KILN_EXPECT(run_portable(kBilinear, a, {&y}).code() == Error::MissingKernel, "bilinear i64 has no kernel");
    const Status s = run_portable(kBilinear, {ScalarType::Float32}, a, {&y});
    KILN_EXPECT(s.code() == Error::KernelFailure && s.message().find("f32 or f64") != std::string::npos,
                "bilinear kernel refuses i64: %s", s.to_string().c_str());
    Args b;
    b.tensor(n).ints({2, 3}).none().none();
    KILN_EXPECT(run_portable(kNearest, b, {&y}).is_ok() && equals_i(y, {4, 4, 5, 4, 4, 5}), "nearest i64");
  }
}

KILN_TEST(portable_flip_roll) {
  TestTensor x = iota_f32({2, 3});
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({-1, 0});
    KILN_EXPECT(run_portable(kFlip, a, {&y}).is_ok() && equals_f(y, {5, 4, 3, 2, 1, 0}), "flip both dims");
  }
  {
    // Shifts at the limits of int64, reduced modulo the size: INT64_MIN mod 3 = 1, INT64_MAX mod 2 = 1.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({kMin, kBig}).ints({1, 0});
    const Status s = run_portable(kRoll, a, {&y});
    KILN_EXPECT(s.is_ok() && equals_f(y, {5, 3, 4, 2, 0, 1}), "roll by int64 limits: %s", s.to_string().c_str());
  }
  {
    // A dim listed twice rolls by the sum; no dims rolls the flattened tensor.
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({1, 1}).ints({1, -1});
    KILN_EXPECT(run_portable(kRoll, a, {&y}).is_ok() && equals_f(y, {1, 2, 0, 4, 5, 3}), "roll a dim twice");
    TestTensor z = out();
    Args b;
    b.tensor(x).ints({-7}).ints({});
    KILN_EXPECT(run_portable(kRoll, b, {&z}).is_ok() && equals_f(z, {1, 2, 3, 4, 5, 0}), "roll flattened");
  }
  TestTensor y = out();
  {
    Args a;
    a.tensor(x).ints({1, -1});
    expect_rejected("flip a dim twice", kFlip, a, {&y}, "duplicates");
  }
  {
    Args a;
    a.tensor(x).ints({kBig});
    expect_rejected("flip dim out of range", kFlip, a, {&y}, "out of range");
  }
  {
    Args a;
    a.tensor(x).ints({1, 2}).ints({0});
    expect_rejected("roll shifts and dims of different lengths", kRoll, a, {&y}, "same length");
  }
  {
    Args a;
    a.tensor(x).ints({1, 2}).ints({});
    expect_rejected("roll flattened by two shifts", kRoll, a, {&y}, "one element");
  }
  {
    Args a;
    a.tensor(x).ints({1}).ints({kMin});
    expect_rejected("roll dim out of range", kRoll, a, {&y}, "out of range");
  }
  {
    Args a;
    a.tensor(x).ints({1}).value(misaligned_ints());
    expect_rejected("roll misaligned dims", kRoll, a, {&y}, "misaligned");
  }
}

KILN_TEST(portable_tril_triu) {
  TestTensor x = iota_f32({2, 3});
  struct Case {
    const char* op;
    int64_t diagonal;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{{kTril, 0, {0, 0, 0, 3, 4, 0}},
                                         {kTril, -1, {0, 0, 0, 3, 0, 0}},
                                         {kTril, kBig, {0, 1, 2, 3, 4, 5}},
                                         {kTril, kMin, {0, 0, 0, 0, 0, 0}},
                                         {kTriu, 1, {0, 1, 2, 0, 0, 5}},
                                         {kTriu, kBig, {0, 0, 0, 0, 0, 0}},
                                         {kTriu, kMin, {0, 1, 2, 3, 4, 5}}}) {
    TestTensor y = out();
    Args a;
    a.tensor(x).i(c.diagonal);
    const Status s = run_portable(c.op, a, {&y});
    KILN_EXPECT(s.is_ok() && equals_f(y, c.want), "%s diagonal %lld: %s", c.op, static_cast<long long>(c.diagonal),
                s.to_string().c_str());
  }
  TestTensor v = iota_f32({4});
  TestTensor y = out();
  Args a;
  a.tensor(v).i(0);
  expect_rejected("tril of a vector", kTril, a, {&y}, "at least 2 dims");
  expect_rejected("triu of a vector", kTriu, a, {&y}, "at least 2 dims");
}

KILN_TEST(portable_logsumexp) {
  TestTensor x = iota_f32({2, 3});
  {
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({-1}).b(true);
    KILN_EXPECT(run_portable(kLogsumexp, a, {&y}).is_ok() && has_shape(y, {2, 1}), "logsumexp shape");
    const double want = 2 + std::log(1 + std::exp(-1.0) + std::exp(-2.0));
    KILN_EXPECT(std::abs(y.f()[0] - want) < 1e-5 && std::abs(y.f()[1] - (want + 3)) < 1e-5, "logsumexp values");
  }
  {
    // Reducing an empty dim: log(0).
    TestTensor e({2, 0});
    TestTensor y = out();
    Args a;
    a.tensor(e).ints({1}).b(false);
    KILN_EXPECT(run_portable(kLogsumexp, a, {&y}).is_ok() && equals_f(y, {-INFINITY, -INFINITY}), "logsumexp empty");
  }
  TestTensor y = out();
  {
    Args a;
    a.tensor(x).ints({}).b(false);
    expect_rejected("logsumexp without dims", kLogsumexp, a, {&y}, "at least one dim");
  }
  {
    Args a;
    a.tensor(x).ints({0, -2}).b(false);
    expect_rejected("logsumexp dim twice", kLogsumexp, a, {&y}, "more than once");
  }
  {
    Args a;
    a.tensor(x).ints({2}).b(false);
    expect_rejected("logsumexp dim out of range", kLogsumexp, a, {&y}, "out of range");
  }
  {
    TestTensor n = i64s({2}, {1, 2});
    TestTensor yi = out(ScalarType::Int64);
    Args a;
    a.tensor(n).ints({0}).b(false);
    KILN_EXPECT(run_portable(kLogsumexp, a, {&yi}).code() == Error::MissingKernel, "logsumexp i64 has no kernel");
    const Status s = run_portable(kLogsumexp, {ScalarType::Float32}, a, {&yi});
    KILN_EXPECT(s.code() == Error::KernelFailure && s.message().find("f32 or f64") != std::string::npos,
                "logsumexp kernel refuses i64: %s", s.to_string().c_str());
  }
}

KILN_TEST(portable_clamp_tensor_fmod) {
  TestTensor x = iota_f32({2, 3});
  TestTensor lo = iota_f32({3});
  TestTensor hi = iota_f32({2, 1});
  {
    // min(max(x, lo), hi), lo > hi giving hi.
    TestTensor y = out();
    Args a;
    a.tensor(x).tensor(lo).tensor(hi);
    KILN_EXPECT(run_portable(kClampTensor, a, {&y}).is_ok() && equals_f(y, {0, 0, 0, 1, 1, 1}), "clamp.Tensor");
  }
  TestTensor y = out();
  {
    Args a;
    a.tensor(x).none().none();
    expect_rejected("clamp.Tensor without bounds", kClampTensor, a, {&y}, "cannot both be None");
  }
  {
    TestTensor wide = iota_f32({4});
    Args a;
    a.tensor(x).tensor(wide).none();
    expect_rejected("clamp.Tensor bounds that do not broadcast", kClampTensor, a, {&y}, "");
  }
  {
    TestTensor n = i64s({3}, {1, 2, 3});
    Args a;
    a.tensor(x).tensor(n).none();
    expect_rejected("clamp.Tensor with an i64 bound (the exporter casts)", kClampTensor, a, {&y}, "same dtype");
  }
  {
    // fmod keeps the dividend's sign; INT64_MIN fmod -1 is 0, not an overflow; fmod by 0 is an error.
    TestTensor a_ = i64s({4}, {7, -7, kMin, 5});
    TestTensor b_ = i64s({4}, {-3, 3, -1, 5});
    TestTensor yi = out(ScalarType::Int64);
    Args a;
    a.tensor(a_).tensor(b_);
    KILN_EXPECT(run_portable("aten::fmod.Tensor", a, {&yi}).is_ok() && equals_i(yi, {1, -1, 0, 0}), "fmod i64");
    TestTensor zero = i64s({4}, {1, 2, 0, 3});
    Args z;
    z.tensor(a_).tensor(zero);
    expect_rejected("fmod by an integer zero", "aten::fmod.Tensor", z, {&yi}, "division by zero");
    Args s;
    s.tensor(a_).i(0);
    expect_rejected("fmod by the integer 0", "aten::fmod.Scalar", s, {&yi}, "division by zero");
  }
}

KILN_TEST(portable_sort_cumprod_var_group_norm) {
  {
    // Ties keep their order (stable) in both directions; NaN is the largest value.
    TestTensor x({5});
    const float v[5] = {2, NAN, 1, 2, 1};
    for (int i = 0; i < 5; ++i) x.f()[i] = v[i];
    TestTensor y = out(), ix = out(ScalarType::Int64);
    Args a;
    a.tensor(x).i(0).b(false);
    KILN_EXPECT(run_portable("aten::sort.default", a, {&y, &ix}).is_ok() && equals_f(y, {1, 1, 2, 2, NAN}) &&
                    equals_i(ix, {2, 4, 0, 3, 1}),
                "sort ascending");
    Args d;
    d.tensor(x).i(-1).b(true);
    KILN_EXPECT(run_portable("aten::sort.default", d, {&y, &ix}).is_ok() && equals_f(y, {NAN, 2, 2, 1, 1}) &&
                    equals_i(ix, {1, 0, 3, 2, 4}),
                "sort descending");
    Args bad;
    bad.tensor(x).i(kMin).b(false);
    expect_rejected("sort dim out of range", "aten::sort.default", bad, {&y, &ix}, "out of range");
    TestTensor yf = out();
    Args wrong;
    wrong.tensor(x).i(0).b(false);
    expect_rejected("sort indices not i64", "aten::sort.default", wrong, {&y, &yf}, "indices must be");
    TestTensor m({3}, ScalarType::Bool), ym = out(ScalarType::Bool);
    Args mb;
    mb.tensor(m).i(0).b(false);
    expect_rejected("sort of bool", "aten::sort.default", mb, {&ym, &ix}, "unsupported dtype");
    Args st;
    st.tensor(x).str("yes").i(0).b(false);
    expect_rejected("sort.stable with a string for stable", "aten::sort.stable", st, {&y, &ix}, "must be a Bool");
  }
  {
    // cumprod wraps around in integers, as PyTorch's.
    TestTensor n = i64s({3}, {int64_t{1} << 62, 4, -1});
    TestTensor y = out(ScalarType::Int64);
    Args a;
    a.tensor(n).i(0).none();
    KILN_EXPECT(run_portable("aten::cumprod.default", a, {&y}).is_ok() && equals_i(y, {int64_t{1} << 62, 0, 0}),
                "cumprod i64 wraps");
  }
  {
    // var: correction 0 and 1, a correction at least the count (inf, or NaN for 0 / 0).
    TestTensor x = iota_f32({2, 3});
    TestTensor y = out();
    Args a;
    a.tensor(x).ints({1}).d(0).b(false);
    KILN_EXPECT(run_portable("aten::var.correction", a, {&y}).is_ok() && std::abs(y.f()[0] - 2.0f / 3) < 1e-6f &&
                    std::abs(y.f()[1] - 2.0f / 3) < 1e-6f,
                "var correction 0");
    Args b;
    b.tensor(x).none().none().b(true);
    KILN_EXPECT(run_portable("aten::var.correction", b, {&y}).is_ok() && has_shape(y, {1, 1}) &&
                    std::abs(y.f()[0] - 3.5f) < 1e-6f,
                "var of everything, correction 1");
    Args c;
    c.tensor(x).ints({0}).d(1e300).b(false);
    KILN_EXPECT(run_portable("aten::var.correction", c, {&y}).is_ok() && std::isinf(y.f()[0]), "var huge correction");
    Args nan;
    nan.tensor(x).ints({0}).d(std::nan("")).b(false);
    expect_rejected("var NaN correction", "aten::var.correction", nan, {&y}, "NaN");
    Args twice;
    twice.tensor(x).ints({1, -1}).none().b(false);
    expect_rejected("var dim twice", "aten::var.correction", twice, {&y}, "more than once");
  }
  {
    TestTensor x = iota_f32({2, 4, 3});
    TestTensor w = iota_f32({4}), b3 = iota_f32({3});
    TestTensor y = out();
    auto args = [&](int64_t groups, TestTensor* weight, double eps) {
      Args a;
      a.tensor(x).i(groups);
      weight != nullptr ? a.tensor(*weight) : a.none();
      a.none().d(eps).b(true);
      return a;
    };
    // Each group of 2 channels x 3 values is 0..5 shifted: mean 2.5, variance 35 / 12.
    KILN_EXPECT(run_portable("aten::group_norm.default", args(2, nullptr, 0), {&y}).is_ok() &&
                    std::abs(y.f()[0] + 2.5f / std::sqrt(35.0f / 12)) < 1e-5f,
                "group_norm values");
    expect_rejected("group_norm 0 groups", "aten::group_norm.default", args(0, nullptr, 0), {&y}, "divide");
    expect_rejected("group_norm 3 groups of 4 channels", "aten::group_norm.default", args(3, nullptr, 0), {&y},
                    "divide");
    expect_rejected("group_norm INT64_MIN groups", "aten::group_norm.default", args(kMin, nullptr, 0), {&y}, "divide");
    expect_rejected("group_norm weight of 3", "aten::group_norm.default", args(2, &b3, 0), {&y}, "weight must be");
    // ATen takes any eps (a negative one gives NaN where it exceeds the variance), NaN is refused.
    KILN_EXPECT(run_portable("aten::group_norm.default", args(2, nullptr, -1e-3), {&y}).is_ok() &&
                    std::abs(y.f()[0] + 2.5f / std::sqrt(35.0f / 12 - 1e-3f)) < 1e-5f,
                "group_norm negative eps");
    expect_rejected("group_norm NaN eps", "aten::group_norm.default", args(2, &w, std::nan("")), {&y}, "eps");
    TestTensor v = iota_f32({4});
    Args flat;
    flat.tensor(v).i(1).none().none().d(0).b(true);
    expect_rejected("group_norm of a vector", "aten::group_norm.default", flat, {&y}, "[N, C, *]");
  }
}

}  // namespace
}  // namespace kiln::test
