// Self-checking tests of the portable kernels against naive reference loops (no framework).
//
// Calls the run functions directly (kernels/portable/portable_ops.h), so it
// needs only the runtime core and the kernel sources. From the repository root:
//   g++ -std=c++17 -O3 -Iruntime/include -Iruntime -Ikernels/portable tests/cpp/kernel_test.cpp
//       kernels/portable/*.cpp runtime/core/*.cpp runtime/registry/*.cpp -o kernel_test -lpthread -ldl
//   ./kernel_test            # all checks, on 1 and 2 threads
//   ./kernel_test bench 1    # 512x512x512 GEMM GFLOP/s on 1 thread
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"
#include "kiln/kernel.h"
#include "portable_ops.h"

using namespace kiln;
using namespace kiln::portable;

namespace {

int g_failures = 0;
int g_checks = 0;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    ++g_checks;                                                 \
    if (!(cond)) {                                              \
      ++g_failures;                                             \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                        \
      std::fprintf(stderr, "\n");                               \
    }                                                           \
  } while (0)

std::mt19937 g_rng(1234);

// A tensor owning its buffer; `capacity_elems` lets outputs be sized generously.
struct Buf {
  std::vector<uint8_t> bytes;
  Tensor t;
  Buf(std::vector<int64_t> sizes, ScalarType dt = ScalarType::Float32, int64_t capacity_elems = -1) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    if (capacity_elems < 0) capacity_elems = n;
    bytes.assign(static_cast<size_t>(std::max<int64_t>(capacity_elems, 1)) * element_size(dt) + 64, 0);
    t.reset(bytes.data(), Span<const int64_t>(sizes.data(), sizes.size()), dt,
            static_cast<size_t>(capacity_elems) * element_size(dt));
  }
  float* f() { return t.data_as<float>(); }
  int64_t* i64() { return t.data_as<int64_t>(); }
  std::vector<int64_t> shape() const { return {t.sizes().begin(), t.sizes().end()}; }
};

Buf rand_f32(std::vector<int64_t> sizes) {
  Buf b(sizes);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < b.t.numel(); ++i) b.f()[i] = u(g_rng);
  return b;
}

Buf out_buf(ScalarType dt = ScalarType::Float32, int64_t cap = 1 << 20) { return Buf({0}, dt, cap); }

// Values live in a deque so their addresses stay stable.
struct Args {
  std::deque<Value> vals;
  std::deque<std::vector<int64_t>> lists;
  std::deque<std::vector<Tensor*>> tlists;
  std::vector<const Value*> ptrs;
  Args& tensor(Tensor& t) {
    Value v;
    v.kind = ValueKind::Tensor;
    v.tensor = &t;
    return push(v);
  }
  Args& none() { return push(Value()); }
  Args& i(int64_t x) {
    Value v;
    v.kind = ValueKind::Int;
    v.i = x;
    return push(v);
  }
  Args& d(double x) {
    Value v;
    v.kind = ValueKind::Double;
    v.d = x;
    return push(v);
  }
  Args& b(bool x) {
    Value v;
    v.kind = ValueKind::Bool;
    v.b = x;
    return push(v);
  }
  Args& ints(std::vector<int64_t> xs) {
    lists.push_back(std::move(xs));
    Value v;
    v.kind = ValueKind::IntList;
    v.ints.data = lists.back().data();
    v.ints.size = lists.back().size();
    return push(v);
  }
  Args& tensors(std::vector<Tensor*> ts) {
    tlists.push_back(std::move(ts));
    Value v;
    v.kind = ValueKind::TensorList;
    v.tensors.data = tlists.back().data();
    v.tensors.size = tlists.back().size();
    return push(v);
  }
  Args& str(const char* s) {
    Value v;
    v.kind = ValueKind::String;
    v.str.data = s;
    v.str.size = std::strlen(s);
    return push(v);
  }
  Args& push(const Value& v) {
    vals.push_back(v);
    ptrs.clear();
    for (const Value& x : vals) ptrs.push_back(&x);
    return *this;
  }
};

Status call(KernelRunFn fn, Args& a, Buf& out) {
  KernelContext ctx;
  Tensor* outs[1] = {&out.t};
  return fn(ctx, Span<const Value* const>(a.ptrs.data(), a.ptrs.size()), Span<Tensor* const>(outs, 1));
}

