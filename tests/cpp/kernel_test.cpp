// Self-checking tests of the portable kernels against naive reference loops (no framework).
//
// Calls the run functions directly (kernels/portable/portable_ops.h), so it
// needs only the runtime core and the kernel sources. From the repository root:
//   g++ -std=c++17 -O3 -Iruntime/include -Iruntime -Ikernels tests/cpp/kernel_test.cpp kernels/common/*.cpp
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

#include "portable/gemm.h"
#include "kiln/kernel.h"
#include "portable/portable_ops.h"

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln::kernels::portable;

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

// Error of one element: relative to max(1, |want|) between finite values; a NaN
// or an infinity on either side must be matched exactly (NaN by NaN, inf by the
// same inf), else the error is infinite, so that nothing can hide it.
double elem_error(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0.0 : INFINITY;
  if (std::isinf(got) || std::isinf(want)) return got == want ? 0.0 : INFINITY;
  return std::fabs(double(got) - want) / std::max(1.0, std::fabs(double(want)));
}

struct Worst {
  double err = 0;
  int64_t at = -1;  // the first element with the largest error; -1 if all match exactly
};

Worst worst_error(const float* got, const float* want, int64_t n) {
  Worst w;
  for (int64_t i = 0; i < n; ++i) {
    const double err = elem_error(got[i], want[i]);
    if (err > w.err) w.err = err, w.at = i;
  }
  return w;
}

void expect_close(const char* what, const float* got, const float* want, int64_t n, float tol = 1e-4f) {
  const Worst w = worst_error(got, want, n);
  CHECK(w.err <= tol, "%s: max rel error %g at %" PRId64 " of %" PRId64 " (got %g, want %g)", what, w.err, w.at, n,
        got[w.at], want[w.at]);
}

// The comparison itself: a NaN or infinity that the reference lacks (or the
// reverse) fails wherever it is, also after or before a larger finite error.
void test_expect_close() {
  const float nan = NAN, inf = INFINITY;
  auto infinite_at = [](const float* got, const float* want, int64_t n, int64_t i) {
    const Worst w = worst_error(got, want, n);
    return w.err == INFINITY && w.at == i;
  };
  const float want[4] = {1, 2, 3, 4};
  const float first_nan[4] = {nan, 2, 3, 4}, nan_after_error[4] = {100, nan, 3, 4}, inf_got[4] = {1, 2, inf, 4};
  CHECK(infinite_at(first_nan, want, 4, 0), "a NaN result must fail");
  CHECK(infinite_at(nan_after_error, want, 4, 1), "a NaN after a finite error must be the worst");
  CHECK(infinite_at(inf_got, want, 4, 2), "an infinite result must fail");
  CHECK(infinite_at(want, first_nan, 4, 0), "a number where the reference is NaN must fail");
  const float want_special[3] = {nan, inf, -inf}, neg_inf[3] = {nan, -inf, -inf};
  CHECK(worst_error(want_special, want_special, 3).err == 0, "NaN and infinities match themselves");
  CHECK(infinite_at(neg_inf, want_special, 3, 1), "-inf must not match inf");
  const float off[4] = {1, 2.5f, 3, 3};
  const Worst w = worst_error(off, want, 4);
  CHECK(w.at == 1 && std::fabs(w.err - 0.25) < 1e-9, "worst finite error 0.25 at 1, got %g at %" PRId64, w.err, w.at);
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

// kiln::fused_linear / fused_conv2d against aten linear / conv2d followed by the residual add and the
// activation computed here in double; then the arguments a corrupt file could hold.
void test_fused() {
  struct Act {
    const char* name;
    double lo, hi;
    double (*ref)(double v, double lo, double hi);
  };
  const Act acts[] = {
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
  // (fused op, its argument list after input/weight/bias/residual, the unfused op and its arguments)
  Buf xl = rand_f32({2, 3, 7}), wl = rand_f32({5, 7}), bl = rand_f32({5}), rl = rand_f32({2, 3, 5});
  Buf xc = rand_f32({2, 4, 6, 5}), wc = rand_f32({6, 2, 3, 3}), bc = rand_f32({6}), rc = rand_f32({2, 6, 3, 5});
  Buf wd = rand_f32({8, 1, 3, 3}), bd = rand_f32({8}), rd = rand_f32({2, 8, 6, 5});  // depthwise, 2 per channel
  struct Case {
    const char* what;
    bool conv;
    Buf *x, *w, *b, *r;
    std::vector<int64_t> stride, pad;
    int64_t groups;
  };
  const Case cases[] = {{"fused_linear", false, &xl, &wl, &bl, &rl, {}, {}, 0},
                        {"fused_conv2d", true, &xc, &wc, &bc, &rc, {2, 1}, {1, 1}, 2},
                        {"fused_conv2d depthwise", true, &xc, &wd, &bd, &rd, {1, 1}, {1, 1}, 4}};
  for (const Case& c : cases) {
    for (bool bias : {false, true}) {
      for (bool residual : {false, true}) {
        Buf plain = out_buf();
        Args pa;
        pa.tensor(c.x->t).tensor(c.w->t);
        bias ? pa.tensor(c.b->t) : pa.none();
        if (c.conv) pa.ints(c.stride).ints(c.pad).ints({1, 1}).i(c.groups);
        CHECK(call(c.conv ? conv2d_run : linear_run, pa, plain).is_ok(), "%s: unfused", c.what);
        for (const Act& act : acts) {
          Buf y = out_buf();
          Args a;
          a.tensor(c.x->t).tensor(c.w->t);
          bias ? a.tensor(c.b->t) : a.none();
          residual ? a.tensor(c.r->t) : a.none();
          if (c.conv) a.ints(c.stride).ints(c.pad).ints({1, 1}).i(c.groups);
          a.str(act.name).d(act.lo).d(act.hi);
          Status s = call(c.conv ? fused_conv2d_run : fused_linear_run, a, y);
          CHECK(s.is_ok() && y.shape() == plain.shape(), "%s %s: %s", c.what, act.name, s.message().c_str());
          if (!s.is_ok()) continue;
          std::vector<float> want(static_cast<size_t>(plain.t.numel()));
          for (size_t i = 0; i < want.size(); ++i)
            want[i] = static_cast<float>(act.ref(plain.f()[i] + (residual ? c.r->f()[i] : 0.0), act.lo, act.hi));
          expect_close((std::string(c.what) + " " + act.name).c_str(), y.f(), want.data(), plain.t.numel());
        }
      }
    }
  }
  // Bad arguments: each is a KernelFailure, never a crash.
  auto fused_linear_fails = [&](Buf& r, const char* act, double lo, double hi, const char* what) {
    Buf y = out_buf();
    Args a;
    a.tensor(xl.t).tensor(wl.t).none().tensor(r.t).str(act).d(lo).d(hi);
    CHECK(call(fused_linear_run, a, y).code() == Error::KernelFailure, "fused_linear %s must fail", what);
  };
  Buf broadcastable = rand_f32({1, 5}), wrong_dtype({2, 3, 5}, ScalarType::Float64);
  fused_linear_fails(broadcastable, "none", 0, 0, "with a broadcasting residual");
  fused_linear_fails(wrong_dtype, "none", 0, 0, "with an f64 residual");
  fused_linear_fails(rl, "swish", 0, 0, "with an unknown activation");
  fused_linear_fails(rl, "", 0, 0, "with an empty activation");
  fused_linear_fails(rl, "clamp", std::nan(""), 1, "with a NaN clamp bound");
  {
    Buf y = out_buf();
    Args a;  // a string argument given as an Int
    a.tensor(xl.t).tensor(wl.t).none().none().i(1).d(0).d(0);
    CHECK(call(fused_linear_run, a, y).code() == Error::KernelFailure, "fused_linear activation as an Int must fail");
    Buf r = rand_f32({2, 6, 3, 4});
    Args c;  // conv residual of another shape
    c.tensor(xc.t).tensor(wc.t).none().tensor(r.t).ints({2, 1}).ints({1, 1}).ints({1, 1}).i(2).str("relu").d(0).d(0);
    CHECK(call(fused_conv2d_run, c, y).code() == Error::KernelFailure, "fused_conv2d residual mismatch must fail");
  }
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

// ---- hostile arguments: scalar arguments and shapes as a corrupt program may
// hold them. Each must end in KernelFailure (or a defined result), never in
// undefined behaviour, an out-of-bounds access or an absurdly long loop; the
// sanitizer build (tests/test_sanitizers.py) runs these.

constexpr int64_t kBig = INT64_MAX;
constexpr int64_t kHuge = int64_t{1} << 40;

// A tensor with arbitrary (possibly absurd) sizes over a small buffer; its
// capacity is the buffer, so any real read past it is caught by check_tensor.
struct Shaped {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(64, 0);
  Tensor t;
  Shaped(std::vector<int64_t> sizes, ScalarType dt = ScalarType::Float32, size_t capacity = 0) {
    t.reset(bytes.data(), Span<const int64_t>(sizes.data(), sizes.size()), dt, capacity);
  }
};

bool fails(Status s) { return s.code() == Error::KernelFailure; }

void test_hostile_windows() {
  Buf x({1, 1, 5, 5});
  for (int i = 0; i < 25; ++i) x.f()[i] = static_cast<float>(i);
  Buf w = rand_f32({2, 1, 3, 3});
  // conv2d: stride/padding/dilation/groups at the limits of int64.
  struct ConvArgs {
    std::vector<int64_t> stride, pad, dil;
    int64_t groups;
    const char* what;
  };
  for (const ConvArgs& c : std::vector<ConvArgs>{
           {{1}, {kBig}, {1}, 1, "padding INT64_MAX"},
           {{1}, {kBig / 2}, {1}, 1, "padding INT64_MAX/2 (the reported 2 * pad overflow)"},
           {{1}, {kHuge}, {1}, 1, "padding 2^40"},
           {{1}, {-1}, {1}, 1, "negative padding"},
           {{kBig}, {0}, {1}, 1, "stride INT64_MAX"},
           {{0}, {0}, {1}, 1, "stride 0"},
           {{1}, {0}, {kBig}, 1, "dilation INT64_MAX"},
           {{1}, {0}, {kHuge}, 1, "dilation 2^40"},
           {{1}, {0}, {-3}, 1, "negative dilation"},
           {{1}, {0}, {1}, kBig, "groups INT64_MAX"},
           {{1}, {0}, {1}, INT64_MIN, "groups INT64_MIN"},
           {{1}, {0}, {1}, 0, "groups 0"},
       }) {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).tensor(w.t).none().ints(c.stride).ints(c.pad).ints(c.dil).i(c.groups);
    CHECK(fails(call(conv2d_run, a, y)), "conv2d %s must fail", c.what);
  }
  {
    // Large but valid padding: the output grows past the planned capacity.
    Buf y = out_buf(ScalarType::Float32, 1024);
    Args a;
    a.tensor(x.t).tensor(w.t).none().ints({1}).ints({1 << 20}).ints({1}).i(1);
    CHECK(fails(call(conv2d_run, a, y)), "conv2d output beyond capacity must fail");
  }
  {
    // A huge dilation with matching padding: a valid 1x1-per-tap output.
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).tensor(w.t).none().ints({1}).ints({1 << 29}).ints({1 << 29}).i(1);
    Status s = call(conv2d_run, a, y);
    CHECK(s.is_ok() && same_shape(y, {1, 2, 5, 5}), "conv2d huge dilation: %s %s", s.message().c_str(),
          shape_str(y.shape()).c_str());
  }
  // Pools: kernel sizes, strides and paddings from the file.
  struct PoolArgs {
    std::vector<int64_t> k, s, pad, dil;
    const char* what;
  };
  for (const PoolArgs& c : std::vector<PoolArgs>{
           {{kBig}, {}, {0}, {1}, "kernel INT64_MAX"},
           {{kHuge}, {}, {kHuge / 2}, {1}, "kernel 2^40 (above kMaxWindowParam)"},
           {{0}, {}, {0}, {1}, "kernel 0"},
           {{-2}, {}, {0}, {1}, "negative kernel"},
           {{2}, {kBig}, {0}, {1}, "stride INT64_MAX"},
           {{2}, {-1}, {0}, {1}, "negative stride"},
           {{3}, {1}, {kBig}, {1}, "padding INT64_MAX"},
           {{3}, {1}, {2}, {1}, "padding over half the kernel"},
           {{3}, {1}, {1}, {kBig}, "dilation INT64_MAX"},
           {{7}, {1}, {0}, {1}, "kernel larger than the input"},
       }) {
    for (bool ceil : {false, true}) {
      Buf y = out_buf();
      Args a;
      a.tensor(x.t).ints(c.k).ints(c.s).ints(c.pad).ints(c.dil).b(ceil);
      CHECK(fails(call(max_pool2d_run, a, y)), "max_pool2d %s must fail", c.what);
      Args b;
      b.tensor(x.t).ints(c.k).ints(c.s).ints(c.pad).b(ceil).b(true).none();
      if (c.dil[0] == 1) CHECK(fails(call(avg_pool2d_run, b, y)), "avg_pool2d %s must fail", c.what);
    }
  }
  {
    // A 2^29 kernel (within the limit) padded around a 5x5 input: one window
    // that covers the whole input. Only its 25 real taps may be visited.
    const int64_t k = int64_t{1} << 29, p = k / 2;
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({k}).ints({}).ints({p}).ints({1}).b(false);
    Status s = call(max_pool2d_run, a, y);
    CHECK(s.is_ok() && same_shape(y, {1, 1, 1, 1}) && y.f()[0] == 24.0f, "max_pool2d huge kernel: %s",
          s.message().c_str());
    Args b;
    b.tensor(x.t).ints({k}).ints({}).ints({p}).b(false).b(false).none();
    s = call(avg_pool2d_run, b, y);
    CHECK(s.is_ok() && same_shape(y, {1, 1, 1, 1}) && y.f()[0] == 12.0f, "avg_pool2d huge kernel: %s",
          s.message().c_str());
    Args c;  // count_include_pad: the divisor is the padded window, k * k (2^58)
    c.tensor(x.t).ints({k}).ints({}).ints({p}).b(false).b(true).none();
    s = call(avg_pool2d_run, c, y);
    const double want = 300.0 / (double(k) * double(k));
    CHECK(s.is_ok() && std::fabs(y.f()[0] - want) <= 1e-6 * want, "avg_pool2d huge kernel include_pad: %s %g",
          s.message().c_str(), y.f()[0]);
    Args d;  // divisor_override INT64_MIN is a valid (if odd) divisor
    d.tensor(x.t).ints({2}).ints({}).ints({0}).b(false).b(true).i(INT64_MIN);
    CHECK(call(avg_pool2d_run, d, y).is_ok(), "avg_pool2d divisor INT64_MIN");
  }
  // adaptive_avg_pool2d: output sizes from the file.
  for (auto os : std::vector<std::vector<int64_t>>{{kBig, kBig}, {kHuge, kHuge}, {-1, 2}, {kBig, 1}}) {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints(os);
    CHECK(fails(call(adaptive_avg_pool2d_run, a, y)), "adaptive_avg_pool2d output_size %s must fail",
          shape_str(os).c_str());
  }
  {
    // A huge output size next to a zero one: an empty (valid) result.
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints({kHuge, 0});
    Status s = call(adaptive_avg_pool2d_run, a, y);
    CHECK(s.is_ok() && same_shape(y, {1, 1, kHuge, 0}), "adaptive_avg_pool2d [2^40, 0]: %s", s.message().c_str());
    // More outputs than inputs: overlapping regions, compared with the formula.
    Args b;
    b.tensor(x.t).ints({7, 3});
    CHECK(call(adaptive_avg_pool2d_run, b, y).is_ok() && same_shape(y, {1, 1, 7, 3}), "adaptive upsampling");
    std::vector<float> want(21);
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 3; ++j) {
        const int h0 = i * 5 / 7, h1 = ((i + 1) * 5 + 6) / 7, w0 = j * 5 / 3, w1 = ((j + 1) * 5 + 2) / 3;
        double sum = 0;
        for (int a2 = h0; a2 < h1; ++a2)
          for (int b2 = w0; b2 < w1; ++b2) sum += x.f()[a2 * 5 + b2];
        want[i * 3 + j] = static_cast<float>(sum / ((h1 - h0) * (w1 - w0)));
      }
    expect_close("adaptive_avg_pool2d upsampling", y.f(), want.data(), 21);
  }
}

