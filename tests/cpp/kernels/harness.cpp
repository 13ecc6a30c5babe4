// The kernel test harness (harness.h) and the test runner's main.
#include "harness.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "executor/packed_constants.h"
#include "registry/registry_internal.h"

namespace kiln::test {

int g_checks = 0;
int g_failures = 0;

namespace {

std::vector<TestCase>& tests() {
  static std::vector<TestCase> all;
  return all;
}

std::mt19937_64& rng() {
  static std::mt19937_64 r(1234);
  return r;
}

const char* g_current_test = "";

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

std::shared_ptr<uint8_t> aligned_bytes(size_t n) {
  n = (n + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, n == 0 ? 64 : n));
  std::memset(p, 0, n == 0 ? 64 : n);
  return std::shared_ptr<uint8_t>(p, AlignedFree());
}

}  // namespace

void report_failure(const char* file, int line, const std::string& message) {
  ++g_failures;
  std::fprintf(stderr, "FAIL [%s] %s:%d: %s\n", g_current_test, file, line, message.c_str());
}

bool register_test(const char* name, void (*fn)()) {
  tests().push_back({name, fn});
  return true;
}

uint64_t next_random() { return rng()(); }
float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }
int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng()); }

TestTensor::TestTensor(std::vector<int64_t> sizes, ScalarType dtype, int64_t capacity_elems, bool constant) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (capacity_elems < 0) capacity_elems = n;
  const size_t bytes = static_cast<size_t>(capacity_elems) * element_size(dtype);
  storage = aligned_bytes(bytes);
  t.reset(storage.get(), Span<const int64_t>(sizes.data(), sizes.size()), dtype, bytes);
  t.set_constant(constant);
}

TestTensor TestTensor::random(std::vector<int64_t> sizes, bool constant, float lo, float hi) {
  TestTensor r(std::move(sizes), ScalarType::Float32, -1, constant);
  for (int64_t i = 0; i < r.numel(); ++i) r.f()[i] = uniform(lo, hi);
  return r;
}

TestTensor TestTensor::output(int64_t capacity_elems, ScalarType dtype) { return TestTensor({0}, dtype, capacity_elems); }

Args& Args::push(const Value& v) {
  values_.push_back(v);
  ptrs_.push_back(&values_.back());
  return *this;
}

Args& Args::tensor(TestTensor& t) {
  Value v;
  v.kind = ValueKind::Tensor;
  v.tensor = &t.t;
  return push(v);
}
Args& Args::none() { return push(Value()); }
Args& Args::i(int64_t x) {
  Value v;
  v.kind = ValueKind::Int;
  v.i = x;
  return push(v);
}
Args& Args::d(double x) {
  Value v;
  v.kind = ValueKind::Double;
  v.d = x;
  return push(v);
}
Args& Args::b(bool x) {
  Value v;
  v.kind = ValueKind::Bool;
  v.b = x;
  return push(v);
}
Args& Args::ints(std::vector<int64_t> xs) {
  lists_.push_back(std::move(xs));
  Value v;
  v.kind = ValueKind::IntList;
  v.ints.data = lists_.back().data();
  v.ints.size = lists_.back().size();
  return push(v);
}
Args& Args::str(const char* s) {
  strings_.emplace_back(s);
  Value v;
  v.kind = ValueKind::String;
  v.str.data = strings_.back().data();
  v.str.size = strings_.back().size();
  return push(v);
}