bool same_shape(const Buf& b, std::vector<int64_t> want) { return b.shape() == want; }

std::string shape_str(const std::vector<int64_t>& s) { return describe_sizes(Span<const int64_t>(s.data(), s.size())); }

void expect_close(const char* what, const float* got, const float* want, int64_t n, float tol = 1e-4f) {
  float worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; ++i) {
    const float err = std::fabs(got[i] - want[i]) / std::max(1.0f, std::fabs(want[i]));
    if (!(err <= worst)) worst = err, at = i;  // NaN counts as worst
  }
  CHECK(at < 0 || worst <= tol, "%s: max rel error %g at %" PRId64 " (got %g, want %g)", what, worst, at,
        at >= 0 ? got[at] : 0.0f, at >= 0 ? want[at] : 0.0f);
}

// ---- naive references

// Row-major index helpers over a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// Value of `b` (shape bs) at broadcast position `idx` of output shape os.
float bcast_at(Buf& b, const std::vector<int64_t>& os, const std::vector<int64_t>& idx) {
  const auto bs = b.shape();
  const auto st = strides_of(bs);
  int64_t off = 0;
  for (size_t d = 0; d < bs.size(); ++d) {
    const int64_t od = d + os.size() - bs.size();
    off += (bs[d] == 1 ? 0 : idx[od]) * st[d];
  }
  return b.f()[off];
}

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& s) {
  std::vector<int64_t> idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) idx[d] = i % s[d], i /= s[d];
  return idx;
}

void naive_mm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, bool bt = false) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[i * k + p]) * (bt ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = static_cast<float>(s);
    }
}

// ---- tests

void test_gemm_random() {
  std::uniform_int_distribution<int> dim(1, 140);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t m = dim(g_rng), n = dim(g_rng), k = trial % 7 == 0 ? 300 : dim(g_rng);
    const bool bt = trial % 2 == 1;
    Buf a = rand_f32({m, k}), b = rand_f32(bt ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
    std::vector<float> c(m * n), want(m * n);
    GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    p.a = a.f(), p.a_rs = k;
    p.b = b.f(), p.b_rs = bt ? 1 : n, p.b_cs = bt ? k : 1;
    p.c = c.data(), p.c_rs = n;
    p.overwrite = true;
    gemm(p);
    naive_mm(a.f(), b.f(), want.data(), m, k, n, bt);
    expect_close(("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k)).c_str(), c.data(),
                 want.data(), m * n);
  }
}

void test_linear() {
  for (bool bias : {false, true}) {
    for (auto xs : std::vector<std::vector<int64_t>>{{5, 7}, {2, 3, 7}, {7}, {1, 7}, {33, 7}}) {
      const int64_t n = 9, k = 7;
      Buf x = rand_f32(xs), w = rand_f32({n, k}), b = rand_f32({n}), y = out_buf();
      Args a;
      a.tensor(x.t).tensor(w.t);
      bias ? a.tensor(b.t) : a.none();
      Status s = call(linear_run, a, y);
      CHECK(s.is_ok(), "linear: %s", s.message().c_str());
      auto ys = xs;
      ys.back() = n;
      CHECK(same_shape(y, ys), "linear shape %s", shape_str(y.shape()).c_str());
      const int64_t m = x.t.numel() / k;
      std::vector<float> want(m * n);
      naive_mm(x.f(), w.f(), want.data(), m, k, n, true);
      if (bias)
        for (int64_t i = 0; i < m * n; ++i) want[i] += b.f()[i % n];
      expect_close("linear", y.f(), want.data(), m * n);
    }
  }
  Buf x = rand_f32({2, 6}), w = rand_f32({4, 7}), y = out_buf();
  Args a;
  a.tensor(x.t).tensor(w.t).none();
  Status s = call(linear_run, a, y);
  CHECK(s.code() == Error::KernelFailure, "linear K mismatch should fail");
}

void test_mm_family() {
  {
    Buf a = rand_f32({2, 3, 4}), b = rand_f32({4, 5}), y = out_buf();
    Args args;
    args.tensor(a.t).tensor(b.t);
    Status s = call(mm_run, args, y);
    CHECK(s.code() == Error::KernelFailure && s.message() == "aten::mm.default: self must be 2-D, got f32[2, 3, 4]",
          "mm message: %s", s.message().c_str());
  }
  {
    Buf a = rand_f32({3, 4, 5}), b = rand_f32({3, 5, 6}), y = out_buf();
    Args args;
    args.tensor(a.t).tensor(b.t);
    CHECK(call(bmm_run, args, y).is_ok(), "bmm");
    std::vector<float> want(3 * 4 * 6);
    for (int i = 0; i < 3; ++i) naive_mm(a.f() + i * 20, b.f() + i * 30, want.data() + i * 24, 4, 5, 6);
    expect_close("bmm", y.f(), want.data(), 72);
  }
  // addmm with self broadcast [N], beta/alpha.
  for (auto ss : std::vector<std::vector<int64_t>>{{6}, {4, 1}, {4, 6}, {}}) {
    Buf s = rand_f32(ss), a = rand_f32({4, 5}), b = rand_f32({5, 6}), y = out_buf();
    Args args;
    args.tensor(s.t).tensor(a.t).tensor(b.t).d(0.5).i(2);
    CHECK(call(addmm_run, args, y).is_ok(), "addmm");
    std::vector<float> want(24);
    naive_mm(a.f(), b.f(), want.data(), 4, 5, 6);
    for (int64_t i = 0; i < 24; ++i) want[i] = 2 * want[i] + 0.5f * bcast_at(s, {4, 6}, unravel(i, {4, 6}));
    expect_close("addmm", y.f(), want.data(), 24);
  }
}

void test_matmul() {
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
    Buf a = rand_f32(c.a), b = rand_f32(c.b), y = out_buf();
    Args args;
    args.tensor(a.t).tensor(b.t);
    Status s = call(matmul_run, args, y);
    CHECK(s.is_ok(), "matmul %s @ %s: %s", shape_str(c.a).c_str(), shape_str(c.b).c_str(), s.message().c_str());
    CHECK(same_shape(y, c.out), "matmul shape %s, want %s", shape_str(y.shape()).c_str(), shape_str(c.out).c_str());
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
    expect_close("matmul", y.f(), want.data(), nbatch * m * n);
  }
}