void test_hostile_shapes() {
  Buf x = rand_f32({2, 3, 4});
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
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints(sz);
    CHECK(fails(call(view_run, a, y)), "view %s must fail", shape_str(sz).c_str());
  }
  {
    // An empty input may take a zero-sized shape, but not one whose other sizes overflow.
    Buf e({0, 3});
    Buf y = out_buf();
    Args ok;
    ok.tensor(e.t).ints({3, 0, 5});
    CHECK(call(view_run, ok, y).is_ok() && same_shape(y, {3, 0, 5}), "view of empty");
    Args bad;
    bad.tensor(e.t).ints({kHuge, 0, kHuge});
    CHECK(fails(call(view_run, bad, y)), "view [2^40, 0, 2^40] must fail");
  }
  {
    // An int list the (corrupt) file left misaligned: rejected before any read.
    alignas(8) static int64_t storage[4] = {4, 6, 0, 0};
    Value misaligned;
    misaligned.kind = ValueKind::IntList;
    misaligned.ints.data = reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(storage) + 4);
    misaligned.ints.size = 2;
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).push(misaligned);
    CHECK(fails(call(view_run, a, y)), "view with a misaligned size list must fail");
    Args c;
    c.tensor(x.t).tensor(x.t).none().push(misaligned).ints({0}).ints({1}).i(1);
    CHECK(fails(call(conv2d_run, c, y)), "conv2d with a misaligned stride list must fail");
  }
  // expand: sizes from the file.
  {
    Buf a = rand_f32({3, 1});
    for (auto sz : std::vector<std::vector<int64_t>>{{kBig, 3, 4},
                                                     {kHuge, kHuge, 3, 4},
                                                     {kHuge, 0, 3, kHuge},
                                                     {-1, 3, 4},
                                                     {3, kBig},
                                                     {3, -2},
                                                     {4, 1},
                                                     {1, 1, 1, 1, 1, 1, 1, 3, 4}}) {
      Buf y = out_buf();
      Args args;
      args.tensor(a.t).ints(sz).b(false);
      CHECK(fails(call(expand_run, args, y)), "expand to %s must fail", shape_str(sz).c_str());
    }
    // A huge size is fine next to a zero one: no elements.
    Buf y = out_buf();
    Args args;
    args.tensor(a.t).ints({0, 3, kHuge}).b(false);
    Status s = call(expand_run, args, y);
    CHECK(s.is_ok() && same_shape(y, {0, 3, kHuge}), "expand [3, 1] to [0, 3, 2^40]: %s", s.message().c_str());
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
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).i(c.dim).i(c.start).i(c.end).i(c.step);
    Status s = call(slice_tensor_run, a, y);
    if (!c.ok) {
      CHECK(fails(s), "slice dim %lld step %lld must fail", (long long)c.dim, (long long)c.step);
      continue;
    }
    const int64_t len = static_cast<int64_t>(c.idx.size());
    CHECK(s.is_ok() && same_shape(y, {2, 3, len}), "slice (%lld, %lld, %lld): %s %s", (long long)c.start,
          (long long)c.end, (long long)c.step, s.message().c_str(), shape_str(y.shape()).c_str());
    bool ok = s.is_ok();
    for (int r = 0; ok && r < 6; ++r)
      for (int64_t j = 0; j < len; ++j) ok &= y.f()[r * len + j] == x.f()[r * 4 + c.idx[j]];
    CHECK(ok, "slice values (%lld, %lld, %lld)", (long long)c.start, (long long)c.end, (long long)c.step);
  }
  // select, squeeze, unsqueeze, permute, transpose, softmax: dims and indices.
  for (int64_t v : {kBig, INT64_MIN, int64_t{3}, int64_t{-4}}) {
    Buf y = out_buf();
    Args sel;
    sel.tensor(x.t).i(v).i(0);
    CHECK(fails(call(select_int_run, sel, y)), "select dim %lld must fail", (long long)v);
    Args idx;
    idx.tensor(x.t).i(0).i(v == 3 ? 2 : v);
    if (v != 3) CHECK(fails(call(select_int_run, idx, y)), "select index %lld must fail", (long long)v);
    Args sq;
    sq.tensor(x.t).ints({0, v});
    CHECK(fails(call(squeeze_dims_run, sq, y)), "squeeze dim %lld must fail", (long long)v);
    Args us;
    us.tensor(x.t).i(v == 3 ? 4 : v == -4 ? -5 : v);
    CHECK(fails(call(unsqueeze_run, us, y)), "unsqueeze dim %lld must fail", (long long)v);
    Args tr;
    tr.tensor(x.t).i(0).i(v);
    CHECK(fails(call(transpose_int_run, tr, y)), "transpose dim %lld must fail", (long long)v);
    Args sm;
    sm.tensor(x.t).i(v).b(false);
    CHECK(fails(call(softmax_run, sm, y)), "softmax dim %lld must fail", (long long)v);
    Args rd;
    rd.tensor(x.t).ints({v}).b(false).none();
    CHECK(fails(call(sum_dim_run, rd, y)), "sum dim %lld must fail", (long long)v);
  }
  for (auto dims : std::vector<std::vector<int64_t>>{{0, 1, 1}, {0, 1}, {0, 1, 2, 3}, {0, 1, -1 - 3}, {2, -1, 0},
                                                     {kBig, 0, 1}}) {
    Buf y = out_buf();
    Args a;
    a.tensor(x.t).ints(dims);
    CHECK(fails(call(permute_run, a, y)), "permute %s must fail", shape_str(dims).c_str());
  }
  {
    Buf y = out_buf();
    Args dup;
    dup.tensor(x.t).ints({1, -2}).b(false).none();
    CHECK(fails(call(mean_dim_run, dup, y)), "mean with a repeated dim must fail");
    Args bad_dtype;
    bad_dtype.tensor(x.t).ints({1}).b(false).i(kBig);
    CHECK(fails(call(sum_dim_run, bad_dtype, y)), "sum dtype INT64_MAX must fail");
    Args neg_dtype;
    neg_dtype.tensor(x.t).ints({1}).b(false).i(-1);
    CHECK(fails(call(sum_dim_run, neg_dtype, y)), "sum dtype -1 must fail");
  }
  // cat: dim range, empty list, sizes that add up past int64.
  {
    Buf a = rand_f32({2, 3}), y = out_buf();
    Args empty;
    empty.tensors({}).i(0);
    CHECK(fails(call(cat_run, empty, y)), "cat of an empty list must fail");
    for (int64_t d : {kBig, INT64_MIN, int64_t{2}, int64_t{-3}}) {
      Args args;
      args.tensors({&a.t, &a.t}).i(d);
      CHECK(fails(call(cat_run, args, y)), "cat dim %lld must fail", (long long)d);
    }
    Shaped big({int64_t{1} << 59, 0});
    std::vector<Tensor*> many(16, &big.t);
    Args args;
    args.tensors(many).i(0);
    CHECK(fails(call(cat_run, args, y)), "cat whose size adds up past int64 must fail");
    // Many empty tensors and one real one: cheap, and correct.
    Buf e({2, 0});
    std::vector<Tensor*> list(1000, &e.t);
    list.push_back(&a.t);
    Args lots;
    lots.tensors(list).i(1);
    CHECK(call(cat_run, lots, y).is_ok() && same_shape(y, {2, 3}) && std::memcmp(y.f(), a.f(), 24) == 0,
          "cat with many empty tensors");
  }
  // Tensor arguments whose sizes multiply past int64 (possible next to a zero
  // size), or that claim more bytes than their storage holds.
  {
    Shaped overflow({kHuge, kHuge, 0});
    Shaped unbacked({4, 4}, ScalarType::Float32, 16);
    for (Tensor* t : {&overflow.t, &unbacked.t}) {
      Buf y = out_buf();
      Args r;
      r.tensor(*t);
      CHECK(fails(call(relu_run, r, y)), "relu of %s must fail", describe(*t).c_str());
      Args sm;
      sm.tensor(*t).i(-1).b(false);
      CHECK(fails(call(softmax_run, sm, y)), "softmax of %s must fail", describe(*t).c_str());
      Args rd;
      rd.tensor(*t).ints({0}).b(false).none();
      CHECK(fails(call(sum_dim_run, rd, y)), "sum of %s must fail", describe(*t).c_str());
      Args cat;
      cat.tensors({t}).i(0);
      CHECK(fails(call(cat_run, cat, y)), "cat of %s must fail", describe(*t).c_str());
    }
    // An output shape that overflows, from operands that are each fine.
    Shaped a({0, kHuge, 1}), b({0, 1, kHuge});
    Buf y = out_buf();
    Args mm;
    mm.tensor(a.t).tensor(b.t);
    CHECK(fails(call(matmul_run, mm, y)), "matmul to [0, 2^40, 2^40] must fail");
    Args bmm;
    bmm.tensor(a.t).tensor(b.t);
    CHECK(fails(call(bmm_run, bmm, y)), "bmm to [0, 2^40, 2^40] must fail");
  }
  // Outputs that alias an argument (the memory planner never does this).
  {
    Buf a = rand_f32({2, 3}), b = rand_f32({2, 3});
    Args args;
    args.tensors({&a.t, &b.t}).i(0);
    CHECK(fails(call(cat_run, args, a)), "cat into one of its inputs must fail");
    Args r;
    r.tensor(b.t);
    CHECK(fails(call(relu_run, r, b)), "in-place relu must fail");
    Tensor half;  // shares the second half of b's bytes
    const int64_t three[1] = {3};
    half.reset(b.f() + 3, Span<const int64_t>(three, 1), ScalarType::Float32, 12);
    Args ex;
    ex.tensor(half).ints({2, 3}).b(false);
    CHECK(fails(call(expand_run, ex, b)), "expand into overlapping memory must fail");
    Buf w = rand_f32({5, 3}), idx({2}, ScalarType::Int64);
    Args emb;
    emb.tensor(w.t).tensor(idx.t).i(-1).b(false).b(false);
    CHECK(fails(call(embedding_run, emb, w)), "embedding into its weight must fail");
  }
}