KernelRun run_kernel(const char* op, const Args& args, const std::vector<TestTensor*>& outputs, int32_t tier, Isa isa,
                     const std::vector<ResizeAfterPrepare>& resize) {
  KernelRun result;
  std::vector<ScalarType> dtypes;
  for (const Value* v : args.span()) {
    if (v->is_tensor()) dtypes.push_back(v->tensor->dtype());
  }
  const internal::KernelEntry* kernel = nullptr;
  for (const internal::KernelEntry* k : internal::find_kernels(op, dtypes)) {
    if (k->tier == tier) {
      kernel = k;
      break;
    }
  }
  if (kernel == nullptr) return result;
  result.found = true;

  std::vector<Tensor*> outs;
  for (TestTensor* o : outputs) outs.push_back(&o->t);
  Span<Tensor* const> out_span(outs.data(), outs.size());
  internal::PackedConstantCache cache;
  internal::KernelServices services;
  services.cache = &cache;
  services.memory_limit = uint64_t{1} << 40;
  KernelContext ctx;
  ctx.op_name = op;
  ctx.isa = isa;
  ctx.services = &services;
  void* state = nullptr;
  if (kernel->prepare != nullptr) {
    // At method load a method input has its sizes but no storage yet: prepare sees every
    // non-constant tensor argument that way, so a prepare that reads one's data fails here too.
    std::vector<Tensor> bare(args.span().size());
    std::vector<Value> values(args.span().size());
    std::vector<const Value*> prepare_args;
    for (size_t i = 0; i < args.span().size(); ++i) {
      values[i] = *args.span()[i];
      const Tensor* t = values[i].is_tensor() ? values[i].tensor : nullptr;
      if (t != nullptr && !t->is_constant()) {
        bare[i].reset(nullptr, t->sizes(), t->dtype(), t->capacity());
        values[i].tensor = &bare[i];
      }
      prepare_args.push_back(&values[i]);
    }
    result.status = kernel->prepare(ctx, Span<const Value* const>(prepare_args.data(), prepare_args.size()), out_span,
                                    &state);
    result.packed_bytes = services.packed_bytes;
    if (result.status.code() == Error::NotSupported) {
      result.declined = true;
      return result;
    }
    if (!result.status.is_ok()) return result;
  }
  ctx.services = nullptr;
  ctx.state = state;
  const size_t call = (ctx.scratch_bytes + 63) / 64 * 64, worker = (ctx.worker_scratch_bytes + 63) / 64 * 64;
  const size_t scratch_bytes = call + worker * static_cast<size_t>(num_threads());
  std::shared_ptr<uint8_t> scratch = aligned_bytes(scratch_bytes);
  // Scratch holds whatever the method's other instructions left there: NaNs
  // here, so that a kernel reading scratch it did not write shows in its output.
  std::memset(scratch.get(), 0xff, scratch_bytes);
  ctx.scratch = ctx.scratch_bytes > 0 ? scratch.get() : nullptr;
  ctx.worker_scratch_base = ctx.worker_scratch_bytes > 0 ? scratch.get() + call : nullptr;
  ctx.worker_scratch_stride = ctx.worker_scratch_bytes > 0 ? worker : 0;
  std::vector<std::vector<int64_t>> prepared_sizes;
  for (const ResizeAfterPrepare& r : resize) {
    prepared_sizes.push_back(r.tensor->shape());
    Status st = r.tensor->t.resize(Span<const int64_t>(r.sizes.data(), r.sizes.size()));
    KILN_EXPECT(st.is_ok(), "resizing an argument after prepare: %s", st.to_string().c_str());
  }
  result.status = kernel->run(ctx, args.span(), out_span);
  for (size_t i = 0; i < resize.size(); ++i) {
    const std::vector<int64_t>& sizes = prepared_sizes[i];
    (void)resize[i].tensor->t.resize(Span<const int64_t>(sizes.data(), sizes.size()));
  }
  if (kernel->release != nullptr && state != nullptr) kernel->release(state);
  return result;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Baseline, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

bool expect_close(const std::string& what, const float* got, const float* want, int64_t n, Tolerance tol) {
  int64_t worst_at = -1;
  double worst = 0;  // excess of |got - want| over the allowed error; infinite for a NaN/inf mismatch
  for (int64_t i = 0; i < n; ++i) {
    const float g = got[i], w = want[i];
    double excess;
    if (std::isnan(g) || std::isnan(w)) {
      excess = std::isnan(g) && std::isnan(w) ? 0.0 : INFINITY;
    } else if (std::isinf(g) || std::isinf(w)) {
      excess = g == w ? 0.0 : INFINITY;
    } else {
      excess = std::fabs(double(g) - double(w)) - (tol.atol + tol.rtol * std::fabs(double(w)));
    }
    if (excess > 0 && (worst_at < 0 || excess > worst)) worst = excess, worst_at = i;
  }
  KILN_EXPECT(worst_at < 0, "%s: %" PRId64 " elements, worst at index %" PRId64 ": got %.9g, want %.9g (rtol %g, atol %g)",
              what.c_str(), n, worst_at, worst_at >= 0 ? got[worst_at] : 0.0f, worst_at >= 0 ? want[worst_at] : 0.0f,
              tol.rtol, tol.atol);
  return worst_at < 0;
}

int expect_tiers_match(const std::string& what, const char* op, const Args& args,
                       const std::vector<int64_t>& output_capacity, Tolerance tol, bool may_decline,
                       const std::vector<ResizeAfterPrepare>& resize) {
  auto make_outputs = [&] {
    std::vector<TestTensor> outs;
    for (int64_t cap : output_capacity) outs.push_back(TestTensor::output(cap));
    return outs;
  };
  auto pointers = [](std::vector<TestTensor>& outs) {
    std::vector<TestTensor*> p;
    for (TestTensor& o : outs) p.push_back(&o);
    return p;
  };
  std::vector<TestTensor> want = make_outputs();
  KernelRun ref = run_kernel(op, args, pointers(want), kTierPortable, Isa::Baseline, resize);
  KILN_EXPECT(ref.found, "%s: no portable kernel for %s", what.c_str(), op);
  KILN_EXPECT(ref.status.is_ok(), "%s: portable %s failed: %s", what.c_str(), op, ref.status.to_string().c_str());
  if (!ref.found || !ref.status.is_ok()) return 0;
  int ran = 0;
  for (Isa isa : supported_isas()) {
    std::vector<TestTensor> got = make_outputs();
    KernelRun fast = run_kernel(op, args, pointers(got), kTierOptimized, isa, resize);
    const std::string where = what + " [" + isa_name(isa) + "]";
    KILN_EXPECT(fast.found, "%s: no optimized kernel for %s", where.c_str(), op);
    if (!fast.found) return ran;
    if (fast.declined) {
      KILN_EXPECT(may_decline, "%s: the optimized kernel declined: %s", where.c_str(), fast.status.message().c_str());
      continue;
    }
    KILN_EXPECT(fast.status.is_ok(), "%s: optimized %s failed: %s", where.c_str(), op, fast.status.to_string().c_str());
    if (!fast.status.is_ok()) continue;
    ++ran;
    for (size_t o = 0; o < want.size(); ++o) {
      const std::string out_name = where + format(" output %zu", o);
      KILN_EXPECT(got[o].shape() == want[o].shape(), "%s: shape %s, reference %s", out_name.c_str(),
                  describe(got[o].t).c_str(), describe(want[o].t).c_str());
      if (got[o].shape() != want[o].shape()) continue;
      expect_close(out_name, got[o].f(), want[o].f(), want[o].numel(), tol);
    }
  }
  return ran;
}

}  // namespace kiln::test

int main(int argc, char** argv) {
  using namespace kiln::test;
  if (argc > 1 && std::strcmp(argv[1], "--levels") == 0) {  // the levels the comparisons run at
    for (kiln::Isa isa : supported_isas()) std::printf("%s\n", kiln::isa_name(isa));
    return 0;
  }
  const char* filter = argc > 1 ? argv[1] : "";
  int ran = 0;
  for (int threads : {1, 2}) {
    kiln::set_num_threads(threads);
    for (const TestCase& t : tests()) {
      if (std::strstr(t.name, filter) == nullptr) continue;
      g_current_test = t.name;
      const int failures = g_failures;
      t.fn();
      std::printf("%-48s %s (%d threads)\n", t.name, g_failures == failures ? "ok" : "FAILED", threads);
      ++ran;
    }
  }
  std::printf("%d test runs, %d checks, %d failures\n", ran, g_checks, g_failures);
  return g_failures == 0 && ran > 0 ? 0 : 1;
}