struct ConvCase {
  int64_t n, c, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias, unbatched;
};

void test_conv2d() {
  const std::vector<ConvCase> cases = {
      {2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 4, 10, 11, 6, 3, 2, 2, 3, 1, 0, 2, 1, 2, false, false},  // groups, stride, dilation
      {2, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, true, false},     // depthwise
      {1, 4, 9, 9, 8, 5, 3, 2, 1, 2, 1, 1, 2, 4, true, false},     // depthwise x2 multiplier, stride 2, dilation
      {1, 8, 5, 6, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false},    // pointwise
      {2, 8, 5, 6, 12, 1, 1, 1, 1, 0, 0, 1, 1, 4, false, false},   // grouped pointwise
      {1, 3, 8, 8, 5, 3, 3, 2, 2, 0, 0, 1, 1, 1, true, true},      // unbatched CHW
      {1, 16, 20, 20, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},  // several GEMM tiles
      {1, 2, 4, 4, 2, 3, 3, 3, 3, 3, 3, 1, 1, 1, true, false},     // padding > output coverage
  };
  for (const ConvCase& c : cases) {
    std::vector<int64_t> xs = {c.n, c.c, c.h, c.w};
    if (c.unbatched) xs.erase(xs.begin());
    Buf x = rand_f32(xs), w = rand_f32({c.cout, c.c / c.groups, c.kh, c.kw}), b = rand_f32({c.cout}), y = out_buf();
    Args args;
    args.tensor(x.t).tensor(w.t);
    c.bias ? args.tensor(b.t) : args.none();
    args.ints({c.sh, c.sw}).ints({c.ph, c.pw}).ints({c.dh, c.dw}).i(c.groups);
    Status s = call(conv2d_run, args, y);
    CHECK(s.is_ok(), "conv2d: %s", s.message().c_str());
    const int64_t oh = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
    const int64_t ow = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
    std::vector<int64_t> ys = {c.n, c.cout, oh, ow};
    if (c.unbatched) ys.erase(ys.begin());
    CHECK(same_shape(y, ys), "conv2d shape %s", shape_str(y.shape()).c_str());
    const int64_t cin_g = c.c / c.groups, cout_g = c.cout / c.groups;
    std::vector<float> want(c.n * c.cout * oh * ow);
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t co = 0; co < c.cout; ++co)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double acc = c.bias ? b.f()[co] : 0.0;
            const int64_t g = co / cout_g;
            for (int64_t ci = 0; ci < cin_g; ++ci)
              for (int64_t p = 0; p < c.kh; ++p)
                for (int64_t q = 0; q < c.kw; ++q) {
                  const int64_t ih = i * c.sh - c.ph + p * c.dh, iw = j * c.sw - c.pw + q * c.dw;
                  if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                  acc += double(x.f()[((n * c.c + g * cin_g + ci) * c.h + ih) * c.w + iw]) *
                         w.f()[((co * cin_g + ci) * c.kh + p) * c.kw + q];
                }
            want[((n * c.cout + co) * oh + i) * ow + j] = static_cast<float>(acc);
          }
    expect_close("conv2d", y.f(), want.data(), static_cast<int64_t>(want.size()));
  }
  // groups that do not divide the channels.
  Buf x = rand_f32({1, 4, 5, 5}), w = rand_f32({3, 2, 3, 3}), y = out_buf();
  Args args;
  args.tensor(x.t).tensor(w.t).none().ints({1}).ints({0}).ints({1}).i(2);
  CHECK(call(conv2d_run, args, y).code() == Error::KernelFailure, "conv2d bad groups must fail");
}