void test_hostile_values() {
  // embedding: indices and padding_idx.
  {
    Buf w = rand_f32({5, 3}), idx({3}, ScalarType::Int64), idx32({2}, ScalarType::Int32), y = out_buf();
    for (int64_t bad : {kBig, INT64_MIN, int64_t{-1}, int64_t{5}}) {
      idx.i64()[0] = 1, idx.i64()[1] = bad, idx.i64()[2] = 2;
      Args a;
      a.tensor(w.t).tensor(idx.t).i(-1).b(false).b(false);
      CHECK(fails(call(embedding_run, a, y)), "embedding index %lld must fail", (long long)bad);
    }
    idx32.t.data_as<int32_t>()[0] = INT32_MIN;
    Args a32;
    a32.tensor(w.t).tensor(idx32.t).i(-1).b(false).b(false);
    CHECK(fails(call(embedding_run, a32, y)), "embedding i32 index INT32_MIN must fail");
    idx.i64()[0] = 0, idx.i64()[1] = 4, idx.i64()[2] = 2;
    for (int64_t pad : {kBig, INT64_MIN, int64_t{5}, int64_t{-6}}) {
      Args a;
      a.tensor(w.t).tensor(idx.t).i(pad).b(false).b(false);
      CHECK(fails(call(embedding_run, a, y)), "embedding padding_idx %lld must fail", (long long)pad);
    }
    for (int64_t pad : {int64_t{-1}, int64_t{0}, int64_t{4}, int64_t{-5}}) {
      Args a;
      a.tensor(w.t).tensor(idx.t).i(pad).b(false).b(false);
      CHECK(call(embedding_run, a, y).is_ok(), "embedding padding_idx %lld is valid", (long long)pad);
    }
  }
  // _to_copy: float -> integer conversions saturate (NaN -> 0), never UB.
  {
    const double vals[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 9.3e18, -9.3e18, 300.7, -200.2, 2.5};
    Buf f({10}, ScalarType::Float64);
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
      Buf y = out_buf(w.dt);
      Args a;
      a.tensor(f.t).i(static_cast<int64_t>(w.dt)).none().none().none().b(false).none();
      Status s = call(to_copy_run, a, y);
      CHECK(s.is_ok(), "_to_copy f64 -> %s: %s", scalar_type_name(w.dt), s.message().c_str());
      for (int i = 0; s.is_ok() && i < 10; ++i) {
        int64_t got = 0;
        switch (w.dt) {
          case ScalarType::Int64: got = y.i64()[i]; break;
          case ScalarType::Int32: got = y.t.data_as<int32_t>()[i]; break;
          case ScalarType::Int8: got = y.t.data_as<int8_t>()[i]; break;
          default: got = y.t.data_as<uint8_t>()[i]; break;
        }
        CHECK(got == w.v[i], "_to_copy f64 -> %s [%d]: got %lld, want %lld", scalar_type_name(w.dt), i,
              (long long)got, (long long)w.v[i]);
      }
    }
    for (int64_t code : {kBig, INT64_MIN, int64_t{-1}, int64_t{kNumScalarTypes}}) {
      Buf y = out_buf();
      Args a;
      a.tensor(f.t).i(code).none().none().none().b(false).none();
      CHECK(fails(call(to_copy_run, a, y)), "_to_copy dtype %lld must fail", (long long)code);
    }
  }
  // Bool tensors whose bytes are neither 0 nor 1 (a corrupt constant): read as true.
  {
    Buf b({3}, ScalarType::Bool), y = out_buf(ScalarType::Int64);
    const uint8_t bytes[] = {0, 2, 255};
    std::memcpy(b.t.data(), bytes, 3);
    Args a;
    a.tensor(b.t).i(static_cast<int64_t>(ScalarType::Int64)).none().none().none().b(false).none();
    CHECK(call(to_copy_run, a, y).is_ok() && y.i64()[0] == 0 && y.i64()[1] == 1 && y.i64()[2] == 1,
          "_to_copy of odd bool bytes");
    Args s;
    s.tensor(b.t).none();
    CHECK(call(sum_run, s, y).is_ok() && y.i64()[0] == 2, "sum of odd bool bytes");
    Buf x = rand_f32({3}), o = rand_f32({3}), fy = out_buf();
    Args w;
    w.tensor(b.t).tensor(x.t).tensor(o.t);
    CHECK(call(where_self_run, w, fy).is_ok() && fy.f()[0] == o.f()[0] && fy.f()[1] == x.f()[1] &&
              fy.f()[2] == x.f()[2],
          "where with odd bool bytes");
    Args m;
    m.tensor(x.t).tensor(b.t).d(5.0);
    CHECK(call(masked_fill_scalar_run, m, fy).is_ok() && fy.f()[0] == x.f()[0] && fy.f()[2] == 5.0f,
          "masked_fill with odd bool bytes");
    Buf by = out_buf(ScalarType::Bool);
    Args mb;  // masked_fill of a bool tensor copies the odd bytes as proper bools
    mb.tensor(b.t).tensor(b.t).d(0.0);
    CHECK(call(masked_fill_scalar_run, mb, by).is_ok(), "masked_fill bool");
  }
  // Integer sums wrap around (like PyTorch) instead of overflowing.
  {
    Buf a({3}, ScalarType::Int64), y = out_buf(ScalarType::Int64);
    a.i64()[0] = INT64_MAX, a.i64()[1] = INT64_MAX, a.i64()[2] = 2;
    Args s;
    s.tensor(a.t).none();
    CHECK(call(sum_run, s, y).is_ok() && y.i64()[0] == 0, "i64 sum wraps: got %lld", (long long)y.i64()[0]);
    Buf c({2, 3}, ScalarType::Int64);
    for (int i = 0; i < 6; ++i) c.i64()[i] = INT64_MIN;
    Args d;
    d.tensor(c.t).ints({0}).b(false).none();
    CHECK(call(sum_dim_run, d, y).is_ok() && y.i64()[0] == 0, "i64 sum over a strided dim wraps");
  }
  // clamp / hardtanh / pow / masked_fill with NaN, inf and huge scalars.
  {
    Buf xi({4}, ScalarType::Int32), yi = out_buf(ScalarType::Int32);
    const int32_t vi[] = {-5, 0, 7, INT32_MAX};
    std::memcpy(xi.t.data(), vi, sizeof vi);
    Args h;
    h.tensor(xi.t).d(-1e300).d(1e300);
    CHECK(call(hardtanh_run, h, yi).is_ok() && std::memcmp(yi.t.data(), vi, sizeof vi) == 0, "hardtanh i32 +-1e300");
    Args c;
    c.tensor(xi.t).d(NAN).d(INFINITY);
    CHECK(call(clamp_run, c, yi).is_ok(), "clamp i32 NaN/inf");
    Args m;
    Buf mask({4}, ScalarType::Bool);
    mask.t.data_as<uint8_t>()[1] = 1;
    m.tensor(xi.t).tensor(mask.t).d(-INFINITY);
    CHECK(call(masked_fill_scalar_run, m, yi).is_ok() && yi.t.data_as<int32_t>()[1] == INT32_MIN,
          "masked_fill i32 -inf saturates");
    Buf xf = rand_f32({4}), yf = out_buf();
    for (double e : {double(NAN), double(INFINITY), -double(INFINITY), 1e300, -1e300}) {
      Args p;
      p.tensor(xf.t).d(e);
      CHECK(call(pow_tensor_scalar_run, p, yf).is_ok(), "pow %g", e);
      Args cl;
      cl.tensor(xf.t).d(e).d(e);
      CHECK(call(clamp_run, cl, yf).is_ok(), "clamp %g", e);
    }
    Buf ai({2}, ScalarType::Int64), bi({2}, ScalarType::Int64), yl = out_buf(ScalarType::Int64);
    ai.i64()[0] = INT64_MIN, ai.i64()[1] = 1, bi.i64()[0] = -1, bi.i64()[1] = INT64_MAX;
    for (double alpha : {1e300, -1e300, double(INFINITY), 2.0}) {
      Args add;
      add.tensor(ai.t).tensor(bi.t).d(alpha);
      CHECK(call(add_tensor_run, add, yl).is_ok(), "add i64 alpha %g", alpha);
    }
    Args nan_alpha;
    nan_alpha.tensor(ai.t).tensor(bi.t).d(NAN);
    CHECK(fails(call(sub_tensor_run, nan_alpha, yl)), "sub i64 alpha NaN must fail");
  }
  // layer_norm, batch_norm: shapes of the parameters against the input.
  {
    Buf x = rand_f32({2, 3, 4}), y = out_buf();
    for (auto shape : std::vector<std::vector<int64_t>>{{}, {5}, {3, 5}, {1, 2, 3, 4}, {kBig}, {-4}, {2, 3, 4, 4}}) {
      Args a;
      a.tensor(x.t).ints(shape).none().none().d(1e-5).b(false);
      CHECK(fails(call(layer_norm_run, a, y)), "layer_norm normalized_shape %s must fail", shape_str(shape).c_str());
    }
    Buf w = rand_f32({4, 3});  // 12 elements and 2 dims like [3, 4], but another shape
    Args a;
    a.tensor(x.t).ints({3, 4}).tensor(w.t).none().d(NAN).b(false);
    CHECK(fails(call(layer_norm_run, a, y)), "layer_norm weight of another shape must fail");
    Args ok;
    ok.tensor(x.t).ints({4}).none().none().d(-INFINITY).b(false);
    CHECK(call(layer_norm_run, ok, y).is_ok(), "layer_norm with eps -inf computes (NaN), no UB");
    Buf c3 = rand_f32({3}), c4 = rand_f32({4});
    Args bn;
    bn.tensor(x.t).tensor(c3.t).tensor(c3.t).tensor(c3.t).tensor(c4.t).d(0.1).d(1e-5);
    CHECK(fails(call(batch_norm_no_training_run, bn, y)), "batch_norm running_var of the wrong size must fail");
    Args bn_ok;
    bn_ok.tensor(x.t).none().none().tensor(c3.t).tensor(c3.t).d(NAN).d(INFINITY);
    CHECK(call(batch_norm_no_training_run, bn_ok, y).is_ok(), "batch_norm with NaN/inf scalars computes");
    Buf e({0, 0, 4});
    Args bn_empty;
    bn_empty.tensor(e.t).none().none().tensor(c3.t).tensor(c3.t).d(0.1).d(1e-5);
    CHECK(fails(call(batch_norm_no_training_run, bn_empty, y)), "batch_norm with 0 channels and [3] stats must fail");
  }
  // Broadcasting: where, masked_fill, binary ops, matmul batch dims.
  {
    Buf a = rand_f32({2, 3}), b = rand_f32({4, 3}), cond({3, 3}, ScalarType::Bool), y = out_buf();
    Args w;
    w.tensor(cond.t).tensor(a.t).tensor(a.t);
    CHECK(fails(call(where_self_run, w, y)), "where [3,3] with [2,3] must fail");
    Args m;
    m.tensor(a.t).tensor(cond.t).d(1.0);
    CHECK(fails(call(masked_fill_scalar_run, m, y)), "masked_fill [2,3] with [3,3] must fail");
    Args add;
    add.tensor(a.t).tensor(b.t).i(1);
    CHECK(fails(call(add_tensor_run, add, y)), "add [2,3] + [4,3] must fail");
    Buf p = rand_f32({2, 3, 4}), q = rand_f32({3, 4, 5});
    Args mm;
    mm.tensor(p.t).tensor(q.t);
    CHECK(fails(call(matmul_run, mm, y)), "matmul batch 2 vs 3 must fail");
    Buf z = rand_f32({0, 3, 4}), r = rand_f32({2, 4, 5});
    Args mz;
    mz.tensor(z.t).tensor(r.t);
    CHECK(fails(call(matmul_run, mz, y)), "matmul batch 0 vs 2 must fail");
  }
}

