// One kernel called through the registry the way a loaded method calls it: the tensors and
// arguments of a call (TestTensor, Args) and a kernel prepared once and run any number of times
// (PreparedKernel). The kernel tests (harness.h) and the benchmarks (bench/) both build on it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "executor/packed_constants.h"
#include "kiln/kernel.h"
#include "registry/registry_internal.h"

namespace kiln::test {

// Seeded random numbers (one sequence per process), so that a run repeats itself.
uint64_t next_random();
float uniform(float lo, float hi);
int64_t uniform_int(int64_t lo, int64_t hi);  // inclusive

// A tensor owning 64-byte aligned, zeroed storage (capacity_elems elements, default its numel),
// optionally marked constant (as program constants are). Copies share the storage.
struct TestTensor {
  std::shared_ptr<uint8_t> storage;
  Tensor t;

  TestTensor() = default;
  TestTensor(std::vector<int64_t> sizes, ScalarType dtype = ScalarType::Float32, int64_t capacity_elems = -1,
             bool constant = false);
  static TestTensor random(std::vector<int64_t> sizes, bool constant = false, float lo = -1.0f, float hi = 1.0f);
  // An output of at most `capacity_elems` elements; kernels resize it.
  static TestTensor output(int64_t capacity_elems, ScalarType dtype = ScalarType::Float32);
  // Any sizes (possibly absurd: their product may overflow) over `capacity_bytes` of storage, as a
  // corrupt program may declare them.
  static TestTensor with_sizes(std::vector<int64_t> sizes, ScalarType dtype, size_t capacity_bytes);
  // A tensor over this one's bytes from element `offset` on (sharing its storage), as the memory
  // planner never makes one but a corrupt program may.
  TestTensor alias(int64_t offset, std::vector<int64_t> sizes) const;

  float* f() const { return t.data_as<float>(); }
  int64_t* i64() const { return t.data_as<int64_t>(); }
  int64_t numel() const { return t.numel(); }
  std::vector<int64_t> shape() const { return {t.sizes().begin(), t.sizes().end()}; }
};

// Kernel arguments in order. Values live in deques so their addresses stay stable.
class Args {
 public:
  Args() = default;
  Args(Args&&) = default;  // moving keeps the values' addresses; a copy would point into the original
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;

  // The caller keeps `t` alive (and may resize it between prepare and run).
  Args& tensor(TestTensor& t);
  // `t` is kept by the Args.
  Args& tensor(TestTensor&& t);
  // A tensor list; null entries are None (an optional-tensor list).
  Args& tensors(std::vector<TestTensor*> ts);
  Args& none();
  Args& i(int64_t x);
  Args& d(double x);
  Args& b(bool x);
  Args& ints(std::vector<int64_t> xs);
  Args& str(const char* s);
  // A value as given, e.g. one a corrupt program could hold.
  Args& value(const Value& v);
  Span<const Value* const> span() const { return {ptrs_.data(), ptrs_.size()}; }
  // The dtypes of the tensor arguments: what the registry matches kernels by.
  std::vector<ScalarType> dtypes() const;

 private:
  std::deque<Value> values_;
  std::deque<TestTensor> owned_;
  std::deque<std::vector<int64_t>> lists_;
  std::deque<std::vector<Tensor*>> tensor_lists_;
  std::deque<std::string> strings_;
  std::vector<const Value*> ptrs_;
};

// While one is alive, kernels prepared by PreparedKernel see this GemmPrecision (float32 otherwise),
// as a method's kernels see LoadOptions::gemm_precision.
class ScopedGemmPrecision {
 public:
  explicit ScopedGemmPrecision(GemmPrecision precision);
  ~ScopedGemmPrecision();
  ScopedGemmPrecision(const ScopedGemmPrecision&) = delete;
  ScopedGemmPrecision& operator=(const ScopedGemmPrecision&) = delete;

 private:
  GemmPrecision before_;
};

// The kernel registered for `op` at `tier` for the dtypes of `args` (or for `dtypes`, to reach a
// kernel with arguments the registry would not give it), prepared for `isa` as a method prepares
// it: non-constant tensor arguments without storage (they have none at method load), packed
// constants from a cache of its own, then scratch as prepare planned it (per call, and per pool
// thread for the pool's current size) filled with NaN bytes, as whatever the method's other
// instructions left there. `args` and `outputs` must outlive it.
class PreparedKernel {
 public:
  PreparedKernel(const char* op, const Args& args, std::vector<Tensor*> outputs, int32_t tier, Isa isa);
  PreparedKernel(const char* op, const std::vector<ScalarType>& dtypes, const Args& args, std::vector<Tensor*> outputs,
                 int32_t tier, Isa isa);
  ~PreparedKernel();
  PreparedKernel(const PreparedKernel&) = delete;
  PreparedKernel& operator=(const PreparedKernel&) = delete;

  bool found() const { return kernel_ != nullptr; }
  // Ready to run: found, and prepare (if any) succeeded.
  bool ready() const { return found() && prepare_status_.is_ok(); }
  bool declined() const { return prepare_status_.code() == Error::NotSupported; }
  const Status& prepare_status() const { return prepare_status_; }
  uint64_t packed_bytes() const { return services_.packed_bytes; }
  // Precondition: ready().
  Status run();

 private:
  const internal::KernelEntry* kernel_ = nullptr;
  const Args& args_;
  std::vector<Tensor*> outputs_;
  internal::PackedConstantCache cache_;
  internal::KernelServices services_;
  KernelContext ctx_;
  void* state_ = nullptr;
  std::shared_ptr<uint8_t> scratch_;
  Status prepare_status_;
};

}  // namespace kiln::test