void test_pools() {
  // Expected values computed with PyTorch on arange(25).view(1, 1, 5, 5).
  Buf x({1, 1, 5, 5});
  for (int i = 0; i < 25; ++i) x.f()[i] = static_cast<float>(i);
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({2}).ints({}).ints({0}).ints({1}).b(true);
    CHECK(call(max_pool2d_run, a, y).is_ok(), "max_pool2d ceil");
    const float want[] = {6, 8, 9, 16, 18, 19, 21, 23, 24};
    CHECK(same_shape(y, {1, 1, 3, 3}), "max_pool2d ceil shape %s", shape_str(y.shape()).c_str());
    expect_close("max_pool2d ceil", y.f(), want, 9);
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({3, 3}).ints({2, 2}).ints({1, 1}).ints({2, 2}).b(false);
    CHECK(call(max_pool2d_run, a, y).is_ok(), "max_pool2d dilated");
    // Windows start at -1 and 1 with taps -1, 1, 3 / 1, 3, 5: only rows/cols 1 and 3 are real.
    const float want[] = {18, 18, 18, 18};
    CHECK(same_shape(y, {1, 1, 2, 2}), "max_pool2d dilated shape %s", shape_str(y.shape()).c_str());
    expect_close("max_pool2d dilated", y.f(), want, 4);
  }
  {
    // avg_pool2d(k=3, s=2, p=1, ceil_mode=True, count_include_pad=True) -> 3x3.
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({3}).ints({2}).ints({1}).b(true).b(true).none();
    CHECK(call(avg_pool2d_run, a, y).is_ok(), "avg_pool2d");
    // The ceil_mode window past the edge still counts the right padding column.
    const float want[] = {12.f / 9, 27.f / 9, 24.f / 9, 63.f / 9, 108.f / 9, 81.f / 9, 72.f / 9, 117.f / 9, 84.f / 9};
    CHECK(same_shape(y, {1, 1, 3, 3}), "avg_pool2d shape %s", shape_str(y.shape()).c_str());
    expect_close("avg_pool2d include_pad", y.f(), want, 9);
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({3}).ints({2}).ints({1}).b(true).b(false).none();
    CHECK(call(avg_pool2d_run, a, y).is_ok(), "avg_pool2d");
    const float want[] = {12.f / 4, 27.f / 6, 24.f / 4, 63.f / 6, 108.f / 9, 81.f / 6, 72.f / 4, 117.f / 6, 84.f / 4};
    expect_close("avg_pool2d exclude_pad", y.f(), want, 9);
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({2}).ints({}).ints({0}).b(false).b(true).i(3);
    CHECK(call(avg_pool2d_run, a, y).is_ok(), "avg_pool2d divisor");
    const float want[] = {12.f / 3, 20.f / 3, 52.f / 3, 60.f / 3};
    expect_close("avg_pool2d divisor_override", y.f(), want, 4);
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({3, 2});
    CHECK(call(adaptive_avg_pool2d_run, a, y).is_ok(), "adaptive_avg_pool2d");
    // rows [0,2) [1,4) [3,5); cols [0,3) [2,5)
    auto avg = [&](int h0, int h1, int w0, int w1) {
      float s = 0;
      for (int i = h0; i < h1; ++i)
        for (int j = w0; j < w1; ++j) s += x.f()[i * 5 + j];
      return s / ((h1 - h0) * (w1 - w0));
    };
    const float want[] = {avg(0, 2, 0, 3), avg(0, 2, 2, 5), avg(1, 4, 0, 3), avg(1, 4, 2, 5), avg(3, 5, 0, 3), avg(3, 5, 2, 5)};
    CHECK(same_shape(y, {1, 1, 3, 2}), "adaptive shape");
    expect_close("adaptive_avg_pool2d", y.f(), want, 6);
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({2}).ints({}).ints({2}).ints({1}).b(false);
    CHECK(call(max_pool2d_run, a, y).code() == Error::KernelFailure, "padding > kernel/2 must fail");
  }
}