// ---- operators of real models (indexing, scatter, factories, comparisons, dim reductions, attention)

Status call_outs(KernelRunFn fn, Args& a, std::vector<Tensor*> outs) {
  KernelContext ctx;
  return fn(ctx, Span<const Value* const>(a.ptrs.data(), a.ptrs.size()), Span<Tensor* const>(outs.data(), outs.size()));
}

Buf iota_f32(std::vector<int64_t> sizes) {
  Buf b(sizes);
  for (int64_t i = 0; i < b.t.numel(); ++i) b.f()[i] = static_cast<float>(i);
  return b;
}

Buf i64s(std::vector<int64_t> sizes, std::vector<int64_t> v) {
  Buf b(sizes, ScalarType::Int64);
  for (size_t i = 0; i < v.size(); ++i) b.i64()[i] = v[i];
  return b;
}

bool equals_f(Buf& b, std::vector<float> want) {
  if (b.t.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(b.f()[i] == want[i] || (std::isnan(b.f()[i]) && std::isnan(want[i])))) return false;
  return true;
}

bool equals_i(Buf& b, std::vector<int64_t> want) {
  if (b.t.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (b.i64()[i] != want[i]) return false;
  return true;
}

bool equals_b(Buf& b, std::vector<int> want) {
  if (b.t.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (b.t.data_as<uint8_t>()[i] != want[i]) return false;
  return true;
}

void test_indexing() {
  Buf x = iota_f32({2, 3, 4});
  {  // x[:, [2, -1]]
    Buf i = i64s({2}, {2, -1}), y = out_buf();
    Args a;
    a.tensor(x.t).tensors({nullptr, &i.t});
    Status s = call(index_tensor_run, a, y);
    CHECK(s.is_ok() && same_shape(y, {2, 2, 4}), "index [:, i]: %s", s.message().c_str());
    CHECK(equals_f(y, {8, 9, 10, 11, 8, 9, 10, 11, 20, 21, 22, 23, 20, 21, 22, 23}), "index [:, i] values");
  }
  {  // x[:, [[0], [2]], [1, 3, -4]] (i32 and i64 broadcast to [2, 3])
    Buf i({2, 1}, ScalarType::Int32), j = i64s({3}, {1, 3, -4}), y = out_buf();
    i.t.data_as<int32_t>()[0] = 0, i.t.data_as<int32_t>()[1] = 2;
    Args a;
    a.tensor(x.t).tensors({nullptr, &i.t, &j.t});
    Status s = call(index_tensor_run, a, y);
    CHECK(s.is_ok() && same_shape(y, {2, 2, 3}), "index broadcast: %s %s", s.message().c_str(), shape_str(y.shape()).c_str());
    CHECK(equals_f(y, {1, 3, 0, 9, 11, 8, 13, 15, 12, 21, 23, 20}), "index broadcast values");
  }
  {  // x[[1]] with a trailing None: rows of dim 0
    Buf i = i64s({1}, {1}), y = out_buf();
    Args a;
    a.tensor(x.t).tensors({&i.t, nullptr});
    CHECK(call(index_tensor_run, a, y).is_ok() && same_shape(y, {1, 3, 4}) && y.f()[0] == 12, "index [i, :]");
  }
  // Errors: out of range (both signs), bool mask, separated index tensors, too many, float index, too small an output.
  for (int64_t bad : std::vector<int64_t>{3, -4, INT64_MAX, INT64_MIN}) {
    Buf i = i64s({2}, {0, bad}), y = out_buf();
    Args a;
    a.tensor(x.t).tensors({nullptr, &i.t});
    Status s = call(index_tensor_run, a, y);
    CHECK(fails(s) && s.message().find("out of bounds") != std::string::npos, "index %lld must fail: %s",
          static_cast<long long>(bad), s.message().c_str());
  }
  {
    Buf m({2}, ScalarType::Bool), i = i64s({1}, {0}), f({1}), y = out_buf();
    Args a;
    a.tensor(x.t).tensors({&m.t});
    CHECK(call(index_tensor_run, a, y).code() == Error::NotSupported, "bool mask index is NotSupported");
    Args b;
    b.tensor(x.t).tensors({&i.t, nullptr, &i.t});
    CHECK(call(index_tensor_run, b, y).code() == Error::NotSupported, "separated index tensors are NotSupported");
    Args c;
    c.tensor(x.t).tensors({&i.t, &i.t, &i.t, &i.t});
    CHECK(fails(call(index_tensor_run, c, y)), "4 indices into a 3-D tensor must fail");
    Args d;
    d.tensor(x.t).tensors({&f.t});
    CHECK(fails(call(index_tensor_run, d, y)), "f32 index must fail");
    Buf small = out_buf(ScalarType::Float32, 3);
    Args e;
    e.tensor(x.t).tensors({&i.t});
    CHECK(fails(call(index_tensor_run, e, small)), "index beyond the output capacity must fail");
    Args g;
    g.tensor(x.t).i(0);
    CHECK(fails(call(index_tensor_run, g, y)), "index with an Int for indices must fail");
  }
}

void test_scatter_ops() {
  // index_put into a [1, 2, 8, 4] cache at positions [2, 3, 4] of dim 2 (a KV cache update).
  auto fresh_cache = [] {
    Buf c({1, 2, 8, 4});
    for (int64_t i = 0; i < c.t.numel(); ++i) c.f()[i] = -1;
    return c;
  };
  Buf v = iota_f32({1, 2, 3, 4}), pos = i64s({3}, {2, 3, -4});
  auto check_cache = [&](Buf& c, const char* what) {
    bool ok = same_shape(c, {1, 2, 8, 4});
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < 8; ++t)
        for (int64_t d = 0; d < 4; ++d) {
          const float got = c.f()[(h * 8 + t) * 4 + d];
          const float want = t >= 2 && t <= 4 ? v.f()[(h * 3 + (t - 2)) * 4 + d] : -1.0f;
          ok = ok && got == want;
        }
    CHECK(ok, "%s: cache contents", what);
  };
  {
    Buf c = fresh_cache(), y = out_buf();
    Args a;
    a.tensor(c.t).tensors({nullptr, nullptr, &pos.t}).tensor(v.t).b(false);
    Status s = call(index_put_run, a, y);
    CHECK(s.is_ok(), "index_put: %s", s.message().c_str());
    check_cache(y, "index_put copy");
  }
  {  // in place: the output is self (same Tensor, and a second Tensor over the same bytes)
    Buf c = fresh_cache();
    Args a;
    a.tensor(c.t).tensors({nullptr, nullptr, &pos.t}).tensor(v.t).b(false);
    Status s = call_outs(index_put_run, a, {&c.t});
    CHECK(s.is_ok(), "index_put in place: %s", s.message().c_str());
    check_cache(c, "index_put in place");
    Buf c2 = fresh_cache();
    Tensor alias;
    alias.reset(c2.t.data(), c2.t.sizes(), ScalarType::Float32, c2.t.capacity());
    Args b;
    b.tensor(c2.t).tensors({nullptr, nullptr, &pos.t}).tensor(v.t).b(false);
    CHECK(call_outs(index_put_run, b, {&alias}).is_ok(), "index_put into an aliasing tensor");
    check_cache(c2, "index_put aliasing tensor");
    // A partial overlap with self, or an output over the values, is refused.
    Tensor shifted;
    shifted.reset(c2.f() + 1, c2.t.sizes(), ScalarType::Float32, c2.t.capacity() - 4);
    CHECK(fails(call_outs(index_put_run, b, {&shifted})), "index_put output overlapping self partially must fail");
    CHECK(fails(call_outs(index_put_run, b, {&v.t})), "index_put output over the values must fail");
  }
  {  // accumulate with a duplicate index, broadcast scalar values
    Buf x({4}), one({}), i = i64s({3}, {1, 1, -1}), y = out_buf();
    one.f()[0] = 2.5f;
    Args a;
    a.tensor(x.t).tensors({&i.t}).tensor(one.t).b(true);
    CHECK(call(index_put_run, a, y).is_ok() && equals_f(y, {0, 5, 0, 2.5f}), "index_put accumulate");
    Buf bad = i64s({1}, {4}), v3({3});
    Args b;
    b.tensor(x.t).tensors({&bad.t}).tensor(one.t).b(false);
    CHECK(fails(call(index_put_run, b, y)), "index_put index 4 into [4] must fail");
    Args c;
    c.tensor(x.t).tensors({&i.t}).tensor(v3.t).b(false);
    CHECK(call(index_put_run, c, y).is_ok(), "index_put [3] values for 3 indices");
    Buf v2({2});
    Args d;
    d.tensor(x.t).tensors({&i.t}).tensor(v2.t).b(false);
    CHECK(fails(call(index_put_run, d, y)), "index_put values [2] for 3 indices must fail");
    Buf vi({3}, ScalarType::Int64);
    Args e;
    e.tensor(x.t).tensors({&i.t}).tensor(vi.t).b(false);
    CHECK(fails(call(index_put_run, e, y)), "index_put i64 values into f32 must fail");
  }
  // index_copy: the same cache update along dim 2, copied and in place.
  {
    Buf c = fresh_cache(), y = out_buf(), pos = i64s({3}, {2, 3, 4});
    Args a;
    a.tensor(c.t).i(2).tensor(pos.t).tensor(v.t);
    CHECK(call(index_copy_run, a, y).is_ok(), "index_copy");
    check_cache(y, "index_copy");
    CHECK(call_outs(index_copy_run, a, {&c.t}).is_ok(), "index_copy in place");
    check_cache(c, "index_copy in place");
    for (int64_t bad_index : {8, -1}) {
      Buf bad = i64s({3}, {2, 3, bad_index});
      Args b;
      b.tensor(c.t).i(2).tensor(bad.t).tensor(v.t);
      CHECK(fails(call(index_copy_run, b, y)), "index_copy index %d into 8 must fail", int(bad_index));
    }
    Args d;
    d.tensor(c.t).i(1).tensor(pos.t).tensor(v.t);
    CHECK(fails(call(index_copy_run, d, y)), "index_copy source of the wrong shape must fail");
  }
  // slice_scatter with ATen clamping: start -3 (wraps), end INT64_MAX, step 2.
  {
    Buf x({2, 5}), src = iota_f32({2, 2}), y = out_buf();
    Args a;
    a.tensor(x.t).tensor(src.t).i(1).i(-3).i(INT64_MAX).i(2);
    Status s = call(slice_scatter_run, a, y);
    CHECK(s.is_ok() && equals_f(y, {0, 0, 0, 0, 1, 0, 0, 2, 0, 3}), "slice_scatter: %s", s.message().c_str());
    CHECK(call_outs(slice_scatter_run, a, {&x.t}).is_ok() && equals_f(x, {0, 0, 0, 0, 1, 0, 0, 2, 0, 3}),
          "slice_scatter in place");
    Buf src3 = iota_f32({2, 3});
    Args b;
    b.tensor(x.t).tensor(src3.t).i(1).i(-3).i(INT64_MAX).i(2);
    CHECK(fails(call(slice_scatter_run, b, y)), "slice_scatter src of the wrong shape must fail");
    Args c;
    c.tensor(x.t).tensor(src.t).i(1).i(0).i(2).i(0);
    CHECK(fails(call(slice_scatter_run, c, y)), "slice_scatter step 0 must fail");
    Buf empty({2, 0});
    Args d;
    d.tensor(x.t).tensor(empty.t).i(1).i(INT64_MIN).i(INT64_MIN).i(1);
    CHECK(call(slice_scatter_run, d, y).is_ok(), "slice_scatter of an empty slice at INT64_MIN");
  }
  // Un-normalized slice and select arguments (dynamic shapes): clamp / wrap once like ATen.
  {
    Buf x = iota_f32({2, 5}), y = out_buf();
    Args a;
    a.tensor(x.t).i(1).i(-2).i(INT64_MAX).i(1);
    CHECK(call(slice_tensor_run, a, y).is_ok() && equals_f(y, {3, 4, 8, 9}), "slice [-2:INT64_MAX]");
    Args b;
    b.tensor(x.t).i(1).i(-100).i(-4).i(1);
    CHECK(call(slice_tensor_run, b, y).is_ok() && equals_f(y, {0, 5}), "slice [-100:-4]");
    Args c;
    c.tensor(x.t).i(1).i(7).i(3).i(1);
    CHECK(call(slice_tensor_run, c, y).is_ok() && same_shape(y, {2, 0}), "slice [7:3] is empty");
    Args d;
    d.tensor(x.t).i(1).i(-1);
    CHECK(call(select_int_run, d, y).is_ok() && equals_f(y, {4, 9}), "select -1");
    Args e;
    e.tensor(x.t).i(1).i(-6);
    CHECK(fails(call(select_int_run, e, y)), "select -6 of 5 must fail");
  }
  // index_select and gather.
  {
    Buf x = iota_f32({2, 3}), i = i64s({3}, {2, 0, 2}), y = out_buf();
    Args a;
    a.tensor(x.t).i(1).tensor(i.t);
    CHECK(call(index_select_run, a, y).is_ok() && equals_f(y, {2, 0, 2, 5, 3, 5}), "index_select");
    for (int64_t bad_index : {3, -1}) {
      Buf bad = i64s({1}, {bad_index});
      Args b;
      b.tensor(x.t).i(1).tensor(bad.t);
      CHECK(fails(call(index_select_run, b, y)), "index_select %d of 3 must fail (ATen does not wrap)", int(bad_index));
    }
    Buf gi = i64s({2, 2}, {2, 0, 2, 1});
    Args g;
    g.tensor(x.t).i(1).tensor(gi.t).b(false);
    CHECK(call(gather_run, g, y).is_ok() && equals_f(y, {2, 0, 5, 4}), "gather");
    Buf gbad = i64s({2, 2}, {0, 0, 0, -1});
    Args h;
    h.tensor(x.t).i(1).tensor(gbad.t).b(false);
    CHECK(fails(call(gather_run, h, y)), "gather -1 must fail (ATen does not wrap)");
    Buf gbig = i64s({3, 1}, {0, 0, 0});
    Args k;
    k.tensor(x.t).i(1).tensor(gbig.t).b(false);
    CHECK(fails(call(gather_run, k, y)), "gather index larger than self must fail");
  }
}

void test_factories() {
  {
    Buf y = out_buf(ScalarType::Int64);
    Args a;
    a.i(0).i(10).i(3).none().none().none().none();
    CHECK(call(arange_start_step_run, a, y).is_ok() && equals_i(y, {0, 3, 6, 9}), "arange(0, 10, 3)");
    Args b;
    b.i(5).i(-1).i(-2).i(static_cast<int64_t>(ScalarType::Int64)).none().none().none();
    CHECK(call(arange_start_step_run, b, y).is_ok() && equals_i(y, {5, 3, 1}), "arange(5, -1, -2)");
    Buf f = out_buf();
    Args c;
    c.d(0.0).d(1.0).d(0.25).none().none().none().none();
    CHECK(call(arange_start_step_run, c, f).is_ok() && equals_f(f, {0, 0.25f, 0.5f, 0.75f}), "arange(0., 1., .25)");
    Args d;
    d.i(0).i(4).none().none().none().none();
    CHECK(call(arange_start_run, d, f).is_ok() && equals_f(f, {0, 1, 2, 3}), "arange.start f32");
    // Errors: step 0, wrong direction, NaN, huge sizes, a dtype that is not the output's.
    for (auto args : std::vector<std::vector<double>>{{0, 10, 0}, {0, 10, -1}, {0, NAN, 1}, {0, 1e300, 1e-300}}) {
      Args e;
      e.d(args[0]).d(args[1]).d(args[2]).none().none().none().none();
      CHECK(fails(call(arange_start_step_run, e, f)), "arange(%g, %g, %g) must fail", args[0], args[1], args[2]);
    }
    Args g;
    g.i(INT64_MIN).i(INT64_MAX).i(1).none().none().none().none();
    CHECK(fails(call(arange_start_step_run, g, y)), "arange(INT64_MIN, INT64_MAX) must fail");
    Args h;
    h.i(0).i(INT64_MAX).i(1).none().none().none().none();
    CHECK(fails(call(arange_start_step_run, h, y)), "arange(0, INT64_MAX) beyond the capacity must fail");
    Args k;
    k.i(0).i(3).i(1).i(static_cast<int64_t>(ScalarType::Float32)).none().none().none();
    CHECK(fails(call(arange_start_step_run, k, y)), "arange dtype f32 into an i64 output must fail");
  }
  {
    Buf y = out_buf();
    Args a;
    a.ints({2, 3}).d(1.5).none().none().none().none();
    CHECK(call(full_run, a, y).is_ok() && equals_f(y, {1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}), "full");
    for (auto sizes : std::vector<std::vector<int64_t>>{{kBig, kBig}, {-1}, {1 << 30, 1 << 30}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
      Args b;
      b.ints(sizes).d(1.0).none().none().none().none();
      CHECK(fails(call(full_run, b, y)), "full %s must fail", shape_str(sizes).c_str());
    }
    Buf yi = out_buf(ScalarType::Int64);
    Args c;
    c.ints({2}).i(INT64_MIN + 1).none().none().none().none();
    CHECK(call(full_run, c, yi).is_ok() && equals_i(yi, {INT64_MIN + 1, INT64_MIN + 1}), "full i64 exact");
    Buf x({3, 1}, ScalarType::Int64), yb = out_buf(ScalarType::Bool);
    Args d;
    d.tensor(x.t).i(2).none().none().none().none().none();
    CHECK(call(full_like_run, d, yb).is_ok() && same_shape(yb, {3, 1}) && equals_b(yb, {1, 1, 1}), "full_like bool");
    Args e;
    e.d(-2.0).none().none().none().none();
    CHECK(call(scalar_tensor_run, e, y).is_ok() && same_shape(y, {}) && y.f()[0] == -2.0f, "scalar_tensor");
  }
}

void test_compare_ops() {
  Buf a = i64s({2, 3}, {1, 2, 3, 4, 5, 6}), b = i64s({3}, {2, 2, 7}), y = out_buf(ScalarType::Bool);
  struct {
    KernelRunFn fn;
    std::vector<int> want;
    const char* name;
  } cases[] = {{eq_tensor_run, {0, 1, 0, 0, 0, 0}, "eq"}, {ne_tensor_run, {1, 0, 1, 1, 1, 1}, "ne"},
               {lt_tensor_run, {1, 0, 1, 0, 0, 1}, "lt"}, {le_tensor_run, {1, 1, 1, 0, 0, 1}, "le"},
               {gt_tensor_run, {0, 0, 0, 1, 1, 0}, "gt"}, {ge_tensor_run, {0, 1, 0, 1, 1, 0}, "ge"}};
  for (auto& c : cases) {
    Args args;
    args.tensor(a.t).tensor(b.t);
    CHECK(call(c.fn, args, y).is_ok() && same_shape(y, {2, 3}) && equals_b(y, c.want), "%s.Tensor", c.name);
  }
  {  // mixed i32 vs f32 compares in f32; f32 vs a Double scalar rounds the scalar to f32
    Buf i({3}, ScalarType::Int32), f({3});
    i.t.data_as<int32_t>()[0] = 1, i.t.data_as<int32_t>()[1] = 2, i.t.data_as<int32_t>()[2] = 3;
    f.f()[0] = 1.5f, f.f()[1] = 2.0f, f.f()[2] = NAN;
    Args m;
    m.tensor(i.t).tensor(f.t);
    CHECK(call(le_tensor_run, m, y).is_ok() && equals_b(y, {1, 1, 0}), "le i32 vs f32");
    f.f()[0] = 0.1f;
    Args s;
    s.tensor(f.t).d(0.1);
    CHECK(call(eq_scalar_run, s, y).is_ok() && equals_b(y, {1, 0, 0}), "eq.Scalar f32 vs 0.1");
    Args t;
    t.tensor(i.t).d(1.5);
    CHECK(call(gt_scalar_run, t, y).is_ok() && equals_b(y, {0, 1, 1}), "gt.Scalar i32 vs 1.5");
    Args u;
    u.tensor(a.t).i(INT64_MAX);
    CHECK(call(lt_scalar_run, u, y).is_ok() && equals_b(y, {1, 1, 1, 1, 1, 1}), "lt.Scalar i64 vs INT64_MAX");
    Buf yf = out_buf();
    Args w;
    w.tensor(a.t).tensor(b.t);
    CHECK(fails(call(eq_tensor_run, w, yf)), "eq into an f32 output must fail");
    Buf c = i64s({2}, {1, 2});
    Args x;
    x.tensor(a.t).tensor(c.t);
    CHECK(fails(call(eq_tensor_run, x, y)), "eq [2,3] with [2] must fail");
  }
  {
    Buf p({3}), q({3}), y2 = out_buf();
    p.f()[0] = 1, p.f()[1] = NAN, p.f()[2] = -1;
    q.f()[0] = 2, q.f()[1] = 0, q.f()[2] = NAN;
    Args m;
    m.tensor(p.t).tensor(q.t);
    CHECK(call(maximum_run, m, y2).is_ok() && equals_f(y2, {2, NAN, NAN}), "maximum propagates NaN");
    CHECK(call(minimum_run, m, y2).is_ok() && equals_f(y2, {1, NAN, NAN}), "minimum propagates NaN");
    Args n;
    n.tensor(p.t).tensor(a.t);
    CHECK(fails(call(maximum_run, n, y2)), "maximum of f32 and i64 must fail (the exporter casts)");
    Args l;
    l.tensor(p.t);
    CHECK(call(logical_not_run, l, y).is_ok() && equals_b(y, {0, 0, 0}), "logical_not f32 (NaN is true)");
    Buf m1({3}, ScalarType::Bool), m2({3}, ScalarType::Bool);
    m1.t.data_as<uint8_t>()[0] = 1, m1.t.data_as<uint8_t>()[1] = 7;  // a corrupt bool byte reads as true
    m2.t.data_as<uint8_t>()[1] = 1;
    Args ba;
    ba.tensor(m1.t).tensor(m2.t);
    CHECK(call(bitwise_and_run, ba, y).is_ok() && equals_b(y, {0, 1, 0}), "bitwise_and bool");
    CHECK(call(logical_or_run, ba, y).is_ok() && equals_b(y, {1, 1, 0}), "logical_or");
    CHECK(call(logical_xor_run, ba, y).is_ok() && equals_b(y, {1, 0, 0}), "logical_xor");
    Args bn;
    bn.tensor(m1.t);
    CHECK(call(bitwise_not_run, bn, y).is_ok() && equals_b(y, {0, 0, 1}), "bitwise_not bool");
    Buf yi = out_buf(ScalarType::Int64);
    Args bi;
    bi.tensor(a.t);
    CHECK(call(bitwise_not_run, bi, yi).is_ok() && equals_i(yi, {-2, -3, -4, -5, -6, -7}), "bitwise_not i64");
    Args bf;
    bf.tensor(p.t);
    CHECK(fails(call(bitwise_not_run, bf, y2)), "bitwise_not f32 must fail");
  }
}

void test_dim_reductions() {
  Buf x({2, 4});
  const float xv[] = {1, 3, 3, 0, 1, NAN, 2, NAN};
  std::memcpy(x.f(), xv, sizeof xv);
  Buf yi = out_buf(ScalarType::Int64), y = out_buf();
  {
    Args a;
    a.tensor(x.t).i(1).b(false);
    CHECK(call(argmax_run, a, yi).is_ok() && equals_i(yi, {1, 1}), "argmax: first max, first NaN");
    CHECK(call(argmin_run, a, yi).is_ok() && equals_i(yi, {3, 1}), "argmin");
    Args b;
    b.tensor(x.t).none().b(true);
    CHECK(call(argmax_run, b, yi).is_ok() && same_shape(yi, {1, 1}) && equals_i(yi, {5}), "argmax flat keepdim");
    Buf e({0, 3});
    Args c;
    c.tensor(e.t).none().b(false);
    CHECK(fails(call(argmax_run, c, yi)), "argmax of an empty tensor must fail");
    Args d;
    d.tensor(x.t).i(2).b(false);
    CHECK(fails(call(argmax_run, d, yi)), "argmax dim 2 of a 2-D tensor must fail");
  }
  {
    Buf vals = out_buf(), idx = out_buf(ScalarType::Int64);
    Args a;
    a.tensor(x.t).i(1).b(true);
    CHECK(call_outs(max_dim_run, a, {&vals.t, &idx.t}).is_ok() && same_shape(idx, {2, 1}) && equals_i(idx, {1, 1}) &&
              equals_f(vals, {3, NAN}),
          "max.dim");
    CHECK(fails(call_outs(max_dim_run, a, {&vals.t})), "max.dim with one output must fail");
    Args b;
    b.tensor(x.t).ints({0, 1}).b(false);
    CHECK(call(amax_run, b, y).is_ok() && same_shape(y, {}) && std::isnan(y.f()[0]), "amax over all dims is NaN");
    Buf z = iota_f32({2, 3, 2});
    Args c;
    c.tensor(z.t).ints({0, 2}).b(false);
    CHECK(call(amin_run, c, y).is_ok() && equals_f(y, {0, 2, 4}), "amin over dims 0 and 2");
    Args d;
    d.tensor(z.t).ints({0, 0}).b(false);
    CHECK(fails(call(amin_run, d, y)), "amin with a repeated dim must fail");
  }
  {
    Buf z({2, 5});
    const float zv[] = {0.5f, -1, 4, 2, 3, 9, 8, 7, 6, 5};
    std::memcpy(z.f(), zv, sizeof zv);
    Buf vals = out_buf(), idx = out_buf(ScalarType::Int64);
    Args a;
    a.tensor(z.t).i(3).i(-1).b(true).b(true);
    Status s = call_outs(topk_run, a, {&vals.t, &idx.t});
    CHECK(s.is_ok() && equals_f(vals, {4, 3, 2, 9, 8, 7}) && equals_i(idx, {2, 4, 3, 0, 1, 2}), "topk largest: %s",
          s.message().c_str());
    Args b;
    b.tensor(z.t).i(1).i(0).b(false).b(true);
    CHECK(call_outs(topk_run, b, {&vals.t, &idx.t}).is_ok() && same_shape(vals, {1, 5}) &&
              equals_f(vals, {0.5f, -1, 4, 2, 3}) && equals_i(idx, {0, 0, 0, 0, 0}),
          "topk smallest along dim 0");
    for (int64_t k : std::vector<int64_t>{6, -1, INT64_MAX}) {
      Args c;
      c.tensor(z.t).i(k).i(-1).b(true).b(true);
      CHECK(fails(call_outs(topk_run, c, {&vals.t, &idx.t})), "topk k=%lld must fail", static_cast<long long>(k));
    }
    Args d;
    d.tensor(z.t).i(0).i(-1).b(true).b(true);
    CHECK(call_outs(topk_run, d, {&vals.t, &idx.t}).is_ok() && same_shape(vals, {2, 0}), "topk k=0");
    // Larger rows against a sort.
    Buf r = rand_f32({3, 200});
    Args e;
    e.tensor(r.t).i(50).i(1).b(true).b(true);
    CHECK(call_outs(topk_run, e, {&vals.t, &idx.t}).is_ok(), "topk 50 of 200");
    bool ok = true;
    for (int row = 0; row < 3; ++row) {
      std::vector<float> sorted(r.f() + row * 200, r.f() + row * 200 + 200);
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      for (int j = 0; j < 50; ++j)
        ok = ok && vals.f()[row * 50 + j] == sorted[j] && r.f()[row * 200 + idx.i64()[row * 50 + j]] == sorted[j];
    }
    CHECK(ok, "topk 50 of 200 matches a sort");
  }
  {
    Buf c({2, 3}, ScalarType::Int32);
    const int32_t cv[] = {1, 2, 3, INT32_MAX, 1, -5};
    std::memcpy(c.t.data(), cv, sizeof cv);
    Args a;
    a.tensor(c.t).i(1).none();
    CHECK(call(cumsum_run, a, yi).is_ok() && equals_i(yi, {1, 3, 6, INT32_MAX, INT32_MAX + 1LL, INT32_MAX - 4LL}),
          "cumsum i32 -> i64");
    Buf f = iota_f32({2, 3});
    Args b;
    b.tensor(f.t).i(0).i(static_cast<int64_t>(ScalarType::Float32));
    CHECK(call(cumsum_run, b, y).is_ok() && equals_f(y, {0, 1, 2, 3, 5, 7}), "cumsum f32 dim 0");
    Args d;
    d.tensor(f.t).i(0).i(static_cast<int64_t>(ScalarType::Float64));
    CHECK(fails(call(cumsum_run, d, y)), "cumsum dtype f64 into f32 must fail");
  }
  {
    Buf f({2, 2});
    const float fv[] = {3, -4, 0, -2};
    std::memcpy(f.f(), fv, sizeof fv);
    Args a;
    a.tensor(f.t).d(2.0).ints({1}).b(false).none();
    CHECK(call(linalg_vector_norm_run, a, y).is_ok() && equals_f(y, {5, 2}), "vector_norm ord 2");
    Args b;
    b.tensor(f.t).d(INFINITY).none().b(true).none();
    CHECK(call(linalg_vector_norm_run, b, y).is_ok() && same_shape(y, {1, 1}) && equals_f(y, {4}), "vector_norm inf");
    Args c;
    c.tensor(f.t).i(1).ints({0}).b(false).none();
    CHECK(call(linalg_vector_norm_run, c, y).is_ok() && equals_f(y, {3, 6}), "vector_norm ord 1 (Int)");
  }
}

void test_binary_math_ops() {
  Buf a({4}), b({4}), y = out_buf();
  const float av[] = {7, -7, 7.5f, -7.5f}, bv[] = {2, 2, -2, -2};
  std::memcpy(a.f(), av, sizeof av);
  std::memcpy(b.f(), bv, sizeof bv);
  Args fl;
  fl.tensor(a.t).tensor(b.t).str("floor");
  CHECK(call(div_tensor_mode_run, fl, y).is_ok() && equals_f(y, {3, -4, -4, 3}), "div floor");
  Args tr;
  tr.tensor(a.t).tensor(b.t).str("trunc");
  CHECK(call(div_tensor_mode_run, tr, y).is_ok() && equals_f(y, {3, -3, -3, 3}), "div trunc");
  Args no;
  no.tensor(a.t).tensor(b.t).none();
  CHECK(call(div_tensor_mode_run, no, y).is_ok() && equals_f(y, {3.5f, -3.5f, -3.75f, 3.75f}), "div true");
  Args bad;
  bad.tensor(a.t).tensor(b.t).str("round");
  CHECK(fails(call(div_tensor_mode_run, bad, y)), "div rounding_mode round must fail");
  Args rm;
  rm.tensor(a.t).tensor(b.t);
  CHECK(call(remainder_tensor_run, rm, y).is_ok() && equals_f(y, {1, 1, -0.5f, -1.5f}), "remainder f32");
  Buf ia = i64s({4}, {7, -7, INT64_MIN, 5}), ib = i64s({4}, {2, 2, -1, -3}), yi = out_buf(ScalarType::Int64);
  Args fi;
  fi.tensor(ia.t).tensor(ib.t).str("floor");
  CHECK(call(div_tensor_mode_run, fi, yi).is_ok() && equals_i(yi, {3, -4, INT64_MIN, -2}), "div floor i64");
  Args ri;
  ri.tensor(ia.t).tensor(ib.t);
  CHECK(call(remainder_tensor_run, ri, yi).is_ok() && equals_i(yi, {1, 1, 0, -1}), "remainder i64");
  Buf iz = i64s({4}, {1, 0, 1, 1});
  Args zi;
  zi.tensor(ia.t).tensor(iz.t).str("trunc");
  CHECK(fails(call(div_tensor_mode_run, zi, yi)), "integer division by zero must fail");
  Args ps;
  ps.d(2.0).tensor(b.t);
  CHECK(call(pow_scalar_run, ps, y).is_ok() && equals_f(y, {4, 4, 0.25f, 0.25f}), "pow.Scalar");
  Args pt;
  pt.tensor(b.t).tensor(b.t);
  CHECK(call(pow_tensor_tensor_run, pt, y).is_ok() && equals_f(y, {4, 4, 0.25f, 0.25f}), "pow.Tensor_Tensor");
  Args pi;
  pi.tensor(ia.t).tensor(iz.t);
  CHECK(call(pow_tensor_tensor_run, pi, yi).is_ok() && equals_i(yi, {7, 1, INT64_MIN, 5}), "pow i64");
  Args sc;
  sc.tensor(a.t).d(2.0);
  CHECK(call(remainder_scalar_run, sc, y).is_ok() && equals_f(y, {1, 1, 1.5f, 0.5f}), "remainder.Scalar");
  Buf u({3}), yu = out_buf();
  u.f()[0] = -2, u.f()[1] = 0, u.f()[2] = NAN;
  Args sg;
  sg.tensor(u.t);
  CHECK(call(sign_run, sg, yu).is_ok() && equals_f(yu, {-1, 0, NAN}), "sign");
  CHECK(call(reciprocal_run, sg, yu).is_ok() && equals_f(yu, {-0.5f, INFINITY, NAN}), "reciprocal");
  CHECK(call(cos_run, sg, yu).is_ok() && std::fabs(yu.f()[0] - std::cos(-2.0f)) < 1e-6f, "cos");
}

// softmax(q k^T * scale + mask) v, naively, in double. mask: -inf for masked-out, or 0.
void naive_attention(const float* q, const float* k, const float* v, float* y, int64_t L, int64_t S, int64_t E,
                     int64_t Ev, double scale, const std::function<bool(int64_t, int64_t)>& keep) {
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> w(S);
    double mx = -INFINITY, sum = 0;
    for (int64_t s = 0; s < S; ++s) {
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += double(q[l * E + e]) * k[s * E + e];
      w[s] = keep(l, s) ? dot * scale : -INFINITY;
      mx = std::max(mx, w[s]);
    }
    for (int64_t s = 0; s < S; ++s) sum += w[s] = std::isinf(mx) ? 0 : std::exp(w[s] - mx);
    for (int64_t e = 0; e < Ev; ++e) {
      double acc = 0;
      for (int64_t s = 0; s < S; ++s) acc += w[s] * v[s * Ev + e];
      y[l * Ev + e] = sum > 0 ? static_cast<float>(acc / sum) : 0.0f;
    }
  }
}

void test_attention() {
  const int64_t B = 2, H = 4, Hkv = 2, L = 5, S = 7, E = 8, Ev = 6;
  Buf q = rand_f32({B, H, L, E}), k = rand_f32({B, Hkv, S, E}), v = rand_f32({B, Hkv, S, Ev});
  Buf mask({L, S}, ScalarType::Bool);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t s = 0; s < S; ++s) mask.t.data_as<uint8_t>()[l * S + s] = (s + l) % 3 != 0 && l != 2;  // row 2 fully masked
  for (int variant = 0; variant < 3; ++variant) {
    const bool causal = variant == 1, with_mask = variant == 2;
    Buf y = out_buf();
    Args a;
    a.tensor(q.t).tensor(k.t).tensor(v.t);
    with_mask ? a.tensor(mask.t) : a.none();
    a.d(0.0).b(causal);
    variant == 0 ? a.d(0.3) : a.none();
    a.b(true);
    Status s = call(sdpa_run, a, y);
    CHECK(s.is_ok() && same_shape(y, {B, H, L, Ev}), "sdpa variant %d: %s", variant, s.message().c_str());
    std::vector<float> want(B * H * L * Ev);
    const double scale = variant == 0 ? 0.3 : 1.0 / std::sqrt(double(E));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = b * Hkv + h / (H / Hkv);
        naive_attention(q.f() + (b * H + h) * L * E, k.f() + kv * S * E, v.f() + kv * S * Ev,
                        want.data() + (b * H + h) * L * Ev, L, S, E, Ev, scale, [&](int64_t l, int64_t s) {
                          if (causal) return s <= l;
                          if (with_mask) return mask.t.data_as<uint8_t>()[l * S + s] != 0;
                          return true;
                        });
      }
    expect_close("sdpa", y.f(), want.data(), static_cast<int64_t>(want.size()), 1e-5f);
  }
  Buf y = out_buf();
  Args drop;
  drop.tensor(q.t).tensor(k.t).tensor(v.t).none().d(0.1).b(false).none().b(true);
  CHECK(fails(call(sdpa_run, drop, y)), "sdpa dropout 0.1 must fail");
  Args nogqa;
  nogqa.tensor(q.t).tensor(k.t).tensor(v.t).none().d(0.0).b(false).none().b(false);
  CHECK(fails(call(sdpa_run, nogqa, y)), "sdpa H != Hkv without enable_gqa must fail");
  Buf m2({3, S}, ScalarType::Bool);
  Args badmask;
  badmask.tensor(q.t).tensor(k.t).tensor(v.t).tensor(m2.t).d(0.0).b(false).none().b(true);
  CHECK(fails(call(sdpa_run, badmask, y)), "sdpa mask [3, S] must fail");
  Buf k2 = rand_f32({B, Hkv, S, E + 1});
  Args bade;
  bade.tensor(q.t).tensor(k2.t).tensor(v.t).none().d(0.0).b(false).none().b(true);
  CHECK(fails(call(sdpa_run, bade, y)), "sdpa key with another E must fail");
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
  test_expect_close();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    test_gemm_random();
    test_linear();
    test_mm_family();
    test_matmul();
    test_conv2d();
    test_fused();
    test_pools();
    test_softmax_layer_norm();
    test_binary_and_reduce();
    test_copy_ops();
    test_unary();
    test_hostile_windows();
    test_hostile_shapes();
    test_hostile_values();
    test_indexing();
    test_scatter_ops();
    test_factories();
    test_compare_ops();
    test_dim_reductions();
    test_binary_math_ops();
    test_attention();
  }
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
