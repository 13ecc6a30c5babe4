// A small test harness for kernels called through the registry, the way a loaded
// method calls them: resolve by operator and dtypes, pick a tier, prepare (with
// scratch and packed constants), run, release. The same test then checks every
// optimized kernel, at every instruction-set level this CPU supports, against
// the portable reference.
//
//   KILN_TEST(gemm_random_shapes) {
//     TestTensor x = TestTensor::random({m, k}), w = TestTensor::random({n, k}, /*constant=*/true);
//     Args args;
//     args.tensor(x).tensor(w).none();
//     expect_tiers_match("aten::linear.default", args, {{m, n}}, Tolerance{1e-5f, 1e-5f});
//   }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernel_call.h"
#include "kiln/kernel.h"

namespace kiln::test {

// ---- checks

extern int g_checks;
extern int g_failures;
void report_failure(const char* file, int line, const std::string& message);

#define KILN_EXPECT(cond, ...)                                                                  \
  do {                                                                                          \
    ++::kiln::test::g_checks;                                                                   \
    if (!(cond)) ::kiln::test::report_failure(__FILE__, __LINE__, ::kiln::format(__VA_ARGS__)); \
  } while (0)

// A test case: registered by KILN_TEST, run by the harness's main (on 1 and 2
// pool threads; `kernel_tiers_test <substring>` runs the matching ones).
struct TestCase {
  const char* name;
  void (*fn)();
};
bool register_test(const char* name, void (*fn)());
#define KILN_TEST(name)                                                                                 \
  static void kiln_test_##name();                                                                       \
  static const bool kiln_test_registered_##name = ::kiln::test::register_test(#name, kiln_test_##name); \
  static void kiln_test_##name()

// ---- running kernels through the registry

struct KernelRun {
  Status status;          // of prepare (when not declined) or run
  bool found = false;     // a kernel of the asked tier exists for these dtypes
  bool declined = false;  // its prepare returned NotSupported
  uint64_t packed_bytes = 0;
};

// A tensor argument given new sizes between prepare and run, as a dynamic dim
// below the bound that prepare saw (within the tensor's capacity); restored after the run.
struct ResizeAfterPrepare {
  TestTensor* tensor;
  std::vector<int64_t> sizes;
};

// Resolves `op` for the dtypes of `args`, takes the kernel registered at `tier`,
// and prepares and runs it the way a method would at instruction-set level
// `isa`: scratch planned from what prepare asks for, packed constants from a
// cache of its own. `outputs` are resized by the kernel.
KernelRun run_kernel(const char* op, const Args& args, const std::vector<TestTensor*>& outputs, int32_t tier, Isa isa,
                     const std::vector<ResizeAfterPrepare>& resize = {});

// The portable kernel of `op` run once on `args`: its status, or MissingKernel when none is
// registered for these dtypes (so that a missing kernel cannot pass for a refusal). With `dtypes`,
// the kernel registered for those instead: how a test reaches a kernel with arguments the registry
// would not give it, to see that the kernel refuses them itself.
Status run_portable(const char* op, const Args& args, const std::vector<TestTensor*>& outputs);
Status run_portable(const char* op, const std::vector<ScalarType>& dtypes, const Args& args,
                    const std::vector<TestTensor*>& outputs);

// The levels the comparisons run at are kiln::supported_isas() (kiln/cpu.h): those this CPU runs,
// lowest first.

struct Tolerance {
  float rtol = 1e-5f;
  float atol = 1e-6f;
};

// The element furthest beyond |got - want| <= atol + rtol * |want| (by how much: `excess`), or
// at = -1 when every element is within. A NaN where the reference has none (or the reverse) and an
// infinity that the reference lacks are infinitely far, wherever they are.
struct Mismatch {
  int64_t at = -1;
  double excess = 0;
};
Mismatch worst_mismatch(const float* got, const float* want, int64_t n, Tolerance tol);

// One check that no element mismatches (worst_mismatch); a failure names the worst element, its
// index and both values.
bool expect_close(const std::string& what, const float* got, const float* want, int64_t n, Tolerance tol);

// Runs the portable kernel of `op` once and the optimized one at every
// supported level, on the same arguments, and compares every output. Outputs
// are made with `output_capacity` elements each. The optimized kernel must
// accept the instruction unless `may_decline`; returns how many levels ran
// the optimized kernel (so a test can tell a vacuous comparison). `resize`
// applies to both runs (the portable kernel has no prepare to see the bound).
int expect_tiers_match(const std::string& what, const char* op, const Args& args,
                       const std::vector<int64_t>& output_capacity, Tolerance tol, bool may_decline = false,
                       const std::vector<ResizeAfterPrepare>& resize = {});

// Runs the portable kernel of `op` and the optimized one at every supported level on the same
// arguments and compares each single output with `want` (n elements: a reference the test computed,
// e.g. in float64), so that a defect both tiers share cannot pass as agreement. The optimized kernel
// must accept the instruction; returns how many levels ran it.
int expect_every_tier_close(const std::string& what, const char* op, const Args& args, const float* want, int64_t n,
                            Tolerance tol);

// A bad instruction: the portable kernel refuses it with `code` (its message containing
// `message_part`), and the optimized kernel, where one is registered for these dtypes, declines it
// at prepare or refuses it at run with the same status, at every level.
void expect_rejected(const std::string& what, const char* op, const Args& args, const std::vector<TestTensor*>& outputs,
                     const char* message_part = "", Error code = Error::KernelFailure);

}  // namespace kiln::test