void test_softmax_layer_norm() {
  Buf x = rand_f32({3, 5, 4});
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool log : {false, true}) {
      Buf y = out_buf();
      Args a;
      a.tensor(x.t).i(dim).b(false);
      CHECK(call(log ? log_softmax_run : softmax_run, a, y).is_ok(), "softmax");
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const std::vector<int64_t> s = {3, 5, 4};
      std::vector<float> want(60);
      for (int64_t i = 0; i < 60; ++i) {
        auto idx = unravel(i, s);
        double sum = 0;
        for (int64_t k = 0; k < s[d]; ++k) {
          auto j = idx;
          j[d] = k;
          sum += std::exp(x.f()[(j[0] * 5 + j[1]) * 4 + j[2]]);
        }
        want[i] = log ? static_cast<float>(x.f()[i] - std::log(sum)) : static_cast<float>(std::exp(x.f()[i]) / sum);
      }
      expect_close(log ? "log_softmax" : "softmax", y.f(), want.data(), 60);
    }
  }
  Buf w = rand_f32({5, 4}), b = rand_f32({5, 4}), y = out_buf();
  Args a;
  a.tensor(x.t).ints({5, 4}).tensor(w.t).tensor(b.t).d(1e-5).b(true);
  CHECK(call(layer_norm_run, a, y).is_ok(), "layer_norm");
  std::vector<float> want(60);
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 20; ++i) mean += x.f()[r * 20 + i];
    mean /= 20;
    for (int i = 0; i < 20; ++i) var += (x.f()[r * 20 + i] - mean) * (x.f()[r * 20 + i] - mean);
    var /= 20;
    for (int i = 0; i < 20; ++i)
      want[r * 20 + i] = static_cast<float>((x.f()[r * 20 + i] - mean) / std::sqrt(var + 1e-5) * w.f()[i] + b.f()[i]);
  }
  expect_close("layer_norm", y.f(), want.data(), 60);
}

