// Calling one kernel through the registry as a method does (kernel_call.h).
#include "kernel_call.h"

#include <cstdlib>
#include <cstring>
#include <random>

namespace kiln::test {

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r(1234);
  return r;
}

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

std::shared_ptr<uint8_t> aligned_bytes(size_t n, int fill = 0) {
  n = (n + 63) / 64 * 64;
  if (n == 0) n = 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, n));
  std::memset(p, fill, n);
  return std::shared_ptr<uint8_t>(p, AlignedFree());
}

}  // namespace

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

TestTensor TestTensor::output(int64_t capacity_elems, ScalarType dtype) {
  return TestTensor({0}, dtype, capacity_elems);
}

TestTensor TestTensor::with_sizes(std::vector<int64_t> sizes, ScalarType dtype, size_t capacity_bytes) {
  TestTensor r;
  r.storage = aligned_bytes(capacity_bytes);
  r.t.reset(r.storage.get(), Span<const int64_t>(sizes.data(), sizes.size()), dtype, capacity_bytes);
  return r;
}

TestTensor TestTensor::alias(int64_t offset, std::vector<int64_t> sizes) const {
  TestTensor r;
  r.storage = storage;
  const size_t elem = element_size(t.dtype()), skip = static_cast<size_t>(offset) * elem;
  r.t.reset(static_cast<uint8_t*>(t.data()) + skip, Span<const int64_t>(sizes.data(), sizes.size()), t.dtype(),
            t.capacity() - skip);
  return r;
}

Args& Args::value(const Value& v) {
  values_.push_back(v);
  ptrs_.push_back(&values_.back());
  return *this;
}

Args& Args::tensor(TestTensor& t) {
  Value v;
  v.kind = ValueKind::Tensor;
  v.tensor = &t.t;
  return value(v);
}
Args& Args::tensor(TestTensor&& t) {
  owned_.push_back(std::move(t));
  return tensor(owned_.back());
}
Args& Args::tensors(std::vector<TestTensor*> ts) {
  std::vector<Tensor*> list;
  for (TestTensor* t : ts) list.push_back(t != nullptr ? &t->t : nullptr);
  tensor_lists_.push_back(std::move(list));
  Value v;
  v.kind = ValueKind::TensorList;
  v.tensors.data = tensor_lists_.back().data();
  v.tensors.size = tensor_lists_.back().size();
  return value(v);
}
Args& Args::none() { return value(Value()); }
Args& Args::i(int64_t x) {
  Value v;
  v.kind = ValueKind::Int;
  v.i = x;
  return value(v);
}
Args& Args::d(double x) {
  Value v;
  v.kind = ValueKind::Double;
  v.d = x;
  return value(v);
}
Args& Args::b(bool x) {
  Value v;
  v.kind = ValueKind::Bool;
  v.b = x;
  return value(v);
}
Args& Args::ints(std::vector<int64_t> xs) {
  lists_.push_back(std::move(xs));
  Value v;
  v.kind = ValueKind::IntList;
  v.ints.data = lists_.back().data();
  v.ints.size = lists_.back().size();
  return value(v);
}
Args& Args::str(const char* s) {
  strings_.emplace_back(s);
  Value v;
  v.kind = ValueKind::String;
  v.str.data = strings_.back().data();
  v.str.size = strings_.back().size();
  return value(v);
}

std::vector<ScalarType> Args::dtypes() const {
  std::vector<ScalarType> out;
  for (const Value* v : span()) {
    if (v->is_tensor()) out.push_back(v->tensor->dtype());
  }
  return out;
}

namespace {
GemmPrecision g_gemm_precision = GemmPrecision::Float32;
}  // namespace

ScopedGemmPrecision::ScopedGemmPrecision(GemmPrecision precision) : before_(g_gemm_precision) {
  g_gemm_precision = precision;
}
ScopedGemmPrecision::~ScopedGemmPrecision() { g_gemm_precision = before_; }

PreparedKernel::PreparedKernel(const char* op, const Args& args, std::vector<Tensor*> outputs, int32_t tier, Isa isa)
    : PreparedKernel(op, args.dtypes(), args, std::move(outputs), tier, isa) {}

PreparedKernel::PreparedKernel(const char* op, const std::vector<ScalarType>& dtypes, const Args& args,
                               std::vector<Tensor*> outputs, int32_t tier, Isa isa)
    : args_(args), outputs_(std::move(outputs)) {
  for (const internal::KernelEntry* k : internal::find_kernels(op, dtypes)) {
    if (k->tier == tier) {
      kernel_ = k;
      break;
    }
  }
  if (kernel_ == nullptr) return;
  services_.cache = &cache_;
  services_.memory_limit = uint64_t{1} << 40;
  ctx_.op_name = op;
  ctx_.isa = isa;
  ctx_.gemm_precision = g_gemm_precision;
  ctx_.services = &services_;
  if (kernel_->prepare != nullptr) {
    // At method load a method input has its sizes but no storage yet: prepare sees every
    // non-constant tensor argument that way, so a prepare that reads one's data fails here too.
    const size_t n = args.span().size();
    std::vector<Tensor> bare(n);
    std::vector<Value> values(n);
    std::vector<const Value*> prepare_args;
    for (size_t i = 0; i < n; ++i) {
      values[i] = *args.span()[i];
      const Tensor* t = values[i].is_tensor() ? values[i].tensor : nullptr;
      if (t != nullptr && !t->is_constant()) {
        bare[i].reset(nullptr, t->sizes(), t->dtype(), t->capacity());
        values[i].tensor = &bare[i];
      }
      prepare_args.push_back(&values[i]);
    }
    prepare_status_ = kernel_->prepare(ctx_, Span<const Value* const>(prepare_args.data(), prepare_args.size()),
                                       Span<Tensor* const>(outputs_.data(), outputs_.size()), &state_);
    if (!prepare_status_.is_ok()) return;
  }
  ctx_.services = nullptr;
  ctx_.state = state_;
  const size_t call = (ctx_.scratch_bytes + 63) / 64 * 64, worker = (ctx_.worker_scratch_bytes + 63) / 64 * 64;
  scratch_ = aligned_bytes(call + worker * static_cast<size_t>(num_threads()), 0xff);
  ctx_.scratch = ctx_.scratch_bytes > 0 ? scratch_.get() : nullptr;
  ctx_.worker_scratch_base = ctx_.worker_scratch_bytes > 0 ? scratch_.get() + call : nullptr;
  ctx_.worker_scratch_stride = ctx_.worker_scratch_bytes > 0 ? worker : 0;
}

PreparedKernel::~PreparedKernel() {
  if (kernel_ != nullptr && kernel_->release != nullptr && state_ != nullptr) kernel_->release(state_);
}

Status PreparedKernel::run() {
  return kernel_->run(ctx_, args_.span(), Span<Tensor* const>(outputs_.data(), outputs_.size()));
}

}  // namespace kiln::test
