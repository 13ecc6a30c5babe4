// The kernel test harness (harness.h) and the test runner's main.
#include "harness.h"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "optimized/isa_dispatch.h"

namespace kiln::test {

int g_checks = 0;
int g_failures = 0;

namespace {

std::vector<TestCase>& tests() {
  static std::vector<TestCase> all;
  return all;
}

const char* g_current_test = "";

// The levels whose microkernel tables were dispatched during this run (isa_dispatch.h's log,
// collected whenever run_kernel takes it).
uint64_t g_levels_dispatched = 0;

uint64_t take_dispatch_log() {
  const uint64_t log = kernels::g_isa_dispatch_log.exchange(0, std::memory_order_relaxed);
  g_levels_dispatched |= log;
  return log;
}

uint64_t level_bit(Isa isa) { return uint64_t{1} << static_cast<unsigned>(isa); }

std::string level_names(uint64_t levels) {
  std::string out;
  for (Isa isa : isa_levels()) {
    if ((levels & level_bit(isa)) == 0) continue;
    out += out.empty() ? "" : " ";
    out += isa_name(isa);
  }
  return out;
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

KernelRun run_kernel(const char* op, const Args& args, const std::vector<TestTensor*>& outputs, int32_t tier, Isa isa,
                     const std::vector<ResizeAfterPrepare>& resize) {
  std::vector<Tensor*> outs;
  for (TestTensor* o : outputs) outs.push_back(&o->t);
  (void)take_dispatch_log();
  PreparedKernel kernel(op, args, outs, tier, isa);
  KernelRun result;
  result.found = kernel.found();
  result.status = kernel.prepare_status();
  result.declined = kernel.declined();
  result.packed_bytes = kernel.packed_bytes();
  if (!kernel.ready()) return result;
  std::vector<std::vector<int64_t>> prepared_sizes;
  for (const ResizeAfterPrepare& r : resize) {
    prepared_sizes.push_back(r.tensor->shape());
    Status st = r.tensor->t.resize(Span<const int64_t>(r.sizes.data(), r.sizes.size()));
    KILN_EXPECT(st.is_ok(), "resizing an argument after prepare: %s", st.to_string().c_str());
  }
  result.status = kernel.run();
  for (size_t i = 0; i < resize.size(); ++i) {
    const std::vector<int64_t>& sizes = prepared_sizes[i];
    (void)resize[i].tensor->t.resize(Span<const int64_t>(sizes.data(), sizes.size()));
  }
  // Prepare and run use the tables of the level asked for and no other: a dispatch that fell back
  // to another level would compare that level's code instead, and pass.
  const uint64_t dispatched = take_dispatch_log();
  KILN_EXPECT(tier != kTierOptimized || (dispatched & ~level_bit(isa)) == 0,
              "%s at level %s used the microkernels of: %s", op, isa_name(isa), level_names(dispatched).c_str());
  return result;
}

Status run_portable(const char* op, const std::vector<ScalarType>& dtypes, const Args& args,
                    const std::vector<TestTensor*>& outputs) {
  std::vector<Tensor*> outs;
  for (TestTensor* o : outputs) outs.push_back(&o->t);
  PreparedKernel kernel(op, dtypes, args, outs, kTierPortable, Isa::Baseline);
  if (!kernel.found()) {
    return Status(Error::MissingKernel,
                  format("no portable %s for [%s]", op, internal::signature_string(dtypes).c_str()));
  }
  return kernel.ready() ? kernel.run() : kernel.prepare_status();
}

Status run_portable(const char* op, const Args& args, const std::vector<TestTensor*>& outputs) {
  return run_portable(op, args.dtypes(), args, outputs);
}

Mismatch worst_mismatch(const float* got, const float* want, int64_t n, Tolerance tol) {
  Mismatch worst;
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
    if (excess > 0 && (worst.at < 0 || excess > worst.excess)) worst.excess = excess, worst.at = i;
  }
  return worst;
}

bool expect_close(const std::string& what, const float* got, const float* want, int64_t n, Tolerance tol) {
  const int64_t worst_at = worst_mismatch(got, want, n, tol).at;
  KILN_EXPECT(worst_at < 0,
              "%s: %" PRId64 " elements, worst at index %" PRId64 ": got %.9g, want %.9g (rtol %g, atol %g)",
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

int expect_every_tier_close(const std::string& what, const char* op, const Args& args, const float* want, int64_t n,
                            Tolerance tol) {
  auto check = [&](int32_t tier, Isa isa, const std::string& where) {
    TestTensor got = TestTensor::output(n);
    KernelRun r = run_kernel(op, args, {&got}, tier, isa);
    KILN_EXPECT(r.found && !r.declined && r.status.is_ok(), "%s: %s: found %d, declined %d, %s", where.c_str(), op,
                r.found, r.declined, r.status.to_string().c_str());
    if (!r.found || r.declined || !r.status.is_ok()) return false;
    KILN_EXPECT(got.numel() == n, "%s: %lld elements, the reference has %lld", where.c_str(),
                static_cast<long long>(got.numel()), static_cast<long long>(n));
    if (got.numel() == n) expect_close(where, got.f(), want, n, tol);
    return true;
  };
  check(kTierPortable, Isa::Baseline, what + " [portable]");
  int ran = 0;
  for (Isa isa : supported_isas()) ran += check(kTierOptimized, isa, what + " [" + isa_name(isa) + "]") ? 1 : 0;
  return ran;
}

void expect_rejected(const std::string& what, const char* op, const Args& args, const std::vector<TestTensor*>& outputs,
                     const char* message_part, Error code) {
  const Status want = run_portable(op, args, outputs);
  KILN_EXPECT(want.code() == code && want.message().find(message_part) != std::string::npos,
              "%s: portable %s must fail with %s (\"%s\"), got %s", what.c_str(), op, error_name(code), message_part,
              want.to_string().c_str());
  for (Isa isa : supported_isas()) {
    const KernelRun fast = run_kernel(op, args, outputs, kTierOptimized, isa);
    if (!fast.found) return;  // no optimized kernel for these dtypes
    KILN_EXPECT(fast.declined || (fast.status.code() == want.code() && fast.status.message() == want.message()),
                "%s [%s]: optimized %s must decline or fail as the portable kernel (%s), got %s", what.c_str(),
                isa_name(isa), op, want.to_string().c_str(), fast.status.to_string().c_str());
  }
}

}  // namespace kiln::test

int main(int argc, char** argv) {
  using namespace kiln::test;
  if (argc > 1 && std::strcmp(argv[1], "--levels") == 0) {  // the levels the comparisons run at
    for (kiln::Isa isa : kiln::supported_isas()) std::printf("%s\n", kiln::isa_name(isa));
    return 0;
  }
  // kernel_tiers_test [--threads N] [--skip PART]... [FILTER]: the cases whose name holds FILTER
  // and no skipped PART, on 1 and 2 pool threads (or on N only). The default test tier runs the
  // emulated aarch64 build on one thread and skips its costliest sweeps; the full tier runs all.
  const char* filter = "";
  std::vector<const char*> skipped;
  std::vector<int> thread_counts = {1, 2};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--skip") == 0 && i + 1 < argc) {
      skipped.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      thread_counts = {std::atoi(argv[++i])};
      if (thread_counts[0] < 1) {
        std::fprintf(stderr, "--threads takes a count of at least 1\n");
        return 2;
      }
    } else {
      filter = argv[i];
    }
  }
  int ran = 0;
  for (int threads : thread_counts) {
    kiln::set_num_threads(threads);
    for (const TestCase& t : tests()) {
      if (std::strstr(t.name, filter) == nullptr) continue;
      bool skip = false;
      for (const char* part : skipped) skip = skip || std::strstr(t.name, part) != nullptr;
      if (skip) continue;
      g_current_test = t.name;
      const int failures = g_failures;
      const auto start = std::chrono::steady_clock::now();
      t.fn();
      // The seconds show where the emulated aarch64 run (the costliest of the tests) spends them.
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%-48s %s (%d threads, %.2f s)\n", t.name, g_failures == failures ? "ok" : "FAILED", threads,
                  seconds);
      ++ran;
    }
  }
  // What the comparisons really ran (tests/test_kernel_tiers.py checks it against the CPU's features).
  (void)take_dispatch_log();
  std::printf("levels dispatched: %s\n", level_names(g_levels_dispatched).c_str());
  std::printf("%d test runs, %d checks, %d failures\n", ran, g_checks, g_failures);
  return g_failures == 0 && ran > 0 ? 0 : 1;
}