void test_binary_and_reduce() {
  struct Case {
    std::vector<int64_t> a, b;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{2, 3}, {}}, {{5}, {5}}, {{1}, {3, 1, 2}}}) {
    Buf a = rand_f32(c.a), b = rand_f32(c.b), y = out_buf();
    Args args;
    args.tensor(a.t).tensor(b.t).d(2.5);
    CHECK(call(add_tensor_run, args, y).is_ok(), "add");
    const auto os = y.shape();
    int64_t n = 1;
    for (int64_t s : os) n *= s;
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      auto idx = unravel(i, os);
      want[i] = bcast_at(a, os, idx) + 2.5f * bcast_at(b, os, idx);
    }
    expect_close("add broadcast", y.f(), want.data(), n);
  }
  {
    Buf a({3}, ScalarType::Int64), b({}, ScalarType::Int64), y = out_buf(ScalarType::Int64);
    a.i64()[0] = 1, a.i64()[1] = -2, a.i64()[2] = INT64_MAX;
    b.i64()[0] = 3;
    Args args;
    args.tensor(a.t).tensor(b.t).i(1);
    CHECK(call(sub_tensor_run, args, y).is_ok(), "sub i64");
    CHECK(y.i64()[0] == -2 && y.i64()[1] == -5 && y.i64()[2] == INT64_MAX - 3, "sub i64 values");
  }
  {
    Buf a = rand_f32({2, 3}), b = rand_f32({2, 3}), y = out_buf();
    Args args;
    args.tensor(a.t).tensor(b.t).i(1);
    Buf bad({2, 3}, ScalarType::Int64);
    Args args2;
    args2.tensor(a.t).tensor(bad.t).i(1);
    CHECK(call(add_tensor_run, args2, y).code() == Error::KernelFailure, "add mixed dtypes must fail");
  }
  // Reductions over several dim sets against a naive sum.
  Buf x = rand_f32({2, 3, 4, 5});
  const std::vector<int64_t> xs = {2, 3, 4, 5};
  for (auto dims : std::vector<std::vector<int64_t>>{{1}, {-1}, {2, 3}, {0, 2}, {0, 1, 2, 3}, {0}, {}}) {
    for (bool keep : {false, true}) {
      for (bool mean : {false, true}) {
        Buf y = out_buf();
        Args a;
        a.tensor(x.t).ints(dims).b(keep).none();
        Status s = call(mean ? mean_dim_run : sum_dim_run, a, y);
        CHECK(s.is_ok(), "reduce: %s", s.message().c_str());
        bool red[4] = {dims.empty(), dims.empty(), dims.empty(), dims.empty()};
        for (int64_t d : dims) red[d < 0 ? d + 4 : d] = true;
        std::vector<int64_t> os;
        for (int d = 0; d < 4; ++d)
          if (!red[d]) os.push_back(xs[d]);
          else if (keep) os.push_back(1);
        CHECK(same_shape(y, os), "reduce shape %s", shape_str(y.shape()).c_str());
        int64_t n = 1, count = 1;
        for (int d = 0; d < 4; ++d)
          if (!red[d]) n *= xs[d];
          else count *= xs[d];
        std::vector<double> acc(n, 0.0);
        for (int64_t i = 0; i < 120; ++i) {
          auto idx = unravel(i, xs);
          int64_t o = 0;
          for (int d = 0; d < 4; ++d)
            if (!red[d]) o = o * xs[d] + idx[d];
          acc[o] += x.f()[i];
        }
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(mean ? acc[i] / count : acc[i]);
        expect_close(mean ? "mean.dim" : "sum.dim", y.f(), want.data(), n);
      }
    }
  }
  {
    Buf b({2, 2}, ScalarType::Bool), y = out_buf(ScalarType::Int64);
    b.t.data_as<bool>()[0] = true, b.t.data_as<bool>()[3] = true;
    Args a;
    a.tensor(b.t).none();
    CHECK(call(sum_run, a, y).is_ok() && y.t.dim() == 0 && y.i64()[0] == 2, "sum(bool) -> i64");
  }
}

