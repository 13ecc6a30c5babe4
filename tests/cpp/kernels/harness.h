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
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kernel.h"

namespace kiln::test {

// ---- checks

extern int g_checks;
extern int g_failures;
void report_failure(const char* file, int line, const std::string& message);

#define KILN_EXPECT(cond, ...)                                                             \
  do {                                                                                     \
    ++::kiln::test::g_checks;                                                              \
    if (!(cond)) ::kiln::test::report_failure(__FILE__, __LINE__, ::kiln::format(__VA_ARGS__)); \
  } while (0)

// A test case: registered by KILN_TEST, run by the harness's main (on 1 and 2
// pool threads; `kernel_tiers_test <substring>` runs the matching ones).
struct TestCase {
  const char* name;
  void (*fn)();
};
bool register_test(const char* name, void (*fn)());
#define KILN_TEST(name)                                                      \
  static void kiln_test_##name();                                            \
  static const bool kiln_test_registered_##name = ::kiln::test::register_test(#name, kiln_test_##name); \
  static void kiln_test_##name()

// Seeded random numbers, reproducible per test.
uint64_t next_random();
float uniform(float lo, float hi);
int64_t uniform_int(int64_t lo, int64_t hi);  // inclusive

// ---- tensors and arguments

// A tensor owning 64-byte aligned storage (capacity_elems elements, default
// its numel), optionally marked constant (as program constants are).
struct TestTensor {
  std::shared_ptr<uint8_t> storage;
  Tensor t;

  TestTensor() = default;
  TestTensor(std::vector<int64_t> sizes, ScalarType dtype = ScalarType::Float32, int64_t capacity_elems = -1,
             bool constant = false);
  static TestTensor random(std::vector<int64_t> sizes, bool constant = false, float lo = -1.0f, float hi = 1.0f);
  // An output of at most `capacity_elems` elements; kernels resize it.
  static TestTensor output(int64_t capacity_elems, ScalarType dtype = ScalarType::Float32);

  float* f() const { return t.data_as<float>(); }
  int64_t numel() const { return t.numel(); }
  std::vector<int64_t> shape() const { return {t.sizes().begin(), t.sizes().end()}; }
};

// Kernel arguments in order. Values live in deques so their addresses stay stable.
class Args {
 public:
  Args& tensor(TestTensor& t);
  Args& none();
  Args& i(int64_t x);
  Args& d(double x);
  Args& b(bool x);
  Args& ints(std::vector<int64_t> xs);
  Args& str(const char* s);
  Span<const Value* const> span() const { return {ptrs_.data(), ptrs_.size()}; }

 private:
  Args& push(const Value& v);
  std::deque<Value> values_;
  std::deque<std::vector<int64_t>> lists_;
  std::deque<std::string> strings_;
  std::vector<const Value*> ptrs_;
};

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
KernelRun run_kernel(const char* op, const Args& args, const std::vector<TestTensor*>& outputs, int32_t tier,
                     Isa isa, const std::vector<ResizeAfterPrepare>& resize = {});

// The instruction-set levels this CPU runs, lowest first (baseline included).
std::vector<Isa> supported_isas();

struct Tolerance {
  float rtol = 1e-5f;
  float atol = 1e-6f;
};

// Elementwise |got - want| <= atol + rtol * |want|. A NaN where the reference has
// none (or the reverse) fails, infinities must match exactly; a failure names
// the worst element, its index and both values.
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

}  // namespace kiln::test