void test_copy_ops() {
  Buf x = rand_f32({2, 3, 4});
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({2, 0, 1});
    CHECK(call(permute_run, a, y).is_ok() && same_shape(y, {4, 2, 3}), "permute");
    bool ok = true;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) ok &= y.f()[(k * 2 + i) * 3 + j] == x.f()[(i * 3 + j) * 4 + k];
    CHECK(ok, "permute values");
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).i(-1).i(0);
    CHECK(call(transpose_int_run, a, y).is_ok() && same_shape(y, {4, 3, 2}), "transpose");
    bool ok = true;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) ok &= y.f()[(k * 3 + j) * 2 + i] == x.f()[(i * 3 + j) * 4 + k];
    CHECK(ok, "transpose values");
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
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).i(-1);
    c.has_start ? a.i(c.start) : a.none();
    c.has_end ? a.i(c.end) : a.none();
    a.i(c.step);
    Status s = call(slice_tensor_run, a, y);
    const int64_t len = static_cast<int64_t>(c.idx.size());
    CHECK(s.is_ok() && same_shape(y, {2, 3, len}), "slice shape %s: %s", shape_str(y.shape()).c_str(), s.message().c_str());
    bool ok = true;
    for (int r = 0; r < 6; ++r)
      for (int64_t j = 0; j < len; ++j) ok &= y.f()[r * len + j] == x.f()[r * 4 + c.idx[j]];
    CHECK(ok, "slice values (start %lld)", static_cast<long long>(c.start));
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).i(1).i(-1);
    CHECK(call(select_int_run, a, y).is_ok() && same_shape(y, {2, 4}), "select");
    bool ok = true;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) ok &= y.f()[i * 4 + k] == x.f()[(i * 3 + 2) * 4 + k];
    CHECK(ok, "select values");
    Args bad;
    bad.tensor(x.t).i(1).i(3);
    CHECK(call(select_int_run, bad, y).code() == Error::KernelFailure, "select out of range must fail");
  }
  {
    Buf a = rand_f32({2, 1, 4}), b = rand_f32({2, 2, 4}), empty({0}), y = out_buf();
    Args args;
    args.tensors({&a.t, &empty.t, &b.t}).i(-2);
    CHECK(call(cat_run, args, y).is_ok() && same_shape(y, {2, 3, 4}), "cat shape %s", shape_str(y.shape()).c_str());
    bool ok = true;
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 4; ++k) ok &= y.f()[(i * 3 + 0) * 4 + k] == a.f()[i * 4 + k];
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 4; ++k) ok &= y.f()[(i * 3 + 1 + j) * 4 + k] == b.f()[(i * 2 + j) * 4 + k];
    }
    CHECK(ok, "cat values");
  }
  {
    Buf a = rand_f32({3, 1}), y = out_buf();
    Args args;
    args.tensor(a.t).ints({2, -1, 4}).b(false);
    CHECK(call(expand_run, args, y).is_ok() && same_shape(y, {2, 3, 4}), "expand");
    bool ok = true;
    for (int i = 0; i < 24; ++i) ok &= y.f()[i] == a.f()[(i / 4) % 3];
    CHECK(ok, "expand values");
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({-1, 6});
    CHECK(call(view_run, a, y).is_ok() && same_shape(y, {4, 6}) && std::memcmp(y.f(), x.f(), 96) == 0, "view");
    Args bad;
    bad.tensor(x.t).ints({5, -1});
    CHECK(call(view_run, bad, y).code() == Error::KernelFailure, "view bad shape must fail");
    Buf one = rand_f32({2, 1, 3, 1});
    Args sq;
    sq.tensor(one.t).ints({1, -1, 0});
    CHECK(call(squeeze_dims_run, sq, y).is_ok() && same_shape(y, {2, 3}), "squeeze.dims");
    Args us;
    us.tensor(x.t).i(-1);
    CHECK(call(unsqueeze_run, us, y).is_ok() && same_shape(y, {2, 3, 4, 1}), "unsqueeze");
  }
  {
    Buf w = rand_f32({5, 3}), idx({2, 2}, ScalarType::Int64), y = out_buf();
    const int64_t ids[] = {4, 0, 2, 4};
    std::memcpy(idx.i64(), ids, sizeof ids);
    Args a;
    a.tensor(w.t).tensor(idx.t).i(-1).b(false).b(false);
    CHECK(call(embedding_run, a, y).is_ok() && same_shape(y, {2, 2, 3}), "embedding");
    bool ok = true;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) ok &= y.f()[i * 3 + j] == w.f()[ids[i] * 3 + j];
    CHECK(ok, "embedding values");
    idx.i64()[1] = 5;
    Status s = call(embedding_run, a, y);
    CHECK(s.code() == Error::KernelFailure, "embedding out of range must fail: %s", s.message().c_str());
  }
  {
    Buf f({4}), y = out_buf(ScalarType::Int32);
    const float vals[] = {1.9f, -2.7f, 1e20f, NAN};
    std::memcpy(f.f(), vals, sizeof vals);
    Args a;
    a.tensor(f.t).i(static_cast<int64_t>(ScalarType::Int32)).none().none().none().b(false).none();
    CHECK(call(to_copy_run, a, y).is_ok(), "_to_copy");
    const int32_t* o = y.t.data_as<int32_t>();
    CHECK(o[0] == 1 && o[1] == -2 && o[2] == INT32_MAX && o[3] == 0, "_to_copy values %d %d %d %d", o[0], o[1], o[2], o[3]);
  }
  {
    Buf cond({2, 1}, ScalarType::Bool), a = rand_f32({3}), b = rand_f32({}), y = out_buf();
    cond.t.data_as<bool>()[0] = true;
    Args args;
    args.tensor(cond.t).tensor(a.t).tensor(b.t);
    CHECK(call(where_self_run, args, y).is_ok() && same_shape(y, {2, 3}), "where");
    bool ok = true;
    for (int j = 0; j < 3; ++j) ok &= y.f()[j] == a.f()[j] && y.f()[3 + j] == b.f()[0];
    CHECK(ok, "where values");
    Args mf;
    mf.tensor(a.t).tensor(cond.t).d(-7.0);
    CHECK(call(masked_fill_scalar_run, mf, y).is_ok() && same_shape(y, {2, 3}), "masked_fill");
    ok = true;
    for (int j = 0; j < 3; ++j) ok &= y.f()[j] == -7.0f && y.f()[3 + j] == a.f()[j];
    CHECK(ok, "masked_fill values");
  }
}

void test_unary() {
  Buf x = rand_f32({100});
  x.f()[0] = -3.5f, x.f()[1] = 3.5f, x.f()[2] = 0.0f;
  struct U {
    const char* name;
    KernelRunFn fn;
    std::function<double(double)> ref;
  };
  const std::vector<U> ops = {
      {"relu", relu_run, [](double v) { return v < 0 ? 0 : v; }},
      {"sigmoid", sigmoid_run, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"tanh", tanh_run, [](double v) { return std::tanh(v); }},
      {"silu", silu_run, [](double v) { return v / (1 + std::exp(-v)); }},
      {"hardswish", hardswish_run, [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }},
      {"hardsigmoid", hardsigmoid_run, [](double v) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; }},
      {"neg", neg_run, [](double v) { return -v; }},
      {"exp", exp_run, [](double v) { return std::exp(v); }},
      {"abs", abs_run, [](double v) { return std::fabs(v); }},
  };
  for (const U& u : ops) {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t);
    CHECK(call(u.fn, a, y).is_ok(), "%s", u.name);
    std::vector<float> want(100);
    for (int i = 0; i < 100; ++i) want[i] = static_cast<float>(u.ref(x.f()[i]));
    expect_close(u.name, y.f(), want.data(), 100);
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).str("tanh");
    CHECK(call(gelu_run, a, y).is_ok(), "gelu tanh");
    std::vector<float> want(100);
    for (int i = 0; i < 100; ++i) {
      const double v = x.f()[i];
      want[i] = static_cast<float>(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    }
    expect_close("gelu tanh", y.f(), want.data(), 100);
    Args bad;
    bad.tensor(x.t).str("fast");
    CHECK(call(gelu_run, bad, y).code() == Error::KernelFailure, "gelu bad mode must fail");
  }
  {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).none().d(0.25);
    CHECK(call(clamp_run, a, y).is_ok(), "clamp");
    bool ok = true;
    for (int i = 0; i < 100; ++i) ok &= y.f()[i] == std::min(x.f()[i], 0.25f);
    CHECK(ok, "clamp values");
  }
  {
    Buf small({0}, ScalarType::Float32, 4), y = out_buf(ScalarType::Float32, 4);
    Args a;
    a.tensor(x.t);
    CHECK(call(relu_run, a, y).code() == Error::KernelFailure, "output without capacity must fail");
  }
}

void bench() {
  const int64_t n = 512;
  Buf a = rand_f32({n, n}), b = rand_f32({n, n}), c({n, n});
  GemmProblem p;
  p.m = p.n = p.k = n;
  p.a = a.f(), p.a_rs = n;
  p.b = b.f(), p.b_rs = n;
  p.c = c.f(), p.c_rs = n;
  p.overwrite = true;
  double best = 1e9;
  for (int r = 0; r < 10; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    gemm(p);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("gemm 512x512x512 on %d thread(s): %.2f GFLOP/s\n", num_threads(), 2.0 * n * n * n / best / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {
    set_num_threads(argc > 2 ? std::atoi(argv[2]) : 1);
    bench();
    return 0;
  }
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    test_gemm_random();
    test_linear();
    test_mm_family();
    test_matmul();
    test_conv2d();
    test_pools();
    test_softmax_layer_norm();
    test_binary_and_reduce();
    test_copy_ops();
    test_unary();
  }
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
